"""`enqueue_many`: many records buffered in order by one call, their results awaited later through `Deliveries`, so
that one call's wait overlaps the next calls (`send_many` is the same call followed by the wait)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from aioproducer import Deliveries, Producer, ProducerRecord, RecordMetadata
from aioproducer.deliveries.delivery import batch_of
from aioproducer.errors import InvalidRecordError, KafkaTimeoutError, ProducerClosedError
from aioproducer.testing import ConsumedRecord, MockCluster, MockProducer, read_back

FAST = {"linger_ms": 1, "retry_backoff_ms": 10, "reconnect_backoff_ms": 20, "max_block_ms": 5000}


async def test_calls_made_one_after_another_keep_their_order_and_their_results_overlap(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic = topic_factory(partitions=1)
    chunks = [[(topic, b"%d-%04d" % (call, i), None, None, None, None) for i in range(2000)] for call in range(5)]
    async with Producer(bootstrap, **FAST) as producer:
        pending = [await producer.enqueue_many(chunk) for chunk in chunks]  # no wait between the calls
        assert [len(d) for d in pending] == [2000] * 5
        results = [await deliveries for deliveries in pending]
    offsets = [r.offset for chunk in results for r in chunk if isinstance(r, RecordMetadata)]
    assert offsets == list(range(10_000)), "a call's records are out of order, or a result is another record's"
    assert [r.value for r in read_back_records(topic)] == [record[1] for chunk in chunks for record in chunk]


async def test_a_bad_record_fails_only_itself_in_its_place(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("t", 2)
    async with Producer(mock_cluster.bootstrap_servers, **FAST) as producer:
        deliveries = await producer.enqueue_many(
            [
                ProducerRecord("t", b"first"),
                ProducerRecord("t", "not bytes"),  # type: ignore[arg-type]
                ProducerRecord("t", b"third", partition=1),
                "not a record",  # type: ignore[list-item]
            ]
        )
        first, bad_value, third, not_a_record = await deliveries
    assert isinstance(first, RecordMetadata) and isinstance(third, RecordMetadata) and third.partition == 1
    assert isinstance(bad_value, InvalidRecordError) and isinstance(not_a_record, InvalidRecordError)
    assert sorted(r.value or b"" for r in read_back(mock_cluster.bootstrap_servers, "t")) == [b"first", b"third"]


async def test_a_record_the_serializer_refuses_holds_its_error_in_its_place(mock_cluster: MockCluster) -> None:
    async def serialize(value: Any) -> bytes:  # async: run before the appender, refusing records from the list
        if value == "refuse":
            raise ValueError("no")
        return str(value).encode()

    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, value_serializer=serialize, **FAST) as producer:
        deliveries = await producer.enqueue_many([ProducerRecord("t", v) for v in ("a", "refuse", "b")])
        assert len(deliveries) == 3
        a, refused, b = await deliveries
    assert isinstance(refused, InvalidRecordError) and "no" in str(refused)
    assert isinstance(a, RecordMetadata) and isinstance(b, RecordMetadata) and (a.offset, b.offset) == (0, 1)


async def test_a_cancelled_await_leaves_the_results_coming_for_the_next(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, **FAST) as producer:
        await producer.send("t", b"warm-up")
        mock_cluster.set_broker_rtt(1, 300)
        deliveries = await producer.enqueue_many([ProducerRecord("t", b"%d" % i) for i in range(10)])
        assert repr(deliveries) == "<Deliveries of 10 records>"
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(deliveries, 0.05)
        first = await deliveries
        again = await deliveries
    assert [r.offset for r in first] == list(range(1, 11))  # type: ignore[union-attr]
    assert again == first and again is not first  # each await gets its own list


async def test_records_whose_results_nobody_awaits_are_delivered_and_acknowledged_to_the_hooks_before_they_close(
    mock_cluster: MockCluster,
) -> None:
    """The hooks hear of each record of an enqueue_many call once it is settled, though the caller never awaits the
    results, and before the producer closes them."""
    acknowledged: list[tuple[bytes, RecordMetadata | None]] = []
    calls: list[tuple[str, int]] = []

    class Hook:
        closed = False

        def on_record_acknowledged(self, record: ProducerRecord, metadata: Any, error: Any) -> None:
            assert not self.closed, "a record acknowledged after the hooks closed"
            acknowledged.append((record.value, metadata))

        def on_send_many_start(self, records: list[ProducerRecord]) -> int:
            calls.append(("start", len(records)))
            return len(records)

        def on_send_many_end(self, token: int, results: list[Any]) -> None:
            calls.append(("end", token))

        def close(self) -> None:
            self.closed = True

    hook = Hook()
    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, hooks=[hook], linger_ms=200) as producer:
        await producer.enqueue_many([("t", b"%d" % i, None, None, None, None) for i in range(100)])
    assert hook.closed
    assert calls == [("start", 100), ("end", 100)]
    assert [value for value, _ in acknowledged] == [b"%d" % i for i in range(100)]
    assert [m.offset for _, m in acknowledged] == list(range(100))  # type: ignore[union-attr]
    assert len(read_back(mock_cluster.bootstrap_servers, "t")) == 100


async def test_close_fails_what_it_could_not_deliver_and_every_result_resolves(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("t", 1)
    producer = Producer(mock_cluster.bootstrap_servers, linger_ms=0, retry_backoff_ms=10, reconnect_backoff_ms=20)
    await producer.start()
    await producer.send("t", b"warm-up")
    for broker in (1, 2, 3):
        mock_cluster.set_broker_down(broker)
    deliveries = await producer.enqueue_many([ProducerRecord("t", b"x" * 100) for _ in range(50)])
    started = time.monotonic()
    await asyncio.wait_for(producer.close(timeout=0.2), 10)
    results = await asyncio.wait_for(deliveries, 5)
    assert Counter(type(r) for r in results) == {ProducerClosedError: 50}
    assert time.monotonic() - started < 5
    with pytest.raises(ProducerClosedError):
        await producer.enqueue_many([ProducerRecord("t", b"late")])


async def test_the_mock_producer_waits_until_the_test_completes_the_records() -> None:
    async with MockProducer(auto_complete=False) as mock:
        deliveries = await mock.enqueue_many([ProducerRecord("t", b"a"), ProducerRecord("t", b"b")])
        assert isinstance(deliveries, Deliveries) and len(deliveries) == 2
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(deliveries, 0.05)
        mock.complete_next()
        mock.complete_next()
        results = await asyncio.wait_for(deliveries, 1)
    assert [r.offset for r in results] == [0, 1]  # type: ignore[union-attr]
    assert [r.value for r in mock.history()] == [b"a", b"b"]


class _Watcher:
    """Records every record event with whether the hooks were closed when it came; reads each record's topic at
    the call's start, as the OpenTelemetry hook does."""

    def __init__(self) -> None:
        self.events: list[tuple[str, bool]] = []
        self.closed = False

    def on_record_acknowledged(self, record: ProducerRecord, metadata: Any, error: Any) -> None:
        self.events.append(("acknowledged", self.closed))

    def on_send_many_start(self, records: list[ProducerRecord]) -> set[str]:
        self.events.append(("start", self.closed))
        return {record.topic for record in records}

    def on_send_many_end(self, token: set[str], results: list[Any]) -> None:
        self.events.append(("end", self.closed))

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("call", ["send_many", "enqueue_many"])
async def test_no_hook_hears_of_a_record_after_the_hooks_closed(mock_cluster: MockCluster, call: str) -> None:
    """A call still in its async serializer when close() ran finished after the hooks were closed, and the hooks
    were then told of its records' outcome (and the call's end): Java calls no interceptor after close()."""
    gate = asyncio.Event()

    async def held(value: bytes) -> bytes:
        await gate.wait()
        return value

    watcher = _Watcher()
    mock_cluster.create_topic("t", 1)
    producer = Producer(mock_cluster.bootstrap_servers, value_serializer=held, hooks=[watcher], **FAST)
    await producer.start()
    running = asyncio.ensure_future(getattr(producer, call)([ProducerRecord("t", b"x")]))
    await asyncio.sleep(0.05)
    await asyncio.wait_for(producer.close(), 10)
    gate.set()
    outcome = await asyncio.wait_for(running, 5)
    results = await asyncio.wait_for(outcome, 5) if call == "enqueue_many" else outcome
    await asyncio.sleep(0.05)  # the acknowledging task, had there been one, has run
    assert [type(r) for r in results] == [ProducerClosedError]
    assert watcher.closed and watcher.events[0] == ("start", False)
    assert not [event for event, closed in watcher.events if closed], watcher.events


