"""Sequence bookkeeping per partition, as Java's TransactionManager keeps it."""

from __future__ import annotations

from aioproducer.idempotence import IdempotenceState, increment_sequence


def test_sequences_wrap_to_zero_after_int_max_like_java() -> None:
    assert increment_sequence(0, 5) == 5
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 3, 5) == 2
    state = IdempotenceState(True)
    state.set_producer_id(1, 0)
    state._state(("t", 0)).next_sequence = 2**31 - 2
    assert state.assign(("t", 0), 4) == 2**31 - 2
    assert state.assign(("t", 0), 1) == 2


def test_only_the_first_in_flight_batch_may_be_resent() -> None:
    state = IdempotenceState(True)
    state.set_producer_id(1, 0)
    tp = ("t", 0)
    a, b = state.assign(tp, 3), state.assign(tp, 2)
    assert (a, b) == (0, 3)
    assert state.may_send_retry(tp, a) and not state.may_send_retry(tp, b)
    state.on_success(tp, a, 3)
    assert state.may_send_retry(tp, b) and state.is_first_in_flight(tp, b)


def test_a_dropped_batch_asks_for_an_epoch_bump_and_a_new_id_resets_sequences() -> None:
    state = IdempotenceState(True)
    state.set_producer_id(1, 0)
    tp = ("t", 0)
    seq = state.assign(tp, 1)
    state.on_dropped(tp, seq)
    assert state.reset_pending
    state.set_producer_id(1, 1)
    assert not state.reset_pending and state.assign(tp, 1) == 0
