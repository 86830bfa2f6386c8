"""Producer identity, sequences and epochs, and the fate of every Produce attempt; pure (no I/O, no clock).

Owns the idempotent part of Java's TransactionManager / TxnPartitionMap / TxnPartitionEntry (KIP-98, KIP-360) and
the error handling of Sender.completeBatch / canRetry: for each answer it says whether a batch is done, retried,
split or failed, and keeps each partition's sequence stream consistent. The sender does what it says; this module
never touches a queue, a connection or a record's outcome. Rules kept here (cited in the code as R1..R10):

R1  Identity. No new batch is stamped before the producer has an id and epoch (InitProducerId; for transactions
    also EndTxn v5). A batch already stamped carries its own identity and may still be retried meanwhile.
R2  Stamps. A batch takes (producer id, epoch, base sequence) when first drained and keeps them for every retry:
    a batch the broker may have written goes out again only as the very same batch, which the broker recognises
    (Java: a batch that hasSequence() is never restamped on drain). Only a split (R6) or a restart of a stream
    proved broken (R9) changes a stamp.
R3  Streams. Each partition numbers its batches in one stream: an (id, epoch), the next sequence, the last
    acknowledged one, and its *tracked* batches (stamped, not settled: on the wire or waiting for a retry) in
    sequence order. All tracked batches of a partition belong to its current stream. Sequences count on here; on
    the wire they wrap to 0 after 2^31-1 (`wire_sequence`).
R4  A stamped batch (a retry, a split part) is sent only as its partition's first tracked batch, so a retry never
    overtakes nor is overtaken (Java: firstInFlightSequence).
R5  A new batch is stamped only if its partition is neither unresolved (R8) nor broken (R9), has fewer than
    `MAX_TRACKED_PER_PARTITION` batches tracked or on the wire and none being retried (a broker remembers a
    producer's last 5 batches per partition to recognise a resend: a batch that may be written must stay among
    them until acknowledged), has no *probe* out (a batch stamped when the broker may have no state for the
    producer: the stream's first, or the first after `IDLE_PROBE_MS` with nothing out, as retention or
    producer.id.expiration.ms make a broker forget; such a broker takes any sequence, so a second batch could
    overtake the first), and its stream is the producer's current (id, epoch); a stream of an older identity
    moves to the current one, from sequence 0, once nothing of it is tracked or on the wire (Java:
    maybeUpdateProducerIdAndEpoch). A stream restarted by R9 probes with its first renumbered batch. A
    transaction's new epoch from the coordinator (EndTxn v5, InitProducerId with the same producer id) starts a
    partition's stream without a probe when the partition's broker holds the producer: an earlier stream of the
    same producer id was acknowledged there within `IDLE_PROBE_MS` (the assumption R5 makes of any stream). That
    broker checks a newer epoch strictly (its first batch must be sequence 0, each next one follow: Kafka's
    ProducerAppendInfo.checkSequence, whatever the transaction markers wrote), so no batch can overtake another;
    only a broker with no state for the producer takes any sequence. (Java never probes: it sends up to 5 batches
    per partition at once after any epoch bump.)
R6  MESSAGE_TOO_LARGE for a batch of several records: split it; and a batch refused for some of its records
    (KIP-467: an error answer naming them in RecordErrors) is split around them, each named record a part of its
    own that fails with its own error (surely not written: R8 breaks the stream there), the others sent again.
    The parts take consecutive slices of its sequence range under its id and epoch, and its place in the sequence
    order; no epoch bump (Java: splitAndReenqueue, insertInSequenceOrder). A part of a batch that may have been
    written whole proves nothing by an OUT_OF_ORDER_SEQUENCE_NUMBER (the broker knows the whole by other bounds):
    it fails, its outcome unknown.
R7  Answers. NONE: the last acknowledged sequence moves up. DUPLICATE_SEQUENCE_NUMBER: the broker has the batch
    already (older brokers, Tansu): delivered, offset unknown. OUT_OF_ORDER_SEQUENCE_NUMBER proves the broker does
    not have the batch (a resend of one it has is recognised, R5); for the first tracked batch, or the one right
    after an unresolved hole, it proves the stream broken there (R9); otherwise an earlier batch decides: retry
    (Java: canRetry). UNKNOWN_PRODUCER_ID: the broker lost the producer's state (retention): the stream is broken
    from its first tracked batch (R9); with no log start offset in the answer, retry as is. A batch may have been
    written once an attempt got no answer, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NETWORK_EXCEPTION,
    KAFKA_STORAGE_ERROR or UNKNOWN_SERVER_ERROR. Other errors retry when retriable, within `retries` and
    `delivery_timeout_ms` (Java: Sender.canRetry), and fail otherwise.
R8  A stamped batch failing for good (a final error, retries or delivery_timeout_ms spent, close) leaves a hole.
    If it was surely not written, the stream is broken at it (R9). If it may have been, the partition is
    *unresolved*: new batches wait; an acknowledgement of a later batch proves it written; an
    OUT_OF_ORDER_SEQUENCE_NUMBER for the batch right after it proves it not (R9); once nothing is tracked or on
    the wire and the stream is not acknowledged to its end, the stream is broken at its end (Java:
    markSequenceUnresolved, maybeResolveSequences).
R9  A broken stream restarts. Batches tracked from the break on were never written (a broker takes a producer's
    sequences only in order) and are renumbered from 0 under a newer identity, in order; batches before the break
    keep their stamps and settle first, and nothing of the partition may be on the wire. The epoch is bumped
    locally (KIP-360, Java: bumpIdempotentProducerEpoch) unless the producer's is already newer than the stream's;
    at epoch 32767, or once a broker refused a locally bumped epoch (Tansu answers PRODUCER_FENCED), a new producer
    id is asked for instead. Other partitions take the new identity by R5.
R10 Transactions: a transactional producer never bumps or renumbers on its own. A stamped batch failing for good (an
    OUT_OF_ORDER_SEQUENCE_NUMBER for the next batch, an UNKNOWN_PRODUCER_ID outside retention, a final error, a
    timeout, an abort) breaks its stream there, and a broken stream needs a new epoch from the coordinator
    (`ProducerIdentity.epoch_bump_required`): InitProducerId with the current id and epoch after the abort under
    transaction version 1, EndTxn v5's new epoch under version 2, or, for a coordinator that cannot bump, the end of
    the producer. The new identity (`set_producer_id`) restarts every stream. Whether a failed batch makes the
    transaction abortable or the producer fatal is the transaction state machine's verdict (Java:
    maybeTransitionToErrorState), never this module's.

On purpose, unlike Java (each where Java can write a record twice or out of order): a break renumbers only the
batches from the break on, once nothing of the partition is on the wire (Java rewrites every in-flight batch of the
partition at once, a written one whose acknowledgement was lost included); a probe goes alone after idle and at a
stream's start, no new batch is stamped while one is retried, and at most 5 are tracked (Java relies on 5 requests
per connection); a batch refused as out of order after a later one was acknowledged fails at once (Java retries it
until delivery_timeout_ms); a batch failing on the wire or after an unanswered attempt leaves an unresolved hole
(Java: only a batch being retried); a broker refusing a locally bumped epoch gets a new producer id (Java: fatal).

The ten rules stay in this one module, past 500 lines, on purpose: they are one state machine over each partition's
sequence stream, and a rule read apart from the others (a retry without the split, a bump without the holes) is
where this kind of bug hides.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import DeliveryTimeoutError
from aioproducer.idempotence.identity import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, ProducerIdentity
from aioproducer.kafka_errors import kafka_error

__all__ = [
    "IDLE_PROBE_MS",
    "MAX_TRACKED_PER_PARTITION",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "Action",
    "Decision",
    "IdempotenceState",
    "ProducerIdentity",
    "SequencedBatch",
    "wire_sequence",
]

log = logging.getLogger("aioproducer.idempotence")

NO_SEQUENCE = -1
# ProducerStateEntry.NUM_BATCHES_TO_RETAIN: how many of a producer's last batches a broker keeps per partition to
# recognise a resend. More batches tracked at once could make a written, unacknowledged one unrecognisable.
MAX_TRACKED_PER_PARTITION = 5
# R5: after this long with nothing out and no acknowledgement, a partition's broker may have forgotten the producer.
IDLE_PROBE_MS = 1000
_MAX_EPOCH = 32767  # Short.MAX_VALUE: past it, a new producer id (Java: resetIdempotentProducerId)
_SEQUENCE_SPAN = 2**31  # sequences wrap to 0 after Integer.MAX_VALUE (DefaultRecordBatch.incrementSequence)
_MAX_RETRIES = 2**31 - 1

# R7: answers after which the broker may have appended the batch (locally, or to too few replicas).
_MAYBE_APPENDED = frozenset(
    {
        ErrorCode.UNKNOWN_SERVER_ERROR,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)

TopicPartition = tuple[str, int]


def wire_sequence(sequence: int) -> int:
    """The base sequence as sent: the count modulo 2^31 (R3), or -1 for an unstamped batch."""
    return sequence % _SEQUENCE_SPAN if sequence >= 0 else NO_SEQUENCE


class SequencedBatch(Protocol):
    """What this module reads and writes on a batch (the accumulator's ProducerBatch). Only this module writes
    `producer_id`, `producer_epoch`, `base_sequence` and `maybe_written`."""

    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    base_sequence: int  # the stream position (R3); NO_SEQUENCE until stamped
    maybe_written: bool
    attempts: int
    created_ms: int

    @property
    def record_count(self) -> int: ...


class Action(enum.Enum):
    """What the sender does with a batch after an answer (or its absence)."""

    DONE = "done"  # delivered: settle it
    RETRY = "retry"  # put it back in its queue, in sequence order, after the retry backoff
    SPLIT = "split"  # split it (MESSAGE_TOO_LARGE); `on_split` stamps the parts
    # KIP-467: split out the records in `Decision.record_errors` (each fails with its own error, `on_abandoned`);
    # the others go again (for a transaction, which must now be aborted, they fail too)
    REJECT_RECORDS = "reject records"
    FAIL = "fail"  # failed for good with `Decision.error`


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    error: BaseException | None = None
    record_errors: Mapping[int, BaseException] | None = None  # REJECT_RECORDS: record index -> its error


_DONE = Decision(Action.DONE)
# Read for every answered batch: an enum member read through its class costs a lookup (about 70 ns) each time.
_NO_ERROR = ErrorCode.NONE
_RETRY = Decision(Action.RETRY)
_SPLIT = Decision(Action.SPLIT)


@dataclass(slots=True)
class _Stream:
    """One partition's sequence stream (Java: TxnPartitionEntry), R3."""

    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    next_sequence: int = 0
    last_acked: int = NO_SEQUENCE
    last_acked_offset: int = -1
    last_ack_ms: int = 0
    tracked: list[SequencedBatch] = field(default_factory=list)  # in sequence order
    on_wire: set[int] = field(default_factory=set)  # batches of this partition on the wire (by id), tracked or not
    # Of those, batches already failed (delivery timeout) whose answer has not come (by identity).
    stray_on_wire: dict[int, SequencedBatch] = field(default_factory=dict)
    unresolved_next: int | None = None  # R8: the sequence after a hole of unknown fate
    # R5: a batch stamped while nothing of the partition was out; the next new batch waits for its answer.
    probe: SequencedBatch | None = None
    # R5: the partition's broker holds this producer id from an earlier stream, acknowledged at `last_ack_ms`.
    broker_knows_producer: bool = False
    # R6: parts of a split batch that may have been written whole (by id): their refusal proves nothing.
    uncertain_parts: set[int] = field(default_factory=set)
    broken_at: int | None = None  # R9: batches from here on were never written

    def restart(self, producer_id: int, producer_epoch: int) -> None:
        if producer_id != self.producer_id:
            self.broker_knows_producer = False
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.next_sequence = 0
        self.last_acked = NO_SEQUENCE
        self.unresolved_next = self.broken_at = self.probe = None

    def first_tracked_before(self, sequence: int) -> bool:
        return bool(self.tracked) and self.tracked[0].base_sequence < sequence


def _named_records(
    batch: SequencedBatch, code: int, message: str | None, record_errors: Sequence[tuple[int, str | None]]
) -> dict[int, BaseException] | None:
    """Each record a KIP-467 answer names, with its error (Java's Sender.failBatch): the partition's error class
    when one record is named, INVALID_RECORD when several are (the code cannot tell their causes apart); the
    record's message, else the partition's. None when no named record is in the batch."""
    named = {index: text for index, text in record_errors if 0 <= index < batch.record_count}
    if not named:
        return None
    single = len(named) == 1
    errors: dict[int, BaseException] = {}
    for index, text in named.items():
        detail = f"{batch.tp[0]}-{batch.tp[1]}, record {index} of its batch: {text or message or 'refused'}"
        errors[index] = kafka_error(code if single else ErrorCode.INVALID_RECORD, detail)
    return errors


def _last_sequence(batch: SequencedBatch) -> int:
    return batch.base_sequence + batch.record_count - 1


class IdempotenceState:
    """Identity and sequence streams of one producer. With `enabled=False` (and no transactional id) it only
    classifies answers: every batch may be drained and nothing is stamped.

    `retries` and `delivery_timeout_ms` bound retries (Java: Sender.canRetry); times arrive as `now_ms`.
    """

    def __init__(
        self,
        enabled: bool,
        *,
        retries: int = _MAX_RETRIES,
        delivery_timeout_ms: int = 120_000,
        transactional_id: str | None = None,
        identity: ProducerIdentity | None = None,
    ) -> None:
        self.enabled = enabled or transactional_id is not None
        self.transactional_id = transactional_id
        self.retries = retries
        self.delivery_timeout_ms = delivery_timeout_ms
        # R1/R9: the producer id and epoch, shared with the transaction state machine of a transactional producer.
        self.identity = identity if identity is not None else ProducerIdentity(needs_producer_id=self.enabled)
        self.local_bumps_refused = False
        self._granted_epoch = NO_PRODUCER_EPOCH  # the epoch the broker gave; above it, bumped locally
        self._streams: dict[TopicPartition, _Stream] = {}
        # Unresolved or broken partitions, for maybe_resolve: a dict used as an ordered set, so that a pass restarts
        # streams in the order they needed it, whatever the string hash seed (a history replays the same way).
        self._attention: dict[TopicPartition, None] = {}

    # -- identity (R1, R9, R10) ---------------------------------------------------------------------------------
    @property
    def producer_id(self) -> int:
        return self.identity.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.identity.producer_epoch

    @property
    def needs_producer_id(self) -> bool:
        """R1/R9: InitProducerId must be (re)sent: at start, at epoch exhaustion, after a refused local bump."""
        return self.identity.needs_producer_id

    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def has_producer_id(self) -> bool:
        return not self.enabled or self.identity.known

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        """A new identity from InitProducerId (or EndTxn v5). Streams move to it when quiet (R5); broken ones at
        their restart (R9); for transactions, every quiet stream restarts at once, remembering whether its broker
        holds the producer id (R5)."""
        self.identity.adopt(producer_id, producer_epoch)
        self._granted_epoch = producer_epoch
        if self.transactional:
            for tp, stream in list(self._streams.items()):
                if not stream.tracked and not stream.on_wire:
                    known = stream.producer_id == producer_id and (
                        stream.last_acked != NO_SEQUENCE or stream.broker_knows_producer
                    )
                    fresh = self._streams[tp] = _Stream(producer_id, producer_epoch)
                    fresh.broker_knows_producer = known
                    fresh.last_ack_ms = stream.last_ack_ms if known else 0
                    self._attention.pop(tp, None)

    def _bump(self) -> bool:
        """Make the producer's identity newer than every stream's (R9): True when done, False when a new id (or,
        for transactions, a bumped epoch from the coordinator) must be asked for first."""
        identity = self.identity
        if self.transactional:
            identity.require_epoch_bump()
            return False
        if identity.needs_producer_id:
            return False
        if identity.producer_epoch >= _MAX_EPOCH or self.local_bumps_refused:
            identity.needs_producer_id = True
            return False
        identity.producer_epoch += 1
        log.info("producer id %d: epoch bumped to %d (KIP-360)", identity.producer_id, identity.producer_epoch)
        return True

    # -- draining (R4, R5) --------------------------------------------------------------------------------------
    def may_drain(self, batch: SequencedBatch) -> bool:
        """Whether the head batch of its partition may go out now."""
        if not self.enabled:
            return True
        stream = self._streams.get(batch.tp)
        if batch.base_sequence != NO_SEQUENCE:  # R4
            if stream is None or not stream.tracked or stream.tracked[0] is not batch:
                return False
            return stream.broken_at is None or batch.base_sequence < stream.broken_at
        identity = self.identity
        if identity.needs_producer_id or not identity.known:  # R1
            return False
        if stream is None:
            return True
        if stream.unresolved_next is not None or stream.broken_at is not None:  # R5
            return False
        # Field by field rather than as (id, epoch) pairs: no tuples built on every drain of every batch.
        if stream.producer_id != identity.producer_id or stream.producer_epoch != identity.producer_epoch:
            return not stream.tracked and not stream.on_wire
        if stream.probe is not None:
            return False  # R5: a broker with no state for the producer takes any sequence: one at a time
        for tracked in stream.tracked:  # a loop, not any(<generator>): no generator made per call
            if tracked.attempts:
                return False  # R5: a retried batch must stay among the last 5 the broker remembers
        return len(stream.tracked) + len(stream.stray_on_wire) < MAX_TRACKED_PER_PARTITION

    def on_drain(self, batch: SequencedBatch, now_ms: int = 0) -> None:
        """The batch goes out now: stamp it if new (R2, R5) and count it on the wire."""
        if not self.enabled:
            return
        stream = self._stream(batch.tp)
        if batch.base_sequence == NO_SEQUENCE:
            identity = self.identity
            if stream.producer_id != identity.producer_id or stream.producer_epoch != identity.producer_epoch:
                stream.restart(identity.producer_id, identity.producer_epoch)
            batch.producer_id, batch.producer_epoch = stream.producer_id, stream.producer_epoch
            batch.base_sequence = stream.next_sequence
            stream.next_sequence += batch.record_count
            unknown = stream.last_acked == NO_SEQUENCE and not stream.broker_knows_producer
            idle = unknown or now_ms - stream.last_ack_ms >= IDLE_PROBE_MS
            if idle and not stream.tracked and not stream.on_wire:
                stream.probe = batch  # R5: the broker may have no state for the producer
            stream.tracked.append(batch)
        stream.on_wire.add(id(batch))

    def _stream(self, tp: TopicPartition) -> _Stream:
        stream = self._streams.get(tp)
        if stream is None:
            stream = self._streams[tp] = _Stream(self.producer_id, self.producer_epoch)
        return stream

    # -- answers (R6, R7) ---------------------------------------------------------------------------------------
    def on_response(
        self,
        batch: SequencedBatch,
        error_code: int,
        now_ms: int,
        *,
        base_offset: int = -1,
        log_start_offset: int = -1,
        message: str | None = None,
        record_errors: Sequence[tuple[int, str | None]] = (),
    ) -> Decision:
        """A Produce answer for the batch (its partition's part of it): what to do next. `record_errors`: the
        answer's RecordErrors (KIP-467), (index of the record in the batch, its message)."""
        stream = self._off_wire(batch)
        if error_code == _NO_ERROR or (error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER and stream is not None):
            self._acked(batch, stream, base_offset, now_ms)
            return _DONE
        if error_code in _MAYBE_APPENDED:
            batch.maybe_written = True
        if error_code == ErrorCode.MESSAGE_TOO_LARGE and batch.record_count > 1:
            return _SPLIT  # R6: on_split takes it from here
        error = kafka_error(error_code, f"{batch.tp[0]}-{batch.tp[1]}: {message}" if message else None)
        # Java: Sender.canRetry checks the limits first, so TransactionManager.canRetry acts only within them.
        if self._within_limits(batch, now_ms) and self._can_retry(batch, stream, error_code, log_start_offset, error):
            return _RETRY
        rejected = _named_records(batch, error_code, message, record_errors) if record_errors else None
        if rejected is not None and batch.record_count == 1:
            self._fail(batch, stream, error_code, rejected[0])  # the batch's one record: its own error
            return Decision(Action.FAIL, rejected[0])
        if rejected is not None and not self._timed_out(batch, now_ms):
            # R6: the batch stays tracked for `on_split`; the named parts then fail through `on_abandoned`.
            return Decision(Action.REJECT_RECORDS, error, rejected)
        if error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and (
            stream is None or id(batch) not in stream.uncertain_parts
        ):
            batch.maybe_written = False  # R7: refused, so not written
        self._fail(batch, stream, error_code, error)
        if error.retriable and self._timed_out(batch, now_ms):
            return Decision(Action.FAIL, self.timeout_error(batch, now_ms, error))
        return Decision(Action.FAIL, error)

    def on_no_response(self, batch: SequencedBatch, error: BaseException, now_ms: int) -> Decision:
        """The request carrying the batch ended without an answer: it may have been written (R7)."""
        stream = self._off_wire(batch)
        batch.maybe_written = True
        if self._within_limits(batch, now_ms):
            return _RETRY
        self._fail(batch, stream, None, error)
        if self._timed_out(batch, now_ms):
            error = self.timeout_error(batch, now_ms, error)
        return Decision(Action.FAIL, error)

    def on_late_response(
        self, batch: SequencedBatch, error_code: int | None, base_offset: int = -1, now_ms: int = 0
    ) -> None:
        """An answer (None: none) for a batch failed while it was on the wire (delivery timeout): bookkeeping only."""
        stream = self._off_wire(batch)
        if stream is not None and (error_code == ErrorCode.NONE or error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
            self._acked(batch, stream, base_offset, now_ms)

    def on_split(self, batch: SequencedBatch, parts: Sequence[SequencedBatch]) -> None:
        """R6: the parts inherit the batch's stamp, in slices, and its place among the tracked batches."""
        stream = self._streams.get(batch.tp) if self.enabled else None
        if stream is None or batch.base_sequence == NO_SEQUENCE or batch not in stream.tracked:
            return
        sequence = batch.base_sequence
        for part in parts:
            part.producer_id, part.producer_epoch = batch.producer_id, batch.producer_epoch
            part.base_sequence = sequence
            part.maybe_written = batch.maybe_written
            if batch.maybe_written:
                stream.uncertain_parts.add(id(part))
            sequence += part.record_count
        index = stream.tracked.index(batch)
        stream.tracked[index : index + 1] = list(parts)
        if stream.probe is batch:
            stream.probe = parts[0]

    def on_expired(
        self, batch: SequencedBatch, now_ms: int, *, on_wire: bool, last_error: BaseException | None
    ) -> BaseException:
        """The batch's delivery_timeout_ms is over: queued, or on the wire (then it may have been written, and
        `on_late_response` follows with its answer). Returns the error to fail it with."""
        stream = self._streams.get(batch.tp) if self.enabled else None
        if on_wire:
            batch.maybe_written = True
            if stream is not None and batch in stream.tracked:
                stream.stray_on_wire[id(batch)] = batch
        error = self.timeout_error(batch, now_ms, last_error)
        self._fail(batch, stream, None, error)
        return error

    def on_abandoned(self, batches: Iterable[SequencedBatch], error: BaseException) -> None:
        """Batches failed with `error` without another try (close, a fatal error, a fault while handling their
        answer): R8 for each; one still counted on the wire is counted off, its answer never to be read."""
        for batch in batches:
            stream = self._streams.get(batch.tp) if self.enabled else None
            if stream is not None:
                stream.on_wire.discard(id(batch))
                stream.stray_on_wire.pop(id(batch), None)
            self._fail(batch, stream, None, error)

    def timeout_error(self, batch: SequencedBatch, now_ms: int, last_error: BaseException | None) -> BaseException:
        """The DeliveryTimeoutError of a batch whose time ran out, saying whether it may have been written."""
        tp = f"{batch.tp[0]}-{batch.tp[1]}"
        if batch.maybe_written:
            what = "not acknowledged; they may have been written: their outcome is unknown"
        elif batch.attempts or batch.base_sequence != NO_SEQUENCE:
            what = "not written (every attempt was refused)"
        else:
            what = "not sent"
        cause = f"; last error: {last_error}" if last_error is not None else ""
        return DeliveryTimeoutError(
            f"{batch.record_count} record(s) for {tp} {what} within delivery_timeout_ms={self.delivery_timeout_ms}"
            f" ({now_ms - batch.created_ms} ms since the batch was created){cause}"
        )

    def _within_limits(self, batch: SequencedBatch, now_ms: int) -> bool:
        return batch.attempts < self.retries and not self._timed_out(batch, now_ms)

    def _timed_out(self, batch: SequencedBatch, now_ms: int) -> bool:
        return now_ms - batch.created_ms >= self.delivery_timeout_ms

    def _off_wire(self, batch: SequencedBatch) -> _Stream | None:
        stream = self._streams.get(batch.tp) if self.enabled else None
        if stream is None or batch.base_sequence == NO_SEQUENCE:
            return None
        stream.on_wire.discard(id(batch))
        if stream.stray_on_wire:
            stream.stray_on_wire.pop(id(batch), None)
        if not stream.on_wire and (stream.broken_at is not None or stream.unresolved_next is not None):
            self._attention[batch.tp] = None
        if batch.producer_id != stream.producer_id or batch.producer_epoch != stream.producer_epoch:
            return None  # a batch of an older stream, failed while on the wire: nothing of it is tracked
        return stream

    def _acked(self, batch: SequencedBatch, stream: _Stream | None, base_offset: int, now_ms: int) -> None:
        """Java: handleCompletedBatch, maybeUpdateLastAckedSequence."""
        if stream is None:
            return
        if now_ms > stream.last_ack_ms:
            stream.last_ack_ms = now_ms
        tracked = stream.tracked
        if tracked and tracked[0] is batch:  # the usual case: answers come in sequence order
            del tracked[0]
        elif batch in tracked:
            tracked.remove(batch)
        if stream.uncertain_parts:
            stream.uncertain_parts.discard(id(batch))
        if stream.probe is batch:
            stream.probe = None
        record_count = batch.record_count
        last = batch.base_sequence + record_count - 1  # _last_sequence, inline: once per acknowledged batch
        if last > stream.last_acked:
            stream.last_acked = last
            if base_offset >= 0:
                stream.last_acked_offset = base_offset + record_count - 1
        if stream.unresolved_next is not None and stream.last_acked + 1 >= stream.unresolved_next:
            stream.unresolved_next = None  # R8: a later batch is in: the hole was written
        if stream.broken_at is not None and stream.last_acked >= stream.broken_at:
            stream.broken_at = None  # the broker took a batch past the break after all: nothing was broken
        if stream.unresolved_next is not None or stream.broken_at is not None:
            # maybe_resolve has work here only while the partition is unresolved or broken (it drops a partition
            # that is neither at once): not marking the others spares it a look per acknowledged batch.
            self._attention[batch.tp] = None

    def _can_retry(
        self, batch: SequencedBatch, stream: _Stream | None, code: int, log_start_offset: int, error: BaseException
    ) -> bool:
        """Java: TransactionManager.canRetry (idempotent and transactional), with R7/R9 in place of its rewrites."""
        if stream is None or batch not in stream.tracked:
            return bool(getattr(error, "retriable", False))
        if code == ErrorCode.UNKNOWN_PRODUCER_ID:
            if log_start_offset == -1:
                return True  # the broker did not know it yet (Java: retry until it does)
            if self.transactional:
                if stream.last_acked_offset < log_start_offset:
                    self._break(stream, batch.tp, stream.tracked[0].base_sequence)  # retention: restart, R9
                    return True
                return False  # R10
            self._break(stream, batch.tp, stream.tracked[0].base_sequence)
            return True
        if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            if id(batch) in stream.uncertain_parts:
                return False  # R6: its whole may be in the log under other sequence bounds: fail, outcome unknown
            batch.maybe_written = False  # R7: a resend of a batch the broker has is recognised, not refused
            if batch.base_sequence <= stream.last_acked:
                return False  # R8: a later batch is in already; this one can no longer be written in order
            if stream.broken_at is not None:
                stream.broken_at = min(stream.broken_at, batch.base_sequence)
                return True
            if stream.unresolved_next is not None:
                if batch.base_sequence != stream.unresolved_next:
                    return True  # wait: an earlier batch decides (Java: retry without bumping)
            elif stream.tracked[0] is not batch:
                return True  # an earlier batch is still out: it decides
            if self.transactional:
                return False  # R10
            self._break(stream, batch.tp, batch.base_sequence)
            return True
        if code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH) and self._locally_bumped(stream):
            # R9: this broker refuses an epoch we bumped ourselves (Tansu does; Kafka accepts it): nothing of the
            # stream was written under it. Ask for a new producer id and renumber.
            log.info("the broker refused a locally bumped epoch (%s): asking for a new producer id", error)
            self.local_bumps_refused = True
            if (stream.producer_id, stream.producer_epoch) == (self.producer_id, self.producer_epoch):
                self.identity.needs_producer_id = True
            batch.maybe_written = False
            self._break(stream, batch.tp, stream.tracked[0].base_sequence)
            return True
        return bool(getattr(error, "retriable", False))

    def _locally_bumped(self, stream: _Stream) -> bool:
        """Whether the stream runs under an epoch we bumped ourselves and nothing of it was acknowledged yet."""
        return (
            not self.transactional
            and stream.last_acked == NO_SEQUENCE
            and stream.producer_id == self.producer_id
            and stream.producer_epoch > self._granted_epoch
        )

    def _fail(self, batch: SequencedBatch, stream: _Stream | None, code: int | None, error: BaseException) -> None:
        """The batch failed for good with `error` (`code` None: not an error answer): R8, R9, R10."""
        if stream is None or batch not in stream.tracked:
            return
        stream.tracked.remove(batch)
        stream.uncertain_parts.discard(id(batch))
        if stream.probe is batch:
            stream.probe = None
        self._attention[batch.tp] = None
        if batch.base_sequence <= stream.last_acked:
            return  # a later batch is in: the broker moved past this one, no hole to mend
        if self.transactional:
            # R10: the abort that follows restarts the stream under the coordinator's new epoch.
            stream.broken_at = batch.base_sequence if stream.broken_at is None else stream.broken_at
            self.identity.require_epoch_bump()
        elif stream.broken_at is not None:
            if not batch.maybe_written and batch.base_sequence < stream.broken_at:
                stream.broken_at = batch.base_sequence  # nothing after it can have been written either
        elif batch.maybe_written:
            end = _last_sequence(batch) + 1
            if stream.last_acked + 1 < end:
                stream.unresolved_next = max(stream.unresolved_next or 0, end)
        else:
            self._break(stream, batch.tp, batch.base_sequence)

    def _break(self, stream: _Stream, tp: TopicPartition, sequence: int) -> None:
        stream.broken_at = sequence if stream.broken_at is None else min(stream.broken_at, sequence)
        stream.unresolved_next = None
        self._attention[tp] = None

    def maybe_resolve(self) -> None:
        """Settle unresolved holes and restart broken streams whose turn it is (R8, R9). The sender calls this
        before each drain (Java: maybeResolveSequences, bumpIdempotentEpochAndResetIdIfNeeded)."""
        if not self._attention:  # the usual pass: nothing unresolved or broken (no copy of an empty one made)
            return
        for tp in list(self._attention):
            stream = self._streams.get(tp)
            if stream is None:
                self._attention.pop(tp, None)
                continue
            quiet = not stream.tracked and not stream.on_wire
            if stream.unresolved_next is not None and quiet:
                if stream.last_acked + 1 >= stream.unresolved_next:
                    stream.unresolved_next = None
                else:
                    log.info("%s-%d: batches failed whose fate is unknown; restarting its sequences", *tp)
                    self._break(stream, tp, stream.next_sequence)
            if (
                stream.broken_at is not None
                and not stream.on_wire
                and not stream.first_tracked_before(stream.broken_at)
            ):
                self._restart(stream, tp)
            if stream.unresolved_next is None and stream.broken_at is None:
                self._attention.pop(tp, None)

    def _restart(self, stream: _Stream, tp: TopicPartition) -> None:
        """R9: renumber the tracked batches (all from the break on) from 0 under a newer identity."""
        current = (self.producer_id, self.producer_epoch)
        if (stream.producer_id, stream.producer_epoch) == current and not self._bump():
            return
        if self.needs_producer_id:
            return
        stream.restart(self.producer_id, self.producer_epoch)
        stream.uncertain_parts.clear()  # all from the break on: proved unwritten
        for batch in stream.tracked:
            batch.producer_id, batch.producer_epoch = stream.producer_id, stream.producer_epoch
            batch.base_sequence = stream.next_sequence
            batch.maybe_written = False
            stream.next_sequence += batch.record_count
        # R5: the restarted stream's first batch is its probe. A broker that lost the producer's state (the
        # retention or expiry that broke the stream, often) takes any sequence: a new batch sent behind the first
        # could be written before it, and a retry of the first then refused as out of order.
        stream.probe = stream.tracked[0] if stream.tracked else None
        log.info(
            "%s-%d: sequences restart at 0 under producer id %d, epoch %d (%d batch(es) renumbered)",
            *tp,
            stream.producer_id,
            stream.producer_epoch,
            len(stream.tracked),
        )

    # -- introspection (tests, the sender's checks) -------------------------------------------------------------
    def tracked(self, tp: TopicPartition) -> list[SequencedBatch]:
        """The partition's tracked batches, in sequence order (a copy)."""
        stream = self._streams.get(tp)
        return list(stream.tracked) if stream is not None else []

    def is_waiting(self, tp: TopicPartition) -> bool:
        """Whether the partition's new batches wait for an unresolved hole or a broken stream (R5)."""
        stream = self._streams.get(tp)
        return stream is not None and (stream.unresolved_next is not None or stream.broken_at is not None)