@pytest.mark.parametrize("call", ["send_many", "enqueue_many"])
async def test_an_item_that_is_not_a_record_does_not_break_the_calls_hooks(
    mock_cluster: MockCluster, call: str
) -> None:
    """The hooks' call start was given every item, records or not, and a hook reading each record's topic (as the
    OpenTelemetry hook does) raised on the item that was not one, losing the call's span."""
    watcher = _Watcher()
    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, hooks=[watcher], **FAST) as producer:
        items: list[Any] = [ProducerRecord("t", b"a"), 5]
        outcome = await getattr(producer, call)(items)
        results = await outcome if call == "enqueue_many" else outcome
        errors = producer.metrics().producer["hook-error-total"]
        with pytest.raises(InvalidRecordError, match="iterable of ProducerRecords, got int"):
            await getattr(producer, call)(5)
    assert [type(r).__name__ for r in results] == ["RecordMetadata", "InvalidRecordError"]
    assert errors == 0
    assert [event for event, _ in watcher.events].count("acknowledged") == 1


async def test_a_shutdown_handler_cancelling_every_task_neither_breaks_the_results_nor_the_hooks(
    mock_cluster: MockCluster,
) -> None:
    """With record hooks, a task acknowledged an enqueue_many call's records and the caller's await waited on that
    task: a shutdown handler cancelling every other task cancelled it, so the hooks never heard of the records (or
    heard CancelledError for delivered ones) and `await deliveries` raised CancelledError in a task nobody
    cancelled."""
    acknowledged: list[tuple[Any, Any]] = []

    class Hook:
        def on_record_acknowledged(self, record: ProducerRecord, metadata: Any, error: Any) -> None:
            acknowledged.append((metadata, error))

    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, hooks=[Hook()], **FAST) as producer:
        await producer.send("t", b"warm-up")
        acknowledged.clear()
        mock_cluster.set_broker_rtt(1, 200)
        running_before = asyncio.all_tasks()  # the producer's own tasks, spared: the point is what the call leaves
        deliveries = await producer.enqueue_many([ProducerRecord("t", b"%d" % i) for i in range(10)])
        # What a shutdown handler does: cancel every task but its own.
        for task in asyncio.all_tasks() - running_before:
            task.cancel()
        await asyncio.sleep(0)
        results = await asyncio.wait_for(deliveries, 5)
    assert [r.offset for r in results] == list(range(1, 11))  # type: ignore[union-attr]
    assert [m.offset for m, _ in acknowledged] == list(range(1, 11))
    assert not [error for _, error in acknowledged if error is not None]


