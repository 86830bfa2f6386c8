"""Counting what reached the broker with an independent client (librdkafka), reading a sample back (CRCs checked),
and dropping a counted topic.

Owns one short-lived confluent-kafka Consumer (or admin client) per call; it must not use any producer under test.
On Apache Kafka a run's records are the end offsets' delta over its timed part (`end_offsets`) and a sample of
them is read back (`read_sample`); on Tansu, whose ListOffsets answer lags the last batch's records, a topic is
counted by consuming it whole (`count_records`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import confluent_kafka
import confluent_kafka.admin

__all__ = ["count_records", "delete_topic", "end_offsets", "read_sample"]

_PARTITION_EOF = -191


def count_records(bootstrap: str, topic: str, timeout_s: float = 120.0) -> int:
    """How many records `topic` holds, read from offset 0 of every partition to its end; raises on any bad batch."""
    consumer: Any = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-count-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "check.crcs": True,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign(
            [confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in partitions]
        )
        return _drain(consumer, set(partitions), topic, timeout_s)
    finally:
        consumer.close()


def _drain(consumer: Any, pending: set[int], topic: str, timeout_s: float) -> int:
    count = 0
    deadline = time.monotonic() + timeout_s
    while pending:
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{topic}: partitions {sorted(pending)} not read to their end in {timeout_s} s")
        for message in consumer.consume(num_messages=10_000, timeout=0.2):
            error = message.error()
            if error is None:
                count += 1
            elif error.code() == _PARTITION_EOF:
                pending.discard(message.partition())
            else:
                raise RuntimeError(f"{topic}[{message.partition()}]: {error.name()}: {error.str()}")
    return count


def _consumer(bootstrap: str) -> Any:
    return confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-count-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "check.crcs": True,
            "fetch.wait.max.ms": 50,
        }
    )


def end_offsets(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[int]:
    """Each partition's end offset (high watermark) now, asked of the broker (no cache), in partition order."""
    consumer = _consumer(bootstrap)
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=timeout_s).topics[topic].partitions)
        return [
            consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=timeout_s, cached=False)[1]
            for p in partitions
        ]
    finally:
        consumer.close()


def read_sample(
    bootstrap: str, topic: str, starts: list[int], ends: list[int], per_partition: int = 100, timeout_s: float = 60.0
) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of up to `per_partition` records of each partition, read from the middle of [start, end); raises
    on any bad batch (CRCs are checked) or if a partition cannot be read that far."""
    consumer = _consumer(bootstrap)
    wanted: dict[int, int] = {}
    assignment = []
    for partition, (start, end) in enumerate(zip(starts, ends, strict=True)):
        if end > start:
            first = start + max(0, (end - start - per_partition) // 2)
            wanted[partition] = min(per_partition, end - first)
            assignment.append(confluent_kafka.TopicPartition(topic, partition, first))
    sample: list[tuple[bytes | None, bytes | None]] = []
    try:
        if not assignment:
            return sample
        consumer.assign(assignment)
        deadline = time.monotonic() + timeout_s
        while any(wanted.values()):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{topic}: sample not read in {timeout_s} s (still wanted: {wanted})")
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                error = message.error()
                if error is not None:
                    if error.code() == _PARTITION_EOF:
                        continue
                    raise RuntimeError(f"{topic}[{message.partition()}]: {error.name()}: {error.str()}")
                if wanted.get(message.partition(), 0) > 0:
                    wanted[message.partition()] -= 1
                    sample.append((message.key(), message.value()))
        return sample
    finally:
        consumer.close()


def delete_topic(bootstrap: str, topic: str, timeout_s: float = 60.0) -> None:
    """Delete `topic` and wait for the controller to accept it (the broker removes the files in the background)."""
    # log_level 3: errors only (its handle otherwise logs an informational line when it is destroyed).
    admin: Any = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.delete_topics([topic], operation_timeout=timeout_s, request_timeout=timeout_s)[topic].result(timeout_s)
