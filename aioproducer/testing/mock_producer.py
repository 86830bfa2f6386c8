"""`MockProducer`: the Producer's API in memory, for testing code that produces without a broker.

Owns an in-memory log per topic-partition and the records waiting to complete; records take the Producer's own
per-record path (the pure-Python `Appender`: validation, serializers, partitioner, size limits), so they are
refused and partitioned exactly as the Producer would. Completion mirrors Java's `MockProducer`: automatic (at once,
or after `latency_ms`) or manual (`complete_next`, `fail_next`, and `flush` completes everything).

A record gets its offset when it completes successfully, as a broker assigns it on append; `_write` is the one place
records enter a partition's log, where a future transactional mock would hold them until commit. Transactions are
not built yet: `transactional_id` raises the Producer's own `FeatureNotAvailableError` from `ProducerConfig`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple

from aioproducer.appender import RECORD_MEMORY_OVERHEAD, Appender, Prepared
from aioproducer.config import ProducerConfig
from aioproducer.delivery import BatchOutcome, BulkDeliveries, Delivery, resolve
from aioproducer.errors import (
    AioProducerError,
    ConfigError,
    KafkaTimeoutError,
    MetadataTimeoutError,
    ProducerClosedError,
)
from aioproducer.metadata import PartitionInfo, TopicInfo
from aioproducer.models import Header, ProducerRecord, RecordMetadata
from aioproducer.producer import _resolve_partitioner
from aioproducer.records.layout import BATCH_HEADER_SIZE
from aioproducer.serializers import resolve_serializer
from aioproducer.validation import check_topic

__all__ = ["MockProducer", "SentRecord"]

_NEW, _RUNNING, _CLOSED = "new", "running", "closed"
_MOCK_BROKER = 0
_DEFAULT_BOOTSTRAP = "mock:9092"


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
class _Pending:
    """A record accepted by the appender and not completed yet: its outcome settles its Delivery."""

    outcome: BatchOutcome
    topic: str
    partition: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


@dataclass
class _InjectedError:
    error: BaseException
    remaining: int | None  # None: every record from now on
    topic: str | None


class _MockBatch:
    """What the appender reads of the batch it appended to: each mock record is a batch of its own."""

    __slots__ = ("outcome",)

    def __init__(self, outcome: BatchOutcome) -> None:
        self.outcome = outcome


class _MockAccumulator:
    """The accumulator as the appender sees it: unlimited memory; every append becomes one pending record."""

    memory_waiters = 0

    def __init__(self, producer: MockProducer) -> None:
        self._producer = producer

    def has_room(self, size: int) -> bool:
        return True

    def append(
        self,
        tp: tuple[str, int],
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[Header, ...],
        size: int,
        clock_ms: Any,
    ) -> tuple[_MockBatch, int, bool]:
        topic, partition = tp
        outcome = BatchOutcome(topic, partition, asyncio.get_running_loop())
        self._producer._accept(_Pending(outcome, topic, partition, timestamp_ms, key, value, headers))
        return _MockBatch(outcome), 0, False


class _Cluster:
    """The topics the mock knows, as the appender reads them (`cluster_state.cluster.topics`)."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicInfo] = {}

    @property
    def cluster(self) -> _Cluster:
        return self

    def add(self, topic: str, partitions: int) -> TopicInfo:
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise ConfigError(f"topic {topic!r} needs a positive number of partitions, got {partitions!r}")
        check_topic(topic)
        layout = tuple(PartitionInfo(p, _MOCK_BROKER) for p in range(partitions))
        info = TopicInfo(topic, layout, tuple(range(partitions)))
        self.topics[topic] = info
        return info


