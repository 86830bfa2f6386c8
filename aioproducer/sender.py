"""The sender task: drains ready batches per leader into Produce requests and settles every batch from the answer.

One task on the event loop (Java's Sender.runOnce): ensure a producer id, refresh metadata when due, send what is
ready within `max_in_flight_requests_per_connection`, expire what outlived `delivery_timeout_ms`, then sleep until
woken. Response handling is synchronous and classifies each partition's error: done, retry, or fail.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Any, Protocol

from .accumulator import ProducerBatch, RecordAccumulator
from .cluster import Cluster, monotonic_ms
from .compression import CompressionType
from .config import ProducerConfig
from .connection import BrokerConnection
from .errors import AioProducerError, DeliveryTimeoutError, TransportError
from .idempotence import IdempotenceState
from .kafka_errors import kafka_error
from .protocol import ApiKey
from .records import BatchBuilder

__all__ = ["Sender", "TransactionGate"]

log = logging.getLogger("aioproducer.sender")

# Compressing a batch this big takes long enough (~1 ms+) that it pays to do it in a worker thread.
_OFFLOAD_COMPRESSION_BYTES = 64 * 1024
_MESSAGE_TOO_LARGE = 10
_DUPLICATE_SEQUENCE_NUMBER = 46
_OUT_OF_ORDER_SEQUENCE_NUMBER = 45
_UNKNOWN_PRODUCER_ID = 59


class TransactionGate(Protocol):
    """What a transactional producer's sender asks its transaction manager (`transactions.TransactionManager`)."""

    transactional_id: str

    def may_send(self, tp: tuple[str, int]) -> bool: ...

    def produce_version(self, conn: BrokerConnection) -> int: ...

    def on_batch_failed(self, error: BaseException) -> None: ...


