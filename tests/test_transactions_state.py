"""The transaction state machine without I/O: Java's transition table, each call in each state, and random sequences of
calls and background events (hypothesis) that must keep its rules."""

from __future__ import annotations

import contextlib
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from aioproducer.errors import (
    ProducerFencedError,
    TransactionError,
    TransactionFatalError,
    TransactionRequiresAbortError,
    TransactionStateError,
)
from aioproducer.kafka_errors import ProducerFencedError as KafkaProducerFenced
from aioproducer.kafka_errors import TopicAuthorizationFailedError, UnknownProducerIdError
from aioproducer.transactions.state import Operation, State, TransactionState, transition_allowed

S = State

# Java 4.x TransactionManager.State.isTransitionValid, written out independently of the module's table
# (UNINITIALIZED is never re-entered here: it is Java's idempotent-producer reset, which has no transactional use).
JAVA_SOURCES = {
    S.UNINITIALIZED: set(),
    S.INITIALIZING: {S.UNINITIALIZED, S.COMMITTING, S.ABORTING},
    S.READY: {S.INITIALIZING, S.COMMITTING, S.ABORTING},
    S.IN_TRANSACTION: {S.READY},
    S.COMMITTING: {S.IN_TRANSACTION},
    S.ABORTING: {S.IN_TRANSACTION, S.ABORTABLE_ERROR},
    S.ABORTABLE_ERROR: {S.IN_TRANSACTION, S.COMMITTING, S.ABORTABLE_ERROR, S.INITIALIZING},
    S.FATAL_ERROR: set(State),
}


@pytest.mark.parametrize(("source", "target"), list(itertools.product(State, State)))
def test_transitions_are_javas(source: State, target: State) -> None:
    assert transition_allowed(source, target) == (source in JAVA_SOURCES[target])


def in_state(state: State, *, tv2: bool = False, error: BaseException | None = None) -> TransactionState:
    txn = TransactionState("tx")
    txn.state = state
    txn.tv2 = tv2
    txn.last_error = error
    return txn


ABORTABLE = TopicAuthorizationFailedError("t")
FATAL = KafkaProducerFenced("fenced")

# What each call does in each state: the state it leaves behind, or the error it raises.
CALLS = {
    "init": lambda t: t.start_init(),
    "begin": lambda t: t.begin(),
    "send": lambda t: t.check_send(),
    "send_offsets": lambda t: t.check_send_offsets({("orders", 0): 10}, "group"),
    "commit": lambda t: t.start_commit(),
    "abort": lambda t: t.start_abort(),
}
EXPECTED: dict[tuple[State, str], State | type[BaseException]] = {
    (S.UNINITIALIZED, "init"): S.INITIALIZING,
    (S.UNINITIALIZED, "begin"): TransactionStateError,
    (S.UNINITIALIZED, "send"): TransactionStateError,
    (S.UNINITIALIZED, "send_offsets"): TransactionStateError,
    (S.UNINITIALIZED, "commit"): TransactionStateError,
    (S.UNINITIALIZED, "abort"): TransactionStateError,
    (S.READY, "init"): S.READY,  # already initialised (by start()): nothing to do
    (S.READY, "begin"): S.IN_TRANSACTION,
    (S.READY, "send"): TransactionStateError,
    (S.READY, "send_offsets"): TransactionStateError,
    (S.READY, "commit"): TransactionStateError,
    (S.READY, "abort"): TransactionStateError,
    (S.IN_TRANSACTION, "init"): TransactionStateError,
    (S.IN_TRANSACTION, "begin"): TransactionStateError,
    (S.IN_TRANSACTION, "send"): S.IN_TRANSACTION,
    (S.IN_TRANSACTION, "send_offsets"): S.IN_TRANSACTION,
    (S.IN_TRANSACTION, "commit"): S.COMMITTING,
    (S.IN_TRANSACTION, "abort"): S.ABORTING,
    (S.ABORTABLE_ERROR, "init"): TransactionRequiresAbortError,
    (S.ABORTABLE_ERROR, "begin"): TransactionRequiresAbortError,
    (S.ABORTABLE_ERROR, "send"): TransactionRequiresAbortError,
    (S.ABORTABLE_ERROR, "send_offsets"): TransactionRequiresAbortError,
    (S.ABORTABLE_ERROR, "commit"): TransactionRequiresAbortError,
    (S.ABORTABLE_ERROR, "abort"): S.ABORTING,
    (S.FATAL_ERROR, "init"): ProducerFencedError,
    (S.FATAL_ERROR, "begin"): ProducerFencedError,
    (S.FATAL_ERROR, "send"): ProducerFencedError,
    (S.FATAL_ERROR, "send_offsets"): ProducerFencedError,
    (S.FATAL_ERROR, "commit"): ProducerFencedError,
    (S.FATAL_ERROR, "abort"): ProducerFencedError,
}
for _state in (S.INITIALIZING, S.COMMITTING, S.ABORTING):
    for _call in CALLS:
        EXPECTED[(_state, _call)] = TransactionStateError


