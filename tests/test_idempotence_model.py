"""The sequence and epoch rules (aioproducer.idempotence) against a model broker, exhaustively and without I/O.

Hypothesis drives the real accumulator and IdempotenceState through sends, drains, a broker processing requests
with or without injected errors, answers, lost answers, dropped connections, leader moves, MESSAGE_TOO_LARGE splits,
batches refused for some of their records (KIP-467), retention, time passing and delivery timeouts. The model broker
keeps Kafka's per-producer checks (ProducerAppendInfo, ProducerStateEntry: the last 5 batches recognised as resends,
epochs, sequences in order), or, in legacy mode, those of Tansu and older brokers (DUPLICATE_SEQUENCE_NUMBER,
UNKNOWN_PRODUCER_ID, no client-bumped epoch). After every step: no record twice in the log, the log in send order,
no sequence reused for other data, every delivered record in the log, no record reported "not written" in it, no
invalid record in it. At the end, with the faults gone, every batch settles without any timeout passing.

In transactional mode each transaction ends as under transaction version 2 (KIP-890): once it is quiet (commit) or
its queued batches are dropped (abort), the coordinator writes a marker with a bumped epoch to every partition the
producer id wrote to (the broker then takes only sequence 0 first from that epoch, as Kafka's ProducerStateEntry
after a marker does) and hands the producer the new epoch (EndTxn v5). Batches of a partition whose broker holds
the producer go out without a probe then (idempotence.R5): the log staying in send order with several batches per
partition in flight right after each new epoch is what shows that safe. A batch is drained only when Hypothesis picks
that rule, any number of steps after it was sent: holding a transaction's first batches while the coordinator writes
the last one's markers (transactions.completion) is one of the orders explored, so that wait needs no rule of its own
and cannot break these rules.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from aioproducer.buffer.accumulator import ProducerBatch, RecordAccumulator
from aioproducer.deliveries.delivery import BatchOutcome
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import TransportError
from aioproducer.idempotence.sequences import IDLE_PROBE_MS, Action, IdempotenceState, wire_sequence
from aioproducer.records import read_batches
from aioproducer.records.compression import CompressionType

PARTITIONS = [("t", 0), ("t", 1)]
SPAN = 2**31
NOT_LEADER_OR_FOLLOWER = ErrorCode.NOT_LEADER_OR_FOLLOWER
# Errors a broker answers without writing, and errors it answers after writing (the batch is in the log).
BEFORE_WRITE = [NOT_LEADER_OR_FOLLOWER, 19, 7, 13, 2]  # NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ..., CORRUPT_MESSAGE
AFTER_WRITE = [7, 20]  # REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND
FINAL = [87, 10]  # INVALID_RECORD; MESSAGE_TOO_LARGE (a single record cannot be split)


@dataclass
class _Entry:
    """A producer's state in one partition (Kafka's ProducerStateEntry)."""

    epoch: int
    last_seq: int = -1
    cache: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=5))  # first, last, offset


class ModelBroker:
    """A partition leader's log and producer-state checks, shared by every leader (replicated state)."""

    def __init__(self, *, legacy: bool, max_records: int | None, invalid_every: int | None = None) -> None:
        self.legacy = legacy
        self.max_records = max_records
        # Records whose value is a multiple of this are invalid (as a keyless record to a compacted topic is): a
        # batch holding one is refused whole with INVALID_RECORD naming them (KIP-467), before any sequence check.
        self.invalid_every = invalid_every
        self.record_errors: list[tuple[int, str | None]] = []  # of the last refusal
        self.logs: dict[tuple[str, int], list[int]] = {tp: [] for tp in PARTITIONS}
        self.log_start: dict[tuple[str, int], int] = dict.fromkeys(PARTITIONS, 0)
        self.entries: dict[tuple[tuple[str, int], int], _Entry] = {}
        self.granted: dict[int, int] = {}
        self._next_pid = 1000

    def init_producer_id(self) -> tuple[int, int]:
        self._next_pid += 1
        self.granted[self._next_pid] = 0
        return self._next_pid, 0

    def end_transaction(self, pid: int, epoch: int) -> tuple[int, int]:
        """EndTxn under transaction version 2: a marker with the bumped epoch in every partition holding the
        producer (its entry moves to the epoch, with no sequence yet), and the epoch for the next transaction."""
        new_epoch = epoch + 1
        for (_tp, entry_pid), entry in self.entries.items():
            if entry_pid == pid:
                entry.epoch, entry.last_seq = new_epoch, -1
                entry.cache.clear()
        return pid, new_epoch

    def forget(self, tp: tuple[str, int]) -> None:
        """Retention removed the partition's old segments, and with them every producer's state there."""
        for key in [key for key in self.entries if key[0] == tp]:
            del self.entries[key]
        self.log_start[tp] = len(self.logs[tp])

    def append(self, tp: tuple[str, int], pid: int, epoch: int, base: int, values: list[int]) -> tuple[int, int, int]:
        """(error code, base offset, log start offset); the values are in the log when the code is 0."""
        lso = self.log_start[tp]
        if self.max_records is not None and len(values) > self.max_records:
            return 10, -1, lso
        if self.invalid_every is not None:
            named = [(i, f"record {v} is invalid") for i, v in enumerate(values) if v % self.invalid_every == 0]
            if named:
                self.record_errors = named
                return 87, -1, lso
        last = (base + len(values) - 1) % SPAN
        if self.legacy and epoch > self.granted.get(pid, -1):
            return 90, -1, lso  # Tansu: PRODUCER_FENCED for an epoch it did not give out
        entry = self.entries.get((tp, pid))
        if entry is not None:
            if epoch == entry.epoch:
                for first, cached_last, offset in entry.cache:
                    if (first, cached_last) == (base, last):
                        return (46, -1, lso) if self.legacy else (0, offset, lso)
                if self.legacy and base <= entry.last_seq and last <= entry.last_seq:
                    return 46, -1, lso
            if epoch < entry.epoch:
                return 47, -1, lso
            if epoch != entry.epoch:
                if base != 0:
                    return 45, -1, lso
            elif not (base == entry.last_seq + 1 or (base == 0 and entry.last_seq == SPAN - 1)):
                return 45, -1, lso
        elif self.legacy and base != 0:
            return 59, -1, lso
        if entry is None or entry.epoch != epoch:
            entry = self.entries[(tp, pid)] = _Entry(epoch)
        offset = len(self.logs[tp])
        self.logs[tp].extend(values)
        entry.last_seq = last
        entry.cache.append((base, last, offset))
        return 0, offset, lso