@pytest.mark.parametrize("call", ["send_many", "enqueue_many"])
async def test_the_mock_closing_while_the_serializer_runs_fails_the_records_rather_than_hanging(call: str) -> None:
    """In manual-completion mode, a call whose async serializer finished after the mock closed put its records in
    the closed mock's log, and waiting for them never ended: they fail with ProducerClosedError, as the producer's
    do."""
    gate = asyncio.Event()

    async def held(value: bytes) -> bytes:
        await gate.wait()
        return value

    mock = MockProducer(auto_complete=False, value_serializer=held)
    await mock.start()
    running = asyncio.ensure_future(getattr(mock, call)([ProducerRecord("t", b"a"), ProducerRecord("t", b"b")]))
    await asyncio.sleep(0.01)
    await asyncio.wait_for(mock.close(), 5)
    gate.set()
    outcome = await asyncio.wait_for(running, 5)
    results = await asyncio.wait_for(outcome, 5) if call == "enqueue_many" else outcome
    assert [type(r) for r in results] == [ProducerClosedError, ProducerClosedError]
    assert mock.history() == []


@pytest.mark.parametrize("argument", [5, None, object()])
async def test_the_mock_refuses_an_argument_that_is_not_iterable_as_the_producer_does(argument: Any) -> None:
    """MockProducer.enqueue_many(5) raised a bare TypeError where the producer raises InvalidRecordError."""
    async with MockProducer() as mock:
        for call in (mock.enqueue_many, mock.send_many):
            with pytest.raises(InvalidRecordError, match="iterable"):
                await call(argument)