@pytest.mark.parametrize(("state", "call"), list(EXPECTED))
def test_each_call_in_each_state(state: State, call: str) -> None:
    error = ABORTABLE if state == S.ABORTABLE_ERROR else FATAL if state == S.FATAL_ERROR else None
    txn = in_state(state, error=error)
    expected = EXPECTED[(state, call)]
    if isinstance(expected, State):
        CALLS[call](txn)
        assert txn.state == expected
    else:
        with pytest.raises(expected) as raised:
            CALLS[call](txn)
        assert txn.state == state, "a refused call changes nothing"
        if error is not None:
            assert raised.value.__cause__ is error


def test_fatal_error_other_than_fenced_raises_transaction_fatal_error() -> None:
    cause = RuntimeError("unexpected")
    txn = in_state(S.FATAL_ERROR, error=cause)
    with pytest.raises(TransactionFatalError) as raised:
        txn.begin()
    assert not isinstance(raised.value, ProducerFencedError)
    assert raised.value.fatal and not raised.value.requires_abort
    assert raised.value.__cause__ is cause


def test_fenced_error_keeps_its_kafka_class() -> None:
    """Callers may catch the Kafka error class (code 90) or aioproducer's ProducerFencedError: both match."""
    txn = in_state(S.FATAL_ERROR, error=KafkaProducerFenced("x"))
    with pytest.raises(KafkaProducerFenced):
        txn.start_commit()


@pytest.mark.parametrize("operation", [Operation.INIT, Operation.COMMIT, Operation.ABORT])
def test_pending_operation_resumes_and_blocks_others(operation: Operation) -> None:
    txn = TransactionState("tx")
    if operation != Operation.INIT:
        txn.state = S.IN_TRANSACTION
    start = {Operation.INIT: txn.start_init, Operation.COMMIT: txn.start_commit, Operation.ABORT: txn.start_abort}
    assert start[operation]() is True
    # The operation finishes in the background while its caller has timed out: it stays pending.
    if operation == Operation.INIT:
        txn.init_done()
    else:
        txn.transaction_ended()
    assert txn.state == S.READY
    for other, call in CALLS.items():
        if other == operation.value.split("_")[0]:
            continue
        with pytest.raises(TransactionStateError, match=operation.value):
            call(txn)
    assert start[operation]() is False, "the same call again resumes the pending one"
    txn.acknowledge(operation)
    txn.begin()
    assert txn.state == S.IN_TRANSACTION


def test_acknowledging_another_operation_changes_nothing() -> None:
    txn = TransactionState("tx")
    txn.start_init()
    txn.acknowledge(Operation.COMMIT)
    assert txn.pending_operation == Operation.INIT


def test_tv1_partitions_are_added_before_they_may_send() -> None:
    txn = in_state(S.IN_TRANSACTION)
    tp = ("t", 0)
    assert not txn.may_send(tp)
    txn.note_partition(tp)
    txn.note_partition(("t", 1))
    assert txn.take_partitions_to_add() == [("t", 0), ("t", 1)]
    txn.note_partition(tp)
    assert not txn.has_partitions_to_add, "a partition being added is not queued again"
    assert not txn.started
    txn.partitions_added([tp])
    assert txn.may_send(tp) and not txn.may_send(("t", 1))
    assert txn.started
    assert txn.pending_partitions == {("t", 1)}
    txn.partitions_not_added([("t", 1)])
    assert not txn.pending_partitions
    txn.note_partition(("t", 1))
    assert txn.take_partitions_to_add() == [("t", 1)], "a partition whose add failed is added again"


