"""The accumulator's pure decisions: batching, readiness from `now_ms`, draining, retries in sequence order."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.deliveries.delivery import BatchOutcome, resolve
from aioproducer.idempotence.sequences import IdempotenceState
from aioproducer.records import read_batches
from aioproducer.records.compression import CompressionType
from tests.twins import TWINS, use_twin

TP = ("t", 0)


def make(batch_size: int = 1000, linger_ms: int = 5, buffer_memory: int = 10_000, **extra: Any) -> RecordAccumulator:
    return RecordAccumulator(
        batch_size=batch_size,
        linger_ms=linger_ms,
        buffer_memory=buffer_memory,
        compression=CompressionType.NONE,
        compression_level=None,
        new_outcome=lambda tp: BatchOutcome(tp[0], tp[1], None),
        **extra,
    )


def append(acc: RecordAccumulator, value: bytes, now: int, tp: tuple[str, int] = TP) -> bool:
    _, _, wake = acc.append(tp, 1_000 + now, None, value, (), len(value) + 21, lambda: now)
    return wake


def test_first_record_creates_a_batch_and_wakes_the_sender() -> None:
    acc = make()
    assert append(acc, b"a", 0) is True
    assert append(acc, b"b", 1) is False
    assert [b.record_count for b in acc.queues[TP]] == [2]
    assert acc.used_bytes == 2 * 22


def test_head_batch_is_ready_after_linger_and_not_before() -> None:
    acc = make(linger_ms=5)
    append(acc, b"a", 100)
    check = acc.ready(104, lambda tp: 7)
    assert check.ready == {} and check.next_check_ms == 1
    assert acc.ready(105, lambda tp: 7).ready == {7: [TP]}


def test_full_batch_is_ready_at_once() -> None:
    acc = make(batch_size=200, linger_ms=10_000)
    woke = [append(acc, b"x" * 50, 0) for i in range(6)]
    assert woke.count(True) >= 2  # a batch was created, then filled
    assert acc.ready(0, lambda tp: 1).ready == {1: [TP]}


def test_unknown_leader_is_reported_and_not_ready() -> None:
    acc = make(linger_ms=0)
    append(acc, b"a", 0)
    check = acc.ready(10, lambda tp: -1)
    assert check.ready == {} and check.unknown_leader_topics == {"t"}


def test_flush_makes_lingering_batches_ready() -> None:
    acc = make(linger_ms=10_000)
    append(acc, b"a", 0)
    assert acc.ready(1, lambda tp: 1).ready == {}
    acc.begin_flush()
    assert acc.ready(1, lambda tp: 1).ready == {1: [TP]}


def test_drain_takes_one_batch_per_partition_and_assigns_sequences() -> None:
    acc = make(batch_size=100, linger_ms=0)
    for _ in range(10):
        append(acc, b"y" * 40, 0)
    append(acc, b"z", 0, tp=("t", 1))
    idem = IdempotenceState(True)
    idem.set_producer_id(5, 0)
    drained = acc.drain([TP, ("t", 1)], 1_000_000, idem)
    assert [b.tp for b in drained] == [TP, ("t", 1)]
    first = drained[0]
    assert first.base_sequence == 0
    batch = read_batches(first.close().encode(producer_id=5, producer_epoch=0, base_sequence=first.base_sequence))[0]
    assert [r.value for r in batch.records] == [b"y" * 40] * first.record_count
    # One batch at a time until a partition's first is acknowledged (idempotence.R5).
    assert acc.drain([TP], 1_000_000, idem) == []
    idem.on_response(first, 0, 0)
    second = acc.drain([TP], 1_000_000, idem)[0]
    assert second.base_sequence == first.record_count


def test_drain_respects_max_request_size_but_always_takes_one() -> None:
    acc = make(batch_size=10_000, linger_ms=0)
    append(acc, b"a" * 600, 0, tp=("t", 0))
    append(acc, b"b" * 600, 0, tp=("t", 1))
    drained = acc.drain([("t", 0), ("t", 1)], 700, IdempotenceState(False))
    assert len(drained) == 1


def test_retry_goes_back_ahead_of_newer_batches_in_sequence_order() -> None:
    acc = make(batch_size=60, linger_ms=0)
    for _ in range(4):
        append(acc, b"q" * 50, 0)
    idem = IdempotenceState(True)
    idem.set_producer_id(1, 0)
    warm = acc.drain([TP], 10**6, idem)[0]
    idem.on_response(warm, 0, 0)
    b0 = acc.drain([TP], 10**6, idem)[0]
    b1 = acc.drain([TP], 10**6, idem)[0]
    acc.reenqueue(b1, retry_at_ms=50)
    acc.reenqueue(b0, retry_at_ms=50)
    assert [b.base_sequence for b in acc.queues[TP]][:2] == [1, 2]
    # Backing off: not ready until the retry time.
    assert acc.ready(49, lambda tp: 1).ready == {}
    assert acc.ready(50, lambda tp: 1).ready == {1: [TP]}
    # b1 may not go before b0: only the first in-flight sequence can be resent.
    assert acc.drain([TP], 10**6, idem)[0] is b0


def test_without_a_sequence_retries_go_back_oldest_first_and_expire_on_time() -> None:
    """A non-idempotent producer's batch once expired up to the gap between two batches after its delivery timeout:
    retries went to the very front of the queue, so two batches failing in the order they were sent came back
    younger first, and expiry (which reads queue heads) held the older one until the younger one's deadline."""
    acc = make(batch_size=60, linger_ms=0)
    append(acc, b"q" * 50, 0)
    append(acc, b"q" * 50, 1_000)  # a second batch, created a second later
    append(acc, b"q" * 50, 2_000)  # never sent
    idem = IdempotenceState(False)
    older = acc.drain([TP], 10**6, idem)[0]
    younger = acc.drain([TP], 10**6, idem)[0]
    acc.reenqueue(older, retry_at_ms=9_000)  # answers come in send order
    acc.reenqueue(younger, retry_at_ms=9_000)
    assert list(acc.queues[TP])[:2] == [older, younger]
    assert acc.next_expiry_ms(3_000) == 3_000
    assert acc.expired(3_000, 3_000) == [older]
    # Answers in reverse order end the same way.
    acc = make(batch_size=60, linger_ms=0)
    append(acc, b"q" * 50, 0)
    append(acc, b"q" * 50, 1_000)
    older, younger = acc.drain([TP], 10**6, idem)[0], acc.drain([TP], 10**6, idem)[0]
    acc.reenqueue(younger, retry_at_ms=9_000)
    acc.reenqueue(older, retry_at_ms=9_000)
    assert list(acc.queues[TP]) == [older, younger]


