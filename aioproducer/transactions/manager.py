"""The transactional producer's engine: runs init / commit / abort / send_offsets against the coordinators, adds
partitions to the transaction, and decides what the sender may send (Java's TransactionManager, async).

Owns the operations' tasks and their order: one coordinator request at a time; commit and abort first wait for the
offsets being sent and for every batch of the transaction (commit flushes, abort fails what was never sent), then
end it. Which call is allowed when is `state`'s rule; what a broker's error means is
`verdicts`'; each request's body and the judging of its answer are `requests`'. Each
caller's wait is bounded by its `timeout` and never cancels the operation itself: calling the same method again
resumes the wait.

At about 500 lines it stays whole: the operations' tasks and the order between them are one machine, and the
rules it follows (state, verdicts, requests, coordinators) are already modules of their own.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Hashable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from aioproducer.config import ProducerConfig
from aioproducer.errors import (
    AioProducerError,
    KafkaError,
    ProducerClosedError,
    ProducerFencedError,
    TransactionAbortedError,
    TransactionFatalError,
    TransactionRequiresAbortError,
    TransactionTimeoutError,
)
from aioproducer.hooks import TransactionEvent
from aioproducer.idempotence.sequences import IdempotenceState
from aioproducer.network.cluster import Cluster
from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol import TRANSACTION_V2_VERSIONS, ApiKey, CoordinatorType
from aioproducer.transactions.completion import MarkerWatch
from aioproducer.transactions.coordinator import CoordinatorRefused, Coordinators, Target
from aioproducer.transactions.group import CommittedOffset, ConsumerGroupMetadata
from aioproducer.transactions.requests import CoordinatorRequest, TransactionRequests
from aioproducer.transactions.state import Operation, State, TransactionState
from aioproducer.transactions.verdicts import Verdict, produce_failure_is_fatal

__all__ = ["BatchHooks", "TransactionManager"]

log = logging.getLogger("aioproducer.transactions")

TopicPartition = tuple[str, int]
_FIRST_BUMPING_INIT_PRODUCER_ID = 3  # KIP-360: InitProducerId v3+ takes the current id and epoch
_TV2_END_TXN = TRANSACTION_V2_VERSIONS[ApiKey.END_TXN]


@dataclass(frozen=True)
class BatchHooks:
    """What the transaction engine needs from the producer's buffers and sender."""

    has_incomplete: Callable[[], bool]  # any batch not yet delivered or failed
    sending_at_once: Callable[[], AbstractContextManager[None]]  # linger_ms is not waited out while in it
    fail_unsent: Callable[[BaseException], None]  # fail every batch never sent
    fail_queued: Callable[[BaseException], None]  # fail every batch not in flight
    wake_sender: Callable[[], None]


