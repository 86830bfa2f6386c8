"""`MockProducer`: the Producer's API in memory, for testing code that produces without a broker.

Owns an in-memory log per topic-partition and the records waiting to complete; records take the Producer's own
per-record path (the pure-Python `Appender`: validation, serializers, partitioner, size limits), so they are
refused and partitioned exactly as the Producer would. Completion mirrors Java's `MockProducer`: automatic (at once,
or after `latency_ms`) or manual (`complete_next`, `fail_next`, and `flush` completes everything).

A record gets its offset when it completes successfully, as a broker assigns it on append; `_write` is the one place
records enter a partition's log. With `transactional_id` the mock is transactional (`mock_transactions`, on the
Producer's own state machine): a record completed inside a transaction takes its offset but is held until commit
(dropped on abort), and each partition of an ended transaction takes one more offset for its control record.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from aioproducer.append.appender import RECORD_MEMORY_OVERHEAD, PreparedRecord, PureAppender
from aioproducer.append.table_records import send_table_as_records
from aioproducer.buffer.pool import PureBufferPool
from aioproducer.columnar.reader import ArrowReader
from aioproducer.config import ProducerConfig
from aioproducer.deliveries.bulk import BulkDeliveries, wait_all
from aioproducer.deliveries.delivery import Delivery, resolve
from aioproducer.errors import (
    AioProducerError,
    ConfigError,
    InvalidTableError,
    KafkaTimeoutError,
    MetadataTimeoutError,
    ProducerClosedError,
    TransactionStateError,
    WouldBlockError,
)
from aioproducer.models import ProducerRecord, RecordMetadata, TableReport, record_of
from aioproducer.network.metadata import TopicInfo
from aioproducer.observability.health import Health
from aioproducer.observability.metrics import MetricsSnapshot
from aioproducer.producer import _resolve_partitioner
from aioproducer.records.layout import BATCH_HEADER_SIZE
from aioproducer.serializers import RecordSerializer, resolve_serializer
from aioproducer.settings import ProducerSettings
from aioproducer.testing.mock_observe import MockObserver
from aioproducer.testing.mock_parts import InjectedError, MockAccumulator, MockTopics, PendingRecord, SentRecord
from aioproducer.testing.mock_transactions import MockTransactions
from aioproducer.transactions.api import TransactionalMethods
from aioproducer.transactions.state import State as TransactionPhase
from aioproducer.validation import check_topic

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from 3.11; only type checkers read it

__all__ = ["MockProducer", "SentRecord"]

_NEW, _RUNNING, _CLOSED = "new", "running", "closed"
_DEFAULT_BOOTSTRAP = "mock:9092"


class MockProducer(TransactionalMethods):
    """The Producer's API (`send`, `enqueue`, `send_many`, `wait`, `flush`, `close`, `partitions_for`, `health`,
    `metrics`, and the transactional methods) without a broker.

    `topics` maps topic names to partition counts; another topic is created on first use with `default_partitions`
    (Kafka's `num.partitions` default is 1), or refused with `MetadataTimeoutError` at once when
    `allow_auto_create_topics=False`. Settings are the Producer's (serializers, partitioner, `max_request_size`,
    ...), validated by the same `ProducerConfig`.

    `auto_complete=True` completes each record as it is sent, or `latency_ms` later; with `auto_complete=False`
    records wait for `complete_next()` / `fail_next(error)` / `complete_all()`, and `flush()` completes them all,
    as Java's MockProducer does. `inject_error(error, count=...)` makes the next records fail as they complete;
    `send_error` set to an exception makes every call raise it (Java's `sendException`).

    With `transactional_id`, `start()` initialises transactions and the Producer's transactional calls follow its
    rules and errors. Records of the open transaction are in `uncommitted_history()`, not in `history()` or
    `records()`, until commit; abort drops them (records not yet completed fail with TransactionAbortedError).
    `consumer_group_offsets_history()` lists the offsets of each committed transaction per group id; Java's flags
    `transaction_initialized`, `transaction_in_flight`, `transaction_committed`, `transaction_aborted`,
    `sent_offsets` and `commit_count` are kept. `fence()` fences the producer; `commit_error` / `abort_error` make
    the next commit / abort fail.

    `metrics()` and `health()` answer as the Producer's, counting what the mock does (`mock_observe`): records sent
    (completed) and failed per topic, their sizes, flush and transactional call times, the last error.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        /,
        *,
        config: Mapping[str, Any] | None = None,
        topics: Mapping[str, int] | None = None,
        default_partitions: int = 1,
        auto_complete: bool = True,
        latency_ms: float = 0,
        **settings: Unpack[ProducerSettings],
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
        self._observe = MockObserver(cfg.buffer_memory)
        self._metrics = self._observe.metrics  # TransactionalMethods adds its call times here
        self._cluster = MockTopics()
        for topic, count in (topics or {}).items():
            self._cluster.add(topic, count)
        self._appender = PureAppender(
            accumulator=MockAccumulator(self._accept),  # type: ignore[arg-type]  # the part of it the appender uses
            # No memory limit in a mock; the pool only keeps the appender's count.
            pool=PureBufferPool(sys.maxsize),
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
            clock_ms=_no_clock,
            wake_sender=_nothing,
        )
        self._record_serializer = RecordSerializer.for_settings(cfg.key_serializer, cfg.value_serializer)
        self._history: list[ProducerRecord] = []
        self._pending: deque[PendingRecord] = deque()
        self._logs: dict[tuple[str, int], list[SentRecord]] = {}
        self._next_offsets: dict[tuple[str, int], int] = {}
        self._txn: MockTransactions | None = None
        if cfg.transactional_id is not None:
            self._txn = MockTransactions(
                cfg.transactional_id, self._settle, self._fail_pending, self._publish, self._skip_offsets
            )
        self._injected: list[InjectedError] = []
        self._timers: set[asyncio.TimerHandle] = set()
        self.flushed = False  # set by flush(); clear() resets it

    def __repr__(self) -> str:
        return f"<MockProducer {self._state} sent={len(self._history)} pending={len(self._pending)}>"

    # -- lifecycle ----------------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the mock (nothing to connect to); as the Producer, a second start raises ProducerClosedError, and a
        transactional producer initialises its transactions."""
        self._open()
        if self._txn is not None:
            await self.init_transactions()

    def _open(self) -> None:
        if self._state != _NEW:
            raise ProducerClosedError(f"start() called on a producer that is {self._state}")
        self._state = _RUNNING
        self._observe.started()

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
                if self._txn is not None:  # as the Producer: an open transaction is aborted on close
                    await self._txn.close(timeout)
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
            error = ProducerClosedError("the producer was closed before this record was sent")
            self._observe.failed(record, error)
            record.outcome.fail(error)

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
        if self._txn is not None:
            self._txn.check_send()
        if self.send_error is not None:
            raise self.send_error
        given = ProducerRecord._make((topic, value, key, headers, partition, timestamp_ms))
        serializer = self._record_serializer
        if serializer is not None:  # as the Producer: context-aware and async serializers first
            if serializer.is_async:
                key, value, headers = await serializer.apply_async(topic, key, value, headers)
                self._check_running()
                if self._txn is not None:  # the transaction may have ended while the serializer ran
                    self._txn.check_send()
            else:
                key, value, headers = serializer.apply(topic, key, value, headers)
        delivery = self._appender.append_now(topic, value, key, headers, partition, timestamp_ms)
        if type(delivery) is PreparedRecord:
            delivery = self._place(delivery)
        self._given(given)
        return delivery  # type: ignore[return-value]  # not a PreparedRecord: a Delivery

    def enqueue_nowait(
        self,
        topic: str,
        value: Any = None,
        *,
        key: Any = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Delivery:
        """Accept one record without awaiting, as `Producer.enqueue_nowait` does (a mock never waits for metadata or
        memory: only an async serializer makes it raise WouldBlockError)."""
        self._check_running()
        if self._txn is not None:
            self._txn.check_send()
        if self.send_error is not None:
            raise self.send_error
        given = ProducerRecord._make((topic, value, key, headers, partition, timestamp_ms))
        serializer = self._record_serializer
        if serializer is not None:
            if serializer.is_async:
                raise WouldBlockError("an async serializer must be awaited: await enqueue(...)")
            key, value, headers = serializer.apply(topic, key, value, headers)
        delivery = self._appender.append_now(topic, value, key, headers, partition, timestamp_ms)
        if type(delivery) is PreparedRecord:
            delivery = self._place(delivery)
        self._given(given)
        return delivery  # type: ignore[return-value]  # not a PreparedRecord: a Delivery

    async def send_table(
        self,
        data: Any,
        *,
        topic: str | None = None,
        topic_column: str | None = None,
        key: str | None = None,
        value: str | None = None,
        headers: str | None = None,
        partition: str | None = None,
        timestamp: str | None = None,
        offsets: bool = False,
    ) -> TableReport:
        """Each row of an Arrow table as a record, as `Producer.send_table` does, with its report; in the mock every row
        becomes a ProducerRecord (through `send_many`, so `history()` shows each one)."""
        self._check_running()
        if (topic is None) == (topic_column is None):
            raise InvalidTableError(
                "send_table takes one topic for every row (topic=) or a topic column (topic_column=), not both"
            )
        if topic is not None:
            check_topic(topic)
        reader = ArrowReader(
            data, key=key, value=value, topic=topic_column, partition=partition, timestamp=timestamp, headers=headers
        )
        return await send_table_as_records(reader, topic, self.send_many, offsets)

    async def send_many(self, records: Iterable[ProducerRecord]) -> list[RecordMetadata | BaseException]:
        """One result per record, in order: its RecordMetadata, or the exception it failed with."""
        self._check_running()
        if self._txn is not None:
            self._txn.check_send()
        given = records if isinstance(records, Sequence) else list(records)
        batch: Sequence[Any] = given
        refused: dict[int, AioProducerError] = {}
        if self._record_serializer is not None:
            batch, refused = await self._record_serializer.apply_many(given)
            if self._txn is not None:
                self._txn.check_send()
        # Where each record of `batch` stands in what was given (refused records are not in `batch`).
        positions = [n for n in range(len(given)) if n not in refused]
        bulk = BulkDeliveries()
        index = 0
        now_ms = int(time.time() * 1000)
        while index < len(batch):
            start = index
            if self.send_error is not None:
                bulk.add(self.send_error)
                index += 1
            else:
                index, prepared = self._appender.append_many(batch, index, now_ms, bulk, 1 << 62)
                if prepared is not None:
                    try:
                        bulk.add(self._place(prepared))
                    except AioProducerError as exc:
                        bulk.add(exc)
            self._remember(given, positions, start, index, bulk)
        for outcome in bulk.outcomes():
            await outcome.wait()
        results: list[RecordMetadata | BaseException] = bulk.results(resolve)
        return RecordSerializer.merge(results, refused)

    async def wait(self, deliveries: Iterable[Any]) -> list[RecordMetadata | BaseException]:
        """Wait for many records' deliveries, as `Producer.wait`: one result per item, in order, its RecordMetadata
        or the exception it failed with (never raised). In manual mode it waits until the test completes them."""
        return await wait_all(deliveries)

    def _remember(self, given: Sequence[Any], positions: list[int], start: int, end: int, bulk: BulkDeliveries) -> None:
        # Which records the appender accepted (a Delivery) rather than refused (an error) at the call.
        for position in range(start, end):
            if bulk.is_delivery(position):
                record = given[positions[position]]
                self._given(record if isinstance(record, ProducerRecord) else record_of(record))

    def _given(self, record: ProducerRecord) -> None:
        """An accepted record as given: in the history, or held with its transaction."""
        if self._txn is not None:
            self._txn.held_given.append(record)
        else:
            self._history.append(record)

    def _place(self, prepared: PreparedRecord) -> Delivery:
        """A record whose topic the mock did not know yet: create the topic (or refuse it), then append."""
        return self._appender.place(prepared, self._topic(prepared.topic))

    def _topic(self, topic: str) -> TopicInfo:
        info = self._cluster.topics.get(topic)
        if info is not None:
            return info
        if not self.config.allow_auto_create_topics:
            raise MetadataTimeoutError(
                f"topic {topic!r} not present in metadata: it does not exist and allow_auto_create_topics=False"
            )
        return self._cluster.add(topic, self.default_partitions)

    def _accept(self, record: PendingRecord) -> None:
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
        self._injected.append(InjectedError(error, count, topic))

    def _complete_pending(self, record: PendingRecord, error: BaseException | None) -> None:
        try:
            self._pending.remove(record)
        except ValueError:  # completed by the test meanwhile
            return
        self._complete(record, error)

    def _complete(self, record: PendingRecord, error: BaseException | None) -> None:
        if error is None:
            error = self._injected_error(record.topic)
        self._observe.completed(record, error)
        if error is not None:
            record.outcome.fail(error)
            if self._txn is not None:
                self._txn.on_record_failed(error)
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

    def _write(self, record: PendingRecord) -> int:
        """Append to the partition's log (or to the open transaction, until commit); returns the record's offset."""
        tp = (record.topic, record.partition)
        offset = self._next_offsets.get(tp, 0)
        self._next_offsets[tp] = offset + 1
        sent = SentRecord(
            record.topic, record.partition, offset, record.timestamp_ms, record.key, record.value, record.headers
        )
        if self._txn is not None:
            self._txn.held.append(sent)
        else:
            self._logs.setdefault(tp, []).append(sent)
        return offset

    # -- transactions -------------------------------------------------------------------------------------------
    def _transaction_manager(self) -> MockTransactions:  # type: ignore[override]  # the same calls, in memory
        if self._txn is None:
            raise TransactionStateError("not a transactional producer: create it with transactional_id=...")
        self._check_running()
        return self._txn

    async def _settle(self, timeout: float | None) -> None:
        """Commit's flush: every record of the transaction completes (manual mode: at once, as flush)."""
        await self.flush(timeout)

    def _fail_pending(self, error: BaseException) -> None:
        pending, self._pending = self._pending, deque()
        for record in pending:
            self._observe.failed(record, error)
            record.outcome.fail(error)

    def _publish(self, records: list[SentRecord], given: list[ProducerRecord]) -> None:
        for record in records:
            self._logs.setdefault((record.topic, record.partition), []).append(record)
        self._history.extend(given)

    def _skip_offsets(self, partitions: set[tuple[str, int]]) -> None:
        for tp in partitions:
            self._next_offsets[tp] = self._next_offsets.get(tp, 0) + 1

    def _mock_transactions(self) -> MockTransactions:
        if self._txn is None:
            raise TransactionStateError("not a transactional producer: create it with transactional_id=...")
        return self._txn

    def fence(self) -> None:
        """A newer producer with the same transactional id fenced this one: the next transactional call (and send)
        raises ProducerFencedError (Java's fenceProducer)."""
        self._mock_transactions().fence()

    @property
    def commit_error(self) -> BaseException | None:
        """Set to make the next commit fail: a timeout leaves it pending (call again to finish it), a fatal error
        ends the producer, another error leaves the transaction to abort (Java's commitTransactionException)."""
        return self._mock_transactions().commit_error

    @commit_error.setter
    def commit_error(self, error: BaseException | None) -> None:
        self._mock_transactions().commit_error = error

    @property
    def abort_error(self) -> BaseException | None:
        """Set to make the next abort fail: a timeout leaves it pending, any other error is fatal."""
        return self._mock_transactions().abort_error

    @abort_error.setter
    def abort_error(self, error: BaseException | None) -> None:
        self._mock_transactions().abort_error = error

    @property
    def transaction_initialized(self) -> bool:
        return self._txn is not None and self._txn.initialized

    @property
    def transaction_in_flight(self) -> bool:
        return self._txn is not None and self._txn.in_flight

    @property
    def transaction_committed(self) -> bool:
        """The last transaction was committed (Java's transactionCommitted)."""
        return self._txn is not None and self._txn.committed

    @property
    def transaction_aborted(self) -> bool:
        return self._txn is not None and self._txn.aborted

    @property
    def sent_offsets(self) -> bool:
        """Offsets were sent in the current (or last) transaction."""
        return self._txn is not None and self._txn.sent_offsets

    @property
    def commit_count(self) -> int:
        return 0 if self._txn is None else self._txn.commit_count

    def uncommitted_history(self) -> list[ProducerRecord]:
        """The records accepted in the open transaction, as given (Java's uncommittedRecords)."""
        return [] if self._txn is None else list(self._txn.held_given)

    def consumer_group_offsets_history(self) -> list[dict[str, dict[tuple[str, int], int]]]:
        """Per committed transaction with offsets: {group id: {(topic, partition): offset}} (Java's
        consumerGroupOffsetsHistory)."""
        return [] if self._txn is None else [dict(entry) for entry in self._txn.offsets_history]

    # -- flushing -----------------------------------------------------------------------------------------------
    async def flush(self, timeout: float | None = None) -> None:
        """Complete every pending record (manual mode, as Java's MockProducer.flush) or wait for those with a
        latency to complete; KafkaTimeoutError after `timeout` seconds."""
        if self._state == _NEW:
            raise ProducerClosedError("flush() on a producer that was never started")
        self.flushed = True
        started = time.perf_counter_ns()
        try:
            if not self.auto_complete:
                self.complete_all()
                return
            outcomes = [record.outcome for record in self._pending]
            if outcomes:
                try:
                    await asyncio.wait_for(asyncio.gather(*(o.wait() for o in outcomes)), timeout)
                except asyncio.TimeoutError:
                    raise KafkaTimeoutError(f"records not delivered within {timeout} s") from None
        finally:  # as the Producer (Java's flush-time-ns-total): whatever the outcome
            self._metrics.flush_time_ns_total += time.perf_counter_ns() - started

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

    def metrics(self) -> MetricsSnapshot:
        """The Producer's metrics snapshot, counting what the mock did: each completed record is a batch of its own
        sent to node 0 (`record-send-total`, `byte-total`, `batch-size-*`, `record-size-avg`, per topic too), failed
        ones (by `fail_next`, an injected error, abort or close) are in `record-error-total`; flush and transactional
        calls are timed. Request, latency and connection numbers have no source in a mock and stay 0."""
        return self._observe.snapshot(self._state == _RUNNING, self._pending)

    def health(self) -> Health:
        """The Producer's `Health`: ready while running (the mock's broker, node 0, leads every partition), the
        pending records' bytes as buffer use, and the last error a record failed with."""
        fatal = None
        if self._txn is not None and self._txn.state.state is TransactionPhase.FATAL_ERROR:
            fatal = self._txn.state.last_error
        return self._observe.health(self._state, dict(self._cluster.topics), self._pending, fatal)

    @property
    def pending(self) -> int:
        """How many records wait for completion."""
        return len(self._pending)

    def clear(self) -> None:
        """Forget the history, the logs and injected errors (Java's `clear()`); pending records stay pending."""
        self._history.clear()
        self._logs.clear()
        self._next_offsets.clear()
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
