"""`MockProducer`: the Producer's API in memory, for testing code that produces without a broker.

Owns the Producer-facing API: the lifecycle, which calls are allowed when, and what each accepts. Records take the
Producer's own per-record path (`mock_parts.mock_appender`), so they are refused and partitioned exactly as the
Producer would. What happens to an accepted record (completion as Java's `MockProducer`: automatic, at once or after
`latency_ms`, or manual; its offset; the logs) is `mock_log`'s. With `transactional_id` the mock is transactional:
`mock_transactions` keeps its transactions on the Producer's own state machine, `mock_transaction_api` is what a test
reads and sets of them.

At about 450 lines it stays whole: it is the Producer's public surface, one short method per call with the Producer's
signature and documentation, and what lies behind the calls is in the modules named above.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any

from aioproducer.append.appender import PreparedRecord
from aioproducer.append.table_records import send_table_as_records
from aioproducer.columnar.reader import ArrowReader
from aioproducer.config import ProducerConfig
from aioproducer.deliveries.bulk import BulkDeliveries, Deliveries, wait_all, when_settled
from aioproducer.deliveries.delivery import Delivery
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
from aioproducer.models import Headers, ProducerRecord, RecordMetadata, TableReport, record_of
from aioproducer.network.metadata import TopicInfo
from aioproducer.observability.health import Health
from aioproducer.observability.metrics import MetricsSnapshot
from aioproducer.producer_bulk import STREAM_CHUNK, reading_failed, records_whole
from aioproducer.serializers import RecordSerializer
from aioproducer.settings import ProducerSettings
from aioproducer.testing.mock_log import MockLog
from aioproducer.testing.mock_observe import MockObserver
from aioproducer.testing.mock_parts import MockTopics, SentRecord, mock_appender
from aioproducer.testing.mock_transaction_api import MockTransactionControls
from aioproducer.testing.mock_transactions import MockTransactions
from aioproducer.transactions.api import TransactionalMethods
from aioproducer.transactions.state import State as TransactionPhase
from aioproducer.validation import check_topic, read_records

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from 3.11; only type checkers read it

__all__ = ["MockProducer", "SentRecord"]

_NEW, _RUNNING, _CLOSED = "new", "running", "closed"
_DEFAULT_BOOTSTRAP = "mock:9092"


class MockProducer(TransactionalMethods, MockTransactionControls):
    """The Producer's API (`send`, `enqueue`, `send_many`, `enqueue_many`, `wait`, `flush`, `close`,
    `partitions_for`, `health`, `metrics`, and the transactional methods) without a broker.

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
        self.send_error: BaseException | None = None
        self._state = _NEW
        self._observe = MockObserver(cfg.buffer_memory)
        self._metrics = self._observe.metrics  # TransactionalMethods adds its call times here
        self._log = log = MockLog(self._observe, auto_complete, latency_ms)
        self._cluster = MockTopics()
        for topic, count in (topics or {}).items():
            self._cluster.add(topic, count)
        self._appender = mock_appender(cfg, log.accept, self._cluster)
        self._record_serializer = RecordSerializer.for_settings(cfg.key_serializer, cfg.value_serializer)
        self._txn: MockTransactions | None = None
        if cfg.transactional_id is not None:
            self._txn = MockTransactions(
                cfg.transactional_id, self._settle, log.fail_pending, log.publish, log.skip_offsets
            )
            log.transaction = self._txn
        self.flushed = False  # set by flush(); clear() resets it

    def __repr__(self) -> str:
        return f"<MockProducer {self._state} sent={len(self._log.history())} pending={self.pending}>"

    @property
    def auto_complete(self) -> bool:
        """Records complete as they are sent (or `latency_ms` later); False: when the test completes them."""
        return self._log.auto_complete

    @auto_complete.setter
    def auto_complete(self, value: bool) -> None:
        self._log.auto_complete = value

    @property
    def latency_ms(self) -> float:
        return self._log.latency_ms

    @latency_ms.setter
    def latency_ms(self, value: float) -> None:
        self._log.latency_ms = value

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
        self._log.close()

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
        headers: Headers | None = None,
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
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Delivery:
        """Accept one record and return its `Delivery`, as `Producer.enqueue` does."""
        self._check_sending()
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
        return self._append(given, topic, value, key, headers, partition, timestamp_ms)

    def enqueue_nowait(
        self,
        topic: str,
        value: Any = None,
        *,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Delivery:
        """Accept one record without awaiting, as `Producer.enqueue_nowait` does (a mock never waits for metadata or
        memory: only an async serializer makes it raise WouldBlockError)."""
        self._check_sending()
        given = ProducerRecord._make((topic, value, key, headers, partition, timestamp_ms))
        serializer = self._record_serializer
        if serializer is not None:
            if serializer.is_async:
                raise WouldBlockError("an async serializer must be awaited: await enqueue(...)")
            key, value, headers = serializer.apply(topic, key, value, headers)
        return self._append(given, topic, value, key, headers, partition, timestamp_ms)

    def _check_sending(self) -> None:
        """A record may be sent now (as the Producer's checks, then Java's `sendException`)."""
        self._check_running()
        if self._txn is not None:
            self._txn.check_send()
        if self.send_error is not None:
            raise self.send_error

    def _append(
        self,
        given: ProducerRecord,
        topic: str,
        value: Any,
        key: Any,
        headers: Any,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> Delivery:
        """A serialized record through the appender; `given` (its form before serialization) joins the history."""
        delivery = self._appender.append_now(topic, value, key, headers, partition, timestamp_ms)
        if type(delivery) is PreparedRecord:
            delivery = self._place(delivery)
        self._log.given(given)
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
        transaction = None  # as the Producer: every row goes to the transaction open now (none spans two)
        if self._txn is not None:
            self._txn.check_send()
            transaction = self._txn.state.transactions_begun

        async def send_rows(records: list[ProducerRecord]) -> list[RecordMetadata | BaseException]:
            return await (await self._enqueue_many(records, transaction))

        return await send_table_as_records(reader, topic, send_rows, offsets)

    async def send_many(self, records: Iterable[ProducerRecord]) -> list[RecordMetadata | BaseException]:
        """One result per record, in order: its RecordMetadata, or the exception it failed with."""
        return await (await self.enqueue_many(records))

    async def enqueue_many(self, records: Iterable[ProducerRecord]) -> Deliveries:
        """Buffer the records, as `Producer.enqueue_many`: await the returned `Deliveries` for one result per record,
        its RecordMetadata or the exception it failed with. In manual mode they wait until the test completes them."""
        return await self._enqueue_many(records, None)

    async def _enqueue_many(self, records: Iterable[ProducerRecord], transaction: int | None) -> Deliveries:
        """enqueue_many's work; its records all go to `transaction` (the one open now when None), as the
        Producer's (TransactionState.check_send)."""
        self._check_running()
        if self._txn is not None:
            self._txn.check_send(transaction)
            if transaction is None:
                transaction = self._txn.state.transactions_begun
        bulk = BulkDeliveries()
        if self._record_serializer is None and isinstance(records, Iterator):
            # As the Producer: an iterator is read a chunk at a time, and no further once buffering is refused.
            while True:
                chunk, unread = read_records(itertools.islice(records, STREAM_CHUNK))
                self._buffer_records(chunk, chunk, list(range(len(chunk))), bulk, transaction)
                if unread is not None:
                    raise reading_failed(unread, bulk) from unread
                if len(chunk) < STREAM_CHUNK or self._refusal(transaction) is not None:
                    return Deliveries(bulk, None)
                await asyncio.sleep(0)
        given = records_whole(records)  # as the Producer: records read whole first are not sent in part
        batch: Sequence[Any] = given
        refused: dict[int, AioProducerError] = {}
        if self._record_serializer is not None:
            batch, refused = await self._record_serializer.apply_many(given)
        # Where each record of `batch` stands in what was given (refused records are not in `batch`).
        positions = [n for n in range(len(given)) if n not in refused]
        self._buffer_records(given, batch, positions, bulk, transaction)
        return Deliveries(bulk, refused)

    def _refusal(self, transaction: int | None) -> AioProducerError | None:
        """Why no more records may be buffered (the mock closed, or the call's transaction ended), if so."""
        try:
            self._check_running()
            if self._txn is not None:
                self._txn.check_send(transaction)
        except AioProducerError as exc:
            return exc
        return None

    def _buffer_records(
        self,
        given: Sequence[Any],
        batch: Sequence[Any],
        positions: list[int],
        bulk: BulkDeliveries,
        transaction: int | None,
    ) -> None:
        """Buffer `batch` (what is left of `given` once the serializers refused some; `positions` maps the one to
        the other), each record's Delivery or error added to `bulk` after those it already holds."""
        base = len(bulk)
        index = 0
        now_ms = int(time.time() * 1000)
        while index < len(batch):
            start = index
            # The mock may have closed, or the transaction ended, while the serializers ran or between an iterator's
            # chunks: as the producer does, the records not yet buffered fail in their places (a closed mock would
            # never settle them).
            refusal = self._refusal(transaction) if self._state != _RUNNING or self._txn is not None else None
            if refusal is not None:
                for _ in range(index, len(batch)):
                    bulk.add(refusal)
                break
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
            self._remember(given, positions, base, start, index, bulk)

    async def wait(self, deliveries: Iterable[Any]) -> list[RecordMetadata | BaseException]:
        """Wait for many records' deliveries, as `Producer.wait`: one result per item, in order, its RecordMetadata
        or the exception it failed with (never raised). In manual mode it waits until the test completes them."""
        return await wait_all(deliveries)

    def _remember(
        self, given: Sequence[Any], positions: list[int], base: int, start: int, end: int, bulk: BulkDeliveries
    ) -> None:
        # Which records the appender accepted (a Delivery) rather than refused (an error) at the call; `bulk` holds
        # them from `base` on.
        for position in range(start, end):
            if bulk.is_delivery(base + position):
                record = given[positions[position]]
                self._log.given(record if isinstance(record, ProducerRecord) else record_of(record))

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

    # -- completing ---------------------------------------------------------------------------------------------
    def complete_next(self) -> bool:
        """Complete the oldest pending record successfully; False when none is pending (Java's completeNext)."""
        return self._log.complete_next()

    def fail_next(self, error: BaseException) -> bool:
        """Fail the oldest pending record with `error`; False when none is pending (Java's errorNext)."""
        return self._log.fail_next(error)

    def complete_all(self) -> int:
        """Complete every pending record successfully, oldest first; returns how many."""
        return self._log.complete_all()

    def inject_error(self, error: BaseException, *, count: int | None = 1, topic: str | None = None) -> None:
        """The next `count` records to complete (of `topic`, when given) fail with `error`; `count=None`: all
        of them until `clear()`."""
        self._log.inject_error(error, count, topic)

    # -- transactions -------------------------------------------------------------------------------------------
    def _transaction_manager(self) -> MockTransactions:
        if self._txn is None:
            raise TransactionStateError("not a transactional producer: create it with transactional_id=...")
        self._check_running()
        return self._txn

    async def _settle(self, timeout: float | None) -> None:
        """Commit's flush: every record of the transaction completes (manual mode: at once, as flush)."""
        await self.flush(timeout)

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
            outcomes = dict.fromkeys(record.outcome for record in self._log.pending)
            if not outcomes:
                return
            loop = asyncio.get_running_loop()
            settled: asyncio.Future[None] = loop.create_future()

            def set_settled() -> None:
                if not settled.done():  # a flush that timed out cancelled it
                    settled.set_result(None)

            # From a loop callback, not from the last batch's waiter: a batch runs its waiters before it schedules
            # its records' callbacks, and flush returns once every record's callback ran (as the Producer's does).
            when_settled(outcomes, partial(loop.call_soon, set_settled))
            try:
                await asyncio.wait_for(settled, timeout)
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
        return self._log.history()

    def records(self, topic: str | None = None, partition: int | None = None) -> list[SentRecord]:
        """Records written to the log (completed successfully), per partition in offset order; all partitions of
        a topic are listed partition by partition."""
        return self._log.records(topic, partition)

    def metrics(self) -> MetricsSnapshot:
        """The Producer's metrics snapshot, counting what the mock did: each completed record is a batch of its own
        sent to node 0 (`record-send-total`, `byte-total`, `batch-size-*`, `record-size-avg`, per topic too), failed
        ones (by `fail_next`, an injected error, abort or close) are in `record-error-total`; flush and transactional
        calls are timed. Request, latency and connection numbers have no source in a mock and stay 0."""
        return self._observe.snapshot(self._state == _RUNNING, self._log.pending)

    def health(self) -> Health:
        """The Producer's `Health`: ready while running (the mock's broker, node 0, leads every partition), the
        pending records' bytes as buffer use, and the last error a record failed with."""
        fatal = None
        if self._txn is not None and self._txn.state.state is TransactionPhase.FATAL_ERROR:
            fatal = self._txn.state.last_error
        return self._observe.health(self._state, dict(self._cluster.topics), self._log.pending, fatal)

    @property
    def pending(self) -> int:
        """How many records wait for completion."""
        return len(self._log.pending)

    def clear(self) -> None:
        """Forget the history, the logs and injected errors (Java's `clear()`); pending records stay pending."""
        self._log.clear()
        self.flushed = False

    def _check_running(self) -> None:
        if self._state == _NEW:
            raise ProducerClosedError("the producer was not started: use `async with Producer(...)` or `await start()`")
        if self._state != _RUNNING:
            raise ProducerClosedError(f"the producer is {self._state}: no more records can be sent")