@pytest.mark.parametrize("hooked", [False, True])
async def test_an_item_of_too_few_fields_is_refused_alike_with_and_without_record_hooks(
    mock_cluster: MockCluster, hooked: bool
) -> None:
    """A short tuple was padded into a record and sent when a record hook was set, and refused without one: one rule
    holds either way, the appender's (six fields)."""

    class Hook:
        def on_record_acknowledged(self, record: ProducerRecord, metadata: Any, error: Any) -> None:
            pass

    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, hooks=[Hook()] if hooked else [], **FAST) as producer:
        results = await producer.send_many([("t", b"short"), ("t", b"whole", None, None, None, None), ["t", b"list"]])
    assert [type(r) for r in results] == [InvalidRecordError, RecordMetadata, InvalidRecordError]
    assert [r.value for r in read_back(mock_cluster.bootstrap_servers, "t")] == [b"whole"]


async def test_a_kept_deliveries_lets_go_of_its_records_once_its_results_are_built() -> None:
    """An awaited Deliveries that was kept held its per-record entries although its results were cached (about
    5 MB per 100 k records compiled, 15 MB pure): keeping it costs only its list of results."""
    import gc
    import tracemalloc

    tracemalloc.start()  # before the records are made: only what is allocated after start() is traced
    try:
        async with MockProducer() as mock:
            deliveries = await mock.enqueue_many([ProducerRecord("t", b"v") for _ in range(100_000)])
            results = await deliveries
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0]
            del deliveries
            gc.collect()
            released = kept - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(results) == 100_000
    # Its cached list of 100 k pointers (~0.8 MB); the records' entries were 5-15 MB more.
    assert released < 1_500_000, released


class _Acknowledgements:
    def __init__(self) -> None:
        self.seen: list[tuple[bytes, RecordMetadata | None, BaseException | None]] = []

    def on_record_acknowledged(self, record: ProducerRecord, metadata: Any, error: Any) -> None:
        self.seen.append((record.value, metadata, error))