def test_a_split_batch_without_a_sequence_keeps_its_parts_in_order_ahead_of_newer_batches() -> None:
    acc = make(batch_size=10_000, linger_ms=0)
    for value in (b"a", b"b", b"c", b"d"):
        append(acc, value * 10, 0)
    idem = IdempotenceState(False)
    batch = acc.drain([TP], 10**6, idem)[0]
    append(acc, b"newer", 5)
    batch.attempts = 1  # it was retried before the broker refused it as too large
    parts = acc.split(batch, idem)
    queued = list(acc.queues[TP])
    assert queued[:2] == parts and queued[2].created_ms == 5
    assert [r.value for part in parts for b in read_batches(part.close().encode()) for r in b.records] == [
        b"a" * 10,
        b"b" * 10,
        b"c" * 10,
        b"d" * 10,
    ]


def test_release_returns_memory_and_runs_callbacks() -> None:
    acc = make(buffer_memory=100)
    append(acc, b"a" * 40, 0)
    assert not acc.has_room(60)
    batch = acc.queues[TP][0]
    seen: list[str] = []
    batch.done_callbacks.append(lambda: seen.append("done"))
    acc.release(batch)
    assert acc.used_bytes == 0 and acc.has_room(100) and seen == ["done"]
    acc.release(batch)  # twice is harmless
    assert seen == ["done"]


