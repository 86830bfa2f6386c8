"""What `MockProducer.metrics()` and `health()` report: the Producer's own `MetricsSnapshot` and `Health`, counting
what the mock does. Owns the mapping of the mock's events (a record completed or failed, a flush, a transactional
call) onto the Producer's metrics; no I/O, and nothing about when records complete (that is `MockProducer`'s).

Each mock record is a batch of its own (as `mock_parts.MockBatch` says), written to the mock's one broker, node 0,
which counts as connected while the mock runs. Numbers the mock has no source for (requests, latencies, bytes on the
wire, producer id) stay at zero or -1.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from aioproducer.append.appender import RECORD_MEMORY_OVERHEAD
from aioproducer.hooks import HookChain
from aioproducer.network.metadata import TopicInfo
from aioproducer.observability.health import Health, health_of
from aioproducer.observability.metrics import Gauges, MetricsSnapshot, ProducerMetrics
from aioproducer.observability.observer import Observer
from aioproducer.testing.mock_parts import PendingRecord
from aioproducer.validation import record_size

__all__ = ["MockObserver"]

_MOCK_NODE = 0


@dataclass(frozen=True)
class _Connection:
    node_id: int = _MOCK_NODE


@dataclass(frozen=True)
class _Buffer:
    """What `health_of` reads of an accumulator."""

    used_bytes: int
    buffer_memory: int


@dataclass(frozen=True)
class _Metadata:
    topics: dict[str, TopicInfo]


class MockObserver:
    """The metrics and last error of one MockProducer."""

    def __init__(self, buffer_memory: int) -> None:
        self.buffer_memory = buffer_memory
        # A clock of its own (not the loop's): a test may read the mock's numbers after its event loop is gone.
        self.observer = Observer(ProducerMetrics(buffer_memory), HookChain(()), _monotonic_ms)
        self.metrics = self.observer.metrics

    def completed(self, record: PendingRecord, error: BaseException | None) -> None:
        """A record completed as if a broker answered: sent, and failed when `error` is set."""
        size = record_size(record.key, record.value, record.headers)
        self.metrics.batch_sent(record.topic, 1, size, size, None, size)
        if error is not None:
            self.failed(record, error)

    def failed(self, record: PendingRecord, error: BaseException) -> None:
        """A record failed (by the broker, or unsent: closed, aborted)."""
        self.metrics.batch_failed(record.topic, 1)
        self.observer.note_error(error)

    def snapshot(self, running: bool, pending: Iterable[PendingRecord]) -> MetricsSnapshot:
        return self.metrics.snapshot(
            Gauges(
                buffer_available_bytes=self.buffer_memory - _used_bytes(pending),
                connection_count=1 if running else 0,
                metadata_age_s=None if self.observer.metadata_refreshed_ms is None else 0.0,
            )
        )

    def started(self) -> None:
        """The mock started: its one broker has answered, as far as readiness goes."""
        self.observer.metadata_refreshed()

    def health(
        self,
        state: str,
        topics: dict[str, TopicInfo],
        pending: Iterable[PendingRecord],
        fatal: BaseException | None = None,
    ) -> Health:
        return health_of(
            state,
            connections=(_Connection(),) if state == "running" else (),
            metadata=_Metadata(topics),
            topics=topics,
            accumulator=_Buffer(_used_bytes(pending), self.buffer_memory),
            observer=self.observer,
            # The mock's metadata never ages out: its broker is always there.
            max_metadata_age_ms=1 << 62,
            fatal=fatal,
        )


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def _used_bytes(pending: Iterable[PendingRecord]) -> int:
    """What the Producer's buffer would hold for these records (as its accumulator counts them)."""
    return sum(record_size(r.key, r.value, r.headers) + RECORD_MEMORY_OVERHEAD for r in pending)