@pytest.mark.parametrize("call", ["send_many", "enqueue_many"])
async def test_a_call_cancelled_while_it_waits_for_memory_acknowledges_what_it_buffered_with_its_own_outcome(
    mock_cluster: MockCluster, call: str
) -> None:
    """A cancelled send_many or enqueue_many acknowledged every record of the call to the hooks with the
    CancelledError, though the records it had buffered were still delivered: the hooks (and the OpenTelemetry spans
    and metrics they feed) reported delivered records as failed."""
    hook = _Acknowledgements()
    mock_cluster.create_topic("t", 1)
    async with Producer(
        mock_cluster.bootstrap_servers, hooks=[hook], buffer_memory=64 * 1024, batch_size=16 * 1024, **FAST
    ) as producer:
        await producer.send("t", b"warm-up")
        hook.seen.clear()
        mock_cluster.set_broker_rtt(1, 400)  # memory comes back only as answers come
        values = [b"%02d" % i + b"x" * 10_000 for i in range(20)]
        running = asyncio.ensure_future(getattr(producer, call)([ProducerRecord("t", v) for v in values]))
        await asyncio.sleep(0.1)  # the call buffered what memory allows, and waits for more
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await producer.flush()
        await asyncio.sleep(0.05)
    delivered = [r.value for r in read_back(mock_cluster.bootstrap_servers, "t")][1:]  # after the warm-up
    assert 0 < len(delivered) < len(values)
    assert sorted(value for value, _, _ in hook.seen) == values  # each record acknowledged once
    assert [value for value, metadata, _ in hook.seen if metadata is not None] == delivered
    assert all(isinstance(error, asyncio.CancelledError) for _, metadata, error in hook.seen if metadata is None)


async def test_a_send_many_cancelled_while_it_waits_for_its_answers_acknowledges_each_record_as_delivered(
    mock_cluster: MockCluster,
) -> None:
    """A send_many cancelled once every record was buffered (a caller's timeout while the answers come) told the
    hooks that each record failed with CancelledError; each was delivered."""
    hook = _Acknowledgements()
    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, hooks=[hook], **FAST) as producer:
        await producer.send("t", b"warm-up")
        hook.seen.clear()
        mock_cluster.set_broker_rtt(1, 300)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(producer.send_many([ProducerRecord("t", b"%d" % i) for i in range(10)]), 0.1)
        await producer.flush()
    assert [(value, metadata.offset) for value, metadata, _ in hook.seen] == [  # type: ignore[union-attr]
        (b"%d" % i, i + 1) for i in range(10)
    ]


def test_a_mock_completed_from_outside_the_running_loop_settles_every_waiter() -> None:
    """An awaited Deliveries scheduled its results from inside its batch's settling with get_running_loop(): a
    MockProducer completed from synchronous code between two run_until_complete calls raised RuntimeError out of
    complete_all(), and the batch's other waiters (a record awaited alone) were never woken."""
    loop = asyncio.new_event_loop()
    try:
        mock = MockProducer(auto_complete=False)
        loop.run_until_complete(mock.start())
        deliveries = loop.run_until_complete(mock.enqueue_many([ProducerRecord("t", b"a")]))
        single = loop.run_until_complete(mock.enqueue("t", b"b"))

        async def wait_both() -> Any:
            return await deliveries, await single

        waiting = loop.create_task(wait_both())
        loop.run_until_complete(asyncio.sleep(0.01))  # the Deliveries is watched now
        mock.complete_all()
        results, metadata = loop.run_until_complete(asyncio.wait_for(waiting, 2))
        assert isinstance(results[0], RecordMetadata) and isinstance(metadata, RecordMetadata)
        loop.run_until_complete(mock.close())
    finally:
        loop.close()


