"""The independent judge: read a topic back with librdkafka (confluent-kafka) and create topics with its admin client.

Owns only these confluent-kafka clients; it must not use any aioproducer code, so what it reports is independent
evidence of what a producer wrote (CRCs checked, every partition read to its end).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import AioProducerError, KafkaTimeoutError, ProtocolError, UnknownPartitionError
from aioproducer.testing import kafka_admin

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError, Message

__all__ = [
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "ConsumedRecord",
    "create_topic",
    "read_back",
]

_EXTRA_HINT = "aioproducer.testing needs confluent-kafka: install it with `pip install aioproducer[testing]`"

# librdkafka's numbering (rd_kafka_timestamp_type_t), not the batch attribute bit: 0 means no timestamp at all.
TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2

# librdkafka codes for a batch that does not decode or fails its CRC, and Kafka's CORRUPT_MESSAGE.
_BAD_MESSAGE_CODES = frozenset({-199, -198, ErrorCode.CORRUPT_MESSAGE})
_PARTITION_EOF = -191
_POLL_S = 0.1


@dataclass(frozen=True)
class ConsumedRecord:
    """One record as the consumer returned it. `timestamp_type` uses the `TIMESTAMP_*` constants of this module."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int
    timestamp_type: int


def _confluent() -> Any:
    try:
        import confluent_kafka
        import confluent_kafka.admin
    except ImportError as exc:
        raise ImportError(_EXTRA_HINT) from exc
    return confluent_kafka


def _consumer(bootstrap_servers: str, isolation_level: str) -> Consumer:
    ck = _confluent()
    consumer: Consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            # assign() needs no group coordination, but the client insists on a group id; nothing is committed.
            "group.id": f"aioproducer-readback-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "check.crcs": True,
            "isolation.level": isolation_level,
            "fetch.wait.max.ms": 50,
        }
    )
    return consumer


def _topic_partitions(consumer: Consumer, topic: str, timeout_s: float) -> list[int]:
    metadata = consumer.list_topics(topic, timeout=timeout_s)
    described = metadata.topics.get(topic)
    if described is None:
        raise AioProducerError(f"the cluster did not describe topic {topic!r}")
    if described.error is not None:
        raise AioProducerError(f"topic {topic!r} cannot be read: {described.error}")
    return sorted(described.partitions)


def _chosen_partitions(existing: Sequence[int], wanted: Iterable[int] | None, topic: str) -> list[int]:
    if wanted is None:
        return list(existing)
    chosen = sorted(set(wanted))
    unknown = [p for p in chosen if p not in existing]
    if unknown:
        raise UnknownPartitionError(f"topic {topic!r} has partitions {list(existing)}, not {unknown}")
    return chosen


def _headers(message: Message) -> tuple[tuple[str, bytes | None], ...]:
    # The consumer hands back a list of (str, bytes | None); dicts and str values exist only in confluent-kafka's
    # type shared with the produce side.
    raw = message.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw
    return tuple((name, value.encode() if isinstance(value, str) else value) for name, value in pairs)


def _record(message: Message) -> ConsumedRecord:
    timestamp_type, timestamp_ms = message.timestamp()
    return ConsumedRecord(
        topic=message.topic() or "",
        partition=message.partition() or 0,
        offset=message.offset() or 0,
        key=message.key(),
        value=message.value(),
        headers=_headers(message),
        timestamp_ms=timestamp_ms,
        timestamp_type=timestamp_type,
    )


def _raise_for(error: KafkaError, message: Message) -> NoReturn:
    where = f"{message.topic()}[{message.partition()}] at offset {message.offset()}"
    if error.code() in _BAD_MESSAGE_CODES:
        raise ProtocolError(f"the consumer rejected the data in {where}: {error.str()}")
    raise AioProducerError(f"the consumer failed on {where}: {error.name()}: {error.str()}")


def _drain(consumer: Consumer, partitions: list[int], topic: str, timeout_s: float) -> list[ConsumedRecord]:
    records: list[ConsumedRecord] = []
    pending = set(partitions)
    deadline = time.monotonic() + timeout_s
    while pending:
        if time.monotonic() >= deadline:
            raise KafkaTimeoutError(f"{topic!r} partitions {sorted(pending)} did not reach their end in {timeout_s} s")
        message = consumer.poll(_POLL_S)
        if message is None:
            continue
        error = message.error()
        if error is None:
            records.append(_record(message))
        elif error.code() == _PARTITION_EOF:
            pending.discard(message.partition() or 0)
        else:
            _raise_for(error, message)
    return records


def read_back(
    bootstrap_servers: str,
    topic: str,
    *,
    partitions: Iterable[int] | None = None,
    timeout_s: float = 30.0,
    isolation_level: str = "read_uncommitted",
) -> list[ConsumedRecord]:
    """Every record of `topic` (or of the given partitions), ordered by partition then offset.

    Reads from the log start until each partition reports its end; CRCs are checked, and any consumer error —
    a corrupt batch above all (`ProtocolError`) — raises instead of being skipped. With the default
    `read_uncommitted` this is everything the broker stored, aborted transactions included.
    """
    ck = _confluent()
    consumer = _consumer(bootstrap_servers, isolation_level)
    try:
        chosen = _chosen_partitions(_topic_partitions(consumer, topic, timeout_s), partitions, topic)
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in chosen])
        records = _drain(consumer, chosen, topic, timeout_s)
    finally:
        consumer.close()
    return sorted(records, key=lambda r: (r.partition, r.offset))


def create_topic(
    bootstrap_servers: str, topic: str, partitions: int, timeout_s: float = 30.0, *, replication_factor: int = 1
) -> None:
    """Create `topic` with an admin client and wait until its leaders take writes (`kafka_admin.create_topic`). Not
    for the librdkafka mock cluster, which has no CreateTopics: use `MockCluster.create_topic` there."""
    kafka_admin.create_topic(
        bootstrap_servers, topic, partitions, replication_factor=replication_factor, timeout_s=timeout_s
    )
