"""Each sequence/epoch rule of aioproducer.idempotence (R1..R10 in its docstring), one scenario at a time.

test_idempotence_model.py explores their combinations against a model broker; these pin each rule's intent.
"""

from __future__ import annotations

from dataclasses import dataclass

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import DeliveryTimeoutError, TransportError
from aioproducer.idempotence.sequences import (
    IDLE_PROBE_MS,
    MAX_TRACKED_PER_PARTITION,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Action,
    IdempotenceState,
    wire_sequence,
)
from aioproducer.kafka_errors import (
    InvalidRecordError,
    InvalidTimestampError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
)
from aioproducer.transactions.state import State as TxnState
from aioproducer.transactions.state import TransactionState
from aioproducer.transactions.verdicts import produce_failure_is_fatal

TP = ("t", 0)
OTHER = ("t", 1)
NONE = ErrorCode.NONE
NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER
REQUEST_TIMED_OUT = ErrorCode.REQUEST_TIMED_OUT
OUT_OF_ORDER = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
DUPLICATE = ErrorCode.DUPLICATE_SEQUENCE_NUMBER
UNKNOWN_PRODUCER = ErrorCode.UNKNOWN_PRODUCER_ID
FENCED = ErrorCode.PRODUCER_FENCED
INVALID_TIMESTAMP = ErrorCode.INVALID_TIMESTAMP
INVALID_RECORD = ErrorCode.INVALID_RECORD
MESSAGE_TOO_LARGE = ErrorCode.MESSAGE_TOO_LARGE


@dataclass(eq=False)
class Batch:
    tp: tuple[str, int] = TP
    count: int = 1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    maybe_written: bool = False
    attempts: int = 0
    created_ms: int = 0

    @property
    def record_count(self) -> int:
        return self.count

    @property
    def stamp(self) -> tuple[int, int, int]:
        return self.producer_id, self.producer_epoch, self.base_sequence


def state(**kwargs: object) -> IdempotenceState:
    idem = IdempotenceState(True, delivery_timeout_ms=1000, **kwargs)  # type: ignore[arg-type]
    idem.set_producer_id(7, 0)
    return idem


def send(idem: IdempotenceState, *batches: Batch) -> None:
    for batch in batches:
        assert idem.may_drain(batch), batch
        idem.on_drain(batch)


def answer(idem: IdempotenceState, batch: Batch, code: int, **kwargs: int) -> Action:
    decision = idem.on_response(batch, code, 0, **kwargs)
    if decision.action is Action.RETRY:
        batch.attempts += 1
    return decision.action


def test_sequences_count_on_and_wrap_to_zero_on_the_wire_like_java() -> None:
    assert wire_sequence(5) == 5
    assert wire_sequence(2**31 - 1) == 2**31 - 1
    assert wire_sequence(2**31) == 0
    assert wire_sequence(2**31 + 2) == 2
    assert wire_sequence(NO_SEQUENCE) == NO_SEQUENCE


def test_no_new_batch_is_stamped_before_a_producer_id() -> None:  # R1
    idem = IdempotenceState(True)
    assert idem.needs_producer_id and not idem.may_drain(Batch())
    idem.set_producer_id(3, 1)
    assert not idem.needs_producer_id and idem.may_drain(Batch())


def test_a_batch_is_stamped_once_and_keeps_its_stamp_for_every_retry() -> None:  # R2
    idem = state()
    first, second = Batch(count=3), Batch(count=2)
    send(idem, first)
    assert answer(idem, first, NONE) is Action.DONE  # one at a time until the stream's first acknowledgement
    send(idem, second)
    assert second.stamp == (7, 0, 3)
    assert answer(idem, second, NOT_LEADER) is Action.RETRY
    send(idem, second)
    assert second.stamp == (7, 0, 3)


def test_only_the_first_tracked_batch_may_be_resent() -> None:  # R4
    idem = state()
    warm, a, b = Batch(), Batch(count=2), Batch(count=2)
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, a, b)
    assert answer(idem, b, NOT_LEADER) is Action.RETRY
    assert not idem.may_drain(b)  # `a` is still out: `b` may not overtake it
    assert answer(idem, a, NONE) is Action.DONE
    assert idem.may_drain(b)


def test_new_batches_wait_for_the_first_acknowledgement_of_a_stream() -> None:  # R5
    """A broker with no state for a producer takes any sequence: a second batch could overtake the first."""
    idem = state()
    a, b = Batch(), Batch()
    send(idem, a)
    assert not idem.may_drain(b)
    answer(idem, a, NONE)
    assert idem.may_drain(b)