def test_expired_removes_only_batches_past_the_delivery_timeout() -> None:
    acc = make(linger_ms=0)
    append(acc, b"a", 0, tp=("t", 0))
    append(acc, b"b", 50, tp=("t", 1))
    expired = acc.expired(100, delivery_timeout_ms=100)
    assert [b.tp for b in expired] == [("t", 0)]
    assert acc.has_queued()


def test_split_halves_a_batch_keeping_records_outcomes_and_memory() -> None:
    acc = make(batch_size=10_000, linger_ms=0)
    indexes = [acc.append(TP, 1000 + i, b"k%d" % i, b"v%d" % i, (("h", b"x"),), 30, lambda: 0)[1] for i in range(5)]
    assert indexes == [0, 1, 2, 3, 4]
    batch = acc.drain([TP], 10**6, IdempotenceState(False))[0]
    acc.split(batch, IdempotenceState(False))
    halves = list(acc.queues[TP])
    assert [h.record_count for h in halves] == [2, 3]
    # Each record's handle now reads the outcome of the half that carries it, at its index there.
    moved = [resolve(batch.outcome, i) for i in range(5)]
    assert moved == [(halves[0].outcome, 0), (halves[0].outcome, 1)] + [(halves[1].outcome, i) for i in range(3)]
    values = [r.value for h in halves for b in read_batches(h.close().encode()) for r in b.records]
    assert values == [b"v%d" % i for i in range(5)]
    assert sum(h.reserved_bytes for h in halves) == 150 and acc.used_bytes == 150
    # A split is not a retry: the halves go out at once, without a backoff (Java's splitAndReenqueue).
    assert acc.ready(0, lambda tp: 1).ready == {1: [TP]} and not acc.is_incomplete(batch)


def test_split_at_given_records_forwards_every_handle_through_a_chain_of_parts() -> None:
    """KIP-467: a batch refused for records 1 and 4 is cut into five parts (around each named record); each
    record's handle resolves to its part, sequences take consecutive slices, and the whole is done when every part
    is."""
    acc = make(batch_size=10_000, linger_ms=0)
    for i in range(7):
        acc.append(TP, 1000 + i, None, b"v%d" % i, (), 30, lambda: 0)
    idem = IdempotenceState(True)
    idem.set_producer_id(5, 0)
    batch = acc.drain([TP], 10**6, idem)[0]
    done: list[bool] = []
    batch.done_callbacks.append(lambda: done.append(True))
    parts = acc.split(batch, idem, at=[1, 2, 4, 5])
    assert [p.record_count for p in parts] == [1, 1, 2, 1, 2]
    assert [p.base_sequence for p in parts] == [0, 1, 2, 4, 5] and list(acc.queues[TP]) == parts
    where = [resolve(batch.outcome, i) for i in range(7)]
    expected = [(0, 0), (1, 0), (2, 0), (2, 1), (3, 0), (4, 0), (4, 1)]
    assert where == [(parts[p].outcome, i) for p, i in expected]
    values = [r.value for p in parts for b in read_batches(p.close().encode()) for r in b.records]
    assert values == [b"v%d" % i for i in range(7)]
    assert sum(p.reserved_bytes for p in parts) == 210 and acc.used_bytes == 210
    for part in parts[:-1]:
        acc.release(part)
    assert not done
    acc.unqueue(parts[-1])
    assert parts[-1] not in acc.queues[TP] and parts[-1].sealed
    acc.release(parts[-1])
    assert done == [True] and acc.used_bytes == 0


def grown(batch_size: int = 1000, batch_max_size: int = 4000) -> RecordAccumulator:
    return RecordAccumulator(
        batch_size=batch_size,
        linger_ms=10_000,
        buffer_memory=1 << 20,
        compression=CompressionType.NONE,
        compression_level=None,
        new_outcome=lambda tp: BatchOutcome(tp[0], tp[1], None),
        batch_max_size=batch_max_size,
    )


