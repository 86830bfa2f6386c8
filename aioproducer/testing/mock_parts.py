"""The in-memory parts behind `MockProducer`: what the Producer's appender sees of an accumulator and of cluster
metadata, the Producer's appender over them (`mock_appender`), and the records a mock holds. Owns no completion logic
(that is `mock_log`'s); no I/O.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from aioproducer.append.appender import RECORD_MEMORY_OVERHEAD, PureAppender
from aioproducer.buffer.pool import PureBufferPool
from aioproducer.config import ProducerConfig
from aioproducer.deliveries.delivery import BatchOutcome
from aioproducer.errors import ConfigError
from aioproducer.models import Header
from aioproducer.network.metadata import PartitionInfo, TopicInfo
from aioproducer.producer import _resolve_partitioner
from aioproducer.records.layout import BATCH_HEADER_SIZE
from aioproducer.serializers import resolve_serializer
from aioproducer.validation import check_topic

__all__ = [
    "InjectedError",
    "MockAccumulator",
    "MockBatch",
    "MockTopics",
    "PendingRecord",
    "SentRecord",
    "mock_appender",
]

_MOCK_BROKER = 0


class SentRecord(NamedTuple):
    """A record written to the mock's log: where it landed, and its bytes as the serializers made them."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


@dataclass
class PendingRecord:
    """A record accepted by the appender and not completed yet: its outcome settles its Delivery."""

    outcome: BatchOutcome
    topic: str
    partition: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


@dataclass
class InjectedError:
    error: BaseException
    remaining: int | None  # None: every record from now on
    topic: str | None


class MockBatch:
    """What the appender reads of the batch it appended to: each mock record is a batch of its own."""

    __slots__ = ("outcome",)

    def __init__(self, outcome: BatchOutcome) -> None:
        self.outcome = outcome


class MockAccumulator:
    """The accumulator as the appender sees it: every append becomes one pending record (memory is the pool's:
    `MockProducer` gives the appender one as large as it can count)."""

    batch_size = 1

    def __init__(self, accept: Callable[[PendingRecord], None]) -> None:
        self._accept = accept

    def append(
        self,
        tp: tuple[str, int],
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[Header, ...],
        size: int,
        clock_ms: Any,
    ) -> tuple[MockBatch, int, bool]:
        topic, partition = tp
        outcome = BatchOutcome(topic, partition, asyncio.get_running_loop())
        self._accept(PendingRecord(outcome, topic, partition, timestamp_ms, key, value, headers))
        return MockBatch(outcome), 0, False


class MockTopics:
    """The topics the mock knows, as the appender reads them (`cluster_state.cluster.topics`)."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicInfo] = {}

    @property
    def cluster(self) -> MockTopics:
        return self

    def touch(self, topic: str, now_ms: int) -> None:
        """The appender marks topics in use (for metadata refreshes): the mock has nothing to refresh."""

    def add(self, topic: str, partitions: int) -> TopicInfo:
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise ConfigError(f"topic {topic!r} needs a positive number of partitions, got {partitions!r}")
        check_topic(topic)
        layout = tuple(PartitionInfo(p, _MOCK_BROKER) for p in range(partitions))
        info = TopicInfo(topic, layout, tuple(range(partitions)))
        self.topics[topic] = info
        return info


def mock_appender(cfg: ProducerConfig, accept: Callable[[PendingRecord], None], topics: MockTopics) -> PureAppender:
    """The Producer's own per-record path (the pure-Python appender: validation, serializers, partitioner, size
    limits) as `cfg` sets it up, handing each record it places to `accept`."""
    return PureAppender(
        accumulator=MockAccumulator(accept),  # type: ignore[arg-type]  # the part of it the appender uses
        # No memory limit in a mock; the pool only keeps the appender's count.
        pool=PureBufferPool(sys.maxsize),
        cluster_state=topics,  # type: ignore[arg-type]
        partitioner=_resolve_partitioner(cfg),
        key_serializer=resolve_serializer(cfg.key_serializer, role="key"),
        value_serializer=resolve_serializer(cfg.value_serializer),
        plain_bytes_keys=cfg.key_serializer in (None, "bytes"),
        plain_bytes_values=cfg.value_serializer in (None, "bytes"),
        # The Producer's limits (Producer._new_appender): a record must fit a request and the buffer.
        max_record_bytes=min(cfg.max_request_size - BATCH_HEADER_SIZE, cfg.buffer_memory - RECORD_MEMORY_OVERHEAD),
        size_limit_message=f"larger than max_request_size={cfg.max_request_size} / buffer_memory={cfg.buffer_memory}",
        clock_ms=_no_clock,
        wake_sender=_nothing,
    )


def _no_clock() -> int:
    return 0


def _nothing() -> None:
    return None