def test_after_an_idle_spell_the_next_batch_goes_alone_until_acknowledged() -> None:  # R5
    """Retention or producer.id.expiration.ms may have made the broker forget the producer meanwhile."""
    idem = state()
    warm, a, b = Batch(), Batch(), Batch()
    send(idem, warm)
    idem.on_response(warm, NONE, 100)
    idem.on_drain(a, 100 + IDLE_PROBE_MS - 1)
    assert idem.may_drain(b)  # acknowledged a moment ago: the broker remembers
    idem.on_response(a, NONE, 200)
    later = 200 + IDLE_PROBE_MS
    idem.on_drain(b, later)
    assert not idem.may_drain(Batch())
    idem.on_response(b, NONE, later)
    assert idem.may_drain(Batch())


def test_a_stream_restarted_after_a_break_probes_with_its_first_batch() -> None:  # R5, R9
    """Regression: a stream restarted under a bumped epoch (R9) had no probe, so a new batch went out right behind
    the first renumbered one; a broker that had forgotten the producer (the retention that often breaks a stream)
    took the second before a retry of the first, which it then refused as out of order, and the renumbered records
    were reported not written though they were in the log (found by the model)."""
    idem = state()
    warm, whole = Batch(), Batch(count=2)
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, whole)
    assert answer(idem, whole, MESSAGE_TOO_LARGE) is Action.SPLIT
    first, second = Batch(), Batch()
    idem.on_split(whole, [first, second])
    send(idem, first)
    assert idem.on_response(first, INVALID_RECORD, 0).action is Action.FAIL  # surely not written: a break (R8)
    idem.maybe_resolve()
    assert second.stamp == (7, 1, 0), "renumbered from 0 under a bumped epoch (R9)"
    idem.on_drain(second)
    assert not idem.may_drain(Batch()), "nothing new goes out with the restarted stream's first batch"
    answer(idem, second, NONE)
    assert idem.may_drain(Batch())


def test_a_transaction_s_new_epoch_needs_no_probe_where_the_broker_holds_the_producer() -> None:  # R5 (KIP-890)
    """Under transaction version 2 each EndTxn brings a new epoch; a partition acknowledged under the producer id a
    moment ago is held by its broker, which takes only sequence 0 first under the new epoch: no probe there. A
    partition never acknowledged, or one held under another producer id, still probes."""
    idem = state(transactional_id="tx")
    held, never = Batch(), Batch(tp=OTHER)
    send(idem, held)
    idem.on_response(held, NONE, 100)
    idem.set_producer_id(7, 1)  # EndTxn v5: same producer id, bumped epoch
    first, second = Batch(), Batch()
    idem.on_drain(first, 200)
    assert first.stamp == (7, 1, 0) and idem.may_drain(second), "the held partition goes on without a probe"
    idem.on_drain(never, 200)
    assert not idem.may_drain(Batch(tp=OTHER)), "a partition never acknowledged probes"
    for batch in (first, never):
        idem.on_response(batch, NONE, 300)
    idem.set_producer_id(7, 2)
    late = Batch()
    idem.on_drain(late, 300 + IDLE_PROBE_MS)
    assert not idem.may_drain(Batch()), "idle past IDLE_PROBE_MS: the broker may have forgotten the producer"
    idem.on_response(late, NONE, 300 + IDLE_PROBE_MS)
    idem.set_producer_id(8, 0)  # a new producer id (the epoch ran out): no broker holds it yet
    fresh = Batch()
    idem.on_drain(fresh, 400 + IDLE_PROBE_MS)
    assert fresh.stamp == (8, 0, 0) and not idem.may_drain(Batch())


def test_a_retried_batch_holds_back_new_batches() -> None:  # R5
    """A written batch whose answer was an error must stay among the last 5 the broker remembers."""
    idem = state()
    warm, a, b = Batch(), Batch(), Batch()
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, a, b)
    assert answer(idem, a, REQUEST_TIMED_OUT) is Action.RETRY
    answer(idem, b, NONE)
    assert not idem.may_drain(Batch())
    send(idem, a)
    assert not idem.may_drain(Batch())
    answer(idem, a, NONE)
    assert idem.may_drain(Batch())