class TransactionManager:
    """The transactions of one producer. Calls mirror the producer's transactional methods; the sender asks
    `may_send`, `produce_version` and reports `on_batch_failed` / `on_batch_done`. `events(name, TransactionEvent)`
    is told of each step done: init, begin, commit, abort (when they succeed) and fenced (the producer hooks'
    `on_transaction`); it must not raise (the hook chain logs and counts a hook's error)."""

    def __init__(
        self,
        config: ProducerConfig,
        cluster: Cluster,
        idempotence: IdempotenceState,
        hooks: BatchHooks,
        events: Callable[[str, TransactionEvent], None] | None = None,
    ) -> None:
        if config.transactional_id is None:
            raise ValueError("a TransactionManager needs a transactional_id")
        self.transactional_id: str = config.transactional_id
        # One identity for both rule sets: the sequence rules and the state machine read and bump the same one.
        self.state = TransactionState(config.transactional_id, idempotence.identity)
        self._config = config
        self._idem = idempotence
        self._hooks = hooks
        self._cluster = cluster
        self._coordinators = Coordinators(config, cluster)
        self._target: Target = (CoordinatorType.TRANSACTION, config.transactional_id)
        self._requests = TransactionRequests(
            config.transactional_id, idempotence, lambda: self.state.tv2, self._known_topic_id
        )
        self._operation: asyncio.Task[None] | None = None  # the pending init / commit / abort
        self._offsets: dict[Hashable, asyncio.Task[None]] = {}
        self._adder: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._batch_waiters: list[asyncio.Future[None]] = []
        self._coordinator_conn: BrokerConnection | None = None
        self._closed = False
        self._events = events
        # Holds the next transaction's first batches while the coordinator writes the last one's markers.
        self._markers = MarkerWatch(
            config.transactional_id,
            lambda api, body: self._coordinators.ask_once(self._target, api, body),
            hooks.wake_sender,
            self._spawn,
            bound_ms=config.request_timeout_ms,
        )

    def __repr__(self) -> str:
        return f"<TransactionManager {self.state!r}>"

    # -- the caller's calls -------------------------------------------------------------------------------------
    async def init(self, timeout: float | None) -> None:
        """init_transactions: get the producer id for the transactional id (fencing older instances)."""
        self._check_open()
        if self.state.start_init():
            self._operation = self._spawn(self._run_init())
        elif self.state.pending_operation is not Operation.INIT:
            return  # initialised already
        await self._wait_operation(Operation.INIT, timeout)

    def begin(self) -> None:
        started = time.perf_counter()
        self._check_open()
        self.state.begin()
        self._emit("begin", started, self._stamp())

    def check_send(self, transaction: int | None = None) -> None:
        """Raise unless a record may be buffered now (inside a transaction without error; with `transaction`, inside
        that one: `TransactionState.check_send`)."""
        if self.state.state is State.IN_TRANSACTION and transaction is None:
            return
        if self.state.state is not State.IN_TRANSACTION:
            self._check_open()
        self.state.check_send(transaction)

    async def send_offsets(self, offsets: Any, group: Any, timeout: float | None) -> None:
        """send_offsets_to_transaction: commit a consumer's offsets with the transaction."""
        self._check_open()
        committed, metadata = self.state.check_send_offsets(offsets, group)
        if not committed:
            return  # as Java: nothing to commit, nothing added to the transaction
        key = (tuple(committed), metadata)
        task = self._offsets.get(key)
        if task is None:
            task = self._offsets[key] = self._spawn(self._run_send_offsets(committed, metadata))
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            raise TransactionTimeoutError(
                f"send_offsets_to_transaction() did not complete within {timeout} s; it goes on: call it again with "
                "the same offsets and group to wait for it"
            )
        if self._offsets.get(key) is task:
            del self._offsets[key]
        self._reraise(task)

    async def commit(self, timeout: float | None) -> None:
        self._check_open()
        if self.state.start_commit():
            self._operation = self._spawn(self._run_commit())
        await self._wait_operation(Operation.COMMIT, timeout)

    async def abort(self, timeout: float | None) -> None:
        self._check_open()
        if self.state.start_abort():
            self._operation = self._spawn(self._run_abort())
        await self._wait_operation(Operation.ABORT, timeout)

    async def close(self, timeout: float | None) -> None:
        """Abort an open transaction (within `timeout`), as Java's Sender does on close, then stop every task.

        A commit or abort already under way is waited for instead. Errors are logged: close never raises them.
        """
        if self._closed:
            return
        pending = self.state.pending_operation
        if pending is not None and self._operation is not None and self._operation.done():
            self.state.acknowledge(pending)  # its outcome is known; nobody asked for it again before closing
        try:
            if self.state.completing or self.state.state is State.INITIALIZING:
                if self._operation is not None:
                    await asyncio.wait({self._operation}, timeout=timeout)
            elif self.state.has_open_transaction and self.state.pending_operation is None:
                log.info("closing with an open transaction: aborting it")
                await self.abort(timeout)
        except (AioProducerError, asyncio.TimeoutError) as exc:
            log.warning("transaction not aborted cleanly on close: %r", exc)
        finally:
            self._closed = True
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for waiter in self._batch_waiters:
                if not waiter.done():
                    waiter.cancel()

    # -- what the sender asks -----------------------------------------------------------------------------------
    def may_send(self, tp: TopicPartition) -> bool:
        """Whether `tp`'s batches may be drained now. Under TV1 a partition not yet in the transaction is queued
        for AddPartitionsToTxn (all new ones go in one request) and waits for it."""
        state = self.state
        if not state.started and self._markers.pending:
            return False  # the last transaction's markers are still being written (completion.py)
        if state.may_send(tp):
            if state.tv2 and not state.started:
                state.mark_sent()  # KIP-890: Produce v12 adds the partition, so EndTxn must follow
            return True
        if not state.tv2 and (state.state is State.IN_TRANSACTION or state.state is State.COMMITTING):
            state.note_partition(tp)
            if state.has_partitions_to_add and (self._adder is None or self._adder.done()):
                self._adder = self._spawn(self._run_adder())
        return False

    def produce_version(self, conn: BrokerConnection) -> int:
        """The Produce version for this connection: below v12 unless the transaction runs as TV2 (KIP-890)."""
        version = conn.versions[ApiKey.PRODUCE]
        if self.state.tv2:
            return version
        return min(version, TRANSACTION_V2_VERSIONS[ApiKey.PRODUCE] - 1)

    def on_batch_failed(self, error: BaseException) -> None:
        """A batch of the transaction failed for good: the transaction must be aborted (or, for the errors Java
        deems fatal on Produce, the producer is done)."""
        state = self.state
        if isinstance(error, (TransactionAbortedError, ProducerClosedError)) or error is state.last_error:
            return
        if not state.has_open_transaction:
            return  # failed by close() or after a fatal error: nothing left to poison
        code = error.code if isinstance(error, KafkaError) else None
        if produce_failure_is_fatal(code):
            self._fatal(error)
        elif state.state is not State.ABORTABLE_ERROR and state.state is not State.ABORTING:
            state.abortable_error(error)
            # Java's abortUndrainedBatches: what was never sent now fails with the error that doomed the transaction.
            asyncio.get_running_loop().call_soon(self._fail_unsent_after_error)
            asyncio.get_running_loop().call_soon(self.on_batch_done)  # a commit waiting for batches stops waiting

    def on_batch_done(self) -> None:
        waiters, self._batch_waiters = self._batch_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- operations ---------------------------------------------------------------------------------------------
    async def _run_init(self) -> None:
        started = time.perf_counter()
        try:
            await self._init_producer_id(bump=False)
        except CoordinatorRefused as refused:
            # Before the first producer id there is no transaction to abort and nothing to recover with: any refusal
            # ends the producer (Java makes some abortable, leaving a producer that can abort but never send).
            if refused.verdict is not Verdict.FENCED:
                refused = CoordinatorRefused(Verdict.FATAL, refused.error)
            self._refused(refused)
        self.state.raise_if_error(Operation.INIT)
        self._emit("init", started, self._stamp())

    async def _run_commit(self) -> None:
        started, stamp = time.perf_counter(), self._stamp()  # the transaction's id and epoch (EndTxn v5 bumps it)
        try:
            await self._settle_traffic()
            self.state.raise_if_error(Operation.COMMIT)
            self._recheck_transaction_version()
            if self.state.started:
                await self._end_transaction(committed=True)
            await self._after_end()
            self.state.raise_if_error(Operation.COMMIT)
        except CoordinatorRefused as refused:
            raise self._requires_abort(refused, Operation.COMMIT, "commit_transaction") from refused.error
        self._emit("commit", started, stamp)

    async def _run_abort(self) -> None:
        started, stamp = time.perf_counter(), self._stamp()
        aborted = TransactionAbortedError("the transaction was aborted before this record was sent")
        # First what never went out (no sequence to account for), then retries waiting in the queues: none of them
        # may slip into the next transaction. Their sequences are then broken, and the epoch bump that follows
        # (or EndTxn v5's new epoch) restarts every sequence. Batches on the wire finish first (flush below).
        self._hooks.fail_unsent(aborted)
        self._hooks.fail_queued(aborted)
        try:
            await self._settle_traffic()
            self._recheck_transaction_version()
            if self.state.started:
                try:
                    await self._end_transaction(committed=False)
                except CoordinatorRefused as refused:
                    if refused.verdict in (Verdict.FATAL, Verdict.FENCED) or not self._can_bump():
                        raise
                    # The coordinator refused the abort but the error is not fatal: re-initialising the producer id
                    # with the current epoch makes the coordinator abort whatever is open (KIP-360).
                    log.warning("EndTxn(abort) refused (%r): bumping the epoch instead", refused.error)
                    self.state.identity.require_epoch_bump()
            await self._after_end()
            self.state.raise_if_error(Operation.ABORT)
        except CoordinatorRefused as refused:
            raise self._requires_abort(refused, Operation.ABORT, "abort_transaction") from refused.error
        self._emit("abort", started, stamp)

    async def _after_end(self) -> None:
        """The transaction ended (EndTxn answered, or nothing to end): READY, or first an epoch bump (the transaction
        state's rule 7, whoever asked for it: an abortable error, a broken sequence stream, a refused abort)."""
        ended = self.state.transaction_ended()
        if ended is State.INITIALIZING:
            await self._markers.wait()  # the bump meets CONCURRENT_TRANSACTIONS until the markers are written
            await self._init_producer_id(bump=True)
        elif ended is State.FATAL_ERROR:
            self._fatal(self.state.last_error or TransactionFatalError("invalid transaction state"))

    async def _run_send_offsets(self, committed: list[CommittedOffset], metadata: ConsumerGroupMetadata) -> None:
        await self._markers.wait()  # adding the offsets' partition meets the same refusal as a first Produce
        try:
            if self.state.tv2:
                self.state.mark_sent()  # TxnOffsetCommit v5 adds the offsets partition itself (KIP-890)
            else:
                await self._add_offsets(metadata.group_id)
                self.state.offsets_added()
            await self._commit_offsets(committed, metadata)
        except CoordinatorRefused as refused:
            raise self._requires_abort(
                refused, Operation.SEND_OFFSETS, "send_offsets_to_transaction"
            ) from refused.error

    async def _run_adder(self) -> None:
        """TV1: add every partition noted by the sender, one AddPartitionsToTxn at a time."""
        while self.state.has_partitions_to_add and self.state.state in (State.IN_TRANSACTION, State.COMMITTING):
            partitions = self.state.take_partitions_to_add()
            try:
                await self._add_partitions(partitions)
            except CoordinatorRefused as refused:
                self.state.partitions_not_added(partitions)
                self._refused(refused)
                return
            finally:
                self._hooks.wake_sender()

    # -- requests (built and judged by transactions_requests) ---------------------------------------------------
    async def _call(self, request: CoordinatorRequest, target: Target | None = None) -> Any:
        return await self._coordinators.call(
            target or self._target, request.api, request.body, request.judge, version=request.version
        )

    async def _init_producer_id(self, *, bump: bool) -> None:
        producer_id, epoch = (self._idem.producer_id, self._idem.producer_epoch) if bump else (-1, -1)
        request = self._requests.init_producer_id(self._config.transaction_timeout_ms, producer_id, epoch)
        conn, new_id, new_epoch = await self._call(request)
        self._coordinator_conn = conn
        self.state.coordinator_can_bump = conn.versions.get(ApiKey.INIT_PRODUCER_ID, 0) >= (
            _FIRST_BUMPING_INIT_PRODUCER_ID
        )
        if not bump:
            self.state.set_transaction_version(self._transaction_v2(conn), initializing=True)
        log.info(
            "transactional id %r: producer id %s epoch %s (transaction version %s)",
            self.transactional_id,
            new_id,
            new_epoch,
            2 if self.state.tv2 else 1,
        )
        self._idem.set_producer_id(new_id, new_epoch)
        self.state.init_done()
        self._hooks.wake_sender()

    async def _add_partitions(self, partitions: list[TopicPartition]) -> None:
        first_of_transaction = not self.state.added_partitions
        await self._call(self._requests.add_partitions(partitions, first_of_transaction=first_of_transaction))
        self.state.partitions_added(partitions)
        log.debug("added %s to the transaction", partitions)

    async def _add_offsets(self, group_id: str) -> None:
        await self._call(self._requests.add_offsets(group_id))

    async def _commit_offsets(self, committed: list[CommittedOffset], metadata: ConsumerGroupMetadata) -> None:
        request = self._requests.commit_offsets(committed, metadata)
        await self._call(request, (CoordinatorType.GROUP, metadata.group_id))

    async def _end_transaction(self, *, committed: bool) -> None:
        response = await self._call(self._requests.end_transaction(committed=committed))
        # EndTxn v5 (TV2) names the producer id and epoch of the next transaction: the coordinator bumped the epoch
        # (a new id when the epoch ran out); every sequence starts again at 0 (KIP-890).
        if response.get("producer_id", -1) >= 0:
            self._idem.set_producer_id(response["producer_id"], response["producer_epoch"])
        self._markers.start()
        log.debug("transaction %s", "committed" if committed else "aborted")

    # -- helpers ------------------------------------------------------------------------------------------------
    def _stamp(self) -> tuple[int, int]:
        return self._idem.producer_id, self._idem.producer_epoch

    def _emit(
        self, event: str, started: float | None, stamp: tuple[int, int], error: BaseException | None = None
    ) -> None:
        """Tell `events` of a step done; `started`: when it began (perf_counter seconds), None for no duration."""
        if self._events is not None:
            duration_ms = 0.0 if started is None else (time.perf_counter() - started) * 1000
            self._events(event, TransactionEvent(self.transactional_id, stamp[0], stamp[1], duration_ms, error))

    def _requires_abort(
        self, refused: CoordinatorRefused, operation: Operation, call: str
    ) -> TransactionRequiresAbortError:
        """A coordinator refused part of `call`: record it; raise the state's error when that ends the producer
        (fatal, fenced), else return the error that tells the caller to abort."""
        self._refused(refused)
        self.state.raise_if_error(operation)
        return TransactionRequiresAbortError(f"{call}() failed: {refused.error!r}")

    def _refused(self, refused: CoordinatorRefused) -> None:
        """Record a refusal in the state machine (the caller then raises from it)."""
        error = refused.error
        if refused.verdict is Verdict.FENCED:
            self._fatal(ProducerFencedError(f"transactional id {self.transactional_id!r} was fenced: {error}"))
        elif refused.verdict is Verdict.FATAL:
            self._fatal(error)
        elif refused.verdict is Verdict.ABORTABLE_IF_POSSIBLE:
            self.state.abortable_error_if_possible(error)
            if self.state.state is State.FATAL_ERROR:
                self._fatal(error)
        else:
            self.state.abortable_error(error)
        if self.state.state is State.ABORTABLE_ERROR:
            self._fail_unsent_after_error()
            self.on_batch_done()  # a commit waiting for batches stops waiting

    def _fatal(self, error: BaseException) -> None:
        """FATAL_ERROR: every buffered record fails with it, every other transactional task stops."""
        first = self.state.state is not State.FATAL_ERROR
        self.state.fatal_error(error)
        if first and isinstance(error, ProducerFencedError):
            self._emit("fenced", None, self._stamp(), error)
        self.on_batch_done()  # a commit waiting for batches stops waiting
        self._hooks.fail_queued(error)
        current = asyncio.current_task()
        for task in [self._adder, *self._offsets.values()]:
            if task is not None and task is not current and not task.done():
                task.cancel()
        self._hooks.wake_sender()

    def _fail_unsent_after_error(self) -> None:
        if self.state.state is State.ABORTABLE_ERROR and self.state.last_error is not None:
            self._hooks.fail_unsent(self.state.last_error)

    def _can_bump(self) -> bool:
        return self.state.coordinator_can_bump

    def _recheck_transaction_version(self) -> None:
        """Re-read `transaction.version` for the next transaction (Java's maybeUpdateTransactionV2Enabled)."""
        conn = self._coordinator_conn
        if conn is not None:
            self.state.set_transaction_version(self._transaction_v2(conn), initializing=False)

    def _known_topic_id(self, topic: str) -> uuid.UUID | None:
        """The topic's id in the producer's metadata (Metadata v10+), for TxnOffsetCommit v6; None when unknown."""
        info = self._cluster.metadata.topics.get(topic)
        return None if info is None else info.topic_id

    def _transaction_v2(self, coordinator: BrokerConnection) -> bool:
        """Transaction version 2 when the cluster finalized `transaction.version` >= 2 (the newest report of any
        broker, as Java's ApiVersions) and the coordinator speaks EndTxn v5 (KIP-890 part 2)."""
        level = self._cluster.features.transaction_version
        return level >= 2 and coordinator.versions.get(ApiKey.END_TXN, -1) >= _TV2_END_TXN

    async def _settle_traffic(self) -> None:
        """What commit and abort both wait for before EndTxn: offsets being sent, every batch of the transaction
        answered, partitions being added (Java's TransactionManager.nextRequest holds EndTxn back the same way)."""
        await self._settle_offsets()
        await self._flush()
        await self._settle_adds()

    async def _settle_offsets(self) -> None:
        tasks = [task for task in self._offsets.values() if not task.done()]
        if tasks:
            await asyncio.wait(tasks)

    async def _settle_adds(self) -> None:
        if self._adder is not None and not self._adder.done():
            await asyncio.wait({self._adder})

    async def _flush(self) -> None:
        """Until no batch is incomplete, sending everything buffered at once (commit flushes first, as Java)."""
        loop = asyncio.get_running_loop()
        self._markers.hurry()  # the first batches may still wait for the last transaction's markers
        with self._hooks.sending_at_once():
            # A failed transaction stops the wait: what is stuck behind the failure is failed or aborted later.
            while self._hooks.has_incomplete() and not self.state.has_error:
                waiter: asyncio.Future[None] = loop.create_future()
                self._batch_waiters.append(waiter)
                self._hooks.wake_sender()
                await waiter

    async def _wait_operation(self, operation: Operation, timeout: float | None) -> None:
        task = self._operation
        if task is None:  # pragma: no cover - a pending operation always has its task
            raise TransactionFatalError(f"{operation.value}() is pending but not running")
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            raise TransactionTimeoutError(
                f"{operation.value}() did not complete within {timeout} s; it goes on: call {operation.value}() again "
                "to wait for its outcome (any other transactional call fails until then)"
            )
        self.state.acknowledge(operation)
        self._reraise(task)

    def _reraise(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            if self._closed:
                raise ProducerClosedError("the producer was closed during this transactional call")
            self.state.raise_if_error(Operation.SEND_OFFSETS)
            raise TransactionFatalError("the transactional call was cancelled")
        error = task.exception()
        if error is not None:
            raise error

    def _check_open(self) -> None:
        if self._closed:
            raise ProducerClosedError("the producer is closed")

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._forget_task)
        return task

    def _forget_task(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # seen: a resumable operation's outcome is kept for the next call, never logged
