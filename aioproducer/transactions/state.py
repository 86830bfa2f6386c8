"""The transactional producer's state machine (Java's TransactionManager.State and the checks around it); pure.

Owns which transactional call is allowed when, which partitions belong to the open transaction, and the error a
failed transaction carries. Does no I/O and reads no clock: the async side (`transactions`) asks this module what
may happen, performs it, and reports back. Rules kept here:

1. States and the sources each may be entered from (Java 4.x `isTransitionValid`):
   INITIALIZING <- UNINITIALIZED, ABORTING, COMMITTING (the last two: an epoch bump after the transaction ended);
   READY <- INITIALIZING, COMMITTING, ABORTING; IN_TRANSACTION <- READY; COMMITTING <- IN_TRANSACTION;
   ABORTING <- IN_TRANSACTION, ABORTABLE_ERROR; ABORTABLE_ERROR <- IN_TRANSACTION, COMMITTING, ABORTABLE_ERROR,
   INITIALIZING; FATAL_ERROR <- any. FATAL_ERROR is terminal: every later call raises its error, only close is left.
2. A caller's call in a state that does not allow it raises TransactionStateError and changes nothing. A background
   event that would make an invalid transition poisons the machine instead (FATAL_ERROR), as Java's sender thread
   does (KAFKA-14831): it means the bookkeeping is wrong, and carrying on could commit the wrong data.
3. In ABORTABLE_ERROR every call but abort raises TransactionRequiresAbortError (caused by the error); while
   aborting, further errors are not recorded: the abort goes on.
4. One pending operation. init, commit and abort leave their operation pending until the caller has seen its
   outcome (`acknowledge`). Calling the same operation again (after a timeout or a cancelled wait) resumes it; any
   other call meanwhile raises TransactionStateError naming the operation to call again.
5. Partitions under transaction version 1: a partition with data becomes `new`; an AddPartitionsToTxn takes all
   `new` ones into `pending`; success moves them to `added`. Only `added` partitions may be drained. Under
   version 2 Produce v12 adds a partition implicitly, so every partition may be drained while a transaction runs.
6. The coordinator knows a transaction once a partition or offsets were added (TV1) or once a record or offsets were
   sent (TV2): only then does EndTxn go out; an empty transaction ends locally.
7. An abortable error under TV1 needs an epoch bump (InitProducerId with the current id and epoch, KIP-360) after the
   abort when the coordinator can bump (InitProducerId v3+); if it cannot, UNKNOWN_PRODUCER_ID is fatal. Under TV2
   the coordinator bumps the epoch at every EndTxn (KIP-890), so no client-side bump is needed. Whether a bump is
   due is one fact of the producer's identity (`idempotence.identity.ProducerIdentity`), which the sequence rules set
   too when a stream broke (idempotence.R10); a bump due when the transaction ends is done then (a coordinator
   older than KIP-360 takes InitProducerId without the current id and epoch, and bumps the epoch all the same).
8. The transaction version is chosen at init and re-read when each transaction ends; switching from 1 to 2 bumps the
   epoch before the next transaction.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

from aioproducer.errors import (
    ProducerFencedError,
    TransactionFatalError,
    TransactionRequiresAbortError,
    TransactionStateError,
)
from aioproducer.idempotence.identity import ProducerIdentity
from aioproducer.transactions.group import CommittedOffset, ConsumerGroupMetadata, group_metadata, offsets_to_commit

__all__ = ["Operation", "State", "TransactionState"]

TopicPartition = tuple[str, int]


class State(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


class Operation(enum.Enum):
    """The caller's transactional calls; the value is the method's name, for messages."""

    INIT = "init_transactions"
    BEGIN = "begin_transaction"
    SEND_OFFSETS = "send_offsets_to_transaction"
    COMMIT = "commit_transaction"
    ABORT = "abort_transaction"
    SEND = "send"


_S = State
_SOURCES: dict[State, frozenset[State]] = {
    _S.UNINITIALIZED: frozenset(),
    _S.INITIALIZING: frozenset({_S.UNINITIALIZED, _S.ABORTING, _S.COMMITTING}),
    _S.READY: frozenset({_S.INITIALIZING, _S.COMMITTING, _S.ABORTING}),
    _S.IN_TRANSACTION: frozenset({_S.READY}),
    _S.COMMITTING: frozenset({_S.IN_TRANSACTION}),
    _S.ABORTING: frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR}),
    _S.ABORTABLE_ERROR: frozenset({_S.IN_TRANSACTION, _S.COMMITTING, _S.ABORTABLE_ERROR, _S.INITIALIZING}),
    _S.FATAL_ERROR: frozenset(State),
}
# The state each resumable operation moves to when it starts (Java's PendingStateTransition.state).
_TARGET = {
    Operation.INIT: State.INITIALIZING,
    Operation.COMMIT: State.COMMITTING,
    Operation.ABORT: State.ABORTING,
}


def transition_allowed(source: State, target: State) -> bool:
    """Rule 1: whether `target` may be entered from `source`."""
    return source in _SOURCES[target]


class TransactionState:
    """The state of one transactional producer. Methods named for a caller's call raise on a call not allowed."""

    def __init__(self, transactional_id: str, identity: ProducerIdentity | None = None) -> None:
        self.transactional_id = transactional_id
        # The producer id and epoch, shared with the sequence rules (rule 7's epoch bump is one of its facts).
        self.identity = identity if identity is not None else ProducerIdentity()
        self.state = State.UNINITIALIZED
        self.last_error: BaseException | None = None
        self.tv2 = False  # transaction version 2 (KIP-890) for the current transaction
        self.coordinator_can_bump = False  # the coordinator speaks InitProducerId v3+ (KIP-360)
        self.started = False  # rule 6
        # begin_transaction calls that succeeded: a bulk call notes the number it began in, and buffers nothing once
        # that transaction has ended, even when another has begun since (its records never span two transactions).
        self.transactions_begun = 0
        self.new_partitions: set[TopicPartition] = set()
        self.pending_partitions: set[TopicPartition] = set()
        self.added_partitions: set[TopicPartition] = set()
        self.pending_operation: Operation | None = None
        self._next_tv2: bool | None = None

    def __repr__(self) -> str:
        pending = f" pending={self.pending_operation.value}" if self.pending_operation else ""
        return f"<TransactionState {self.transactional_id!r} {self.state.value}{pending} tv2={self.tv2}>"

    # -- the caller's calls -------------------------------------------------------------------------------------
    def start_init(self) -> bool:
        """init_transactions: True to start it, False to resume (or re-read) the pending one.

        Raises when another operation is pending, on a fatal error, or when a transaction is under way. Called on a
        producer already initialised and idle it raises nothing and returns False: there is nothing to do.
        """
        if self._resume(Operation.INIT):
            return False
        if self.state == State.READY:
            return False
        self.raise_if_error(Operation.INIT)
        if self.state != State.UNINITIALIZED:  # INITIALIZING from COMMITTING/ABORTING is the background's epoch bump
            raise TransactionStateError(f"cannot call init_transactions() while the producer is {self.state.value}")
        self._caller_transition(State.INITIALIZING, Operation.INIT)
        self._set_pending(Operation.INIT)
        return True

    def begin(self) -> None:
        """begin_transaction: READY -> IN_TRANSACTION (local only, as in Java)."""
        self._check_no_pending(Operation.BEGIN)
        self.raise_if_error(Operation.BEGIN)
        if self.state == State.UNINITIALIZED or self.state == State.INITIALIZING:
            raise TransactionStateError("begin_transaction before init_transactions completed: initialise first")
        self._caller_transition(State.IN_TRANSACTION, Operation.BEGIN)
        self.started = False
        self.transactions_begun += 1

    def check_send(self, transaction: int | None = None) -> None:
        """A record may be buffered only inside a transaction, with no error and no operation pending; with
        `transaction` (the `transactions_begun` a bulk call began with), only inside that one, though another may
        have begun since: one call's records never span two transactions. Java has no bulk call; its `send` of one
        record joins whatever transaction is open when it appends, as `enqueue` does."""
        if self.state == State.IN_TRANSACTION:
            if transaction is None or transaction == self.transactions_begun:
                return
            raise TransactionStateError(
                "the transaction this call began in ended (committed or aborted) while the call was buffering: its "
                "records not buffered yet are not sent, as one call's records never span two transactions"
            )
        self._check_no_pending(Operation.SEND)
        self.raise_if_error(Operation.SEND)
        raise TransactionStateError(
            f"cannot send while the producer is {self.state.value}: a transactional producer sends only between "
            "begin_transaction() and commit_transaction() / abort_transaction()"
        )

    def check_send_offsets(self, offsets: Any, group: Any) -> tuple[list[CommittedOffset], ConsumerGroupMetadata]:
        """send_offsets_to_transaction's arguments, normalised (InvalidOffsetsError first), once the state allows the
        call: an open transaction, no error and no pending init/commit/abort. It is not itself a pending operation
        (as in Java): sends go on meanwhile, and commit waits for it."""
        committed, metadata = offsets_to_commit(offsets), group_metadata(group)
        self._check_no_pending(Operation.SEND_OFFSETS)
        self.raise_if_error(Operation.SEND_OFFSETS)
        if self.state != State.IN_TRANSACTION:
            raise TransactionStateError(
                f"send_offsets_to_transaction() needs an open transaction; the producer is {self.state.value}"
            )
        return committed, metadata

    def start_commit(self) -> bool:
        """commit_transaction: True to start it (IN_TRANSACTION -> COMMITTING), False to resume the pending one."""
        if self._resume(Operation.COMMIT):
            return False
        self.raise_if_error(Operation.COMMIT)
        self._caller_transition(State.COMMITTING, Operation.COMMIT)
        self._set_pending(Operation.COMMIT)
        return True

    def start_abort(self) -> bool:
        """abort_transaction: True to start it (from IN_TRANSACTION or ABORTABLE_ERROR), False to resume.

        Partitions not yet added are dropped: their batches are failed, not added only to be aborted.
        """
        if self._resume(Operation.ABORT):
            return False
        if self.state != State.ABORTABLE_ERROR:
            self.raise_if_error(Operation.ABORT)
        self._caller_transition(State.ABORTING, Operation.ABORT)
        self._set_pending(Operation.ABORT)
        self.new_partitions.clear()
        return True

    def acknowledge(self, operation: Operation) -> None:
        """The caller has seen the outcome of `operation` (returned or raised, not timed out): it is no longer
        pending (Java's TransactionalRequestResult.isAcked)."""
        if self.pending_operation == operation:
            self.pending_operation = None

    # -- what the sender may do ---------------------------------------------------------------------------------
    def note_partition(self, tp: TopicPartition) -> None:
        """A partition has data in this transaction: under TV1 it must be added before its first batch goes out."""
        if self.tv2:
            return
        if tp not in self.added_partitions and tp not in self.pending_partitions:
            self.new_partitions.add(tp)

    def may_send(self, tp: TopicPartition) -> bool:
        """Whether a batch of `tp` may be drained now (Java's isSendToPartitionAllowed)."""
        if self.state == State.FATAL_ERROR or self.state == State.READY or self.state == State.UNINITIALIZED:
            return False
        if self.state == State.INITIALIZING:
            return False
        return self.tv2 or tp in self.added_partitions

    def mark_sent(self) -> None:
        """Under TV2, a record went out (or offsets were sent): the coordinator may know the transaction."""
        self.started = True

    @property
    def has_partitions_to_add(self) -> bool:
        return bool(self.new_partitions)

    @property
    def completing(self) -> bool:
        return self.state == State.COMMITTING or self.state == State.ABORTING

    @property
    def has_error(self) -> bool:
        return self.state == State.ABORTABLE_ERROR or self.state == State.FATAL_ERROR

    @property
    def has_open_transaction(self) -> bool:
        """Java's hasOngoingTransaction: from begin until the transaction ended or a fatal error."""
        return self.state in (State.IN_TRANSACTION, State.COMMITTING, State.ABORTING, State.ABORTABLE_ERROR)

    # -- background results -------------------------------------------------------------------------------------
    def take_partitions_to_add(self) -> list[TopicPartition]:
        """The partitions for one AddPartitionsToTxn: every `new` one joins those still `pending` (rule 5)."""
        self.pending_partitions |= self.new_partitions
        self.new_partitions.clear()
        return sorted(self.pending_partitions)

    def partitions_added(self, partitions: Iterable[TopicPartition]) -> None:
        added = set(partitions)
        self.pending_partitions -= added
        self.added_partitions |= added
        if added:
            self.started = True

    def partitions_not_added(self, partitions: Iterable[TopicPartition]) -> None:
        """An AddPartitionsToTxn failed for good: its partitions are no longer pending (the error decides the rest)."""
        self.pending_partitions -= set(partitions)

    def offsets_added(self) -> None:
        """AddOffsetsToTxn succeeded (TV1): the group's offsets partition is in the transaction."""
        self.started = True

    @property
    def epoch_bump_required(self) -> bool:
        """Rule 7: the next identity must be a bumped epoch (`ProducerIdentity.epoch_bump_required`)."""
        return self.identity.epoch_bump_required

    def init_done(self) -> None:
        """InitProducerId succeeded: INITIALIZING -> READY, and a version switch now takes effect (rule 8)."""
        self._background_transition(State.READY)
        self.last_error = None
        self.identity.epoch_bump_required = False
        if self._next_tv2 is not None:
            self.tv2, self._next_tv2 = self._next_tv2, None

    def transaction_ended(self) -> State:
        """EndTxn succeeded or was not needed. READY, or INITIALIZING when an epoch bump must come first (rule 7/8);
        returns the new state."""
        bump = self.identity.epoch_bump_required
        if not bump and self._next_tv2 is not None:
            self.tv2, self._next_tv2 = self._next_tv2, None
        self._background_transition(State.INITIALIZING if bump else State.READY)
        self.last_error = None
        self.started = False
        self.new_partitions.clear()
        self.pending_partitions.clear()
        self.added_partitions.clear()
        return self.state

    def set_transaction_version(self, tv2: bool, *, initializing: bool) -> None:
        """The cluster's finalized `transaction.version` (>= 2 means TV2). At init it applies at once; between
        transactions it applies to the next one, and a switch to TV2 bumps the epoch first (Java's
        maybeUpdateTransactionV2Enabled)."""
        if initializing:
            self.tv2 = tv2
            self._next_tv2 = None
            return
        if tv2 != self.tv2:
            self._next_tv2 = tv2
            if tv2:
                self.identity.require_epoch_bump()

    @property
    def can_recover_abortable(self) -> bool:
        """Whether an abortable error can be recovered from: by a client-side bump (TV1 with InitProducerId v3+) or
        by the coordinator's bump at EndTxn (TV2). Java's canHandleAbortableError."""
        return self.coordinator_can_bump or self.tv2

    def abortable_error(self, error: BaseException) -> None:
        """The transaction cannot commit: ABORTABLE_ERROR, unless it is being aborted already (rule 3). Under TV1 with
        a coordinator that can bump, the abort is followed by an epoch bump (rule 7)."""
        if self.state == State.ABORTING or self.state == State.FATAL_ERROR:
            return
        if self.coordinator_can_bump and not self.tv2 and not self.completing:
            self.identity.require_epoch_bump()
        self._background_transition(State.ABORTABLE_ERROR, error)

    def abortable_error_if_possible(self, error: BaseException) -> None:
        """UNKNOWN_PRODUCER_ID and the like: abortable when the epoch can be bumped, fatal otherwise."""
        if self.can_recover_abortable:
            if not self.tv2:
                self.identity.require_epoch_bump()
            self.abortable_error(error)
        else:
            self.fatal_error(error)

    def fatal_error(self, error: BaseException) -> None:
        self.state = State.FATAL_ERROR
        self.last_error = error

    # -- internals ----------------------------------------------------------------------------------------------
    def _resume(self, operation: Operation) -> bool:
        """Rule 4: True when `operation` is the pending one (resume it); raises when another one is pending.
        After a fatal error every call raises it (rule 1), the pending one included."""
        if self.state == State.FATAL_ERROR:
            self.raise_if_error(operation)
        if self.pending_operation is None:
            return False
        if self.pending_operation == operation:
            return True
        earlier = self.pending_operation.value
        raise TransactionStateError(
            f"cannot call {operation.value}(): the earlier {earlier}() has not been seen to complete (it is running, "
            f"or its caller timed out or was cancelled); call {earlier}() again to wait for its outcome"
        )

    def _check_no_pending(self, operation: Operation) -> None:
        self._resume(operation)

    def _set_pending(self, operation: Operation) -> None:
        self.pending_operation = operation

    def raise_if_error(self, operation: Operation) -> None:
        """Rule 2/3: in an error state a call raises the error that caused it (Java's maybeFailWithError)."""
        error = self.last_error
        if self.state == State.FATAL_ERROR:
            if isinstance(error, ProducerFencedError):
                raise type(error)(
                    f"transactional id {self.transactional_id!r} was fenced by a newer producer with the same id: "
                    "close this producer"
                ) from error
            raise TransactionFatalError(
                f"{operation.value}() is not possible: the transactional producer hit a fatal error ({error!r}); "
                "close it"
            ) from error
        if self.state == State.ABORTABLE_ERROR:
            raise TransactionRequiresAbortError(
                f"{operation.value}() is not possible: the transaction failed ({error!r}); call abort_transaction() "
                "and start a new one"
            ) from error

    def _caller_transition(self, target: State, operation: Operation) -> None:
        if not transition_allowed(self.state, target):
            raise TransactionStateError(f"cannot call {operation.value}() while the producer is {self.state.value}")
        self.state = target
        self.last_error = None

    def _background_transition(self, target: State, error: BaseException | None = None) -> None:
        if not transition_allowed(self.state, target):
            poison = TransactionStateError(
                f"invalid transition from {self.state.value} to {target.value} for transactional id "
                f"{self.transactional_id!r}"
            )
            self.fatal_error(poison)
            return
        if target == State.FATAL_ERROR or target == State.ABORTABLE_ERROR:
            self.last_error = error
        self.state = target