def test_a_deliveries_awaited_on_a_closed_loop_does_not_stop_the_mock_completing_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A Deliveries awaited on an event loop that has since closed scheduled its results on that loop once its batch
    settled: call_soon raised RuntimeError out of the batch's settling, so MockProducer.complete_all() raised and
    the records after it (one awaited on a new loop) were never completed."""
    first_loop = asyncio.new_event_loop()
    mock = MockProducer(auto_complete=False)
    try:
        first_loop.run_until_complete(mock.start())
        deliveries = first_loop.run_until_complete(mock.enqueue_many([ProducerRecord("t", b"a")]))
        abandoned = first_loop.create_task(_awaited(deliveries))
        first_loop.run_until_complete(asyncio.sleep(0))  # the Deliveries is watched now
        abandoned.cancel()  # only the await: the Deliveries' results stay due on this loop
        with pytest.raises(asyncio.CancelledError):
            first_loop.run_until_complete(abandoned)
    finally:
        first_loop.close()
    loop = asyncio.new_event_loop()
    try:
        single = loop.run_until_complete(mock.enqueue("t", b"b"))
        waiting = loop.create_task(_awaited(single))
        loop.run_until_complete(asyncio.sleep(0))
        with caplog.at_level(logging.ERROR, logger="aioproducer.deliveries"):
            assert mock.complete_all() == 2
        assert not caplog.records  # nothing went wrong: a closed loop's results are let go, not scheduled
        assert isinstance(loop.run_until_complete(waiting), RecordMetadata)
        loop.run_until_complete(mock.close())
    finally:
        loop.close()


async def test_a_raising_batch_waiter_leaves_the_other_waiters_and_the_records_settled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A batch outcome's waiter that raised stopped its settling: the waiters after it were dropped, the records'
    callbacks never ran (their awaits hung), and the error escaped into whatever settled the batch (here
    MockProducer.complete_all()). Each waiter's error is logged and the others still run."""
    mock = MockProducer(auto_complete=False)
    await mock.start()
    delivery = await mock.enqueue("t", b"a")
    woken: list[str] = []

    def broken() -> None:
        raise ValueError("a broken waiter")

    batch_of(delivery).add_waiter(broken)
    batch_of(delivery).add_waiter(lambda: woken.append("after"))
    resolved: list[Any] = []
    delivery.add_done_callback(lambda done: resolved.append(done.result()))  # waits on the batch too
    with caplog.at_level(logging.ERROR, logger="aioproducer.deliveries"):
        assert mock.complete_all() == 1
    assert woken == ["after"]
    await asyncio.sleep(0)  # the records' callbacks run in one loop callback
    assert [type(result) for result in resolved] == [RecordMetadata]
    assert [str(r.exc_info[1]) for r in caplog.records if r.exc_info] == ["a broken waiter"]
    await mock.close()


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


@pytest.mark.parametrize("hooked", [False, True])
async def test_an_iterator_item_is_pulled_only_as_far_as_a_record_goes(mock_cluster: MockCluster, hooked: bool) -> None:
    """With record hooks an item was made a record by ProducerRecord._make, which drains the whole iterable before
    it counts the fields: an endless iterator item hung the call (and a long one was copied whole), where without
    hooks it is refused in its place after seven values at most."""
    pulled = 0

    def endless() -> Any:
        nonlocal pulled
        while pulled < 100_000:  # stands for "forever"
            pulled += 1
            yield "t"

    hooks = [_Acknowledgements()] if hooked else []
    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, hooks=hooks, **FAST) as producer:
        results = await producer.send_many([endless(), ProducerRecord("t", b"ok")])
    assert [type(r) for r in results] == [InvalidRecordError, RecordMetadata]
    assert pulled <= (14 if hooked else 7)  # the hooks' look and the appender's, seven values each at most


async def test_the_hooks_heard_of_every_record_of_a_bulk_call_once_flush_returns(mock_cluster: MockCluster) -> None:
    """The hooks heard of an enqueue_many call's records a few loop turns after flush() returned (the results are
    built, then acknowledged), where enqueue's records are acknowledged as their batch settles: flush returns once
    the hooks heard of every record it waited for, whichever call buffered it."""
    hook = _Acknowledgements()
    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, hooks=[hook], linger_ms=500) as producer:
        await producer.enqueue_many([ProducerRecord("t", b"%d" % i) for i in range(5)])
        await producer.enqueue("t", b"alone")
        await producer.flush()
        assert sorted(value for value, _, _ in hook.seen) == [b"0", b"1", b"2", b"3", b"4", b"alone"]