class Sender:
    """Moves batches from the accumulator to brokers. `run()` is the task; `wake()` pokes it."""

    def __init__(
        self,
        config: ProducerConfig,
        accumulator: RecordAccumulator,
        cluster: Cluster,
        idempotence: IdempotenceState,
        acks: int,
    ) -> None:
        self._config = config
        self._acc = accumulator
        self._cluster = cluster
        self._idem = idempotence
        self._acks = acks
        self._rng = random.Random()
        self._waiter: asyncio.Future[None] | None = None
        self._wakeup_pending = False
        self._running = True
        self._in_flight: set[asyncio.Future[dict[str, Any]]] = set()
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._init_pid_task: asyncio.Task[None] | None = None
        self._bump_refused = False
        self.fatal_error: AioProducerError | None = None
        self.on_batch_done: Callable[[], None] = lambda: None
        # Set for a transactional producer: it owns the producer id and says which partitions may be sent.
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
        while self._running:
            self._wakeup_pending = False
            now = monotonic_ms()
            delay = self._cluster.maybe_update(now)
            manages_id = self._idem.enabled and self.transaction is None
            if manages_id and (not self._idem.has_producer_id or self._idem.reset_pending):
                self._ensure_producer_id()
            if self._idem.has_producer_id and not self._idem.reset_pending:
                sent, wait = self._send_ready(now)
                if sent:
                    await asyncio.sleep(0)
                    continue
                if wait is not None:
                    delay = min(delay, wait)
            self._expire(now)
            reconnect = self._cluster.next_reconnect_delay_ms(now)
            if reconnect is not None:
                delay = min(delay, reconnect)
            await self._sleep(max(delay, 1) / 1000)

    async def _sleep(self, seconds: float) -> None:
        """Until `wake()` or `seconds` pass. A plain future and timer: cheaper than wait_for, which also could
        swallow a cancellation before Python 3.12."""
        if self._wakeup_pending:
            self._wakeup_pending = False
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(seconds, _resolve, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    async def close(self) -> None:
        self.stop()
        tasks = list(self._side_tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- producer id --------------------------------------------------------------------------------------------
    def _ensure_producer_id(self) -> None:
        if self._init_pid_task is not None and not self._init_pid_task.done():
            return
        if self._idem.reset_pending and self._in_flight:
            return  # KIP-360: bump only once the requests in flight have come back
        self._init_pid_task = self._spawn(self._init_producer_id())

    async def _init_producer_id(self) -> None:
        try:
            await self._request_producer_id()
        finally:
            self.wake()

    async def _request_producer_id(self) -> None:
        conn = self._cluster.any_connection()
        if conn is None:
            return  # connecting: the sender is woken when a connection is ready
        bump = self._idem.reset_pending and self._idem.producer_id >= 0 and not self._bump_refused
        body = {
            "transactional_id": None,
            "transaction_timeout_ms": 2147483647,
            "producer_id": self._idem.producer_id if bump else -1,
            "producer_epoch": self._idem.producer_epoch if bump else -1,
        }
        try:
            response = await conn.request(ApiKey.INIT_PRODUCER_ID, body)
        except TransportError as exc:
            log.debug("InitProducerId failed: %s", exc)
            await asyncio.sleep(self._config.retry_backoff_ms / 1000)
            return
        error = response["error_code"]
        if error == 0:
            self._bump_refused = False
            self._idem.set_producer_id(response["producer_id"], response["producer_epoch"])
            self._renumber_queued()
        elif kafka_error(error).retriable:
            await asyncio.sleep(self._config.retry_backoff_ms / 1000)
        elif bump:
            # The broker cannot bump this epoch (e.g. it forgot the producer): start over with a new producer id.
            self._bump_refused = True
        else:
            self.fatal_error = kafka_error(error, f"InitProducerId failed with error {error}")
            self.fail_queued(self.fatal_error)
            await asyncio.sleep(self._config.retry_backoff_max_ms / 1000)  # then ask again, without spinning

    def _renumber_queued(self) -> None:
        """After a new producer id/epoch, queued retries take fresh sequences in queue order (KIP-360)."""
        for batch in self._acc.queued_batches():
            batch.base_sequence = -1

    # -- sending ------------------------------------------------------------------------------------------------
    def _send_ready(self, now: int) -> tuple[bool, int | None]:
        check = self._acc.ready(now, self._leader_of)
        if check.unknown_leader_topics:
            for topic in check.unknown_leader_topics:
                self._cluster.state.touch(topic, now)
            self._cluster.request_update()
        sent = False
        for node_id, partitions in check.ready.items():
            conn = self._cluster.connection(node_id)
            if conn is None or not conn.writable:
                continue
            if conn.in_flight >= self._config.max_in_flight_requests_per_connection:
                continue
            if self.transaction is not None:
                partitions = [tp for tp in partitions if self.transaction.may_send(tp)]
            self._offload_compression(partitions)
            batches = self._acc.drain(partitions, self._config.max_request_size, self._idem)
            if batches:
                self._send_produce(conn, batches)
                sent = True
        return sent, check.next_check_ms

    def _leader_of(self, tp: tuple[str, int]) -> int:
        info = self._cluster.metadata.topics.get(tp[0])
        return -1 if info is None else info.leader(tp[1])

    def _offload_compression(self, partitions: list[tuple[str, int]]) -> None:
        """Close big compressed head batches in a worker thread; `drain` skips them until they are ready."""
        if self._acc.compression == CompressionType.NONE:
            return
        for tp in partitions:
            queue = self._acc.queues.get(tp)
            head = queue[0] if queue else None
            if head is None or head.compressing or head.builder is None:
                continue
            if head.size_in_bytes >= _OFFLOAD_COMPRESSION_BYTES:
                head.seal()
                head.compressing = True
                self._spawn(self._compress(head, head.builder))

    async def _compress(self, batch: ProducerBatch, builder: BatchBuilder) -> None:
        try:
            closed = await asyncio.get_running_loop().run_in_executor(None, builder.close)
        finally:
            batch.compressing = False
        batch.closed, batch.builder = closed, None
        self.wake()

    def _send_produce(self, conn: BrokerConnection, batches: list[ProducerBatch]) -> None:
        idem = self._idem
        txn = self.transaction
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for batch in batches:
            records = batch.close().encode(
                producer_id=idem.producer_id,
                producer_epoch=idem.producer_epoch,
                base_sequence=batch.base_sequence,
                transactional=txn is not None,
            )
            by_topic.setdefault(batch.topic, []).append({"index": batch.partition, "records": records})
        body = {
            "transactional_id": None if txn is None else txn.transactional_id,
            "acks": self._acks,
            "timeout_ms": self._config.request_timeout_ms,
            "topic_data": [{"name": topic, "partition_data": parts} for topic, parts in by_topic.items()],
        }
        try:
            version = None if txn is None else txn.produce_version(conn)
            future = conn.send(ApiKey.PRODUCE, body, version=version, expect_response=self._acks != 0)
        except TransportError as exc:
            for batch in batches:
                self._retry_or_fail(batch, exc, monotonic_ms())
            return
        if future is None:
            for batch in batches:
                self._settle_success(batch, -1, -1)
            return
        self._in_flight.add(future)
        future.add_done_callback(lambda f: self._on_produce_done(f, batches))

    # -- responses ----------------------------------------------------------------------------------------------
    def _on_produce_done(self, future: asyncio.Future[dict[str, Any]], batches: list[ProducerBatch]) -> None:
        self._in_flight.discard(future)
        now = monotonic_ms()
        if future.cancelled():
            error: BaseException = TransportError("request cancelled")
        else:
            error = future.exception() or TransportError("no response")
        if future.cancelled() or future.exception() is not None:
            for batch in batches:
                batch.maybe_written = True
                self._retry_or_fail(batch, error, now)
            self._cluster.request_update()
        else:
            self._handle_produce_response(future.result(), batches, now)
        self.wake()

    def _handle_produce_response(self, response: dict[str, Any], batches: list[ProducerBatch], now: int) -> None:
        results: dict[tuple[str, int], dict[str, Any]] = {}
        for topic in response["responses"]:
            for part in topic["partition_responses"]:
                results[(topic["name"], part["index"])] = part
        for batch in batches:
            part = results.get(batch.tp)
            if part is None:
                self._retry_or_fail(batch, TransportError(f"no response for partition {batch.tp}"), now)
                continue
            code = part["error_code"]
            if code == 0:
                self._settle_success(batch, part["base_offset"], part.get("log_append_time_ms", -1))
            elif code == _DUPLICATE_SEQUENCE_NUMBER:
                # Already written by an earlier attempt: a success whose offset the broker did not tell us.
                self._settle_success(batch, -1, -1)
            else:
                self._on_partition_error(batch, code, part, now)

    def _on_partition_error(self, batch: ProducerBatch, code: int, part: dict[str, Any], now: int) -> None:
        message = part.get("error_message") or None
        error = kafka_error(code, f"{batch.topic}-{batch.partition}: {message}" if message else None)
        leader = part.get("current_leader")
        if leader and leader.get("leader_id", -1) >= 0:
            # KIP-951: the broker tells us the new leader, so the batch can follow it without a metadata round trip.
            self._cluster.state.cluster = self._cluster.metadata.with_leader(
                batch.topic, batch.partition, leader["leader_id"], leader["leader_epoch"]
            )
        if error.invalid_metadata:
            self._cluster.request_update()
        if code == _MESSAGE_TOO_LARGE and batch.record_count > 1:
            # Too big for this broker's limits: split it and send the halves (Java's splitAndReenqueue).
            if batch.base_sequence >= 0:
                self._idem.on_dropped(batch.tp, batch.base_sequence)
            self._acc.split(batch, now)
            return
        if code == _OUT_OF_ORDER_SEQUENCE_NUMBER and not self._idem.is_first_in_flight(batch.tp, batch.base_sequence):
            # An earlier batch of this partition failed and is being retried: this one follows it (Java canRetry).
            self._retry_or_fail(batch, error, now, force_retriable=True)
            return
        # A transactional producer never bumps on its own: the batch fails and the transaction must abort.
        bumps = self._idem.enabled and self.transaction is None
        if code in (_OUT_OF_ORDER_SEQUENCE_NUMBER, _UNKNOWN_PRODUCER_ID) and bumps:
            # KIP-360: the broker lost our sequence state; bump the epoch and resend from a fresh sequence.
            self._idem.reset_pending = True
            self._retry_or_fail(batch, error, now, force_retriable=True)
            return
        self._retry_or_fail(batch, error, now)

    def _retry_or_fail(
        self, batch: ProducerBatch, error: BaseException, now: int, *, force_retriable: bool = False
    ) -> None:
        retriable = force_retriable or getattr(error, "retriable", False)
        expired = now - batch.created_ms >= self._config.delivery_timeout_ms
        if retriable and not expired and batch.attempts < self._config.retries:
            self._acc.reenqueue(batch, now + self._retry_backoff_ms(batch.attempts))
            return
        if expired and retriable:
            error = DeliveryTimeoutError(
                f"{batch.record_count} record(s) for {batch.topic}-{batch.partition} not acknowledged within "
                f"delivery_timeout_ms={self._config.delivery_timeout_ms}; last error: {error}"
            )
        self._settle_failure(batch, error)

    def _retry_backoff_ms(self, attempts: int) -> int:
        """Exponential backoff with ±20% jitter, `retry_backoff_ms` → `retry_backoff_max_ms` (KIP-580)."""
        base = min(self._config.retry_backoff_max_ms, self._config.retry_backoff_ms * (2**attempts))
        return int(base * self._rng.uniform(0.8, 1.2))

    def _settle_success(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int) -> None:
        if batch.base_sequence >= 0:
            self._idem.on_success(batch.tp, batch.base_sequence, batch.record_count)
        batch.outcome.succeed(base_offset, log_append_time_ms)
        self._acc.release(batch)
        self.on_batch_done()

    def _settle_failure(self, batch: ProducerBatch, error: BaseException) -> None:
        if batch.base_sequence >= 0:
            self._idem.on_dropped(batch.tp, batch.base_sequence)
        batch.outcome.fail(error)
        self._acc.release(batch)
        if self.transaction is not None:
            self.transaction.on_batch_failed(error)
        self.on_batch_done()

    def _expire(self, now: int) -> None:
        auth_error, self._cluster.auth_error = self._cluster.auth_error, None
        if auth_error is not None:
            self.fail_queued(auth_error)
        for batch in self._acc.expired(now, self._config.delivery_timeout_ms):
            cause = f"; last error: {self._cluster.last_error}" if self._cluster.last_error else ""
            self._settle_failure(
                batch,
                DeliveryTimeoutError(
                    f"{batch.record_count} record(s) for {batch.topic}-{batch.partition} expired after "
                    f"delivery_timeout_ms={self._config.delivery_timeout_ms} before they could be sent{cause}"
                ),
            )

    def fail_unsent(self, error: BaseException) -> None:
        """Fail every batch never sent (Java's abortUndrainedBatches: a transaction is being aborted)."""
        for batch in self._acc.take_unsent():
            self._settle_failure(batch, error)

    def fail_queued(self, error: BaseException, outcome_unknown: BaseException | None = None) -> None:
        """Fail every batch not in flight (close after its timeout, or a fatal producer error); batches the broker
        may already have written fail with `outcome_unknown` when given."""
        for batch in self._acc.take_all_queued():
            self._settle_failure(batch, outcome_unknown if outcome_unknown and batch.maybe_written else error)

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)
        return task


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