def test_at_most_five_batches_of_a_partition_are_tracked() -> None:  # R5
    idem = state()
    warm = Batch()
    send(idem, warm)
    answer(idem, warm, NONE)
    batches = [Batch() for _ in range(MAX_TRACKED_PER_PARTITION)]
    send(idem, *batches)
    assert not idem.may_drain(Batch())
    assert idem.may_drain(Batch(tp=OTHER))  # per partition
    answer(idem, batches[0], NONE)
    assert idem.may_drain(Batch())


def test_split_parts_take_slices_of_the_batch_sequence_range_with_no_epoch_bump() -> None:  # R6
    idem = state()
    warm, big, after = Batch(), Batch(count=10), Batch(count=1)
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, big, after)
    assert answer(idem, big, 10) is Action.SPLIT
    parts = [Batch(count=4), Batch(count=6)]
    idem.on_split(big, parts)
    assert [p.stamp for p in parts] == [(7, 0, 1), (7, 0, 5)]
    assert idem.tracked(TP) == [parts[0], parts[1], after]
    assert idem.producer_epoch == 0
    assert idem.may_drain(parts[0]) and not idem.may_drain(parts[1])


def test_duplicate_sequence_number_is_a_delivery_with_unknown_offset() -> None:  # R7
    idem = state()
    batch = Batch()
    send(idem, batch)
    assert answer(idem, batch, DUPLICATE) is Action.DONE
    assert idem.tracked(TP) == []


def test_answers_after_which_the_broker_may_have_written_mark_the_batch() -> None:  # R7
    for code, written in ((REQUEST_TIMED_OUT, True), (20, True), (-1, True), (NOT_LEADER, False), (19, False)):
        idem = state()
        batch = Batch()
        send(idem, batch)
        answer(idem, batch, code)
        assert batch.maybe_written is written, code
    idem = state()
    batch = Batch()
    send(idem, batch)
    assert idem.on_no_response(batch, TransportError("gone"), 0).action is Action.RETRY
    assert batch.maybe_written


def test_out_of_order_for_a_later_batch_waits_for_the_earlier_one() -> None:  # R7
    idem = state()
    warm, a, b = Batch(), Batch(), Batch()
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, a, b)
    assert answer(idem, b, OUT_OF_ORDER) is Action.RETRY
    assert not idem.is_waiting(TP) and idem.producer_epoch == 0
    assert answer(idem, a, NONE) is Action.DONE
    send(idem, b)
    assert b.stamp == (7, 0, 2)


def test_out_of_order_for_the_first_batch_restarts_the_stream_under_a_bumped_epoch() -> None:  # R7, R9
    idem = state()
    warm, a, b = Batch(), Batch(count=2), Batch(count=3)
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, a, b)
    assert answer(idem, a, OUT_OF_ORDER) is Action.RETRY
    idem.maybe_resolve()
    assert a.stamp == (7, 0, 1)  # `b` is still on the wire: nothing is renumbered yet
    assert answer(idem, b, OUT_OF_ORDER) is Action.RETRY
    idem.maybe_resolve()
    assert (idem.producer_id, idem.producer_epoch) == (7, 1)  # bumped locally (KIP-360)
    assert (a.stamp, b.stamp) == ((7, 1, 0), (7, 1, 2))
    assert idem.may_drain(a) and not idem.may_drain(b) and not idem.may_drain(Batch())


def test_a_break_renumbers_only_the_batches_from_the_break_on() -> None:  # R9, unlike Java
    """A batch before the break may have been written with its ack lost: it keeps its stamp and settles first."""
    idem = state()
    warm, early, failed, late = Batch(), Batch(), Batch(), Batch()
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, early, failed, late)
    assert idem.on_no_response(early, TransportError("ack lost"), 0).action is Action.RETRY
    assert answer(idem, failed, 87) is Action.FAIL  # INVALID_RECORD: refused, a hole at its sequence
    assert answer(idem, late, OUT_OF_ORDER) is Action.RETRY
    idem.maybe_resolve()
    assert early.stamp == (7, 0, 1) and late.stamp == (7, 0, 3)  # waits for `early`
    assert idem.may_drain(early) and not idem.may_drain(late)
    send(idem, early)
    assert answer(idem, early, NONE) is Action.DONE
    idem.maybe_resolve()
    assert early.stamp == (7, 0, 1) and late.stamp == (7, 1, 0)