@pytest.mark.parametrize("call", ["send_many", "enqueue_many"])
async def test_flush_during_a_bulk_call_returns_once_the_hooks_heard_of_what_it_had_buffered(
    mock_cluster: MockCluster, call: str
) -> None:
    """A flush() made while a send_many or enqueue_many call was still buffering (waiting for a partition to appear)
    returned before the hooks heard of the records the call had buffered, though flush waited for them: the call
    acknowledged its records only once it had buffered them all."""
    hook = _Acknowledgements()
    mock_cluster.create_topic("t", 1)
    mock_cluster.create_topic("growing", 1)
    async with Producer(
        mock_cluster.bootstrap_servers,
        hooks=[hook],
        linger_ms=500,
        max_block_ms=10_000,
        metadata_max_age_ms=100,
        allow_auto_create_topics=False,  # see MockCluster.delete_topic
    ) as producer:
        await producer.send("t", b"warm-up")
        hook.seen.clear()
        records = [ProducerRecord("t", b"%d" % i) for i in range(5)] + [ProducerRecord("growing", b"last", partition=1)]
        running = asyncio.ensure_future(getattr(producer, call)(records))
        await asyncio.sleep(0.2)  # the call buffered the first five records, and waits for partition 1 of "growing"
        assert not running.done()
        await producer.flush()
        assert [(value, metadata.offset) for value, metadata, _ in hook.seen] == [  # type: ignore[union-attr]
            (b"%d" % i, i + 1) for i in range(5)
        ]
        mock_cluster.delete_topic("growing")
        mock_cluster.create_topic("growing", 2)
        results = await running
        if call == "enqueue_many":
            results = await results
        await producer.flush()
    assert [type(result) for result in results] == [RecordMetadata] * 6
    assert [value for value, _, _ in hook.seen] == [b"0", b"1", b"2", b"3", b"4", b"last"]


async def test_a_flush_that_returns_within_its_timeout_leaves_no_record_unacknowledged(
    mock_cluster: MockCluster,
) -> None:
    """flush(timeout) with record hooks returned normally when its wait for the hooks' acknowledgement of a bulk
    call's records ran out of time, leaving records the hooks had not heard of: flush either returns with each
    record it waited for acknowledged, or raises KafkaTimeoutError."""
    hook = _Acknowledgements()
    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, hooks=[hook], linger_ms=500) as producer:
        deliveries = await producer.enqueue_many([ProducerRecord("t", b"%d" % i) for i in range(200_000)])
        while True:
            try:
                await producer.flush(0.002)
                break
            except KafkaTimeoutError:
                pass
        assert len(hook.seen) == 200_000
        assert all(isinstance(result, RecordMetadata) for result in await deliveries)


@pytest.mark.parametrize("hooked", [False, True])
async def test_a_send_many_cancelled_while_buffering_sends_what_it_buffered_without_waiting_out_linger(
    mock_cluster: MockCluster, hooked: bool
) -> None:
    """A send_many cancelled while it still buffered (waiting for a partition to appear) left the records it had
    buffered lingering for linger_ms, where a call that finishes sends its last batches at once."""
    hook = _Acknowledgements()
    mock_cluster.create_topic("t", 1)
    mock_cluster.create_topic("growing", 1)
    async with Producer(
        mock_cluster.bootstrap_servers, hooks=[hook] if hooked else [], linger_ms=60_000, max_block_ms=30_000
    ) as producer:
        records = [ProducerRecord("t", b"%d" % i) for i in range(5)] + [ProducerRecord("growing", b"last", partition=1)]
        running = asyncio.ensure_future(producer.send_many(records))
        await asyncio.sleep(0.2)  # the call buffered the first five records, and waits for partition 1 of "growing"
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        for _ in range(300):  # well within linger_ms
            if producer.metrics().producer["record-send-total"] == 5:
                break
            await asyncio.sleep(0.05)
        assert producer.metrics().producer["record-send-total"] == 5  # the five records the call buffered