def test_a_waiting_batch_is_ready_at_batch_size_and_grows_to_batch_max_size() -> None:
    acc = grown()
    woke = [append(acc, b"x" * 100, 0) for _ in range(50)]
    sizes = [batch.size_in_bytes for batch in acc.queues[TP]]
    # Ready (and the sender woken) once batch_size is reached; the batch took records until batch_max_size.
    assert woke[:2] == [True, False] and woke.count(True) == 4  # two batches: each created, then filled
    assert acc.ready(0, lambda tp: 1).ready == {1: [TP]}
    assert len(sizes) == 2 and 3500 < sizes[0] <= 4000 and sizes[1] > 1000


def test_a_drained_batch_takes_no_more_records_however_small() -> None:
    acc = grown()
    for _ in range(12):
        append(acc, b"x" * 100, 0)
    drained = acc.drain([TP], 10**6, IdempotenceState(False))
    assert len(drained) == 1 and drained[0].record_count == 12
    append(acc, b"y", 0)
    assert drained[0].record_count == 12 and [b.record_count for b in acc.queues[TP]] == [1]


def test_batches_do_not_grow_when_batch_max_size_is_batch_size() -> None:
    acc = grown(batch_max_size=1000)
    for _ in range(40):
        append(acc, b"x" * 100, 0)
    assert max(batch.size_in_bytes for batch in acc.queues[TP]) <= 1000


def test_after_a_split_the_topic_s_batches_stay_at_batch_size() -> None:
    # A topic whose max.message.bytes refuses grown batches would otherwise split every batch it is sent.
    acc = grown()
    for _ in range(35):
        append(acc, b"x" * 100, 0)
    big = acc.drain([TP], 10**6, IdempotenceState(False))[0]
    acc.split(big, IdempotenceState(False))
    acc.queues[TP].clear()
    for _ in range(35):
        append(acc, b"x" * 100, 0)
    assert max(batch.size_in_bytes for batch in acc.queues[TP]) <= 1000
    other = ("u", 0)
    for _ in range(35):
        append(acc, b"x" * 100, 0, tp=other)
    assert max(batch.size_in_bytes for batch in acc.queues[other]) > 1000  # other topics still grow


def test_ready_reports_each_topic_s_load_for_adaptive_partitioning() -> None:
    """KIP-794 (Java's RecordAccumulator.partitionReady): per topic, what waits in each partition whose leader is
    known, in batch_size units; a partition with batches waiting for an unavailable node is left out, one with an
    empty queue never is."""
    reports: list[tuple[str, list[int], list[int], int]] = []
    acc = make(
        batch_size=100,
        buffer_memory=1 << 20,
        batch_max_size=1000,
        load_sink=lambda topic, sizes, ids, queues: reports.append((topic, sizes, ids, queues)),
    )
    leaders = {("t", 0): 1, ("t", 1): 2, ("t", 2): 3, ("t", 3): -1, ("u", 0): 1}
    for tp, records in ((("t", 0), 1), (("t", 1), 5), (("t", 2), 2), (("t", 3), 1), (("u", 0), 1)):
        for _ in range(records):
            acc.append(tp, 1_000, None, b"v" * 99, (), 120, lambda: 0)
    acc.append(("t", 2), 1_000, None, b"v", (), 1, lambda: 0)
    acc.drain([("t", 2)], 1 << 20, IdempotenceState(False))  # t-2's queue is empty now: 0, still a candidate
    acc.ready(0, leaders.__getitem__, unavailable={2, 3})
    assert sorted(reports) == [("t", [2, 0], [0, 2], 4), ("u", [2], [0], 1)]  # t-1 waits for node 2, t-3 leaderless
    reports.clear()
    acc.ready(0, leaders.__getitem__)
    assert ("t", [2, 6, 0], [0, 1, 2], 4) in reports
    assert make().ready(0, leaders.__getitem__).ready == {}  # without a sink nothing is counted
    # A topic's view is told again only when it changed: the partitioner's stats depend on it alone.
    reports.clear()
    acc.ready(0, leaders.__getitem__)
    assert reports == []
    acc.append(("u", 0), 1_000, None, b"v" * 99, (), 120, lambda: 0)
    acc.ready(0, leaders.__getitem__)
    assert reports == [("u", [3], [0], 1)]