LOST = None  # a request whose answer never comes


@dataclass
class Request:
    batch: ProducerBatch
    conn: int
    values: list[int]
    stamp: tuple[int, int, int]
    processed: bool = False
    result: tuple[int, int, int] | None = None
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)


class SequenceMachine(RuleBasedStateMachine):
    @initialize(
        legacy=st.booleans(),
        max_records=st.sampled_from([None, None, 1, 2, 3]),
        batch_records=st.integers(1, 4),
        near_wrap=st.booleans(),
        delivery_timeout_ms=st.sampled_from([250, 1_000, 60_000]),
        retries=st.sampled_from([1, 3, 2**31 - 1]),
        invalid_every=st.sampled_from([None, None, 5, 11]),
        transactional=st.booleans(),
    )
    def setup(
        self,
        legacy: bool,
        max_records: int | None,
        batch_records: int,
        near_wrap: bool,
        delivery_timeout_ms: int,
        retries: int,
        invalid_every: int | None,
        transactional: bool,
    ) -> None:
        self.acc = RecordAccumulator(
            batch_size=1 << 30,
            linger_ms=0,
            buffer_memory=1 << 40,
            compression=CompressionType.NONE,
            compression_level=None,
            new_outcome=lambda tp: BatchOutcome(tp[0], tp[1], None),
        )
        self.delivery_timeout_ms = delivery_timeout_ms
        self.transactional = transactional
        self.doomed = False  # a batch of the current transaction failed for good
        self.idem = IdempotenceState(
            True,
            retries=retries,
            delivery_timeout_ms=delivery_timeout_ms,
            transactional_id="tx" if transactional else None,
        )
        # Transactions need a broker of transaction version 2 (Kafka 4.x): never the legacy checks.
        self.broker = ModelBroker(
            legacy=legacy and not transactional, max_records=max_records, invalid_every=invalid_every
        )
        self.batch_records = batch_records
        self.near_wrap = near_wrap
        self.now = 0
        self.conns: list[deque[Request]] = [deque(), deque()]
        self.leader = 0
        self.next_id = 0
        self.delivered: set[int] = set()
        self.not_written: set[int] = set()
        self.unknown: set[int] = set()
        self.sent: dict[tuple[str, int], list[int]] = {tp: [] for tp in PARTITIONS}
        self.stamps: dict[tuple[tuple[str, int], int, int, int], int] = {}
        self.last_ack_ms: dict[tuple[str, int], int] = dict.fromkeys(PARTITIONS, 0)
        self.init_producer_id()

    # -- the producer ---------------------------------------------------------------------------------------------
    @rule(partition=st.sampled_from(PARTITIONS), count=st.integers(1, 5))
    def send(self, partition: tuple[str, int], count: int) -> None:
        for _ in range(count):
            record_id = self.next_id
            self.next_id += 1
            value = b"%d" % record_id
            batch, _, _ = self.acc.append(partition, 0, None, value, (), len(value) + 21, lambda: self.now)
            self.sent[partition].append(record_id)
            if batch.record_count >= self.batch_records:
                batch.seal()

    @precondition(lambda self: self.idem.needs_producer_id)
    @rule()
    def init_producer_id(self) -> None:
        pid, epoch = self.broker.init_producer_id()
        self.idem.set_producer_id(pid, epoch)
        if self.near_wrap:  # let sequences cross 2^31 soon (on the wire they wrap to 0)
            self.near_wrap = False
            self.idem._stream(PARTITIONS[0]).next_sequence = SPAN - 3

    @precondition(lambda self: self.transactional and not any(self.conns) and not self.acc.has_incomplete())
    @rule()
    def commit(self) -> None:
        """Commit: every batch of the transaction is settled, then EndTxn gives the next epoch."""
        self._end_transaction()

    @precondition(lambda self: self.transactional and not any(self.conns))
    @rule()
    def abort(self) -> None:
        """Abort: batches never sent, then retries waiting, fail (Java's abortUndrainedBatches); nothing is on the
        wire (the abort waits for it); then EndTxn gives the next epoch."""
        for batch in self.acc.take_unsent():
            self._fail(batch, TransportError("aborted"))
        queued = self.acc.take_all_queued()
        self.idem.on_abandoned(queued, TransportError("aborted"))
        for batch in queued:
            self._fail(batch, TransportError("aborted"))
        self._end_transaction()

    def _end_transaction(self) -> None:
        pid, epoch = self.broker.end_transaction(self.idem.producer_id, self.idem.producer_epoch)
        self.idem.set_producer_id(pid, epoch)
        self.doomed = False
        event("transaction ended")

    @rule(partition=st.sampled_from(PARTITIONS))
    def drain(self, partition: tuple[str, int]) -> None:
        self.idem.maybe_resolve()
        for batch in self.acc.drain([partition], 1 << 40, self.idem, self.now):
            encoded = batch.close().encode(
                producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch,
                base_sequence=wire_sequence(batch.base_sequence),
            )
            (decoded,) = read_batches(encoded)
            values = [int(r.value or b"") for r in decoded.records]
            stamp = (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence)
            for i, value in enumerate(values):  # no sequence is ever reused for other data
                key = (partition, stamp[0], stamp[1], (stamp[2] + i) % SPAN)
                known = self.stamps.setdefault(key, value)
                assert known == value, f"sequence {key} reused: {value} after {known}"
            self.conns[self.leader].append(Request(batch, self.leader, values, stamp))
            if self.transactional and stamp[2] > 0:
                first = [r for c in self.conns for r in c if r.stamp[:2] == stamp[:2] and r.batch.tp == partition]
                if any(r.stamp[2] == 0 for r in first[:-1]):
                    event("batches in flight behind a new epoch's first")

    # -- the broker -----------------------------------------------------------------------------------------------
    def _unprocessed(self, conn: int) -> Request | None:
        return next((r for r in self.conns[conn] if not r.processed), None)

    @rule(
        partition=st.sampled_from(PARTITIONS),
        count=st.integers(1, 12),
        faults=st.lists(st.sampled_from(["ok", "ok", "before", "after", "lose", "drop", "final"]), max_size=6),
        code=st.integers(0, 10),
    )
    def burst(self, partition: tuple[str, int], count: int, faults: list[str], code: int) -> None:
        """A round as the sender and the broker run it: records come, every partition drains what it may (several
        batches in flight), and the leader takes the requests with these faults, then answers them in order."""
        self.send(partition, count)
        for _ in range(3):
            for tp in PARTITIONS:
                self.drain(tp)
        for fault in faults:
            if any(not r.processed for r in self.conns[self.leader]):
                self.process(self.leader, fault, code)
        while self.conns[self.leader] and self.conns[self.leader][0].processed:
            self.answer(self.leader)

    @precondition(lambda self: any(not r.processed for c in self.conns for r in c))
    @rule(
        conn=st.integers(0, 1),
        fault=st.sampled_from(["ok"] * 6 + ["before", "after", "lose", "drop", "final"]),
        code=st.integers(0, 10),
    )
    def process(self, conn: int, fault: str, code: int) -> None:
        request = self._unprocessed(conn) or self._unprocessed(1 - conn)
        assert request is not None
        request.processed = True
        tp = request.batch.tp
        if request.conn != self.leader:
            request.result = (NOT_LEADER_OR_FOLLOWER, -1, self.broker.log_start[tp])
            return
        if fault in ("before", "drop", "final"):
            table = BEFORE_WRITE if fault == "before" else FINAL
            request.result = LOST if fault == "drop" else (table[code % len(table)], -1, self.broker.log_start[tp])
            return
        result = self.broker.append(tp, *request.stamp, request.values)
        if result[0] == 87:
            request.record_errors = self.broker.record_errors
        if result[0] == 59 and code % 3 == 0:
            result = (59, -1, -1)  # the broker did not know the log start offset yet (Java retries as is)
        if fault == "after" and result[0] == 0:
            result = (AFTER_WRITE[code % len(AFTER_WRITE)], -1, result[2])
        request.result = LOST if fault == "lose" else result

    @precondition(lambda self: any(c and c[0].processed for c in self.conns))
    @rule(conn=st.integers(0, 1))
    def answer(self, conn: int) -> None:
        if not (self.conns[conn] and self.conns[conn][0].processed):
            conn = 1 - conn
        request = self.conns[conn].popleft()
        self._deliver(request, request.result)

    @rule(conn=st.integers(0, 1))
    def disconnect(self, conn: int) -> None:
        """The connection breaks: requests not processed are lost, answers not read are lost."""
        requests, self.conns[conn] = list(self.conns[conn]), deque()
        for request in requests:
            self._deliver(request, LOST)

    @rule()
    def move_leader(self) -> None:
        self.leader = 1 - self.leader

    @rule(partition=st.sampled_from(PARTITIONS))
    def retention(self, partition: tuple[str, int]) -> None:
        """Old segments deleted: the broker forgets the producer (only when nothing of the partition is pending, and
        not within IDLE_PROBE_MS of its last acknowledgement: the producer's assumption, idempotence.R5)."""
        if self.idem.tracked(partition) or any(r.batch.tp == partition for c in self.conns for r in c):
            return
        if self.now - self.last_ack_ms[partition] < IDLE_PROBE_MS:
            return
        self.broker.forget(partition)

    @rule(ms=st.integers(1, 300))
    def tick(self, ms: int) -> None:
        self.now += ms
        for batch in self.acc.expired(self.now, self.delivery_timeout_ms):
            self._fail(batch, self.idem.on_expired(batch, self.now, on_wire=False, last_error=None))
        for request in [r for c in self.conns for r in c]:
            batch = request.batch
            if not batch.outcome.done and self.now - batch.created_ms >= self.delivery_timeout_ms:
                self._fail(batch, self.idem.on_expired(batch, self.now, on_wire=True, last_error=None))

    @rule()
    def abandon_queued(self) -> None:
        """What close (after its timeout) and a fatal error do: every queued batch fails without another try."""
        batches = self.acc.take_all_queued()
        self.idem.on_abandoned(batches, TransportError("closed"))
        for batch in batches:
            self._fail(batch, TransportError("closed"))

    # -- what the sender does with a decision -----------------------------------------------------------------------
    def _deliver(self, request: Request, result: tuple[int, int, int] | None) -> None:
        batch = request.batch
        if batch.outcome.done:  # failed while on the wire
            event("late answer")
            code, offset = (None, -1) if result is None else result[:2]
            self.idem.on_late_response(batch, code, offset, self.now)
            return
        surely_unwritten = not batch.maybe_written  # before this answer
        if result is None:
            decision = self.idem.on_no_response(batch, TransportError("lost"), self.now)
        else:
            decision = self.idem.on_response(
                batch,
                result[0],
                self.now,
                base_offset=result[1],
                log_start_offset=result[2],
                record_errors=request.record_errors,
            )
        event(f"answer {'lost' if result is None else result[0]} -> {decision.action.value}")
        if self.transactional and result is not None and result[0] == 45 and surely_unwritten and not self.doomed:
            # A broker that holds the producer refuses an overtaking batch; the batch it overtook goes first, then
            # the overtaking one again (R7). Only a batch overtaken on a broker with no state for the producer could
            # be refused for good (R10: the transaction would abort): the probe (R5) keeps that from happening. (A
            # part of a batch that may have been written whole is another matter, R6; and once a batch of the
            # transaction failed, it is to be aborted anyway.)
            assert decision.action is not Action.FAIL, "OUT_OF_ORDER_SEQUENCE_NUMBER failed a transaction's batch"
        for tp in PARTITIONS:
            if self.idem.is_waiting(tp):
                event("a partition unresolved or broken")
        if self.idem.producer_epoch > 0:
            event("epoch bumped")
        if self.idem.local_bumps_refused:
            event("local epoch bump refused")
        if decision.action is Action.DONE:
            log = self.broker.logs[batch.tp]
            missing = [v for v in request.values if v not in log]
            assert not missing, f"records {missing} reported delivered but not in the log"
            self.delivered.update(request.values)
            self.last_ack_ms[batch.tp] = self.now
            batch.outcome.succeed(-1, -1)
            self.acc.release(batch)
        elif decision.action is Action.RETRY:
            self.acc.reenqueue(batch, self.now)
        elif decision.action is Action.SPLIT:
            self.acc.split(batch, self.idem)
        elif decision.action is Action.REJECT_RECORDS:
            # What the sender does: each named record a part of its own that fails, the others sent again.
            named = decision.record_errors or {}
            parts = self.acc.split(batch, self.idem, at=sorted({*named, *(i + 1 for i in named)}))
            first = 0
            for part in parts:
                error = named.get(first) if part.record_count == 1 else None
                first += part.record_count
                if error is not None:
                    self.acc.unqueue(part)
                    self.idem.on_abandoned([part], error)
                    self._fail(part, error)
        else:
            self._fail(batch, decision.error)

    def _fail(self, batch: ProducerBatch, error: Any) -> None:
        self.doomed = True  # a transaction must now be aborted (R10)
        values = [int(r.value or b"") for b in read_batches(batch.close().encode()) for r in b.records]
        if batch.maybe_written:
            self.unknown.update(values)
        else:
            self.not_written.update(values)
        batch.outcome.fail(error)
        self.acc.release(batch)

    # -- what must hold -------------------------------------------------------------------------------------------
    @invariant()
    def the_log_is_clean(self) -> None:
        if not hasattr(self, "broker"):
            return
        for tp, log in self.broker.logs.items():
            assert len(log) == len(set(log)), f"{tp}: a record written twice: {log}"
            assert log == sorted(log), f"{tp}: the log is out of send order: {log}"
            written = set(log)
            assert not written & self.not_written, f"{tp}: records reported not written are in the log"
            if self.broker.invalid_every is not None:
                assert all(v % self.broker.invalid_every for v in log), f"{tp}: an invalid record in the log"
            assert self.delivered.isdisjoint(self.not_written | self.unknown)

    @invariant()
    def batches_on_the_wire_are_counted_per_partition(self) -> None:
        # A count off by one would hold a partition's full batches back for linger_ms each (or for good, if high).
        if not hasattr(self, "broker"):
            return
        on_the_wire: dict[tuple[str, int], int] = {}
        for batch in self.acc.incomplete_batches():
            if batch.in_flight:
                on_the_wire[batch.tp] = on_the_wire.get(batch.tp, 0) + 1
        assert {tp: self.acc.in_flight_count(tp) for tp in PARTITIONS if self.acc.in_flight_count(tp)} == on_the_wire

    def teardown(self) -> None:
        if not hasattr(self, "broker"):
            return
        # The faults stop: the leader answers everything, without time passing.
        for _ in range(10_000):
            progressed = False
            self.idem.maybe_resolve()  # may find that a new producer id is needed
            if self.idem.needs_producer_id:
                self.init_producer_id()
                progressed = True
            if self.transactional and self.idem.identity.epoch_bump_required and not any(self.conns):
                self.abort()  # what the caller does with the transaction's abortable error
                progressed = True
            for tp in PARTITIONS:
                before = sum(len(c) for c in self.conns)
                self.drain(tp)
                progressed |= sum(len(c) for c in self.conns) != before
            for conn in (0, 1):
                while self.conns[conn]:
                    request = self.conns[conn][0]
                    if not request.processed:
                        self.process(conn, "ok", 1)
                    self.answer(conn)
                    progressed = True
            if not progressed and self.transactional and self.acc.has_incomplete():
                # Batches waiting for a new epoch: the caller aborts the failed transaction (commit would otherwise
                # wait for them), which is fine only when the transaction did fail.
                assert self.doomed, f"a transaction's batches wait for nothing: {self.acc.incomplete_batches()}"
                self.abort()
                progressed = True
            if not progressed:
                break
        self.the_log_is_clean()
        stuck = self.acc.incomplete_batches()
        assert not stuck, f"batches never settled: {stuck}; tracked {[self.idem.tracked(tp) for tp in PARTITIONS]}"
        every = {v for values in self.sent.values() for v in values}
        assert every == self.delivered | self.not_written | self.unknown, "a record has no outcome"
        for tp, log in self.broker.logs.items():
            assert set(log) <= set(self.sent[tp])


DEEP = bool(os.environ.get("AIOPRODUCER_DEEP_MODEL"))
TestSequenceMachine = SequenceMachine.TestCase
TestSequenceMachine.settings = settings(
    max_examples=int(os.environ.get("AIOPRODUCER_MODEL_EXAMPLES", 3000 if DEEP else 200)),
    stateful_step_count=80 if DEEP else 50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