def test_tv2_sends_any_partition_without_adding() -> None:
    txn = in_state(S.IN_TRANSACTION, tv2=True)
    txn.note_partition(("t", 0))
    assert not txn.has_partitions_to_add
    assert txn.may_send(("t", 0))
    assert not in_state(S.READY, tv2=True).may_send(("t", 0))
    assert not in_state(S.FATAL_ERROR, tv2=True, error=FATAL).may_send(("t", 0))


def test_abort_drops_partitions_not_yet_added() -> None:
    txn = in_state(S.IN_TRANSACTION)
    txn.note_partition(("t", 0))
    txn.start_abort()
    assert not txn.has_partitions_to_add


def test_error_while_aborting_is_not_recorded() -> None:
    txn = in_state(S.ABORTING)
    txn.abortable_error(ABORTABLE)
    assert txn.state == S.ABORTING and txn.last_error is None


def test_abortable_error_bumps_epoch_only_under_tv1_with_a_bumping_coordinator() -> None:
    for tv2, can_bump, bump in [(False, True, True), (False, False, False), (True, True, False)]:
        txn = in_state(S.IN_TRANSACTION, tv2=tv2)
        txn.coordinator_can_bump = can_bump
        txn.abortable_error(ABORTABLE)
        assert txn.state == S.ABORTABLE_ERROR
        assert txn.epoch_bump_required is bump
        txn.start_abort()
        assert txn.transaction_ended() == (S.INITIALIZING if bump else S.READY)


def test_unknown_producer_id_is_fatal_when_the_epoch_cannot_be_bumped() -> None:
    txn = in_state(S.IN_TRANSACTION)
    txn.abortable_error_if_possible(UnknownProducerIdError())
    assert txn.state == S.FATAL_ERROR
    txn = in_state(S.IN_TRANSACTION, tv2=True)
    txn.abortable_error_if_possible(UnknownProducerIdError())
    assert txn.state == S.ABORTABLE_ERROR and not txn.epoch_bump_required


def test_switch_to_tv2_takes_effect_after_an_epoch_bump() -> None:
    txn = in_state(S.COMMITTING)
    txn.set_transaction_version(True, initializing=False)
    assert not txn.tv2, "the version does not change inside a transaction"
    assert txn.transaction_ended() == S.INITIALIZING
    assert not txn.tv2
    txn.init_done()
    assert txn.tv2 and txn.state == S.READY


def test_switch_back_to_tv1_needs_no_bump() -> None:
    txn = in_state(S.ABORTING, tv2=True)
    txn.set_transaction_version(False, initializing=False)
    assert txn.transaction_ended() == S.READY
    assert not txn.tv2


def test_invalid_background_transition_poisons_the_state() -> None:
    """A batch failing in READY would mean the bookkeeping is wrong: the producer stops rather than guess."""
    txn = in_state(S.READY)
    txn.abortable_error(ABORTABLE)
    assert txn.state == S.FATAL_ERROR
    with pytest.raises(TransactionFatalError):
        txn.begin()


# -- random sequences ------------------------------------------------------------------------------------------

EVENTS = ["init_done", "ended", "abortable", "abortable_if_possible", "fatal", "added", "not_added"]


