"""The sender task: drains ready batches per leader into Produce requests and carries out what each answer means.

One task on the event loop (Java's Sender.runOnce): resolve sequence holes, ensure a producer id, send what is
ready within `max_in_flight_requests_per_connection`, expire what outlived `delivery_timeout_ms` (queued or on the
wire), refresh metadata when due, then sleep until woken. What an answer means (done, retry, split, fail) and every
sequence/epoch rule are `idempotence.sequences`'s; carrying an answer out (settling, retrying with backoff, logging
failures) is `answers`'s, mixed into `Sender`; this module drains, closes and writes the requests.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from aioproducer.buffer.accumulator import ProducerBatch, RecordAccumulator
from aioproducer.config import ProducerConfig
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import AioProducerError, TransportError
from aioproducer.idempotence.sequences import IdempotenceState, wire_sequence
from aioproducer.kafka_errors import kafka_error
from aioproducer.network.cluster import Cluster, monotonic_ms
from aioproducer.network.connection import BrokerConnection
from aioproducer.network.metadata import ClusterMetadata
from aioproducer.network.node_states import NodeLatency
from aioproducer.observability.observer import Observer
from aioproducer.protocol import ApiKey
from aioproducer.records import BatchBuilder
from aioproducer.records.compression import CompressionType
from aioproducer.send.answers import Answers, FailureLog, TransactionGate
from aioproducer.send.compression_pacing import CompressionPacer
from aioproducer.send.pipeline import BatchPipeline

__all__ = ["Sender", "TransactionGate"]

log = logging.getLogger("aioproducer.sender")


class Sender(Answers):
    """Moves batches from the accumulator to brokers. `run()` is the task; `wake()` pokes it."""

    def __init__(
        self,
        config: ProducerConfig,
        accumulator: RecordAccumulator,
        cluster: Cluster,
        idempotence: IdempotenceState,
        acks: int,
        observer: Observer,
    ) -> None:
        self._config = config
        self._acc = accumulator
        # Closing drained batches (compress, stamp, checksum): beside the loop on a worker thread when the compiled
        # pipeline has the codec natively, else here on the loop, paced so that it stays short.
        self._pipeline = BatchPipeline(accumulator.compression, accumulator.compression_level)
        self._compression_pacer = (
            None
            if accumulator.compression == CompressionType.NONE or self._pipeline.off_loop
            else CompressionPacer(accumulator.compression, accumulator.compression_level)
        )
        # Produce requests drained but not written yet, per connection, in drain order: each waits until the
        # pipeline has closed its batches, and none overtakes an earlier one on its connection (sequence order).
        self._unwritten: dict[BrokerConnection, deque[_PendingRequest]] = {}
        self._closing: dict[ProducerBatch, _PendingRequest] = {}  # batch on the pipeline's worker -> its request
        if self._compression_pacer is not None:
            accumulator.limit_growth(self._compression_pacer.largest_on_loop())
        self._cluster = cluster
        self._idem = idempotence
        self._acks = acks
        self._observer = observer
        self.idempotence = idempotence  # read by the producer's metrics
        self._rng = random.Random()
        self._waiter: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the running loop, once `run` starts
        self._wakeup_pending = False
        self._running = True
        self._in_flight: set[asyncio.Future[Any]] = set()
        # Batches in requests not answered yet, in send order: expired here after delivery_timeout_ms (Java's
        # getExpiredInflightBatches), their answer still read when it comes.
        self._on_wire: dict[ProducerBatch, None] = {}
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._init_pid_task: asyncio.Task[None] | None = None
        self._init_pid_retry_ms = 0
        self._next_expiry_ms = 0
        self._failure_log = FailureLog(log)
        self._latency = NodeLatency()  # partitioner_availability_timeout_ms (KIP-794)
        self._leaders = _Leaders(cluster.state.cluster)
        # The last InitProducerId refusal (idempotent producer): queued records failed with it, and the next attempt
        # waits retry_backoff_max_ms. Not a state of the producer: records sent later ask again.
        self._producer_id_refused: AioProducerError | None = None
        self.on_batch_done: Callable[[], None] = lambda: None
        # Set for a transactional producer: it owns the producer id (InitProducerId goes to the transaction
        # coordinator) and says which partitions may be sent and with which Produce version.
        self.transaction: TransactionGate | None = None

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is None:
            self._wakeup_pending = True
        elif not waiter.done():
            waiter.set_result(None)

    def stop(self) -> None:
        self._running = False
        self.wake()

    async def run(self) -> None:
        # Kept for the sleeps between passes: get_running_loop() costs a getpid() system call per call before
        # Python 3.12, and the sender sleeps about once per pass.
        loop = self._loop = asyncio.get_running_loop()
        pipeline_fd = self._pipeline.fileno()
        if pipeline_fd >= 0:
            loop.add_reader(pipeline_fd, self._on_batches_closed)
        try:
            await self._run()
        finally:
            if pipeline_fd >= 0:
                loop.remove_reader(pipeline_fd)

    async def _run(self) -> None:
        while self._running:
            self._wakeup_pending = False
            now = monotonic_ms()
            self._idem.maybe_resolve()
            if self._idem.needs_producer_id and self.transaction is None:
                self._ensure_producer_id(now)
            sent, wait = self._send_ready(now)
            auth_error, self._cluster.auth_error = self._cluster.auth_error, None
            if auth_error is not None:
                self.fail_queued(auth_error)
            # _next_expiry_ms never lies past the next batch's delivery timeout (batches created later expire later;
            # a retried batch was counted while it was on the wire), so passes before it have nothing to expire.
            if now >= self._next_expiry_ms:
                self._expire(now)
            # After sending: a partition without a known leader has just asked for metadata (Java's NetworkClient
            # polls its metadata updater after the sender's requests, so the request goes out in the same round).
            delay = self._cluster.maybe_update(now)
            if sent:
                await asyncio.sleep(0)
                continue
            # InitProducerId backing off after a failure; with no connection, the sender waits to be woken.
            asks_id = self._idem.needs_producer_id and self.transaction is None
            pid_retry = self._init_pid_retry_ms - now if asks_id else None
            if pid_retry is not None and pid_retry <= 0:
                pid_retry = None
            for other in (wait, self._cluster.next_reconnect_delay_ms(now), self._next_expiry_ms - now, pid_retry):
                if other is not None:
                    delay = min(delay, other)
            await self._sleep_until(now + max(delay, 1))

    async def _sleep_until(self, due_ms: int) -> None:
        """Until `wake()` or the loop's clock reaches `due_ms`. A plain future and timer: cheaper than wait_for,
        which also could swallow a cancellation before Python 3.12.

        The timer is set at `due_ms` itself (plus 0.1 ms, so that the clock then reads at least `due_ms` in whole
        milliseconds), not `delay` after now: `now` is the clock cut to whole milliseconds, so sleeping `delay` from
        the real time overslept by up to 1 ms, on top of the up-to-1 ms the selector rounds its timeout up by. For an
        idle `send` that was up to 1 ms beyond linger_ms."""
        if self._wakeup_pending:
            self._wakeup_pending = False
            return
        loop = self._loop if self._loop is not None else asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_at(due_ms / 1000 + 0.0001, _resolve, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    async def close(self) -> None:
        self.stop()
        # Batches still on the pipeline's worker are finished (a few milliseconds at most) and come back: their
        # requests then go to connections that are closed, and their batches back to their queues.
        self._pipeline.shutdown()
        self._on_batches_closed()
        tasks = list(self._side_tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- producer id --------------------------------------------------------------------------------------------
    def _ensure_producer_id(self, now: int) -> None:
        """Send InitProducerId when none is out, its backoff is over and a connection is ready. With no connection
        no attempt is made: the sender is woken when one is ready (asking at once, again and again, would spin)."""
        if self._init_pid_task is not None and not self._init_pid_task.done():
            return
        if now < self._init_pid_retry_ms:
            return
        conn = self._cluster.any_connection()  # starts connecting to known brokers when none is open
        if conn is not None:
            self._init_pid_task = self._spawn(self._init_producer_id(conn))

    async def _init_producer_id(self, conn: BrokerConnection) -> None:
        """One InitProducerId attempt (Java's InitProducerIdHandler, idempotent case). A failure delays the next by
        `retry_backoff_ms`, as Java retries it (a fresh cluster answers COORDINATOR_LOAD_IN_PROGRESS a few times);
        after a fatal error by `retry_backoff_max_ms`."""
        try:
            if await self._request_producer_id(conn):
                return
            base = self._config.retry_backoff_max_ms if self._producer_id_refused else self._config.retry_backoff_ms
            self._init_pid_retry_ms = monotonic_ms() + int(base * self._rng.uniform(0.8, 1.2))
        finally:
            self.wake()

    async def _request_producer_id(self, conn: BrokerConnection) -> bool:
        try:
            response = await conn.request(ApiKey.INIT_PRODUCER_ID, _INIT_PRODUCER_ID)
        except AioProducerError as exc:  # a broken connection, a timeout
            log.debug("InitProducerId failed: %s", exc)
            return False
        error = response["error_code"]
        if error == ErrorCode.NONE:
            self._producer_id_refused = None
            self._idem.set_producer_id(response["producer_id"], response["producer_epoch"])
            self._observer.producer_id_set(response["producer_id"], response["producer_epoch"], False)
            return True
        if not kafka_error(error).retriable:
            # e.g. CLUSTER_AUTHORIZATION_FAILED: what is queued fails now; later records ask again after a backoff.
            self._producer_id_refused = kafka_error(error, f"InitProducerId failed with error {error}")
            self.fail_queued(self._producer_id_refused)
        return False

    # -- sending ------------------------------------------------------------------------------------------------
    def _send_ready(self, now: int) -> tuple[bool, int | None]:
        availability_ms = self._config.partitioner_availability_timeout_ms
        unavailable = self._latency.unavailable(availability_ms) if availability_ms > 0 else ()
        leaders = self._leaders_of(self._cluster.state.cluster)
        check = self._acc.ready(now, leaders.__getitem__, leaders.epochs.__getitem__, unavailable)
        if check.unknown_leader_topics:
            for topic in check.unknown_leader_topics:
                self._cluster.state.touch(topic, now)
            self._cluster.request_update()
        sent = False
        compressing_ns = 0  # on the loop, in this pass
        for node_id, partitions in check.ready.items():
            conn = self._cluster.connection(node_id)
            unwritten = self._unwritten.get(conn) if conn is not None else None
            drainable = (
                conn is not None
                and conn.writable
                and conn.in_flight + (len(unwritten) if unwritten else 0)
                < self._config.max_in_flight_requests_per_connection
            )
            if availability_ms > 0:  # KIP-794: how long the node's ready batches have waited (Java's Sender)
                self._latency.ready(node_id, now, drained=drainable)
            if not drainable or conn is None:
                continue
            if self.transaction is not None:
                partitions = [tp for tp in partitions if self.transaction.may_send(tp)]
            partitions, compressing_ns = self._compress_heads(partitions, compressing_ns)
            batches = self._acc.drain(partitions, self._config.max_request_size, self._idem, now)
            if batches:
                self._send_produce(conn, batches)
                sent = True
        return sent, check.next_check_ms

    def _leaders_of(self, snapshot: ClusterMetadata) -> _Leaders:
        """Each partition's leader and leader epoch in `snapshot`, looked up once per partition rather than on
        every pass and every batch: the snapshot is immutable (a change replaces it), so the view is rebuilt only
        when the cluster's snapshot is another object."""
        leaders = self._leaders
        if leaders.snapshot is not snapshot:
            leaders = self._leaders = _Leaders(snapshot)
        return leaders

    def _compress_heads(self, partitions: list[tuple[str, int]], spent_ns: int) -> tuple[list[tuple[str, int]], int]:
        """Compress the head batches about to be drained, each as the pacer says: on the loop; in a worker thread
        when that alone would be long (`drain` skips it until its thread is done); or, when this pass has already
        compressed on the loop for most of the budget, in the next pass (it is left out of the partitions returned,
        and keeps growing meanwhile). Returns the partitions to drain now and the time spent compressing so far."""
        pacer = self._compression_pacer
        if pacer is None:
            return partitions, spent_ns
        heads = {head.tp: head for head in self._acc.drainable_heads(partitions, self._idem.may_drain)}
        to_drain: list[tuple[str, int]] = []
        for tp in partitions:
            head = heads.get(tp)
            if head is None or head.builder is None:
                to_drain.append(tp)  # nothing to compress here; drain decides the rest
                continue
            size = head.builder.estimated_size
            if pacer.off_loop(size):
                head.seal()
                head.compressing = True
                self._spawn(self._compress(head, head.builder))
            elif pacer.fits(size, spent_ns):
                started = time.perf_counter_ns()
                head.close()
                elapsed = time.perf_counter_ns() - started
                pacer.measured(size, elapsed)
                spent_ns += elapsed
                to_drain.append(tp)
        self._acc.limit_growth(pacer.largest_on_loop())
        return to_drain, spent_ns

    async def _compress(self, batch: ProducerBatch, builder: BatchBuilder) -> None:
        try:
            closed = await asyncio.get_running_loop().run_in_executor(None, self._timed_close, builder)
        finally:
            batch.compressing = False
        batch.closed, batch.builder = closed, None
        self.wake()

    def _timed_close(self, builder: BatchBuilder) -> Any:
        """In a worker thread: close (compress) the batch, and tell the pacer how long it took."""
        size = builder.estimated_size
        started = time.perf_counter_ns()
        closed = builder.close()
        if self._compression_pacer is not None:  # a float store: safe beside the loop's reads
            self._compression_pacer.measured(size, time.perf_counter_ns() - started)
        return closed

    def _send_produce(self, conn: BrokerConnection, batches: list[ProducerBatch]) -> None:
        """Close the drained batches for the wire (on the pipeline's worker, or at once) and write their request once
        every batch is ready and every earlier request to the connection is written."""
        request = _PendingRequest(conn, batches)
        transactional = self.transaction is not None
        epochs = self._leaders_of(self._cluster.state.cluster).epochs
        # The estimated compression ratio is read only for compressed batches (`estimated_wire_size`).
        compressed = self._acc.compression is not CompressionType.NONE
        for position, batch in enumerate(batches):
            request.uncompressed[position] = -1 if batch.closed is not None else batch.size_in_bytes
            encoded = self._pipeline.submit(
                batch, batch.producer_id, batch.producer_epoch, wire_sequence(batch.base_sequence), transactional
            )
            if encoded is None:
                self._closing[batch] = request
                request.missing += 1
            else:
                request.encoded[position] = encoded
                if compressed:
                    self._acc.observe_compression(request.uncompressed[position], len(encoded))
            batch.leader_id, batch.leader_epoch = conn.node_id, epochs[batch.tp]
            self._on_wire[batch] = None
        if not request.missing and conn not in self._unwritten:
            # Every batch closed at once and nothing earlier waits for this connection (the usual case without
            # compression): written now, as `_write_ready` would, without queueing it first.
            self._write_produce(conn, batches, request.encoded)
            return
        self._unwritten.setdefault(conn, deque()).append(request)
        self._write_ready(conn)

    def _on_batches_closed(self) -> None:
        """The pipeline's worker has closed batches (its pipe is readable): put each in its request, and write the
        requests that are complete."""
        touched: set[BrokerConnection] = set()
        for batch, encoded in self._pipeline.completed():
            request = self._closing.pop(batch)
            if isinstance(encoded, BaseException):
                request.error = encoded
            else:
                position = request.batches.index(batch)
                request.encoded[position] = encoded
                self._acc.observe_compression(request.uncompressed[position], len(encoded))
            request.missing -= 1
            touched.add(request.conn)
        for conn in touched:
            self._write_ready(conn)
        if touched:
            self.wake()

    def _write_ready(self, conn: BrokerConnection) -> None:
        """Write the connection's complete requests, oldest first, up to the first one still waiting for a batch."""
        queue = self._unwritten.get(conn)
        while queue and not queue[0].missing:
            request = queue.popleft()
            if request.error is not None:
                self._on_no_response(request.batches, request.error, monotonic_ms())
            else:
                self._write_produce(conn, request.batches, request.encoded)
        if queue is not None and not queue:
            del self._unwritten[conn]

    def _write_produce(self, conn: BrokerConnection, batches: list[ProducerBatch], encoded: list[Any]) -> None:
        txn = self.transaction
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for batch, records in zip(batches, encoded, strict=True):
            by_topic.setdefault(batch.topic, []).append({"index": batch.partition, "records": records})
        body = {
            "transactional_id": None if txn is None else txn.transactional_id,
            "acks": self._acks,
            "timeout_ms": self._config.request_timeout_ms,
            "topic_data": [{"name": topic, "partition_data": parts} for topic, parts in by_topic.items()],
        }
        try:
            version = None if txn is None else txn.produce_version(conn)
            if self._acks == 0:
                written = conn.send_unanswered(ApiKey.PRODUCE, body, version=version)
            else:
                future = conn.send(ApiKey.PRODUCE, body, version=version)
        except TransportError as exc:
            self._on_no_response(batches, exc, monotonic_ms())
            return
        # The observer reads the batches before they are settled; should it ever fail, the batches are still
        # answered (try/finally): observing must never cost a record its outcome.
        if self._acks == 0:
            try:
                self._observer.produce_sent(conn, batches, None)
            finally:
                # acks=0: sent is done, once the request is wholly in the socket (not merely handed to the
                # transport, whose buffer a closed connection drops): Java completes it when its send completes.
                if written.done():
                    self._on_written(written, batches)
                else:
                    self._in_flight.add(written)
                    written.add_done_callback(lambda f: self._on_written(f, batches))
            return
        self._in_flight.add(future)
        observed: Callable[[asyncio.Future[Any], int], None] | None = None
        try:
            observed = self._observer.produce_sent(conn, batches, future)
        finally:
            future.add_done_callback(lambda f: self._on_produce_done(f, batches, observed))

    # -- expiry -------------------------------------------------------------------------------------------------
    def _expire(self, now: int) -> None:
        timeout = self._config.delivery_timeout_ms
        for batch in self._acc.expired(now, timeout):
            last_error = batch.last_error or self._cluster.last_error
            self._settle_failure(batch, self._idem.on_expired(batch, now, on_wire=False, last_error=last_error))
        next_expiry = self._acc.next_expiry_ms(timeout)
        for batch in list(self._on_wire):
            if batch.outcome.done:
                continue
            if now - batch.created_ms < timeout:
                expiry = batch.created_ms + timeout
                next_expiry = expiry if next_expiry is None else min(next_expiry, expiry)
                continue
            # Java's getExpiredInflightBatches: the record's time is up though its request is out; the broker may
            # write it yet, so its outcome is unknown. The answer, when it comes, still counts for its sequence.
            self._settle_failure(batch, self._idem.on_expired(batch, now, on_wire=True, last_error=batch.last_error))
        self._next_expiry_ms = next_expiry if next_expiry is not None else now + timeout

    def fail_unsent(self, error: BaseException) -> None:
        """Fail every batch never sent (Java's abortUndrainedBatches: a transaction is being aborted). They carry
        no sequence yet, so the sequence rules have nothing to record."""
        for batch in self._acc.take_unsent():
            self._settle_failure(batch, error)

    def fail_queued(self, error: BaseException, outcome_unknown: BaseException | None = None) -> None:
        """Fail every batch not in flight (close after its timeout, or a fatal producer error); batches the broker
        may already have written fail with `outcome_unknown` when given."""
        batches = self._acc.take_all_queued()
        self._idem.on_abandoned(batches, error)
        for batch in batches:
            self._settle_failure(batch, outcome_unknown if outcome_unknown and batch.maybe_written else error)

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)
        return task


