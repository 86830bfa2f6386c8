"""Delivery handles and batch outcomes: every way asyncio code waits on a future works on what `enqueue` returns,
a batch's outcome reaches each record (after a split too), and cancelling a wait never unsends a record.

Every test runs on each twin of the handle (pure Python, and compiled when built; see tests/twins.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import tracemalloc
import weakref
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioproducer.deliveries import bulk as bulk_module
from aioproducer.deliveries import delivery as delivery_module
from aioproducer.deliveries.bulk import BulkDeliveries, Deliveries, wait_all, when_settled
from aioproducer.deliveries.delivery import BatchOutcome, Delivery, resolve
from aioproducer.errors import DeliveryTimeoutError, InvalidRecordError
from aioproducer.models import ProducerRecord, RecordMetadata
from tests.twins import TWINS, use_twin


@pytest.fixture(autouse=True, params=TWINS)
def twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    use_twin(monkeypatch, request.param)
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def bulk_type() -> type[BulkDeliveries]:
    return bulk_module.BulkDeliveries


def new_delivery(outcome: BatchOutcome, index: int, timestamp_ms: int, key_size: int, value_size: int) -> Delivery:
    return delivery_module.new_delivery(outcome, index, timestamp_ms, key_size, value_size)


def make_delivery(outcome: BatchOutcome, index: int, timestamp_ms: int = 1_000, key: int = -1) -> Delivery:
    return new_delivery(outcome, index, timestamp_ms, key, 3)


def outcome_now(topic: str = "t", partition: int = 2) -> BatchOutcome:
    return BatchOutcome(topic, partition, asyncio.get_running_loop())


async def test_a_pending_delivery_reports_pending_without_creating_a_future() -> None:
    delivery = make_delivery(outcome_now(), 0)
    assert asyncio.isfuture(delivery) and not delivery.done() and not delivery.cancelled()
    with pytest.raises(asyncio.InvalidStateError):
        delivery.result()
    with pytest.raises(asyncio.InvalidStateError):
        delivery.exception()
    assert delivery._callback is None and delivery._callbacks is None  # nothing waits yet: nothing was allocated


async def test_settled_batch_gives_each_record_its_offset_and_timestamp() -> None:
    outcome = outcome_now()
    first, third = make_delivery(outcome, 0, 10, key=4), make_delivery(outcome, 2, 30)
    outcome.succeed(base_offset=100, log_append_time_ms=-1)
    assert first.done() and first.exception() is None
    assert first.result() == RecordMetadata("t", 2, 100, 10, 4, 3)
    assert await third == RecordMetadata("t", 2, 102, 30, -1, 3)


async def test_log_append_time_and_unknown_offsets() -> None:
    outcome = outcome_now()
    delivery = make_delivery(outcome, 5, 10)
    outcome.succeed(base_offset=-1, log_append_time_ms=77)
    assert delivery.result() == RecordMetadata("t", 2, -1, 77, -1, 3)


async def test_a_failed_batch_fails_every_record_with_its_error() -> None:
    outcome = outcome_now()
    deliveries = [make_delivery(outcome, i) for i in range(3)]
    waiting = asyncio.ensure_future(deliveries[1])
    await asyncio.sleep(0)
    error = DeliveryTimeoutError("expired")
    outcome.fail(error)
    assert all(d.exception() is error for d in deliveries)
    with pytest.raises(DeliveryTimeoutError):
        deliveries[0].result()
    with pytest.raises(DeliveryTimeoutError):
        await waiting


async def test_awaiting_wakes_when_the_batch_settles() -> None:
    outcome = outcome_now()
    delivery = make_delivery(outcome, 1)
    task = asyncio.ensure_future(delivery)
    await asyncio.sleep(0)
    assert not task.done()
    outcome.succeed(7, -1)
    assert (await asyncio.wait_for(task, 1)).offset == 8


async def test_done_callbacks_run_on_the_loop_once_settled() -> None:
    outcome = outcome_now()
    delivery = make_delivery(outcome, 0)
    seen: list[object] = []
    delivery.add_done_callback(lambda handle: seen.append((handle is delivery, handle.result().offset)))
    delivery.add_done_callback(seen.append)  # a second callback, removed again
    assert delivery.remove_done_callback(seen.append) == 1
    outcome.succeed(40, -1)
    assert seen == []  # callbacks are scheduled, never called inline
    await asyncio.sleep(0)
    assert seen == [(True, 40)]


async def test_a_callback_added_after_settling_still_runs() -> None:
    outcome = outcome_now()
    delivery = make_delivery(outcome, 0)
    outcome.succeed(1, -1)
    seen: list[int] = []
    delivery.add_done_callback(lambda future: seen.append(future.result().offset))
    await asyncio.sleep(0)
    assert seen == [1]


async def test_gather_wait_as_completed_and_shield_accept_deliveries() -> None:
    outcome = outcome_now()
    deliveries = [make_delivery(outcome, i) for i in range(4)]
    gathered = asyncio.ensure_future(asyncio.gather(*deliveries[:2]))
    waited = asyncio.ensure_future(asyncio.wait(deliveries[2:3]))
    shielded = asyncio.ensure_future(asyncio.shield(deliveries[3]))
    await asyncio.sleep(0)
    outcome.succeed(0, -1)
    assert [m.offset for m in await gathered] == [0, 1]
    done, pending = await waited
    assert done == {deliveries[2]} and not pending
    assert (await shielded).offset == 3
    offsets = sorted([(await f).offset for f in asyncio.as_completed(deliveries)])
    assert offsets == [0, 1, 2, 3]


async def test_wait_for_timing_out_cancels_the_wait_but_not_the_record() -> None:
    outcome = outcome_now()
    delivery = make_delivery(outcome, 0)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(delivery, 0.01)
    assert delivery.cancelled() and delivery.done()
    with pytest.raises(asyncio.CancelledError):
        delivery.result()
    outcome.succeed(5, -1)  # the batch still settles; the cancelled handle stays cancelled
    assert delivery.cancelled()


async def test_cancel_after_settling_is_refused() -> None:
    outcome = outcome_now()
    delivery = make_delivery(outcome, 0)
    outcome.succeed(5, -1)
    assert delivery.cancel() is False and not delivery.cancelled()
    assert delivery.result().offset == 5


async def test_cancelled_delivery_in_gather_reports_cancellation() -> None:
    outcome = outcome_now()
    first, second = make_delivery(outcome, 0), make_delivery(outcome, 1)
    gathered = asyncio.gather(first, second, return_exceptions=True)
    await asyncio.sleep(0)
    assert first.cancel("stop waiting")
    outcome.succeed(0, -1)
    results = await gathered
    assert isinstance(results[0], asyncio.CancelledError) and results[1].offset == 1


async def test_cancelling_the_awaiting_task_cancels_only_the_wait() -> None:
    outcome = outcome_now()
    delivery = make_delivery(outcome, 0)

    async def waiter() -> RecordMetadata:
        return await delivery

    task = asyncio.ensure_future(waiter())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    outcome.succeed(9, -1)
    assert delivery.cancelled()


async def test_a_split_batch_forwards_each_record_to_its_half() -> None:
    outcome = outcome_now()
    deliveries = [make_delivery(outcome, i) for i in range(5)]
    waiting = [asyncio.ensure_future(d) for d in (deliveries[1], deliveries[4])]
    await asyncio.sleep(0)
    first, second = outcome_now(), outcome_now()
    outcome.forward(2, first, second)
    assert resolve(outcome, 1) == (first, 1) and resolve(outcome, 4) == (second, 2)
    assert not any(d.done() for d in deliveries)
    # The second half is split again before it settles.
    third, fourth = outcome_now(), outcome_now()
    second.forward(1, third, fourth)
    first.succeed(10, -1)
    third.succeed(20, -1)
    error = InvalidRecordError("rejected")
    fourth.fail(error)
    assert [d.result().offset for d in deliveries[:3]] == [10, 11, 20]
    assert deliveries[3].exception() is error and deliveries[4].exception() is error
    assert (await waiting[0]).offset == 11
    with pytest.raises(InvalidRecordError):
        await waiting[1]


async def test_when_settled_calls_once_after_both_halves_of_a_split_and_every_other_outcome_settled() -> None:
    """Called once (an outcome listed twice too), after both halves of a split batch and the other outcome settled,
    not at the split."""
    outcome, other = outcome_now(), outcome_now()
    calls: list[None] = []
    when_settled([outcome, other, outcome], lambda: calls.append(None))
    first, second = outcome_now(), outcome_now()
    outcome.forward(1, first, second)
    first.succeed(0, -1)
    other.succeed(5, -1)
    assert calls == []
    second.succeed(1, -1)
    assert calls == [None]
    when_settled([first, other], lambda: calls.append(None))  # all settled already: at once
    assert calls == [None, None]


async def test_bulk_deliveries_keep_order_errors_and_splits(bulk_type: type[BulkDeliveries]) -> None:
    a, b = outcome_now("t", 0), outcome_now("t", 1)
    bulk = bulk_type()
    error = InvalidRecordError("bad record")
    for item in (make_delivery(a, 0, 1), make_delivery(b, 0, 2), error, make_delivery(a, 1, 3)):
        bulk.add(item)
    bulk.add(make_delivery(b, 1, 4))
    assert len(bulk) == 5
    assert [bulk.is_delivery(position) for position in range(5)] == [True, True, False, True, True]
    with pytest.raises(IndexError):
        bulk.is_delivery(5)
    assert set(map(id, bulk.outcomes())) == {id(a), id(b)}
    a1, a2 = outcome_now("t", 0), outcome_now("t", 0)
    a.forward(1, a1, a2)
    a1.succeed(100, -1)
    a2.succeed(200, -1)
    b.succeed(-1, 55)
    assert bulk.results(resolve) == [
        RecordMetadata("t", 0, 100, 1, -1, 3),
        RecordMetadata("t", 1, -1, 55, -1, 3),
        error,
        RecordMetadata("t", 0, 200, 3, -1, 3),
        RecordMetadata("t", 1, -1, 55, -1, 3),
    ]


def _bulk_of(partitions: list[int | None], outcomes: list[BatchOutcome]) -> tuple[BulkDeliveries, list[Any]]:
    """The twin's BulkDeliveries of one record per entry of `partitions` (the fixture swapped it in): a record of
    that partition's outcome, or a record refused at the call for None."""
    bulk = bulk_module.BulkDeliveries()
    items: list[Any] = []
    for index, partition in enumerate(partitions):
        item = InvalidRecordError("refused") if partition is None else make_delivery(outcomes[partition], index)
        items.append(item)
        bulk.add(item)
    return bulk, items


