"""The transactions of `MockProducer` (Java's MockProducer transaction bookkeeping), on the Producer's state machine.

Owns what a transaction holds in memory (records completed but not committed, their given form, the consumer
offsets sent) and the injected transactional failures. Which call is allowed when, and the error a refused call
raises, are `transactions.state.TransactionState`'s: the same rules and classes as the Producer's. Same method names
as `transactions.TransactionManager`, so the Producer's `TransactionalMethods` (signatures, `transaction()`) drive it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aioproducer.errors import (
    KafkaTimeoutError,
    ProducerClosedError,
    ProducerFencedError,
    TransactionAbortedError,
    TransactionError,
    TransactionTimeoutError,
)
from aioproducer.models import ProducerRecord
from aioproducer.testing.mock_parts import SentRecord
from aioproducer.transactions.state import Operation, State, TransactionState

__all__ = ["MockTransactions"]

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]


class MockTransactions:
    """One transactional mock's transactions. `settle(timeout)` completes the records of the open transaction (the
    mock's flush); `fail_pending(error)` fails those still pending; `publish(records, given)` writes committed ones."""

    def __init__(
        self,
        transactional_id: str,
        settle: Callable[[float | None], Awaitable[None]],
        fail_pending: Callable[[BaseException], None],
        publish: Callable[[list[SentRecord], list[ProducerRecord]], None],
        end_markers: Callable[[set[TopicPartition]], None],
    ) -> None:
        self.state = TransactionState(transactional_id)
        self._settle = settle
        self._fail_pending = fail_pending
        self._publish = publish
        self._end_markers = end_markers
        self.held: list[SentRecord] = []  # completed in the open transaction, not committed
        self.held_given: list[ProducerRecord] = []
        self.held_offsets: dict[str, Offsets] = {}
        self.offsets_history: list[dict[str, Offsets]] = []  # Java's consumerGroupOffsetsHistory
        self.initialized = False
        self.in_flight = False
        self.committed = False
        self.aborted = False
        self.sent_offsets = False
        self.commit_count = 0
        self.commit_error: BaseException | None = None
        self.abort_error: BaseException | None = None
        self._closed = False

    # -- the caller's calls (the names TransactionalMethods uses) -----------------------------------------------
    async def init(self, timeout: float | None) -> None:
        self._check_open()
        if not self.state.start_init() and self.state.pending_operation is not Operation.INIT:
            return  # initialised already
        self.state.init_done()
        self.state.acknowledge(Operation.INIT)
        self.initialized = True

    def begin(self) -> None:
        self._check_open()
        self.state.begin()
        self.in_flight, self.committed, self.aborted, self.sent_offsets = True, False, False, False

    def check_send(self, transaction: int | None = None) -> None:
        if self.state.state is State.IN_TRANSACTION and transaction is None:
            return
        if self.state.state is not State.IN_TRANSACTION:
            self._check_open()
        self.state.check_send(transaction)

    async def send_offsets(self, offsets: Any, group: Any, timeout: float | None) -> None:
        self._check_open()
        committed, metadata = self.state.check_send_offsets(offsets, group)
        if not committed:
            return  # as Java and the Producer: nothing to commit, nothing added to the transaction
        mine = self.held_offsets.setdefault(metadata.group_id, {})
        for entry in committed:
            mine[(entry.topic, entry.partition)] = entry.offset
        self.sent_offsets = True

    async def commit(self, timeout: float | None) -> None:
        """The Producer's commit: flush the transaction's records, then end it; a failed record (or an injected
        error) leaves it to be aborted."""
        self._check_open()
        if self.state.start_commit():
            self._inject(Operation.COMMIT)
        try:
            await self._settle(timeout)
        except KafkaTimeoutError as exc:
            raise TransactionTimeoutError(
                f"commit_transaction() did not complete within {timeout} s; call it again to wait for its outcome"
            ) from exc
        self.state.acknowledge(Operation.COMMIT)
        self.state.raise_if_error(Operation.COMMIT)
        self._publish(self.held, self.held_given)
        if self.held_offsets:
            self.offsets_history.append(self.held_offsets)
        self._end(committed=True)

    async def abort(self, timeout: float | None) -> None:
        """The Producer's abort: records not completed fail with TransactionAbortedError; completed ones (their
        deliveries succeeded, as batches a broker acknowledged) are dropped from what the mock keeps."""
        self._check_open()
        if self.state.start_abort():
            self._fail_pending(TransactionAbortedError("the transaction was aborted before this record was sent"))
            self._inject(Operation.ABORT)
        self.state.acknowledge(Operation.ABORT)
        self._end(committed=False)

    async def close(self, timeout: float | None) -> None:
        """As the Producer: an open transaction is aborted on close; close never raises a transactional error."""
        if self._closed:
            return
        if self.state.has_open_transaction and self.state.state is not State.FATAL_ERROR:
            try:
                if self.state.pending_operation is Operation.COMMIT:
                    await self.commit(timeout)
                else:
                    await self.abort(timeout)
            except TransactionError:
                pass
        self._closed = True

    # -- injected failures --------------------------------------------------------------------------------------
    def fence(self) -> None:
        """A newer producer with the same transactional id took over: the next call raises ProducerFencedError,
        records still pending fail with it, and the open transaction's records are dropped (the newer producer's
        init aborts it)."""
        error = ProducerFencedError(f"transactional id {self.state.transactional_id!r} was fenced (MockProducer.fence)")
        self.state.fatal_error(error)
        self._fail_pending(error)
        self._drop()

    def on_record_failed(self, error: BaseException) -> None:
        """A record of the transaction failed: it cannot commit (the Producer's on_batch_failed)."""
        if isinstance(error, (TransactionAbortedError, ProducerClosedError)) or error is self.state.last_error:
            return
        if self.state.state is State.IN_TRANSACTION or self.state.state is State.COMMITTING:
            self.state.abortable_error(error)

    def _inject(self, operation: Operation) -> None:
        """An injected commit/abort error, once. A timeout leaves the operation pending (calling it again finishes
        it, as on the Producer); a fatal error ends the producer; another commit error makes the transaction
        abortable (raised as TransactionRequiresAbortError); another abort error is fatal (an abort that cannot
        complete leaves nothing but close)."""
        if operation is Operation.COMMIT:
            error, self.commit_error = self.commit_error, None
        else:
            error, self.abort_error = self.abort_error, None
        if error is None:
            return
        if isinstance(error, KafkaTimeoutError):
            raise error
        if operation is Operation.COMMIT and not (isinstance(error, TransactionError) and error.fatal):
            self.state.abortable_error(error)
        else:
            self.state.fatal_error(error)
            self._fail_pending(error)
            self._drop()
        self.state.acknowledge(operation)
        self.state.raise_if_error(operation)

    # -- internals ----------------------------------------------------------------------------------------------
    def _end(self, *, committed: bool) -> None:
        partitions = {(record.topic, record.partition) for record in self.held}
        self._end_markers(partitions)  # each partition of the transaction takes a control record's offset
        self._drop()
        self.state.transaction_ended()
        self.in_flight = False
        if committed:
            self.committed = True
            self.commit_count += 1
        else:
            self.aborted = True

    def _drop(self) -> None:
        self.held = []
        self.held_given = []
        self.held_offsets = {}

    def _check_open(self) -> None:
        if self._closed:
            raise ProducerClosedError("the producer is closed")