_INIT_PRODUCER_ID: dict[str, Any] = {
    "transactional_id": None,
    "transaction_timeout_ms": 2147483647,
    "producer_id": -1,
    "producer_epoch": -1,
}


class _PendingRequest:
    """A Produce request drained for a connection and not written yet: its batches, and their bytes as the pipeline
    closes them (`missing` of them still on its worker; `error` when the worker failed one)."""

    __slots__ = ("batches", "conn", "encoded", "error", "missing", "uncompressed")

    def __init__(self, conn: BrokerConnection, batches: list[ProducerBatch]) -> None:
        self.conn = conn
        self.batches = batches
        self.encoded: list[Any] = [None] * len(batches)
        self.uncompressed = [-1] * len(batches)  # each batch's size before it was closed (-1: closed before)
        self.missing = 0
        self.error: BaseException | None = None


class _Leaders(dict[tuple[str, int], int]):
    """tp -> its leader's node id (-1: unknown) in one metadata snapshot, and `epochs`: tp -> leader epoch (-1:
    unknown). Filled on first ask (`__missing__`), so the accumulator's per-partition lookups are C-level dict reads
    (`__getitem__`) after the first pass on a snapshot."""

    __slots__ = ("epochs", "snapshot")

    def __init__(self, snapshot: ClusterMetadata) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.epochs = _LeaderEpochs(snapshot)

    def __missing__(self, tp: tuple[str, int]) -> int:
        info = self.snapshot.topics.get(tp[0])
        leader = self[tp] = -1 if info is None else info.leader(tp[1])
        return leader


class _LeaderEpochs(dict[tuple[str, int], int]):
    """tp -> its leader epoch in one metadata snapshot (-1: unknown), filled on first ask (see `_Leaders`)."""

    __slots__ = ("snapshot",)

    def __init__(self, snapshot: ClusterMetadata) -> None:
        super().__init__()
        self.snapshot = snapshot

    def __missing__(self, tp: tuple[str, int]) -> int:
        info = self.snapshot.topics.get(tp[0])
        unknown = info is None or not 0 <= tp[1] < info.num_partitions
        epoch = self[tp] = -1 if info is None or unknown else info.partitions[tp[1]].leader_epoch
        return epoch


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