# Runs of equal values; 0 first (the compiled cache's unset value); two values alike in their low 32 bits.
_SHARED_VALUES = st.sampled_from([0, -1, 1, 1 + 2**32, 100, 1_700_000_000_000])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.lists(
        st.tuples(st.integers(0, 2), _SHARED_VALUES, st.sampled_from([-1, 0, 3]), st.sampled_from([-1, 0, 100])),
        min_size=1,
        max_size=40,
    ),
    log_append_times=st.tuples(st.sampled_from([-1, 0, 55]), st.sampled_from([-1, 0, 55]), st.sampled_from([-1, 55])),
)
def test_bulk_results_give_each_record_its_own_timestamp_and_sizes(
    twin: str, records: list[tuple[int, int, int, int]], log_append_times: tuple[int, ...]
) -> None:
    """The compiled results hand consecutive records with the same timestamp or size one shared int: each record
    must still read its own values, as plain ints (a value equal to the one before, a first value of 0, values alike
    in their low 32 bits, CreateTime and LogAppendTime batches interleaved), exactly as each Delivery reads alone."""

    async def run() -> None:
        outcomes = [outcome_now("t", partition) for partition in range(3)]
        bulk = bulk_module.BulkDeliveries()  # the twin's (the fixture swapped it in)
        deliveries = []
        for index, (partition, timestamp_ms, key_size, value_size) in enumerate(records):
            delivery = new_delivery(outcomes[partition], index, timestamp_ms, key_size, value_size)
            deliveries.append(delivery)
            bulk.add(delivery)
        for partition, outcome in enumerate(outcomes):
            outcome.succeed(1000 * partition, log_append_times[partition])
        expected = [delivery.result() for delivery in deliveries]
        results = bulk.results(resolve)
        assert results == expected
        assert all(type(field) is int for metadata in results for field in metadata[1:])
        assert expected == [
            RecordMetadata(
                "t",
                partition,
                1000 * partition + index,
                log_append_times[partition] if log_append_times[partition] >= 0 else timestamp_ms,
                key_size,
                value_size,
            )
            for index, (partition, timestamp_ms, key_size, value_size) in enumerate(records)
        ]

    asyncio.run(run())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    partitions=st.lists(st.one_of(st.integers(0, 2), st.none()), max_size=10),
    start=st.integers(-12, 12),
    stop=st.one_of(st.none(), st.integers(-12, 12)),
)
def test_bulk_outcomes_and_results_of_a_range_read_it_as_a_slice_of_the_records(
    twin: str, partitions: list[int | None], start: int, stop: int | None
) -> None:
    """The compiled twin read a negative `stop` as zero, where the original slices its list and counts it from the
    end: records `start` to `stop` are, in both twins, those of `records[max(start, 0):stop]` (a None partition
    stands for a record refused at the call)."""

    async def run() -> None:
        outcomes = [outcome_now("t", partition) for partition in range(3)]
        bulk, items = _bulk_of(partitions, outcomes)
        for partition, outcome in enumerate(outcomes):
            outcome.succeed(100 * partition, -1)
        chosen = items[max(start, 0) : stop]
        first_seen = {id(item._outcome): item._outcome for item in chosen if not isinstance(item, BaseException)}
        assert bulk.outcomes(start, stop) == list(first_seen.values())
        assert bulk.results(resolve, start, stop) == [
            item if isinstance(item, BaseException) else item.result() for item in chosen
        ]

    asyncio.run(run())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    partitions=st.lists(st.one_of(st.integers(0, 3), st.none()), max_size=12),
    settled=st.sets(st.integers(0, 4)),
    prebuilt=st.sets(st.integers(0, 11)),
    start=st.integers(-3, 14),
    stop=st.integers(-3, 14),
)
def test_fill_settled_builds_exactly_the_records_whose_batch_settled_and_says_where_the_first_gap_is(
    twin: str, partitions: list[int | None], settled: set[int], prebuilt: set[int], start: int, stop: int
) -> None:
    """`fill_settled` may build a call's results before all its batches settled: from `start` to `stop` it must fill
    each entry still unbuilt whose record's batch (or, once split, the half that carries it) has settled, as the
    record itself reads, and only those, and return the first entry of that range it left unbuilt. Partition 3's
    batch is split, its halves settled as `settled` holds 3 and 4; a None partition is a record refused at the
    call; `prebuilt` entries hold something already."""

    async def run() -> None:
        outcomes = [outcome_now("t", partition) for partition in range(4)]
        halves = [outcome_now("t", 3), outcome_now("t", 3)]
        bulk, items = _bulk_of(partitions, outcomes)
        outcomes[3].forward(len(partitions) // 2, halves[0], halves[1])
        for number in settled:
            if number < 3:
                outcomes[number].succeed(100 * number, -1)
            elif number == 3:
                halves[0].succeed(7, 9)
            else:
                halves[1].fail(DeliveryTimeoutError("expired"))
        unbuilt, kept = object(), object()
        results = [kept if position in prebuilt else unbuilt for position in range(len(items))]
        first_gap = bulk.fill_settled(resolve, results, start, stop, unbuilt)
        end = min(max(stop, 0), len(items))
        expected_gap = end
        for position, item in enumerate(items):
            inside = max(start, 0) <= position < end
            done = isinstance(item, BaseException) or item.done()
            if position in prebuilt:
                assert results[position] is kept
            elif inside and done:
                assert results[position] == (item if isinstance(item, BaseException) else _outcome_of(item))
            else:
                assert results[position] is unbuilt
                if inside:
                    expected_gap = min(expected_gap, position)
        assert first_gap == expected_gap

    asyncio.run(run())


def _outcome_of(delivery: Delivery) -> Any:
    """What a settled record's result is: its metadata or the error it failed with."""
    return delivery.exception() or delivery.result()


async def test_fill_settled_refuses_a_list_that_is_not_one_entry_per_record(bulk_type: type[BulkDeliveries]) -> None:
    bulk = bulk_type()
    bulk.add(make_delivery(outcome_now(), 0))
    unbuilt = object()
    for wrong in ([], [unbuilt, unbuilt]):
        with pytest.raises(ValueError, match="one entry per record"):
            bulk.fill_settled(resolve, wrong, 0, 1, unbuilt)


async def test_a_calls_results_are_built_as_its_batches_settle_not_all_once_the_last_did(
    bulk_type: type[BulkDeliveries],
) -> None:
    """A send_many call's results were all built once its last batch settled, with the broker idle meanwhile: the
    results of the records whose batches settled earlier are built while the others are still out (one loop turn
    after they settle), so only the last batch's records are left to build when it settles."""
    early, late = outcome_now("t", 0), outcome_now("t", 1)
    deliveries = [make_delivery(early if i % 4 else late, i, i) for i in range(40)]
    bulk = bulk_type()
    for delivery in deliveries:
        bulk.add(delivery)
    call = Deliveries(bulk)
    waiting = asyncio.ensure_future(call._settled_future())
    early.succeed(500, -1)
    await asyncio.sleep(0)
    built = call._built
    assert built is not None and not waiting.done()
    assert [entry is bulk_module._UNBUILT for entry in built] == [i % 4 == 0 for i in range(40)]
    late.succeed(900, 77)
    assert await waiting == [delivery.result() for delivery in deliveries]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=st.lists(st.tuples(st.integers(0, 4), st.sampled_from(["ok", "fail", "split"])), min_size=1, max_size=60),
    order=st.permutations(range(5)),
    turns=st.lists(st.integers(0, 2), min_size=12, max_size=12),
    slice_size=st.sampled_from([1, 3, 1000]),
)
def test_results_built_as_batches_settle_come_out_whole_and_in_order_whatever_the_order_and_timing(
    twin: str,
    monkeypatch: pytest.MonkeyPatch,
    plan: list[tuple[int, str]],
    order: list[int],
    turns: list[int],
    slice_size: int,
) -> None:
    """The results built while batches settle one by one (in any order, failed or split, the loop turning between
    some settlings and not others, in slices as small as one record) must be the same list, in the caller's order,
    as each record reads once all have settled."""
    monkeypatch.setattr(bulk_module, "_RESULTS_PER_SLICE", slice_size)

    async def run() -> None:
        outcomes = [outcome_now("t", partition) for partition in range(5)]
        fates = {partition: fate for partition, fate in plan}
        deliveries = [make_delivery(outcomes[partition], index, index) for index, (partition, _) in enumerate(plan)]
        waiting = asyncio.ensure_future(wait_all(deliveries))
        await asyncio.sleep(0)
        step = 0
        for partition in order:
            outcome, fate = outcomes[partition], fates.get(partition, "ok")
            if fate == "fail":
                outcome.fail(DeliveryTimeoutError("expired"))
            elif fate == "split":
                first, second = outcome_now("t", partition), outcome_now("t", partition)
                outcome.forward(1, first, second)
                for _ in range(turns[step % len(turns)]):
                    await asyncio.sleep(0)
                first.succeed(10 * partition, -1)
                step += 1
                for _ in range(turns[step % len(turns)]):
                    await asyncio.sleep(0)
                second.fail(DeliveryTimeoutError("second half"))
            else:
                outcome.succeed(100 * partition, -1)
            step += 1
            for _ in range(turns[step % len(turns)]):
                await asyncio.sleep(0)
        assert await waiting == [_outcome_of(delivery) for delivery in deliveries]

    asyncio.run(run())