def test_a_batch_that_may_have_been_written_makes_its_partition_unresolved() -> None:  # R8
    idem = state()
    warm, lost, after = Batch(), Batch(count=2), Batch()
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, lost, after)
    idem.on_no_response(lost, TransportError("no answer"), 0)
    error = idem.on_expired(lost, 5000, on_wire=False, last_error=None)
    assert isinstance(error, DeliveryTimeoutError) and "may have been written" in str(error)
    assert idem.is_waiting(TP) and not idem.may_drain(Batch())
    # The next batch is acknowledged: the broker had the lost one, sequences are consistent.
    assert answer(idem, after, NONE) is Action.DONE
    idem.maybe_resolve()
    assert not idem.is_waiting(TP) and idem.producer_epoch == 0


def test_out_of_order_right_after_an_unresolved_batch_proves_it_unwritten() -> None:  # R8
    idem = state()
    warm, lost, after = Batch(), Batch(count=2), Batch()
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, lost, after)
    idem.on_expired(lost, 5000, on_wire=True, last_error=None)
    assert answer(idem, after, OUT_OF_ORDER) is Action.RETRY
    idem.on_late_response(lost, NOT_LEADER)
    idem.maybe_resolve()
    assert after.stamp == (7, 1, 0)


def test_an_unresolved_partition_with_nothing_left_restarts_under_a_new_epoch() -> None:  # R8, R9
    idem = state()
    warm, lost = Batch(), Batch()
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, lost)
    idem.on_expired(lost, 5000, on_wire=True, last_error=None)
    idem.maybe_resolve()
    assert idem.producer_epoch == 0  # its answer may still come and settle the question
    idem.on_late_response(lost, None)
    idem.maybe_resolve()
    assert idem.producer_epoch == 1 and not idem.is_waiting(TP)
    fresh = Batch()
    send(idem, fresh)
    assert fresh.stamp == (7, 1, 0)


def test_a_late_acknowledgement_resolves_without_a_bump() -> None:  # R8
    idem = state()
    warm, slow = Batch(), Batch()
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, slow)
    idem.on_expired(slow, 5000, on_wire=True, last_error=None)
    idem.on_late_response(slow, NONE, 10)
    idem.maybe_resolve()
    assert idem.producer_epoch == 0 and not idem.is_waiting(TP)


def test_a_batch_overtaken_by_an_acknowledged_later_one_fails_instead_of_reordering() -> None:  # R7, R8
    idem = state()
    warm, a, b = Batch(), Batch(), Batch()
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, a, b)
    answer(idem, a, NOT_LEADER)
    assert answer(idem, b, NONE) is Action.DONE  # a broker without our state took `b` first
    send(idem, a)
    decision = idem.on_response(a, OUT_OF_ORDER, 0)
    assert decision.action is Action.FAIL and isinstance(decision.error, OutOfOrderSequenceNumberError)
    idem.maybe_resolve()
    assert idem.producer_epoch == 0 and not idem.is_waiting(TP)


def test_unknown_producer_id_restarts_the_stream_unless_the_log_start_is_unknown() -> None:  # R7
    idem = state()
    warm, a = Batch(), Batch()
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, a)
    assert answer(idem, a, UNKNOWN_PRODUCER, log_start_offset=-1) is Action.RETRY
    assert not idem.is_waiting(TP)
    send(idem, a)
    assert answer(idem, a, UNKNOWN_PRODUCER, log_start_offset=100) is Action.RETRY
    idem.maybe_resolve()
    assert a.stamp == (7, 1, 0)


def test_a_broker_refusing_a_locally_bumped_epoch_gets_a_new_producer_id() -> None:  # R9
    """Tansu answers PRODUCER_FENCED to an epoch it did not give out; Kafka takes it."""
    idem = state()
    warm, a = Batch(), Batch()
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, a)
    answer(idem, a, OUT_OF_ORDER)
    idem.maybe_resolve()
    assert a.stamp == (7, 1, 0)
    send(idem, a)
    assert answer(idem, a, FENCED) is Action.RETRY
    assert idem.needs_producer_id and idem.local_bumps_refused
    idem.maybe_resolve()
    assert a.stamp == (7, 1, 0)  # waits for the new id
    idem.set_producer_id(8, 0)
    idem.maybe_resolve()
    assert a.stamp == (8, 0, 0)
    # From now on a break asks for a new id rather than bumping locally.
    send(idem, a)
    answer(idem, a, NONE)
    b = Batch()
    send(idem, b)
    answer(idem, b, OUT_OF_ORDER)
    idem.maybe_resolve()
    assert idem.needs_producer_id and idem.producer_epoch == 0


def test_epoch_exhaustion_asks_for_a_new_producer_id() -> None:  # R9 (Java: resetIdempotentProducerId)
    idem = IdempotenceState(True)
    idem.set_producer_id(7, 32767)
    a = Batch()
    send(idem, a)
    answer(idem, a, OUT_OF_ORDER)
    idem.maybe_resolve()
    assert idem.needs_producer_id and not idem.may_drain(Batch(tp=OTHER))


