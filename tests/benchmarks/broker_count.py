"""Counting what reached the broker, with an independent consumer (librdkafka, CRCs checked), and dropping a counted
topic.

Owns one short-lived confluent-kafka Consumer (or admin client) per call; it must not use any producer under test.
Counting by consuming rather than by high watermarks: Tansu's ListOffsets answer lags the last batch's records.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import confluent_kafka
import confluent_kafka.admin

__all__ = ["count_records", "delete_topic"]

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


def delete_topic(bootstrap: str, topic: str, timeout_s: float = 60.0) -> None:
    """Delete `topic` and wait for the controller to accept it (the broker removes the files in the background)."""
    admin: Any = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=timeout_s, request_timeout=timeout_s)[topic].result(timeout_s)
