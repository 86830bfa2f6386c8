"""`Producer`: the public coroutine API — send / enqueue / send_many / flush / close.

Owns the caller-facing hot path: validate and serialize a record, await its topic's metadata (bounded by
`max_block_ms`), partition it, wait for buffer memory in FIFO order, append it. Sending is the sender task's job.
Arrow tables (`send_table`) are `producer_tables`'s, transactions `transactions.api`'s: both mixed into `Producer`.

It stays past 500 lines: the lifecycle (start, flush, close) and the record path share one state, checked by every
send and changed by close, which must fail every waiting send; split, that state's rules would live in two places.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MethodType, TracebackType
from typing import TYPE_CHECKING, Any

from aioproducer.append.appender import (
    LET_THE_LOOP_RUN,
    RECORD_MEMORY_OVERHEAD,
    YIELD_AFTER_BYTES,
    Appender,
    PreparedRecord,
    must_wait_for,
)
from aioproducer.append.table_appender import TableAppender
from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.buffer.memory import MemoryWaiters
from aioproducer.config import ProducerConfig
from aioproducer.deliveries.bulk import wait_all
from aioproducer.deliveries.delivery import BatchOutcome, Delivery, track_again
from aioproducer.errors import (
    AioProducerError,
    KafkaTimeoutError,
    ProducerClosedError,
    TransactionFatalError,
    TransactionStateError,
    TransportError,
    WouldBlockError,
)
from aioproducer.idempotence.sequences import IdempotenceState
from aioproducer.models import Headers, RecordMetadata
from aioproducer.network.cluster import Cluster, monotonic_ms
from aioproducer.network.metadata import TopicInfo
from aioproducer.observability.health import Health, health_of
from aioproducer.observability.metrics import MetricsSnapshot
from aioproducer.observability.observer import Observer, new_observer
from aioproducer.observability.record_hooks import RecordHooks
from aioproducer.partitioner import DefaultPartitioner, Partitioner, RoundRobinPartitioner
from aioproducer.producer_bulk import BulkMethods
from aioproducer.producer_tables import TableMethods
from aioproducer.records.compression import CompressionType
from aioproducer.records.layout import BATCH_HEADER_SIZE
from aioproducer.send.sender import Sender
from aioproducer.serializers import RecordSerializer, resolve_serializer
from aioproducer.settings import ProducerSettings
from aioproducer.transactions.api import TransactionalMethods
from aioproducer.transactions.manager import BatchHooks, TransactionManager
from aioproducer.transactions.state import State as TransactionPhase
from aioproducer.validation import check_topic

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from 3.11; only type checkers read it

__all__ = ["Producer"]

log = logging.getLogger("aioproducer.producer")

_NEW, _RUNNING, _CLOSING, _CLOSED = "new", "running", "closing", "closed"


class Producer(BulkMethods, TableMethods, TransactionalMethods):
    """An asyncio Kafka producer. Use as `async with Producer(...) as producer:` or `start()` / `close()`.

    Settings are the Java producer's, dots turned to underscores (`linger_ms=5`; typed by `ProducerSettings`, so a
    type checker catches a misspelt one), or a dict of Java keys (`config={"linger.ms": 5}`). See `ProducerConfig`
    for every setting and its default. With `transactional_id` the producer is transactional: see
    `TransactionalMethods` for begin / commit / abort / send_offsets. `send_table` (Arrow tables) comes from
    `TableMethods`. `health()` answers readiness and liveness probes (`aioproducer.observability.health` states
    the rules).
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        /,
        *,
        config: Mapping[str, Any] | None = None,
        hooks: Iterable[Any] = (),
        **settings: Unpack[ProducerSettings],
    ):
        if bootstrap_servers is not None:
            settings["bootstrap_servers"] = bootstrap_servers
        self.config = cfg = ProducerConfig.build(config, **settings)
        self._partitioner = _resolve_partitioner(cfg)
        self._record_serializer = RecordSerializer.for_settings(cfg.key_serializer, cfg.value_serializer)
        self._compression = CompressionType.from_name(cfg.compression_type)
        self._state = _NEW
        self._loop: asyncio.AbstractEventLoop  # set by start(); nothing uses it before
        self._task: asyncio.Task[None] | None = None
        self._accumulator = RecordAccumulator(
            batch_size=cfg.batch_size,
            linger_ms=cfg.linger_ms,
            buffer_memory=cfg.buffer_memory,
            compression=self._compression,
            compression_level=cfg.compression_level,
            new_outcome=self._new_outcome,
            guarantee_order=cfg.max_in_flight_requests_per_connection == 1,
            batch_max_size=cfg.effective_batch_max_size,
            load_sink=_load_sink(cfg, self._partitioner),
        )
        if cfg.partitioner in ("default", "uniform_sticky") and isinstance(self._partitioner, DefaultPartitioner):
            # The built-in partitioner moves a sticky partition on once its newest batch is full (KIP-794).
            self._partitioner.follow_batches(self._accumulator.missing_bytes)
        self._memory_waiters = MemoryWaiters(self._accumulator.pool, self._wake, cfg.max_block_ms)
        self._shutdown_task: asyncio.Task[None] | None = None
        self._sender_error: BaseException | None = None  # why the sender task crashed, if it did
        self._observer: Observer = new_observer(
            cfg, hooks, config if isinstance(config, Mapping) else {}, monotonic_ms, RECORD_MEMORY_OVERHEAD
        )
        self._metrics = self._observer.metrics
        # Resolved once: without record hooks the record path only checks that this is None.
        self._record_hooks = RecordHooks(self._observer.hooks) if self._observer.hooks.wants_records else None
        self._txn: TransactionManager | None = None  # set by start() when transactional_id is given
        # send_table calls buffer their rows one call after another, in the order they were made: the rows of two
        # calls never interleave, so a partition receives a caller's tables in the order it sent them (a Spark
        # task's chunks, several calls in flight).
        self._table_turn = asyncio.Lock()

    def __repr__(self) -> str:
        return f"<Producer {self._state} bootstrap={','.join(self.config.bootstrap_servers)}>"

    # -- lifecycle ----------------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the sender task and fetch the cluster's metadata, waiting for the first answer (or failure) for at
        most `max_block_ms`: when the cluster answers, the producer is ready (`health().ready`) once this returns.

        With TLS or SASL, start() first connects to a bootstrap server (for at most `max_block_ms`): a rejected
        certificate or wrong credentials raise AuthenticationError here. An unreachable cluster does not fail
        start(): a WARNING is logged, `health()` says why the producer is not ready, and it keeps trying.
        """
        if self._state != _NEW:
            raise ProducerClosedError(f"start() called on a producer that is {self._state}")
        self._loop = asyncio.get_running_loop()
        self._stopped: asyncio.Future[None] = self._loop.create_future()  # done once closed
        self._cluster = Cluster(self.config, self._wake, self._observer, self._topics_in_use)
        if self.config.security_protocol != "PLAINTEXT":
            try:
                await asyncio.wait_for(self._cluster.connect_any(), self.config.max_block_ms / 1000)
            except (TransportError, asyncio.TimeoutError) as exc:
                log.warning("no bootstrap server reachable at start(), the producer keeps trying: %s", exc)
            except BaseException:
                await self._cluster.close()
                raise
        idempotence = IdempotenceState(
            self.config.idempotence,
            retries=self.config.retries,
            delivery_timeout_ms=self.config.delivery_timeout_ms,
            transactional_id=self.config.transactional_id,
        )
        self._sender = Sender(
            self.config, self._accumulator, self._cluster, idempotence, self.config.acks, self._observer
        )
        self._sender.on_batch_done = self._memory_waiters.notify
        if self.config.transactional_id is not None:
            self._txn = self._new_transaction_manager(idempotence)
        self._appender = self._new_appender()
        self._table_appender = self._new_table_appender()
        self._row_appender = self._new_appender(serialize=False)  # send_table's rows as records (record hooks)
        self._task = self._loop.create_task(self._sender.run(), name="aioproducer-sender")
        self._task.add_done_callback(self._on_sender_exit)
        self._enter(_RUNNING)
        await self._first_metadata()
        if self._txn is not None:
            # On a timeout the producer stays started: init_transactions() resumes the wait.
            await self.init_transactions()  # timed as Java's txn-init-time-ns-total

    def _enter(self, state: str) -> None:
        """The producer's state changes: and with it whether enqueue_nowait and enqueue may take their fast paths."""
        self._state = state
        plain = (
            state == _RUNNING and self._record_serializer is None and self._record_hooks is None and self._txn is None
        )
        appender: Appender | None = getattr(self, "_appender", None)  # none until started
        if appender is None:
            return
        appender.plain = plain
        if plain and type(self).enqueue_nowait is _GENERAL_ENQUEUE_NOWAIT:
            # A plain producer (running; nothing to serialize, show record hooks or check for a transaction) hands
            # out its appender's enqueue_plain as enqueue_nowait: one call per record, in C when compiled, where
            # this class's method and the appender's were two. Once the producer leaves the state, enqueue_plain
            # takes this class's method, bound here. A subclass that overrides enqueue_nowait, or a wrapper or mock
            # put on the class before start, keeps its own; one put on the class later is shadowed by this
            # attribute (patch the producer itself: docs/testing.md).
            appender.general_enqueue = MethodType(_GENERAL_ENQUEUE_NOWAIT, self)
            # Set as an attribute, not through self.__dict__: reading __dict__ makes CPython keep the instance's
            # attributes in a dict of their own from then on, and every self.<attribute> read gets slower.
            object.__setattr__(self, "enqueue_nowait", appender.enqueue_plain)
        if plain and type(self).enqueue is _GENERAL_ENQUEUE:
            # The same for enqueue: the appender's enqueue_plain_async buffers the record at once when nothing needs
            # waiting for (a compiled coroutine, with none of this class's checks left to make) and takes this
            # class's method otherwise, bound here.
            appender.general_enqueue_async = MethodType(_GENERAL_ENQUEUE, self)
            object.__setattr__(self, "enqueue", appender.enqueue_plain_async)

    async def _first_metadata(self) -> None:
        """Wait (at most `max_block_ms`) for the sender's first Metadata attempt, which readiness rests on."""
        try:
            await asyncio.wait_for(self._cluster.first_attempt_done.wait(), self.config.max_block_ms / 1000)
        except asyncio.TimeoutError:
            log.warning("no metadata from the cluster within max_block_ms at start(), the producer keeps trying")

    def _new_transaction_manager(self, idempotence: IdempotenceState) -> TransactionManager:
        sender = self._sender
        manager = TransactionManager(
            self.config,
            self._cluster,
            idempotence,
            BatchHooks(
                has_incomplete=self._accumulator.has_incomplete,
                sending_at_once=self._sending_at_once,
                fail_unsent=sender.fail_unsent,
                fail_queued=sender.fail_queued,
                wake_sender=sender.wake,
            ),
            events=self._observer.transaction_event,
        )
        sender.transaction = manager
        notify_memory = self._memory_waiters.notify

        def on_batch_done() -> None:
            notify_memory()
            manager.on_batch_done()

        sender.on_batch_done = on_batch_done
        return manager

    def _new_appender(self, *, serialize: bool = True) -> Appender:
        """The record appender; with `serialize=False`, one that takes keys and values as bytes whatever the
        producer's serializers (for send_table's rows, which hold the records' bytes already)."""
        cfg = self.config
        key_serializer = cfg.key_serializer if serialize else None
        value_serializer = cfg.value_serializer if serialize else None
        return Appender(
            accumulator=self._accumulator,
            pool=self._accumulator.pool,
            cluster_state=self._cluster.state,
            partitioner=self._partitioner,
            key_serializer=resolve_serializer(key_serializer, role="key"),
            value_serializer=resolve_serializer(value_serializer),
            plain_bytes_keys=key_serializer in (None, "bytes"),
            plain_bytes_values=value_serializer in (None, "bytes"),
            max_record_bytes=min(cfg.max_request_size - BATCH_HEADER_SIZE, cfg.buffer_memory - RECORD_MEMORY_OVERHEAD),
            size_limit_message=(
                f"larger than max_request_size={cfg.max_request_size} / buffer_memory={cfg.buffer_memory}"
            ),
            clock_ms=monotonic_ms,
            wake_sender=self._sender.wake,
        )

    def _new_table_appender(self) -> TableAppender:
        cfg = self.config
        return TableAppender(
            accumulator=self._accumulator,
            pool=self._accumulator.pool,
            cluster_state=self._cluster.state,
            partitioner=self._partitioner,
            max_record_bytes=min(cfg.max_request_size - BATCH_HEADER_SIZE, cfg.buffer_memory - RECORD_MEMORY_OVERHEAD),
            size_limit_message=(
                f"larger than max_request_size={cfg.max_request_size} / buffer_memory={cfg.buffer_memory}"
            ),
            clock_ms=monotonic_ms,
            wake_sender=self._sender.wake,
        )

    def _new_outcome(self, tp: tuple[str, int]) -> BatchOutcome:
        """The outcome a new batch's records are settled through, bound to this producer's loop."""
        running = self._task is not None and not self._task.done()
        return BatchOutcome(tp[0], tp[1], self._loop, held=running)

    async def __aenter__(self) -> Producer:
        try:
            await self.start()
        except BaseException:
            await self.close(0)  # `async with` would otherwise leave a started producer behind
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Flush, then stop. Records still undelivered after `timeout` seconds (default: the `close_timeout_ms`
        setting; None waits for every record) fail with ProducerClosedError.

        Closing starts at once: later sends raise ProducerClosedError, and so do sends waiting for metadata or
        buffer memory (Java's BufferPool.close). Records in flight when the timeout hits fail too, with a message
        saying their outcome is unknown (they may have been written). A second `close` waits for the first. After
        the sender task crashed, `close` still releases everything. Cancelling `close` leaves the producer closed,
        as if the timeout had passed.
        """
        if self._state == _NEW:
            self._enter(_CLOSED)
            return
        if self._state != _RUNNING:
            # Closing already (another close, or the sender crashed): wait until that is done.
            await asyncio.shield(self._stopped)
            return
        if timeout is None and self.config.close_timeout_ms is not None:
            timeout = self.config.close_timeout_ms / 1000
        # What is left of the timeout when the records are settled goes to the connections: bytes still in their
        # buffers (requests written, not yet in the socket) get that long to reach it before the sockets close.
        deadline = None if timeout is None else self._loop.time() + timeout
        self._begin_closing()
        try:
            if self._txn is not None:
                # Java's Sender aborts an open transaction on close; a commit under way is waited for. Both share
                # the one timeout with the flush below.
                started = self._loop.time()
                await self._txn.close(timeout)
                if timeout is not None:
                    timeout = max(0.0, timeout - (self._loop.time() - started))
            await self._wait_incomplete(timeout)
        except KafkaTimeoutError:
            log.warning("close(timeout=%s): failing records not delivered in time", timeout)
        finally:
            if deadline is None:
                drain_s = self.config.request_timeout_ms / 1000
            else:
                drain_s = max(0.0, deadline - self._loop.time())
            await self._shutdown(drain_s)

    def _begin_closing(self) -> None:
        """No more records: sends raise, waiting sends fail now, and every buffered batch is ready at once."""
        self._enter(_CLOSING)
        self._accumulator.close()
        error = self._closed_error()
        self._memory_waiters.fail_all(error)
        self._cluster.fail_waiters(error)
        self._wake()

    async def _shutdown(self, drain_s: float = 0.0) -> None:
        """Stop the sender, close every connection (each once its written bytes are in the socket, for at most
        `drain_s`), fail what is left; once, however many callers ask."""
        if self._shutdown_task is None:
            self._shutdown_task = self._loop.create_task(self._stop_everything(drain_s), name="aioproducer-shutdown")
        await asyncio.shield(self._shutdown_task)

    async def _stop_everything(self, drain_s: float = 0.0) -> None:
        try:
            self._sender.stop()
            if self._task is not None:
                await asyncio.gather(self._task, return_exceptions=True)
            await self._cluster.close(drain_s)
            await self._sender.close()
            await asyncio.sleep(0)  # let the failed in-flight requests settle back into the queues
            self._sender.fail_queued(
                ProducerClosedError("the producer was closed before this record was sent"),
                ProducerClosedError(
                    "the producer was closed while this record's request was in flight: its outcome is unknown "
                    "(the broker may have written it)"
                ),
            )
            self._memory_waiters.fail_all(
                ProducerClosedError("the producer was closed while waiting for buffer memory")
            )
            if self._record_hooks is not None:  # every record is settled: its hooks hear of it before they close
                await self._record_hooks.all_acknowledged()
        finally:
            self._enter(_CLOSED)
            self._stopped.set_result(None)
            self._observer.hooks.close()

    def _on_sender_exit(self, task: asyncio.Task[None]) -> None:
        # The sender no longer holds the batches left (cancelled with the event loop's end, crashed, or stopped by
        # close): their waiting handles, and any registered from now on, stay in the cyclic collector's care.
        for batch in self._accumulator.incomplete_batches():
            batch.outcome.held = False
            track_again(batch.outcome.deliveries)
        if task.cancelled() or task.exception() is None or self._state == _CLOSED:
            return
        self._sender_error = error = task.exception()
        log.error("sender task crashed: %r", error)
        if self._state == _RUNNING:
            self._begin_closing()
        self._sender.fail_queued(ProducerClosedError(f"the producer's sender failed: {error!r}"))
        # Nothing sends any more: release the connections and fail what is in flight now, rather than when the
        # owner calls close() (which then just waits for this).
        if self._shutdown_task is None:
            self._shutdown_task = self._loop.create_task(self._stop_everything(), name="aioproducer-shutdown")

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
        """Send one record and wait until the broker acknowledged it (or it failed: the error is raised).

        Cancelling `send` after the record was buffered does not unsend it: it is still delivered.
        """
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
        """Buffer one record; returns its `Delivery` as soon as it is buffered: await it for the `RecordMetadata`.

        Waits (up to `max_block_ms`) only for the topic's metadata or for buffer memory, and for an async serializer
        when one is configured. Cancelling `enqueue` while it waits guarantees the record is not sent; once it
        returned, the record will be delivered or failed.
        """
        hooks = self._record_hooks
        if hooks is not None:
            record = hooks.buffering(topic, value, key, headers, partition, timestamp_ms)
            topic, value, key, headers, partition, timestamp_ms = record
        try:
            if self._state != _RUNNING:
                raise self._closed_error()
            serializer = self._record_serializer
            if serializer is not None:  # context-aware or async serializers; plain ones run in the appender
                if serializer.is_async:
                    key, value, headers = await serializer.apply_async(topic, key, value, headers)
                    if self._state != _RUNNING:
                        raise self._closed_error()
                else:
                    key, value, headers = serializer.apply(topic, key, value, headers)
            appender = self._appender
            if appender.unyielded_bytes >= YIELD_AFTER_BYTES and appender.yield_due():
                # Before buffering, so that a cancellation here leaves the record unsent, as documented.
                appender.yielded()
                await asyncio.sleep(0)
                if self._state != _RUNNING:
                    raise self._closed_error()
            if self._txn is not None:  # here, after every wait: a transaction that ended meanwhile takes no record
                self._txn.check_send()
            delivery = appender.append_now(topic, value, key, headers, partition, timestamp_ms)
            if type(delivery) is PreparedRecord:
                delivery = await self._append_after_waiting(delivery)
        except BaseException as exc:
            if hooks is not None:
                hooks.refused(record, exc)
            raise
        if hooks is not None:
            hooks.buffered(record, delivery)  # type: ignore[arg-type]
        return delivery  # type: ignore[return-value]  # not a PreparedRecord: a Delivery

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
        """Buffer one record without awaiting anything, and return its `Delivery`; or raise `WouldBlockError`, the
        record not buffered, when `enqueue` would have to wait: for the topic's metadata (or a partition beyond
        its known ones), for buffer memory, or to let the event loop run so the sender can send (once 64 KiB are
        buffered and half a millisecond has passed since the caller last yielded, or at 256 KiB:
        `Appender.yield_due`). Then `await producer.enqueue(...)` the same record (anyio's `send_nowait` idiom):

            try:
                delivery = producer.enqueue_nowait(topic, value)
            except WouldBlockError:
                delivery = await producer.enqueue(topic, value)

        Any other error is `enqueue`'s. A producer with an async serializer cannot buffer without awaiting it:
        every call raises WouldBlockError.
        """
        # Refusals that do not depend on the record come before the record hooks see it: a record shown to them is
        # acknowledged to them once (the OpenTelemetry hook opens a span it closes then), and the caller sends this
        # one again with enqueue.
        serializer = self._record_serializer
        if self._state == _RUNNING:
            if self._appender.unyielded_bytes >= YIELD_AFTER_BYTES and self._appender.yield_due():
                raise WouldBlockError(LET_THE_LOOP_RUN)
            if serializer is not None and serializer.is_async:
                raise WouldBlockError("an async serializer must be awaited: await enqueue(...)")
        hooks = self._record_hooks
        if hooks is not None:
            record = hooks.buffering(topic, value, key, headers, partition, timestamp_ms)
            topic, value, key, headers, partition, timestamp_ms = record
        try:
            if self._state != _RUNNING:
                raise self._closed_error()
            if serializer is not None:
                key, value, headers = serializer.apply(topic, key, value, headers)
            if self._txn is not None:
                self._txn.check_send()
            delivery = self._appender.append_now(topic, value, key, headers, partition, timestamp_ms)
            if type(delivery) is PreparedRecord:
                raise WouldBlockError(must_wait_for(topic))
        except BaseException as exc:
            if hooks is not None:  # WouldBlockError included (Java's onSendError for a send that could not buffer)
                hooks.refused(record, exc)
            raise
        if hooks is not None:
            hooks.buffered(record, delivery)  # type: ignore[arg-type]
        return delivery  # type: ignore[return-value]  # not a PreparedRecord: a Delivery

    def _raise_unless_running(self) -> None:
        if self._state != _RUNNING:
            raise self._closed_error()

    def _refusal(self, transaction: int | None = None) -> AioProducerError | None:
        """Why no more records may be buffered now (the producer is closing, or the transaction ended: with
        `transaction`, the one a bulk call began in), if so."""
        if self._state != _RUNNING:
            return self._closed_error()
        if self._txn is not None:
            try:
                self._txn.check_send(transaction)
            except AioProducerError as exc:
                return exc
        return None

    async def wait(self, deliveries: Iterable[Any]) -> list[RecordMetadata | BaseException]:
        """Wait for many records' deliveries; one result per item, in order: its `RecordMetadata` or the exception
        it failed with (never raised). The fast way to wait for what `enqueue` returned.

        `asyncio.gather(*deliveries, return_exceptions=True)` gives the same list, but wakes once per record; this
        waits batch by batch and builds the results in one pass. A record's result is exact: a failed batch fails
        only its own records. Sending is not hurried (linger_ms still applies; `flush` sends at once). Items that
        are not a `Delivery` (a cancelled one, an asyncio future or task) are awaited too, and their result or
        exception takes their place. Cancelling `wait` cancels only the waiting.
        """
        return await wait_all(deliveries)

    async def _append_after_waiting(
        self, prepared: PreparedRecord, appender: Appender | None = None, transaction: int | None = None
    ) -> Delivery:
        """The slow path: wait for metadata and memory (together bounded by `max_block_ms`), then append (into the
        transaction a bulk call began in, `transaction`, when given: not into one begun during the wait)."""
        if self._state != _RUNNING:
            raise self._closed_error()
        deadline = self._loop.time() + self.config.max_block_ms / 1000
        topic, partition = prepared.topic, prepared.partition
        info = self._cluster.metadata.topics.get(topic)
        if info is None or not info.num_partitions or (partition is not None and partition >= info.num_partitions):
            info = await self._wait_for_topic(topic, partition)
        memory = prepared.memory
        if self._memory_waiters or not self._accumulator.has_room(memory):
            await self._observer.timed_memory_wait(self._memory_waiters.wait(memory, deadline))
        if self._state != _RUNNING:
            raise self._closed_error()
        if self._txn is not None:
            self._txn.check_send(transaction)
        return (appender or self._appender).place(prepared, info)

    # -- flushing -----------------------------------------------------------------------------------------------
    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until each of those records is delivered or failed.

        Raises KafkaTimeoutError after `timeout` seconds. Cancelling `flush` cancels only the wait.
        """
        if self._state == _NEW:
            raise ProducerClosedError("flush() on a producer that was never started")
        started = time.perf_counter_ns()
        try:
            # The record hooks hear of each record as its batch settles (RecordHooks), before this returns: as Java's
            # flush returns once every record's callback ran.
            await self._wait_incomplete(timeout)
        finally:  # as Java's KafkaProducer.flush: the time is counted whatever the outcome
            self._metrics.flush_time_ns_total += time.perf_counter_ns() - started

    async def _wait_incomplete(self, timeout: float | None) -> None:
        batches = self._accumulator.incomplete_batches()
        if not batches:
            return
        done: asyncio.Future[None] = self._loop.create_future()
        remaining = len(batches)

        def one_done() -> None:
            nonlocal remaining
            remaining -= 1
            if remaining == 0 and not done.done():
                done.set_result(None)

        for batch in batches:
            batch.done_callbacks.append(one_done)
        with self._sending_at_once():
            try:
                await asyncio.wait_for(done, timeout)
            except asyncio.TimeoutError:
                raise KafkaTimeoutError(f"records not delivered within {timeout} s") from None

    def _send_buffered_now(self) -> None:
        """A caller is done buffering and waits for its records: the batches holding its last ones go out now, not
        after linger_ms; batches begun later linger as usual (see RecordAccumulator.expedite). Not a flush
        (`_sending_at_once`): that keeps every batch ready while the caller waits, so under a pipeline of calls
        (Spark's tasks keep several `send_table` calls going) linger_ms would never apply."""
        self._accumulator.expedite()
        self._wake()

    @contextlib.contextmanager
    def _sending_at_once(self) -> Iterator[None]:
        """While a caller waits for what is buffered, every batch is ready at once (linger_ms is not waited out)."""
        self._accumulator.begin_flush()
        self._wake()
        try:
            yield
        finally:
            self._accumulator.end_flush()

    # -- information --------------------------------------------------------------------------------------------
    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition numbers, waiting for its metadata up to `max_block_ms`."""
        if self._state != _RUNNING:
            raise self._closed_error()
        check_topic(topic)
        info = await self._wait_for_topic(topic, None)
        return list(range(info.num_partitions))

    async def _wait_for_topic(self, topic: str, partition: int | None) -> TopicInfo:
        """Wait for the topic's metadata (up to `max_block_ms`), timed as Java's metadata-wait-time-ns-total."""
        started = time.perf_counter_ns()
        try:
            return await self._cluster.wait_for_topic(topic, self.config.max_block_ms, partition)
        finally:
            self._metrics.metadata_wait_time_ns_total += time.perf_counter_ns() - started

    def metrics(self) -> MetricsSnapshot:
        """An immutable snapshot of the producer's metrics, under the Java producer's names (listed in
        docs/observability.md)."""
        started = self._state != _NEW
        return self._observer.snapshot(
            self._accumulator,
            self._cluster.open_connections() if started else (),
            self._sender.idempotence if started else None,
            self._accumulator.pool.waiters,
        )

    def health(self) -> Health:
        """Whether the producer is ready (can deliver now) and live (may yet), why not, and what they rest on: for
        readiness and liveness probes. The rules are `aioproducer.observability.health`'s."""
        started = self._state != _NEW
        return health_of(
            self._state,
            connections=self._cluster.open_connections() if started else (),
            metadata=self._cluster.metadata if started else None,
            topics=self._cluster.state.topics if started else (),
            accumulator=self._accumulator,
            observer=self._observer,
            max_metadata_age_ms=self.config.metadata_max_age_ms + self.config.request_timeout_ms,
            fatal=self._fatal_error() if started else None,
        )

    def _fatal_error(self) -> BaseException | None:
        """What ended this producer's usefulness: its sender crashed, or its transactions hit a fatal error (fenced,
        say). An idempotent producer's broken sequences are mended with a new epoch or producer id (R9), never
        fatal; an InitProducerId refusal is tried again after retry_backoff_max_ms."""
        if self._sender_error is not None:
            return self._sender_error
        if self._txn is not None and self._txn.state.state is TransactionPhase.FATAL_ERROR:
            return self._txn.state.last_error or TransactionFatalError("fatal transaction error")
        return None

    def _transaction_manager(self) -> TransactionManager:
        if self.config.transactional_id is None:
            raise TransactionStateError("not a transactional producer: create it with transactional_id=...")
        if self._state != _RUNNING or self._txn is None:
            raise self._closed_error()
        return self._txn

    def _topics_in_use(self) -> set[str]:
        """Topics with batches waiting to be sent or retried (read once per metadata refresh, one look per
        partition; a batch in flight comes back to its queue if its request fails)."""
        return self._accumulator.topics_with_batches()

    def _wake(self) -> None:
        if self._state != _NEW:
            self._sender.wake()

    def _closed_error(self) -> ProducerClosedError:
        if self._state == _NEW:
            return ProducerClosedError(
                "the producer was not started: use `async with Producer(...)` or `await start()`"
            )
        if self._sender_error is not None:
            return ProducerClosedError(
                f"the producer's sender failed ({self._sender_error!r}): no more records can be sent"
            )
        return ProducerClosedError(f"the producer is {self._state}: no more records can be sent")


# Producer.enqueue_nowait as this module defines it (see Producer._enter).
_GENERAL_ENQUEUE_NOWAIT = Producer.enqueue_nowait
_GENERAL_ENQUEUE = Producer.enqueue


def _load_sink(cfg: ProducerConfig, partitioner: Partitioner) -> Any:
    """Where the accumulator reports each topic's load (adaptive partitioning, KIP-794): the built-in partitioner,
    unless partitioner_adaptive_partitioning_enable is off (Java's UniformStickyPartitioner, and a partitioner given
    as an object, take no part)."""
    if not cfg.partitioner_adaptive_partitioning_enable:
        return None
    return getattr(partitioner, "update_load_stats", None) if cfg.partitioner == "default" else None


def _resolve_partitioner(cfg: ProducerConfig) -> Partitioner:
    spec = cfg.partitioner
    if spec == "default":
        return DefaultPartitioner(cfg.batch_size, ignore_keys=cfg.partitioner_ignore_keys)
    if spec == "uniform_sticky":
        return DefaultPartitioner(cfg.batch_size, ignore_keys=True)
    if spec == "round_robin":
        return RoundRobinPartitioner()
    return spec  # type: ignore[return-value]  # validated by ProducerConfig: an object with `partition`