def test_other_partitions_take_a_new_epoch_once_quiet() -> None:  # R5
    idem = state()
    warm_a, warm_b, a, b = Batch(), Batch(tp=OTHER), Batch(), Batch(tp=OTHER)
    send(idem, warm_a, warm_b)
    answer(idem, warm_a, NONE)
    answer(idem, warm_b, NONE)
    send(idem, a, b)
    answer(idem, a, OUT_OF_ORDER)
    idem.maybe_resolve()
    assert idem.producer_epoch == 1 and b.stamp == (7, 0, 1)
    assert not idem.may_drain(Batch(tp=OTHER))  # `b` of the old epoch is still out
    answer(idem, b, NONE)
    fresh = Batch(tp=OTHER)
    send(idem, fresh)
    assert fresh.stamp == (7, 1, 0)


def test_retries_and_delivery_timeout_bound_retries() -> None:  # R7 (Java: Sender.canRetry)
    idem = IdempotenceState(True, retries=1, delivery_timeout_ms=1000)
    idem.set_producer_id(7, 0)
    batch = Batch()
    send(idem, batch)
    assert answer(idem, batch, NOT_LEADER) is Action.RETRY
    send(idem, batch)
    decision = idem.on_response(batch, NOT_LEADER, 0)
    assert decision.action is Action.FAIL and type(decision.error).__name__ == "NotLeaderOrFollowerError"
    other = Batch(tp=OTHER)
    send(idem, other)
    decision = idem.on_response(other, REQUEST_TIMED_OUT, 1000)
    assert decision.action is Action.FAIL and isinstance(decision.error, DeliveryTimeoutError)
    assert "may have been written" in str(decision.error)


def test_timeout_messages_say_what_became_of_the_records() -> None:
    idem = state()
    never = Batch(count=3)
    assert "not sent" in str(idem.timeout_error(never, 1500, None))
    refused = Batch(attempts=2)
    assert "refused" in str(idem.timeout_error(refused, 1500, None))
    unknown = Batch(maybe_written=True, attempts=1)
    message = str(idem.timeout_error(unknown, 1500, TransportError("no answer")))
    assert "may have been written" in message and "t-0" in message and "no answer" in message


def test_without_idempotence_nothing_is_stamped_and_answers_are_only_classified() -> None:
    idem = IdempotenceState(False)
    batch = Batch(count=4)
    assert idem.may_drain(batch)
    idem.on_drain(batch)
    assert batch.stamp == (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)
    assert idem.on_response(batch, NOT_LEADER, 0).action is Action.RETRY
    assert idem.on_response(batch, 10, 0).action is Action.SPLIT
    assert idem.on_response(batch, 87, 0).action is Action.FAIL


def test_a_batch_refused_for_some_records_names_each_with_its_own_error() -> None:  # R6 (KIP-467)
    idem = state()
    warm, batch = Batch(), Batch(count=5)
    send(idem, warm)
    answer(idem, warm, NONE)
    send(idem, batch)
    decision = idem.on_response(
        batch, INVALID_RECORD, 0, message="batch refused", record_errors=[(1, "no key"), (3, None), (9, "beyond")]
    )
    assert decision.action is Action.REJECT_RECORDS
    errors = decision.record_errors or {}
    assert sorted(errors) == [1, 3]  # an index beyond the batch is ignored
    # Several named: each an INVALID_RECORD (the code cannot tell their causes apart), with its own message.
    assert all(isinstance(e, InvalidRecordError) for e in errors.values())
    assert "no key" in str(errors[1]) and "batch refused" in str(errors[3])
    assert idem.tracked(TP) == [batch], "it stays tracked: its parts take its slices of the sequence range"
    # One named record: the partition's own error class.
    single, lone = Batch(count=3), Batch()
    send(idem, single)
    one = idem.on_response(single, INVALID_TIMESTAMP, 0, record_errors=[(2, "too old")])
    assert isinstance((one.record_errors or {})[2], InvalidTimestampError)
    # A batch of one record fails with its record's error.
    idem = state()
    send(idem, lone)
    alone = idem.on_response(lone, INVALID_RECORD, 0, message="m", record_errors=[(0, "no key")])
    assert alone.action is Action.FAIL and "no key" in str(alone.error)