async def test_a_wait_cancelled_while_its_settled_records_are_being_built_builds_no_more(
    bulk_type: type[BulkDeliveries],
) -> None:
    """A wait cancelled just before some batches settled, the build of their results then due on the loop: that
    build must not run (nobody will read its results, and the records' entries went at the cancel), and a new wait
    gets every result."""
    early, late = outcome_now("t", 0), outcome_now("t", 1)
    deliveries = [make_delivery(early if i % 2 else late, i) for i in range(10)]
    bulk = bulk_type()
    for delivery in deliveries:
        bulk.add(delivery)
    call = Deliveries(bulk)
    results = call._settled_future()
    results.cancel()  # its records' entries go at the next turn of the loop...
    early.succeed(0, -1)  # ...and the build of some is due after that
    for _ in range(3):
        await asyncio.sleep(0)
    assert call._built is None and len(call._bulk) == 0
    late.succeed(50, -1)
    assert await wait_all(deliveries) == [delivery.result() for delivery in deliveries]


def _counting_bulk(examined: list[int]) -> type[BulkDeliveries]:
    """The twin's BulkDeliveries, counting the record positions its builds look at."""

    class Counting(bulk_module.BulkDeliveries):  # type: ignore[misc,valid-type]
        __slots__ = ()

        def fill_settled(self, resolve: Any, results: list[Any], start: int, stop: int, unbuilt: object) -> int:
            examined[0] += max(0, min(stop, len(self)) - max(start, 0))
            return super().fill_settled(resolve, results, start, stop, unbuilt)  # type: ignore[no-any-return]

    return Counting


