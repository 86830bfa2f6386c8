"""What a test reads and sets of `MockProducer`'s transactions, mixed into it: Java MockProducer's flags
(`transaction_committed`, `commit_count`, ...), the records and offsets of transactions, and the injected failures
(`fence`, `commit_error`, `abort_error`). Owns only this surface; the bookkeeping is `mock_transactions`'.
"""

from __future__ import annotations

from aioproducer.errors import TransactionStateError
from aioproducer.models import ProducerRecord
from aioproducer.testing.mock_transactions import MockTransactions

__all__ = ["MockTransactionControls"]


class MockTransactionControls:
    """The transactional flags and failure switches of a mock whose `_txn` is its transactions (None: not
    transactional; the flags then read False, the histories empty, and the switches raise TransactionStateError)."""

    _txn: MockTransactions | None

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