def test_a_transactional_failure_breaks_the_stream_and_asks_the_coordinator_for_a_new_epoch() -> None:  # R10
    idem = state(transactional_id="tx")
    warm, a, b = Batch(), Batch(), Batch()
    send(idem, warm)
    answer(idem, warm, NONE)
    assert not idem.identity.epoch_bump_required
    send(idem, a, b)
    decision = idem.on_response(a, OUT_OF_ORDER, 0)
    assert decision.action is Action.FAIL  # Java: no retry for the next batch's OUT_OF_ORDER in a transaction
    assert isinstance(decision.error, OutOfOrderSequenceNumberError) and idem.identity.epoch_bump_required
    idem.maybe_resolve()
    assert idem.producer_epoch == 0 and b.stamp == (7, 0, 2)  # no local bump: the coordinator gives the epoch
    fenced = idem.on_response(b, FENCED, 0)
    # Whether that ends the producer is the transaction state machine's verdict (transactions_verdicts), not R10's.
    assert fenced.action is Action.FAIL and isinstance(fenced.error, ProducerFencedError)
    assert produce_failure_is_fatal(FENCED) and not produce_failure_is_fatal(OUT_OF_ORDER)
    idem.set_producer_id(7, 1)  # the coordinator's bumped epoch
    assert not idem.identity.epoch_bump_required
    c = Batch()
    send(idem, c)
    assert c.stamp == (7, 1, 0)


def test_a_transactional_failure_of_a_batch_never_sent_needs_no_new_epoch() -> None:  # R10
    idem = state(transactional_id="tx")
    never = Batch()
    idem.on_abandoned([never], TransportError("aborted"))
    assert not idem.identity.epoch_bump_required


def test_the_sequence_rules_and_the_transaction_share_one_identity() -> None:
    idem = state(transactional_id="tx")
    txn = TransactionState("tx", idem.identity)
    a = Batch()
    send(idem, a)
    idem.on_abandoned([a], TransportError("aborted"))  # a stamped batch abandoned: its stream is broken
    assert txn.epoch_bump_required, "the state machine sees the bump the sequence rules asked for"
    txn.state = TxnState.ABORTING
    assert txn.transaction_ended() is TxnState.INITIALIZING


def test_a_transactional_identity_from_end_txn_restarts_quiet_streams() -> None:  # R10 (EndTxn v5)
    idem = state(transactional_id="tx")
    a = Batch()
    send(idem, a)
    answer(idem, a, NONE)
    idem.set_producer_id(7, 1)
    b = Batch()
    send(idem, b)
    assert b.stamp == (7, 1, 0) and not idem.identity.epoch_bump_required


_TWO_BREAKS_AT_TWO_EPOCHS = """
from aioproducer.idempotence.sequences import IdempotenceState

class Batch:
    def __init__(self, tp):
        self.tp, self.record_count, self.created_ms, self.attempts, self.maybe_written = tp, 1, 0, 0, False
        self.producer_id = self.producer_epoch = self.base_sequence = -1

idem = IdempotenceState(True)
idem.set_producer_id(7, 0)
a, b = ("a", 0), ("b", 0)
a1, a2, b1 = Batch(a), Batch(a), Batch(b)
for batch in (a1, a2, b1):
    idem.on_drain(batch, 0)
idem.on_response(b1, 45, 0)  # OUT_OF_ORDER_SEQUENCE_NUMBER on b's first batch: b breaks
idem.maybe_resolve()  # and restarts under epoch 1
idem.on_response(a1, 45, 0)  # a breaks under epoch 0, its second batch still on the wire
idem.on_response(a2, 45, 0)  # a is quiet now
idem.on_drain(b1, 0)
idem.on_response(b1, 45, 0)  # b breaks again, under epoch 1
idem.maybe_resolve()
print(idem._streams[a].producer_epoch, idem._streams[b].producer_epoch, idem.producer_epoch)
"""


def test_a_history_restarts_its_streams_alike_whatever_the_hash_seed() -> None:  # R9
    """maybe_resolve went over its broken partitions in a set's order, which follows the string hash seed: the same
    history restarted one stream under epoch 1 in some processes and under epoch 2 in others, so a seeded run could
    not be replayed. The pass now goes in the order the partitions broke."""
    import os
    import subprocess
    import sys

    outcomes = set()
    for seed in range(8):
        done = subprocess.run(
            [sys.executable, "-c", _TWO_BREAKS_AT_TWO_EPOCHS],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        )
        outcomes.add(done.stdout.strip())
    assert len(outcomes) == 1, outcomes