def test_a_call_whose_batches_settle_one_per_loop_turn_builds_its_results_in_linear_work(twin: str) -> None:
    """Every early build looked again from the first record still unbuilt: with that record's batch out and the
    others settling one per loop turn, each turn looked at the whole call again (3000 batches: 4.5 M looks for
    3000 results). The early builds stop at a budget of looks per record; the last batch's build does the rest."""
    examined = [0]
    count = 3000

    async def run() -> None:
        outcomes = [outcome_now("t", 0) for _ in range(count)]
        bulk = _counting_bulk(examined)()
        for outcome in outcomes:
            bulk.add(make_delivery(outcome, 0))
        waiting = asyncio.ensure_future(Deliveries(bulk)._settled_future())
        await asyncio.sleep(0)
        for offset, outcome in enumerate(outcomes):
            outcome.succeed(offset, -1)
            await asyncio.sleep(0)
        assert [metadata.offset for metadata in await waiting] == list(range(count))

    asyncio.run(run())
    assert examined[0] <= 6 * count, f"{examined[0]} looks"  # the early budget (4 a record), a slice, the last build


def test_a_mock_producers_send_many_completed_record_by_record_builds_its_results_in_linear_work(
    twin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MockProducer makes each record a batch of its own: a test completing a send_many call's records one by one
    took 18 s for 20 000 records (0.1 s before the early builds), each turn looking at the call again."""
    from aioproducer.testing import MockProducer, mock_producer

    examined = [0]
    monkeypatch.setattr(mock_producer, "BulkDeliveries", _counting_bulk(examined))
    count = 2000

    async def run() -> None:
        mock = MockProducer(auto_complete=False)
        await mock.start()

        async def complete_one_by_one() -> None:
            for _ in range(10):  # the call buffers its records
                await asyncio.sleep(0)
            assert mock.pending == count
            for _ in range(count):  # each record settles on a loop turn of its own
                assert mock.complete_next()
                await asyncio.sleep(0)

        records = [ProducerRecord("t", b"v") for _ in range(count)]
        results, _ = await asyncio.gather(mock.send_many(records), complete_one_by_one())
        assert len(results) == count and not any(isinstance(result, BaseException) for result in results)
        await mock.close()

    asyncio.run(run())
    assert examined[0] <= 6 * count, f"{examined[0]} looks"  # the early budget (4 a record), a slice, the last build


# -- waiting batch by batch -----------------------------------------------------------------------------------------


async def test_wait_all_gives_each_record_its_own_outcome_in_order(bulk_type: type[BulkDeliveries]) -> None:
    """Results come back in the caller's order, one per item: a failed batch fails only its own records, a split
    batch's records read their halves, a cancelled delivery gives CancelledError and other awaitables their own
    result or exception, as asyncio.gather(return_exceptions=True) would."""
    ok, bad, split = outcome_now("t", 0), outcome_now("t", 1), outcome_now("t", 2)
    loop = asyncio.get_running_loop()
    plain, broken = loop.create_future(), loop.create_future()
    cancelled = make_delivery(ok, 3, 40)
    assert cancelled.cancel()
    items = [
        make_delivery(ok, 0, 10),
        make_delivery(bad, 0),
        make_delivery(split, 1, 30),
        plain,
        make_delivery(ok, 1, 11, key=2),
        cancelled,
        broken,
        make_delivery(bad, 1),
        make_delivery(split, 0, 29),
    ]
    waiting = asyncio.ensure_future(wait_all(iter(items)))
    await asyncio.sleep(0)
    assert not waiting.done()
    error = InvalidRecordError("rejected")
    ok.succeed(100, -1)
    bad.fail(error)
    left, right = outcome_now("t", 2), outcome_now("t", 2)
    split.forward(1, left, right)
    left.succeed(7, -1)
    await asyncio.sleep(0)
    assert not waiting.done()  # the right half is still pending
    right.succeed(50, -1)
    plain.set_result("plain")
    broken.set_exception(KeyError("broken"))
    results = await asyncio.wait_for(waiting, 5)
    assert results[0] == RecordMetadata("t", 0, 100, 10, -1, 3)
    assert results[1] is error and results[7] is error
    assert results[2] == RecordMetadata("t", 2, 50, 30, -1, 3)
    assert results[3] == "plain"
    assert results[4] == RecordMetadata("t", 0, 101, 11, 2, 3)
    assert isinstance(results[5], asyncio.CancelledError)
    assert isinstance(results[6], KeyError)
    assert results[8] == RecordMetadata("t", 2, 7, 29, -1, 3)
    assert len(results) == len(items)
    # The same answers, record by record, as asking each handle.
    for item, result in zip(items, results, strict=True):
        if isinstance(item, Delivery) and not item.cancelled():
            assert (item.exception() or item.result()) == result


async def test_wait_all_of_nothing_and_of_settled_deliveries_returns_at_once(bulk_type: type[BulkDeliveries]) -> None:
    assert await wait_all([]) == []
    outcome = outcome_now()
    outcome.succeed(5, -1)
    assert [m.offset for m in await wait_all([make_delivery(outcome, 1)])] == [6]


async def test_wait_all_runs_a_listed_coroutine_while_the_records_wait(bulk_type: type[BulkDeliveries]) -> None:
    """wait_all awaited the listed coroutines and futures only after every record's batch had settled: a coroutine
    that settles them (or a flush) never ran first, so the wait hung; and a cancelled wait left them never awaited."""
    outcome = outcome_now()
    delivery = make_delivery(outcome, 0)

    async def settles() -> str:
        outcome.succeed(9, -1)
        return "settled"

    metadata, result = await asyncio.wait_for(wait_all([delivery, settles()]), 5)
    assert (metadata.offset, result) == (9, "settled")

    pending = make_delivery(outcome_now(), 0)
    never = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(wait_all([pending, never]))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert never.cancelled()


async def test_a_cancelled_wait_all_lets_go_of_its_records_entries_before_their_batch_settles(
    bulk_type: type[BulkDeliveries],
) -> None:
    """A wait_all cancelled before its records' batch settled kept the entries of every record it listed until the
    batch settled: a caller retrying `wait_for(producer.wait(...), timeout)` while the broker was away kept one copy
    per attempt (52 MB for 20 attempts over 50 000 records)."""
    outcome = outcome_now()
    deliveries = [make_delivery(outcome, index) for index in range(50_000)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20):
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(wait_all(deliveries), 0.001)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    outcome.succeed(0, -1)
    assert kept < 1_000_000, f"{kept / 1e6:.1f} MB kept by 20 cancelled waits"
    results = await wait_all(deliveries)
    assert [metadata.offset for metadata in results] == list(range(50_000))  # type: ignore[union-attr]


async def test_a_cancelled_wait_all_takes_its_waiters_off_the_batches_still_pending(
    bulk_type: type[BulkDeliveries],
) -> None:
    """A cancelled wait_all left one waiter (266 B) per batch per attempt on every batch still pending, until the
    batch settled: a wait retried under a timeout while the broker was away over 5 000 batches kept 27 MB."""
    outcomes = [outcome_now("t", partition) for partition in range(50)]
    deliveries = [make_delivery(outcome, index) for index in range(4) for outcome in outcomes]
    outcomes[0].succeed(0, -1)  # one settled already: nothing to take off it
    for _ in range(3):
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(wait_all(deliveries), 0.001)
    assert [len(outcome.waiters) for outcome in outcomes] == [0] * 50
    for outcome in outcomes[1:]:
        outcome.succeed(10, -1)
    results = await wait_all(deliveries)
    assert [metadata.offset for metadata in results] == [  # type: ignore[union-attr]
        index + (0 if outcome is outcomes[0] else 10) for index in range(4) for outcome in outcomes
    ]


async def test_a_cancelled_settled_watch_never_calls_and_leaves_no_waiter_on_a_split_batchs_halves() -> None:
    outcome, other = outcome_now(), outcome_now()
    calls: list[None] = []
    watch = when_settled([outcome, other], lambda: calls.append(None))
    first, second = outcome_now(), outcome_now()
    outcome.forward(1, first, second)  # the watch now waits on both halves
    first.succeed(0, -1)
    watch.cancel()
    assert (first.waiters, second.waiters, other.waiters) == ([], [], [])
    second.succeed(1, -1)
    other.succeed(2, -1)
    assert calls == []


async def test_cancelling_wait_all_leaves_the_deliveries_pending_and_usable(bulk_type: type[BulkDeliveries]) -> None:
    outcome = outcome_now()
    delivery = make_delivery(outcome, 0)
    waiting = asyncio.ensure_future(wait_all([delivery]))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert not delivery.done() and not delivery.cancelled()
    outcome.succeed(3, -1)
    assert (await delivery).offset == 3


# -- one loop callback per settled batch ----------------------------------------------------------------------------


async def test_a_settled_batch_runs_its_records_callbacks_in_one_loop_callback_in_order() -> None:
    """A batch's waiting records are woken by one loop callback (not one each); each callback still runs once, after
    the settling code returned, in the order the callbacks were added, each in its own context."""
    outcome = outcome_now()
    deliveries = [make_delivery(outcome, i) for i in range(50)]
    seen: list[tuple[int, int, str]] = []
    label: contextvars.ContextVar[str] = contextvars.ContextVar("label", default="-")
    for i, delivery in enumerate(reversed(deliveries)):
        context = contextvars.copy_context()
        context.run(label.set, f"ctx{i}")
        delivery.add_done_callback(lambda d, i=i: seen.append((i, d.result().offset, label.get())), context=context)
    loop = asyncio.get_running_loop()
    scheduled: list[object] = []
    original = loop.call_soon

    def counting_call_soon(callback: Any, *args: Any, **kwargs: Any) -> asyncio.Handle:
        scheduled.append(callback)
        return original(callback, *args, **kwargs)

    loop.call_soon = counting_call_soon  # type: ignore[method-assign]
    try:
        outcome.succeed(1000, -1)
    finally:
        del loop.call_soon
    assert len(scheduled) == 1 and seen == []
    await asyncio.sleep(0)
    assert seen == [(i, 1049 - i, f"ctx{i}") for i in range(50)]


async def test_each_callback_sees_the_variables_of_when_it_was_added_and_none_set_by_another_callback(
    twin: str,
) -> None:
    """asyncio copies the context per add_done_callback, so a callback sees the contextvars as they were when it was
    added, and a variable one callback sets is seen by no other; the compiled handle shares one snapshot among a
    batch's records added under the same variables, which must not let a callback's `set` reach the next record's
    callback (the first, second and later callbacks of a record, and a cancelled record's, alike)."""
    label: contextvars.ContextVar[str] = contextvars.ContextVar("label", default="-")
    outcome = outcome_now()
    deliveries = [make_delivery(outcome, i) for i in range(7)]
    seen: list[tuple[int, str]] = []

    def note_then_set(position: int) -> Callable[[Delivery], None]:
        def callback(delivery: Delivery) -> None:
            seen.append((position, label.get()))
            label.set(f"set by {position}")

        return callback

    expected: list[tuple[int, str]] = []
    for position, value in enumerate(["a", "a", "b", "b", "a", "a", "a"]):
        label.set(value)
        deliveries[position].add_done_callback(note_then_set(position))
        expected.append((position, value))
    label.set("after")
    deliveries[1].add_done_callback(note_then_set(10))  # a second callback on a record, added under other variables
    deliveries[5].cancel()  # its callback runs at once, through the loop
    await asyncio.sleep(0)
    assert seen == [(5, "a")]
    outcome.succeed(0, -1)
    await asyncio.sleep(0)
    assert sorted(seen) == sorted([*expected, (10, "after")])
    assert label.get() == "after"  # nothing a callback set reached the code that added them
    if twin == "compiled":  # records added under the same variables share one snapshot until they settle
        shared = outcome_now()
        first, second = make_delivery(shared, 0), make_delivery(shared, 1)
        first.add_done_callback(lambda d: None)
        second.add_done_callback(lambda d: None)
        assert first._callback_context is second._callback_context


async def test_a_shared_snapshot_removed_from_a_record_leaves_its_other_callbacks_their_variables() -> None:
    """remove_done_callback keeps a record's other callbacks: the first callback's context (on the compiled handle a
    snapshot shared with other records) moves with it to the first slot and must still be the one taken at add."""
    label: contextvars.ContextVar[str] = contextvars.ContextVar("label", default="-")
    outcome = outcome_now()
    one, other = make_delivery(outcome, 0), make_delivery(outcome, 1)
    seen: list[tuple[str, str]] = []

    def dropped(_: Delivery) -> None:
        seen.append(("dropped", label.get()))

    label.set("x")
    one.add_done_callback(lambda _: (seen.append(("one", label.get())), label.set("leak")))
    other.add_done_callback(dropped)
    label.set("y")
    other.add_done_callback(lambda _: seen.append(("other", label.get())))
    assert other.remove_done_callback(dropped) == 1
    outcome.succeed(0, -1)
    await asyncio.sleep(0)
    assert seen == [("one", "x"), ("other", "y")]


async def test_a_raising_callback_is_reported_and_the_batchs_other_callbacks_still_run() -> None:
    outcome = outcome_now()
    deliveries = [make_delivery(outcome, i) for i in range(3)]
    seen: list[int] = []
    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:

        def explode(delivery: Delivery) -> None:
            raise ValueError("callback bug")

        deliveries[0].add_done_callback(explode)
        for delivery in deliveries:
            delivery.add_done_callback(lambda d: seen.append(d.result().offset))
        outcome.succeed(0, -1)
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert seen == [0, 1, 2]
    assert len(reported) == 1 and isinstance(reported[0]["exception"], ValueError)


async def test_system_exit_in_a_callback_leaves_the_remaining_callbacks_scheduled() -> None:
    """Should a callback raise SystemExit (it propagates, as from any asyncio callback), the batch's callbacks not
    yet run are not lost: they run at the loop's next turn."""
    outcome = outcome_now()
    deliveries = [make_delivery(outcome, i) for i in range(3)]
    seen: list[int] = []

    def leave(delivery: Delivery) -> None:
        raise SystemExit(3)

    deliveries[0].add_done_callback(leave)
    deliveries[0].add_done_callback(lambda d: seen.append(d.result().offset))
    deliveries[0].add_done_callback(lambda d: seen.append(-d.result().offset))  # two left behind the SystemExit
    for delivery in deliveries[1:]:
        delivery.add_done_callback(lambda d: seen.append(d.result().offset))
    outcome.succeed(10, -1)
    with pytest.raises(SystemExit):
        delivery_module.run_callbacks_of(outcome_deliveries := list(deliveries))
    assert seen == [] and outcome_deliveries == deliveries
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    # Each callback ran exactly once, the record's own in the order added: nothing was lost or run twice.
    assert sorted(seen) == [-10, 10, 11, 12] and seen.index(10) < seen.index(-10)


async def test_a_records_first_waiter_is_held_without_a_list_of_callbacks() -> None:
    """The first waiter (a task, gather, one done-callback) sits in the handle's own slots: a list and a tuple per
    waiting record were two more objects the cyclic collector walked while the batch was in flight."""
    outcome = outcome_now()
    delivery = make_delivery(outcome, 0)
    seen: list[str] = []
    delivery.add_done_callback(lambda _: seen.append("first"))
    assert delivery._callback is not None and delivery._callbacks is None
    delivery.add_done_callback(lambda _: seen.append("second"))
    assert delivery._callbacks is not None and len(delivery._callbacks) == 1
    outcome.succeed(0, -1)
    await asyncio.sleep(0)
    assert seen == ["first", "second"] and delivery._callback is None and delivery._callbacks is None


@pytest.mark.parametrize("settled", [False, True], ids=["pending", "settled"])
async def test_a_callback_that_is_not_callable_is_refused_where_it_is_added(settled: bool) -> None:
    """A None callback was taken for an empty slot and dropped, so the record's real callbacks ran out of order or
    not at all; asyncio only fails later, inside whatever settles the future. It is refused at once, by both twins."""
    outcome = outcome_now()
    delivery = make_delivery(outcome, 0)
    if settled:
        outcome.succeed(5, -1)
    seen: list[int] = []
    for hostile in (None, 42, "callback"):
        with pytest.raises(TypeError, match="callable"):
            delivery.add_done_callback(hostile)  # type: ignore[arg-type]
    delivery.add_done_callback(lambda d: seen.append(d.result().offset))
    if not settled:
        outcome.succeed(5, -1)
    await asyncio.sleep(0)
    assert seen == [5]


async def test_a_settled_records_callbacks_cannot_be_removed_before_they_run() -> None:
    """Removing a callback after the batch settled but before its one loop callback ran used to take the callback
    out, so it never ran and the count said 1; an asyncio.Future has already scheduled its callbacks by then (0,
    and they run). Also from inside a callback of another record of the same batch."""
    outcome = outcome_now()
    first, second, third = (make_delivery(outcome, i) for i in range(3))
    seen: list[object] = []

    def record(delivery: Delivery) -> None:
        seen.append(delivery.result().offset)

    def remove_from_third(delivery: Delivery) -> None:
        seen.append(("removed", third.remove_done_callback(record)))

    first.add_done_callback(remove_from_third)
    second.add_done_callback(record)
    third.add_done_callback(record)
    outcome.succeed(20, -1)
    assert second.remove_done_callback(record) == 0
    await asyncio.sleep(0)
    assert seen == [("removed", 0), 21, 22]


# Operations on a pending handle: add callback k, remove callback k; then the batch settles or the wait is cancelled.
CALLBACK_OPERATIONS = st.lists(st.tuples(st.sampled_from(["add", "remove"]), st.integers(0, 3)), max_size=12)


@settings(max_examples=150, deadline=None)
@given(operations=CALLBACK_OPERATIONS, ending=st.sampled_from(["succeed", "fail", "cancel"]))
def test_adding_and_removing_callbacks_behaves_as_on_an_asyncio_future(operations: Any, ending: str) -> None:
    """Differential: any sequence of add_done_callback / remove_done_callback on a pending Delivery gives the same
    counts removed and the same callbacks run, in the same order, as on an asyncio.Future ending the same way
    (the first callback in the handle's slots and the later ones in a list must read as one ordered list)."""

    async def run(make: Callable[[asyncio.AbstractEventLoop], Any]) -> tuple[list[int], list[tuple[int, bool]]]:
        loop = asyncio.get_running_loop()
        waitable, settle = make(loop)
        removed: list[int] = []
        calls: list[tuple[int, bool]] = []
        callbacks = [lambda f, k=k: calls.append((k, f.cancelled())) for k in range(4)]
        for operation, k in operations:
            if operation == "add":
                waitable.add_done_callback(callbacks[k])
            else:
                removed.append(waitable.remove_done_callback(callbacks[k]))
        settle()
        for _ in range(3):
            await asyncio.sleep(0)
        return removed, calls

    def delivery_and_ending(loop: asyncio.AbstractEventLoop) -> tuple[Delivery, Callable[[], object]]:
        outcome = BatchOutcome("t", 0, loop)
        delivery = make_delivery(outcome, 0)
        endings = {
            "succeed": lambda: outcome.succeed(0, -1),
            "fail": lambda: outcome.fail(DeliveryTimeoutError("late")),
            "cancel": delivery.cancel,
        }
        return delivery, endings[ending]

    def future_and_ending(loop: asyncio.AbstractEventLoop) -> tuple[asyncio.Future[int], Callable[[], object]]:
        future: asyncio.Future[int] = loop.create_future()
        endings = {
            "succeed": lambda: future.set_result(0),
            "fail": lambda: future.set_exception(DeliveryTimeoutError("late")),
            "cancel": future.cancel,
        }
        return future, endings[ending]

    assert asyncio.run(run(delivery_and_ending)) == asyncio.run(run(future_and_ending))


async def test_callbacks_of_a_record_whose_batch_is_split_run_when_its_half_settles() -> None:
    outcome = outcome_now()
    deliveries = [make_delivery(outcome, i) for i in range(4)]
    seen: list[tuple[int, object]] = []
    for i, delivery in enumerate(deliveries):
        delivery.add_done_callback(lambda d, i=i: seen.append((i, d.exception() or d.result().offset)))
    first, second = outcome_now(), outcome_now()
    outcome.forward(2, first, second)
    error = InvalidRecordError("rejected")
    second.fail(error)
    await asyncio.sleep(0)
    assert seen == [(2, error), (3, error)]
    first.succeed(20, -1)
    await asyncio.sleep(0)
    assert seen[2:] == [(0, 20), (1, 21)]


def test_settling_after_the_loop_closed_does_not_raise() -> None:
    """A batch failed after its loop closed (a test's producer closed late) must still settle: its waiting records'
    callbacks cannot run any more, and scheduling them on the closed loop would raise instead."""
    loop = asyncio.new_event_loop()
    outcome = BatchOutcome("t", 0, loop)
    delivery = make_delivery(outcome, 0)
    delivery.add_done_callback(lambda d: None, context=contextvars.copy_context())
    loop.close()
    error = InvalidRecordError("closed")
    outcome.fail(error)
    assert delivery.done() and delivery.exception() is error


async def test_a_frame_that_awaited_a_failed_record_is_freed() -> None:
    """The compiled handles were not traversed by the cyclic collector: a coroutine that awaited a record of a
    failed batch stayed alive for ever (its frame holds the handle, the handle its batch's outcome, the outcome the
    error, and the error's traceback the frame), with every local it held."""

    class Marker:
        pass

    outcome = BatchOutcome("t", 0, asyncio.get_running_loop())
    delivery = new_delivery(outcome, 0, 0, 1, 1)
    marker = Marker()
    watched = weakref.ref(marker)

    async def awaits(record: Delivery, local: Marker) -> None:
        with pytest.raises(InvalidRecordError):
            await record

    task = asyncio.ensure_future(awaits(delivery, marker))
    await asyncio.sleep(0)
    outcome.fail(InvalidRecordError("refused"))
    await task
    del delivery, outcome, task, marker
    gc.collect()
    assert watched() is None


async def test_awaiting_many_records_of_a_failed_batch_does_not_grow_its_error_s_traceback() -> None:
    """Every record of a failed batch raised the one shared error object as it was, so each raise added the
    awaiting frames to its traceback: 1,000 awaiting tasks left a chain of 3,000 frames (and their locals) on it."""
    outcome = BatchOutcome("t", 0, asyncio.get_running_loop())
    deliveries = [new_delivery(outcome, i, 0, 1, 1) for i in range(200)]

    async def awaits(record: Delivery) -> None:
        with pytest.raises(InvalidRecordError):
            await record

    tasks = [asyncio.ensure_future(awaits(d)) for d in deliveries]
    await asyncio.sleep(0)
    outcome.fail(InvalidRecordError("refused"))
    await asyncio.gather(*tasks)
    depth, entry = 0, outcome.error.__traceback__ if outcome.error is not None else None
    while entry is not None:
        depth, entry = depth + 1, entry.tb_next
    assert depth <= 5, depth  # one raise's frames at most, as asyncio.Future keeps it


def test_a_record_subclass_with_attributes_stays_collectable() -> None:
    """The compiled ProducerRecord constructor untracked a user's subclass too, whose instances have a __dict__:
    a reference cycle through such a record's attributes was never freed."""

    class Tagged(ProducerRecord):
        pass

    class Owner:
        record: Any = None

    record = Tagged("topic", b"v")
    owner = Owner()
    owner.record, record.__dict__["owner"] = record, owner
    watched = weakref.ref(owner)
    del record, owner
    gc.collect()
    assert watched() is None


async def test_wait_all_builds_a_long_list_of_results_in_slices_letting_the_loop_run(
    bulk_type: type[BulkDeliveries],
) -> None:
    """Building 300 k results in one pass held the event loop for ~30 ms; they are built in slices, the loop
    running between them, and come out the same and in order."""
    settled = [outcome_now("t", p) for p in range(3)]
    for number, outcome in enumerate(settled):
        outcome.succeed(1000 * number, -1)
    count = 2 * bulk_module._RESULTS_PER_SLICE + 7
    items = [make_delivery(settled[i % 3], i // 3, i) for i in range(count)]
    few = [make_delivery(settled[0], 0, 0)]
    loop = asyncio.get_running_loop()
    turns = 0
    ticking = True

    def tick() -> None:  # one call per turn of the loop
        nonlocal turns
        turns += 1
        if ticking:
            loop.call_soon(tick)

    loop.call_soon(tick)
    await wait_all(few)
    one_slice, turns = turns, 0
    results = await wait_all(items)
    three_slices = turns
    ticking = False
    await asyncio.sleep(0)
    assert three_slices == one_slice + 2, "the loop did not run between the slices"
    assert [r.offset for r in results] == [1000 * (i % 3) + i // 3 for i in range(count)]