class TransactionMachine(RuleBasedStateMachine):
    """Any interleaving of calls and background events keeps rules 1-4 of the module."""

    def __init__(self) -> None:
        super().__init__()
        self.txn = TransactionState("tx")
        self.unacknowledged: Operation | None = None

    def _call(self, name: str) -> None:
        txn = self.txn
        before = txn.state
        pending = txn.pending_operation
        try:
            result = CALLS[name](txn)
        except TransactionError as exc:
            assert txn.state == before, "a refused call changes nothing"
            if pending is not None and before != S.FATAL_ERROR and pending.value.split("_")[0] != name:
                assert isinstance(exc, TransactionStateError)
            if before == S.FATAL_ERROR:
                assert exc.fatal
            return
        assert before != S.FATAL_ERROR, "no call succeeds after a fatal error"
        if pending is not None:
            assert pending.value.split("_")[0] == name, "only the pending operation may be called again"
            assert result is False
        if txn.state != before:
            assert transition_allowed(before, txn.state)

    @rule(call=st.sampled_from(sorted(CALLS)), seen=st.booleans())
    def call(self, call: str, seen: bool) -> None:
        self._call(call)
        if seen:  # the caller saw the outcome of whatever was pending
            operation = self.txn.pending_operation
            if operation is not None and not self.txn.completing and self.txn.state != S.INITIALIZING:
                self.txn.acknowledge(operation)

    @rule(call=st.sampled_from(["init", "begin", "commit", "abort"]))
    def complete(self, call: str) -> None:
        """A call that runs to its end and whose caller sees the outcome (the common case)."""
        self._call(call)
        ended = self.txn.completing and self.txn.transaction_ended()
        if self.txn.state == S.INITIALIZING or ended == S.INITIALIZING:
            self.txn.init_done()
        operation = self.txn.pending_operation
        if operation is not None and self.txn.state in (S.READY, S.ABORTABLE_ERROR, S.FATAL_ERROR):
            self.txn.acknowledge(operation)

    @rule(operation=st.sampled_from([Operation.INIT, Operation.COMMIT, Operation.ABORT]))
    def acknowledge(self, operation: Operation) -> None:
        self.txn.acknowledge(operation)

    @rule(tv2=st.booleans(), initializing=st.booleans())
    def version(self, tv2: bool, initializing: bool) -> None:
        self.txn.set_transaction_version(tv2, initializing=initializing)

    @rule(can_bump=st.booleans())
    def coordinator(self, can_bump: bool) -> None:
        self.txn.coordinator_can_bump = can_bump

    @rule(partition=st.integers(0, 3))
    def note(self, partition: int) -> None:
        self.txn.note_partition(("t", partition))

    @precondition(lambda self: self.txn.state == S.INITIALIZING)
    @rule()
    def init_done(self) -> None:
        self.txn.init_done()
        assert self.txn.state == S.READY

    @precondition(lambda self: self.txn.completing)
    @rule()
    def ended(self) -> None:
        assert self.txn.transaction_ended() in (S.READY, S.INITIALIZING)

    @rule(event=st.sampled_from(["abortable", "abortable_if_possible", "fatal"]))
    def error(self, event: str) -> None:
        before = self.txn.state
        if event == "fatal":
            self.txn.fatal_error(FATAL)
            assert self.txn.state == S.FATAL_ERROR
            return
        if event == "abortable":
            self.txn.abortable_error(ABORTABLE)
        else:
            self.txn.abortable_error_if_possible(UnknownProducerIdError())
        after = self.txn.state
        if before == S.FATAL_ERROR or (before == S.ABORTING and event == "abortable"):
            assert after == before, "an error while aborting is not recorded; after a fatal one nothing is"
        elif before == S.ABORTING:
            assert after in (S.ABORTING, S.FATAL_ERROR), "an unrecoverable error stops even an abort"
        else:
            assert after in (S.ABORTABLE_ERROR, S.FATAL_ERROR)

    @rule()
    def take_partitions_to_add(self) -> None:
        partitions = self.txn.take_partitions_to_add()
        assert not self.txn.has_partitions_to_add
        assert set(partitions) == self.txn.pending_partitions

    @rule(added=st.integers(0, 4))
    def add_result(self, added: int) -> None:
        partitions = sorted(self.txn.pending_partitions)
        self.txn.partitions_added(partitions[:added])
        self.txn.partitions_not_added(partitions[added:])

    @invariant()
    def fatal_is_terminal_and_explained(self) -> None:
        if self.txn.state == S.FATAL_ERROR:
            assert self.txn.last_error is not None
            assert not self.txn.may_send(("t", 0))

    @invariant()
    def sending_needs_an_open_transaction(self) -> None:
        txn = self.txn
        for partition in range(4):
            tp = ("t", partition)
            if txn.may_send(tp):
                assert txn.has_open_transaction
                assert txn.tv2 or tp in txn.added_partitions

    @invariant()
    def partition_sets_are_disjoint(self) -> None:
        txn = self.txn
        assert not txn.new_partitions & txn.pending_partitions
        assert not txn.pending_partitions & txn.added_partitions


TestTransactionMachine = TransactionMachine.TestCase
TestTransactionMachine.settings = settings(max_examples=200, stateful_step_count=30, deadline=None)


@given(st.lists(st.sampled_from(sorted(CALLS)), max_size=30))
def test_calls_alone_never_raise_anything_but_transaction_errors(calls: list[str]) -> None:
    txn = TransactionState("tx")
    for name in calls:
        with contextlib.suppress(TransactionError):
            CALLS[name](txn)
        assert txn.state != S.FATAL_ERROR, "no caller's call alone can poison the machine"