def test_a_load_view_the_sink_refused_is_told_again() -> None:
    """The view was recorded as told before the sink took it: had the sink raised once, the same view would never
    have been told again, leaving the partitioner with older stats for as long as the queues kept their sizes."""
    told: list[list[int]] = []

    def sink(topic: str, sizes: list[int], ids: list[int], queues: int) -> None:
        told.append(sizes)
        if len(told) == 1:
            raise RuntimeError("refused once")

    acc = make(batch_size=100, buffer_memory=1 << 20, load_sink=sink)
    acc.append(("t", 0), 1_000, None, b"v" * 99, (), 120, lambda: 0)
    acc.append(("t", 1), 1_000, None, b"v", (), 20, lambda: 0)
    with pytest.raises(RuntimeError):
        acc.ready(0, lambda tp: 1)
    acc.ready(0, lambda tp: 1)
    acc.ready(0, lambda tp: 1)
    assert told == [[2, 1], [2, 1]]  # told again once, then not while it holds


class _Queued:
    """A queued batch as the load sees it; reading the size of one past the sample fails the test."""

    def __init__(self, reserved: int, readable: bool = True) -> None:
        self._reserved, self._readable = reserved, readable

    @property
    def reserved_bytes(self) -> int:
        assert self._readable, "a batch past the sample was read"
        return self._reserved


@pytest.mark.parametrize("twin", TWINS)
def test_load_of_a_long_queue_reads_only_its_oldest_batches(twin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the adaptive partitioner's load summed every queued batch of every partition on every pass of the
    sender; with a full buffer of 16 KiB batches (hundreds per partition) that was a sixth of the event loop's time.
    Up to the sample the load is exact; beyond it, the sample's mean size times the queue's length. Both twins, over
    any objects with the field and over batches."""
    use_twin(monkeypatch, twin)
    from aioproducer.buffer import batch as batch_module

    queued_bytes, sample = batch_module.queued_bytes, batch_module.LOAD_SAMPLE_BATCHES
    short = deque(_Queued(size) for size in range(1, sample + 1))
    assert queued_bytes(short) == sum(range(1, sample + 1))
    assert queued_bytes(deque()) == 0
    long = deque([_Queued(1000) for _ in range(sample)] + [_Queued(0, readable=False)] * 392)
    assert queued_bytes(long) == 1000 * 400
    acc = make(batch_size=100)
    for size in (50, 120, 7, 300, 60, 90, 10, 11, 12, 13):
        batch, _index, _wake = acc.append(TP, 0, None, b"v", (), size, lambda: 0)
        batch.seal()
    queue = acc.queues[TP]
    assert len(queue) == 10 and queued_bytes(queue) == (50 + 120 + 7 + 300 + 60 + 90 + 10 + 11) * 10 // sample


def test_expedite_makes_each_partitions_newest_batch_ready_and_leaves_later_batches_lingering() -> None:
    """A caller done buffering (send_many, send_table) has its last batches sent at once; records buffered after
    it, by another caller, start batches that linger as usual (a flush would make them ready too)."""
    acc = make(batch_size=300, linger_ms=10_000)
    append(acc, b"y" * 150, 0)
    append(acc, b"y" * 150, 0)  # does not fit: t-0 now holds two batches, the newest with room
    append(acc, b"z", 0, tp=("t", 1))
    assert len(acc.queues[TP]) == 2
    assert acc.ready(1, lambda tp: 1).ready == {1: [TP]}  # the head, which has a batch behind it
    acc.expedite()
    assert sorted(acc.ready(1, lambda tp: 1).ready[1]) == [TP, ("t", 1)]
    idem = IdempotenceState(False)
    assert len(acc.drain([TP, ("t", 1)], 1_000_000, idem)) == 2
    acc.unmute(TP)
    acc.unmute(("t", 1))
    # t-0's newest batch, expedited, is ready at once; t-1's next batch, begun afterwards, waits its linger_ms.
    append(acc, b"later", 1, tp=("t", 1))
    check = acc.ready(2, lambda tp: 1)
    assert check.ready == {1: [TP]}
    assert check.next_check_ms is not None and check.next_check_ms > 9_000