class MockProducer:
    """The Producer's API (`send`, `enqueue`, `send_many`, `flush`, `close`, `partitions_for`) without a broker.

    `topics` maps topic names to partition counts; another topic is created on first use with `default_partitions`
    (Kafka's `num.partitions` default is 1), or refused with `MetadataTimeoutError` at once when
    `allow_auto_create_topics=False`. Settings are the Producer's (serializers, partitioner, `max_request_size`,
    ...), validated by the same `ProducerConfig`.

    `auto_complete=True` completes each record as it is sent, or `latency_ms` later; with `auto_complete=False`
    records wait for `complete_next()` / `fail_next(error)` / `complete_all()`, and `flush()` completes them all,
    as Java's MockProducer does. `inject_error(error, count=...)` makes the next records fail as they complete;
    `send_error` set to an exception makes every call raise it (Java's `sendException`).
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        config: Any = None,
        topics: Mapping[str, int] | None = None,
        default_partitions: int = 1,
        auto_complete: bool = True,
        latency_ms: float = 0,
        **settings: Any,
    ) -> None:
        if bootstrap_servers is not None:
            settings["bootstrap_servers"] = bootstrap_servers
        elif not (config and ("bootstrap.servers" in config or "bootstrap_servers" in config)):
            settings.setdefault("bootstrap_servers", _DEFAULT_BOOTSTRAP)
        self.config = cfg = ProducerConfig.build(config, **settings)
        if isinstance(default_partitions, bool) or not isinstance(default_partitions, int) or default_partitions < 1:
            raise ConfigError(f"default_partitions must be a positive int, got {default_partitions!r}")
        if latency_ms < 0:
            raise ConfigError(f"latency_ms must be >= 0, got {latency_ms!r}")
        self.default_partitions = default_partitions
        self.auto_complete = auto_complete
        self.latency_ms = latency_ms
        self.send_error: BaseException | None = None
        self._state = _NEW
        self._cluster = _Cluster()
        for topic, count in (topics or {}).items():
            self._cluster.add(topic, count)
        self._appender = Appender(
            accumulator=_MockAccumulator(self),  # type: ignore[arg-type]  # the part of it the appender uses
            cluster_state=self._cluster,  # type: ignore[arg-type]
            partitioner=_resolve_partitioner(cfg),
            key_serializer=resolve_serializer(cfg.key_serializer, role="key"),
            value_serializer=resolve_serializer(cfg.value_serializer),
            plain_bytes_keys=cfg.key_serializer in (None, "bytes"),
            plain_bytes_values=cfg.value_serializer in (None, "bytes"),
            # The Producer's limits (Producer._new_appender): a record must fit a request and the buffer.
            max_record_bytes=min(cfg.max_request_size - BATCH_HEADER_SIZE, cfg.buffer_memory - RECORD_MEMORY_OVERHEAD),
            size_limit_message=(
                f"larger than max_request_size={cfg.max_request_size} / buffer_memory={cfg.buffer_memory}"
            ),
            delivery_type=Delivery,
            clock_ms=_no_clock,
            wake_sender=_nothing,
        )
        self._history: list[ProducerRecord] = []
        self._pending: deque[_Pending] = deque()
        self._logs: dict[tuple[str, int], list[SentRecord]] = {}
        self._injected: list[_InjectedError] = []
        self._timers: set[asyncio.TimerHandle] = set()
        self.flushed = False  # set by flush(); clear() resets it

    def __repr__(self) -> str:
        return f"<MockProducer {self._state} sent={len(self._history)} pending={len(self._pending)}>"

    # -- lifecycle ----------------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the mock (nothing to connect to); as the Producer, a second start raises ProducerClosedError."""
        self._open()

    def _open(self) -> None:
        if self._state != _NEW:
            raise ProducerClosedError(f"start() called on a producer that is {self._state}")
        self._state = _RUNNING

    async def __aenter__(self) -> MockProducer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Flush (completing pending records as `flush` does), then stop; records still pending after `timeout`
        seconds fail with ProducerClosedError."""
        if self._state == _CLOSED:
            return
        if self._state == _RUNNING:
            with contextlib.suppress(KafkaTimeoutError):  # what is still pending fails below
                await self.flush(timeout)
        self._close_now()

    def _close_now(self) -> None:
        """Closed at once: what is still pending fails, as the Producer fails what it could not send."""
        self._state = _CLOSED
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        pending, self._pending = self._pending, deque()
        for record in pending:
            if record.outcome.loop.is_closed():
                record.outcome.waiters.clear()  # nothing can wait on a closed loop; its callbacks could not run
            record.outcome.fail(ProducerClosedError("the producer was closed before this record was sent"))

    @property
    def closed(self) -> bool:
        return self._state == _CLOSED

    # -- sending ------------------------------------------------------------------------------------------------
    async def send(
        self,
        topic: str,
        value: Any = None,
        *,
        key: Any = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its completion (in manual mode: until the test completes it)."""
        delivery = await self.enqueue(
            topic, value, key=key, headers=headers, partition=partition, timestamp_ms=timestamp_ms
        )
        return await delivery

    async def enqueue(
        self,
        topic: str,
        value: Any = None,
        *,
        key: Any = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Delivery:
        """Accept one record and return its `Delivery`, as `Producer.enqueue` does."""
        self._check_running()
        if self.send_error is not None:
            raise self.send_error
        delivery = self._appender.append_now(topic, value, key, headers, partition, timestamp_ms)
        if type(delivery) is tuple:
            delivery = self._place(topic, delivery, partition)
        self._history.append(ProducerRecord(topic, value, key, headers, partition, timestamp_ms))
        return delivery  # type: ignore[return-value]

    async def send_many(self, records: Iterable[ProducerRecord]) -> list[RecordMetadata | BaseException]:
        """One result per record, in order: its RecordMetadata, or the exception it failed with."""
        self._check_running()
        batch = records if isinstance(records, Sequence) else list(records)
        bulk = BulkDeliveries()
        index = 0
        now_ms = int(time.time() * 1000)
        while index < len(batch):
            start = index
            if self.send_error is not None:
                bulk.add(self.send_error)
                index += 1
            else:
                index = self._appender.append_many(batch, index, now_ms, bulk, 1 << 62)
                prepared = bulk.last()
                if type(prepared) is tuple:
                    topic, partition = batch[index - 1][0], batch[index - 1][4]
                    try:
                        bulk.set_last(self._place(topic, prepared, partition))
                    except AioProducerError as exc:
                        bulk.set_last(exc)
            self._remember(batch, start, index, bulk)
        for outcome in bulk.outcomes():
            await outcome.wait()
        return bulk.results(resolve)

    def _remember(self, batch: Sequence[Any], start: int, end: int, bulk: BulkDeliveries) -> None:
        # Which records the appender accepted (a Delivery) rather than refused (an error) at the call.
        accepted = bulk._items
        for position in range(start, end):
            if isinstance(accepted[position], Delivery):
                record = batch[position]
                self._history.append(record if isinstance(record, ProducerRecord) else ProducerRecord(*record))

    def _place(self, topic: str, prepared: Prepared, partition: int | None) -> Delivery:
        """A record whose topic the mock did not know yet: create the topic (or refuse it), then append."""
        return self._appender.place(topic, prepared, partition, self._topic(topic))

    def _topic(self, topic: str) -> TopicInfo:
        info = self._cluster.topics.get(topic)
        if info is not None:
            return info
        if not self.config.allow_auto_create_topics:
            raise MetadataTimeoutError(
                f"topic {topic!r} not present in metadata: it does not exist and allow_auto_create_topics=False"
            )
        return self._cluster.add(topic, self.default_partitions)

    def _accept(self, record: _Pending) -> None:
        """A record the appender placed: complete it now, later, or when the test says."""
        if not self.auto_complete:
            self._pending.append(record)
        elif self.latency_ms:
            self._pending.append(record)
            loop = record.outcome.loop
            timer: asyncio.TimerHandle

            def complete_later() -> None:
                self._timers.discard(timer)
                self._complete_pending(record, None)

            timer = loop.call_later(self.latency_ms / 1000, complete_later)
            self._timers.add(timer)
        else:
            self._complete(record, None)

    # -- completing ---------------------------------------------------------------------------------------------
    def complete_next(self) -> bool:
        """Complete the oldest pending record successfully; False when none is pending (Java's completeNext)."""
        if not self._pending:
            return False
        self._complete(self._pending.popleft(), None)
        return True

    def fail_next(self, error: BaseException) -> bool:
        """Fail the oldest pending record with `error`; False when none is pending (Java's errorNext)."""
        if not self._pending:
            return False
        self._complete(self._pending.popleft(), error)
        return True

    def complete_all(self) -> int:
        """Complete every pending record successfully, oldest first; returns how many."""
        count = 0
        while self.complete_next():
            count += 1
        return count

    def inject_error(self, error: BaseException, *, count: int | None = 1, topic: str | None = None) -> None:
        """The next `count` records to complete (of `topic`, when given) fail with `error`; `count=None`: all
        of them until `clear()`."""
        if count is not None and count < 1:
            raise ConfigError(f"count must be a positive int or None, got {count!r}")
        self._injected.append(_InjectedError(error, count, topic))

    def _complete_pending(self, record: _Pending, error: BaseException | None) -> None:
        try:
            self._pending.remove(record)
        except ValueError:  # completed by the test meanwhile
            return
        self._complete(record, error)

    def _complete(self, record: _Pending, error: BaseException | None) -> None:
        if error is None:
            error = self._injected_error(record.topic)
        if error is not None:
            record.outcome.fail(error)
            return
        offset = self._write(record)
        record.outcome.succeed(offset, -1)

    def _injected_error(self, topic: str) -> BaseException | None:
        for injected in self._injected:
            if injected.topic is None or injected.topic == topic:
                if injected.remaining is not None:
                    injected.remaining -= 1
                    if injected.remaining == 0:
                        self._injected.remove(injected)
                return injected.error
        return None

    def _write(self, record: _Pending) -> int:
        """Append to the partition's log; returns the record's offset."""
        log = self._logs.setdefault((record.topic, record.partition), [])
        offset = len(log)
        log.append(
            SentRecord(
                record.topic, record.partition, offset, record.timestamp_ms, record.key, record.value, record.headers
            )
        )
        return offset

    # -- flushing -----------------------------------------------------------------------------------------------
    async def flush(self, timeout: float | None = None) -> None:
        """Complete every pending record (manual mode, as Java's MockProducer.flush) or wait for those with a
        latency to complete; KafkaTimeoutError after `timeout` seconds."""
        if self._state == _NEW:
            raise ProducerClosedError("flush() on a producer that was never started")
        self.flushed = True
        if not self.auto_complete:
            self.complete_all()
            return
        outcomes = [record.outcome for record in self._pending]
        if outcomes:
            try:
                await asyncio.wait_for(asyncio.gather(*(o.wait() for o in outcomes)), timeout)
            except asyncio.TimeoutError:
                raise KafkaTimeoutError(f"records not delivered within {timeout} s") from None

    # -- information --------------------------------------------------------------------------------------------
    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition numbers (creating the topic as a send would)."""
        self._check_running()
        check_topic(topic)
        return list(range(self._topic(topic).num_partitions))

    def history(self) -> list[ProducerRecord]:
        """Every record accepted, in call order, as given (before serialization): Java's `history()`."""
        return list(self._history)

    def records(self, topic: str | None = None, partition: int | None = None) -> list[SentRecord]:
        """Records written to the log (completed successfully), per partition in offset order; all partitions of
        a topic are listed partition by partition."""
        return [
            record
            for (log_topic, log_partition), log in sorted(self._logs.items())
            if (topic is None or log_topic == topic) and (partition is None or log_partition == partition)
            for record in log
        ]

    @property
    def pending(self) -> int:
        """How many records wait for completion."""
        return len(self._pending)

    def clear(self) -> None:
        """Forget the history, the logs and injected errors (Java's `clear()`); pending records stay pending."""
        self._history.clear()
        self._logs.clear()
        self._injected.clear()
        self.flushed = False

    def _check_running(self) -> None:
        if self._state == _NEW:
            raise ProducerClosedError("the producer was not started: use `async with Producer(...)` or `await start()`")
        if self._state != _RUNNING:
            raise ProducerClosedError(f"the producer is {self._state}: no more records can be sent")


def _no_clock() -> int:
    return 0


def _nothing() -> None:
    return None
