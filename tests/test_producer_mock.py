"""The producer on librdkafka's mock cluster: several brokers, an old ApiVersions, injected Produce errors."""

from __future__ import annotations

import asyncio

import pytest

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import InternalError, RecordTooLargeError
from aioproducer.idempotence.sequences import IdempotenceState
from aioproducer.protocol import ApiKey
from aioproducer.testing import MockCluster, read_back

MESSAGE_TOO_LARGE = ErrorCode.MESSAGE_TOO_LARGE


async def test_produces_to_every_leader_of_a_three_broker_cluster(mock_cluster: MockCluster) -> None:
    # The mock answers ApiVersions v3 with UNSUPPORTED_VERSION: the producer must fall back and go on.
    mock_cluster.create_topic("spread", 6)
    async with Producer(mock_cluster.bootstrap_servers) as producer:
        results = await producer.send_many([ProducerRecord("spread", b"%d" % i, partition=i % 6) for i in range(60)])
    assert all(isinstance(r, RecordMetadata) for r in results)
    records = read_back(mock_cluster.bootstrap_servers, "spread")
    assert sorted(int(r.value or b"") for r in records) == list(range(60))
    assert {r.partition for r in records} == set(range(6))


async def test_message_too_large_splits_the_batch_and_delivers_every_record_once(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("big", 1)
    # One request in flight: the mock does not check idempotent sequences (a real broker would reject the second
    # half with OUT_OF_ORDER_SEQUENCE while the first is retried), so pipelining could reorder the halves here.
    settings = {"linger_ms": 200, "batch_size": 1 << 20, "max_in_flight_requests_per_connection": 1}
    async with Producer(mock_cluster.bootstrap_servers, **settings) as producer:
        await producer.send("big", b"warm-up")
        mock_cluster.push_request_errors(ApiKey.PRODUCE, MESSAGE_TOO_LARGE, MESSAGE_TOO_LARGE)
        results = await producer.send_many([ProducerRecord("big", b"r%02d" % i) for i in range(20)])
    assert all(isinstance(r, RecordMetadata) for r in results), results
    values = [r.value for r in read_back(mock_cluster.bootstrap_servers, "big")]
    assert values == [b"warm-up"] + [b"r%02d" % i for i in range(20)]


async def test_message_too_large_for_a_single_record_fails_it_with_a_typed_error(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("one", 1)
    async with Producer(mock_cluster.bootstrap_servers, linger_ms=0) as producer:
        await producer.send("one", b"warm-up")
        mock_cluster.push_request_errors(ApiKey.PRODUCE, MESSAGE_TOO_LARGE)
        with pytest.raises(RecordTooLargeError):
            await producer.send("one", b"too big for this broker")
        md = await producer.send("one", b"next")
    assert md.offset == 1


@pytest.mark.parametrize("how", ["flush", "close"])
async def test_flush_and_close_return_once_a_split_batch_is_delivered(mock_cluster: MockCluster, how: str) -> None:
    """Regression: flush() and close() waited forever once a batch they waited on was split after
    MESSAGE_TOO_LARGE: the split batch left the set of incomplete batches without telling its waiters."""
    mock_cluster.create_topic("split-wait", 1)
    producer = Producer(mock_cluster.bootstrap_servers, linger_ms=100, batch_size=1 << 20)
    await producer.start()
    try:
        await producer.send("split-wait", b"warm-up")
        mock_cluster.push_request_errors(ApiKey.PRODUCE, MESSAGE_TOO_LARGE)
        deliveries = [await producer.enqueue("split-wait", b"r%02d" % i) for i in range(20)]
        if how == "flush":
            await asyncio.wait_for(producer.flush(), 10)
        else:
            await asyncio.wait_for(producer.close(), 10)
        assert all(d.done() and d.exception() is None for d in deliveries)
    finally:
        await producer.close(timeout=1)
    values = [r.value for r in read_back(mock_cluster.bootstrap_servers, "split-wait")]
    assert values == [b"warm-up"] + [b"r%02d" % i for i in range(20)]


async def test_a_fault_in_handling_an_answer_fails_the_records_instead_of_leaving_them_pending(
    mock_cluster: MockCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every record resolves even if handling its Produce answer raises (a bug). Regression: the record failed with
    that bug's own exception (a RuntimeError here), not an aioproducer error; it is now an InternalError caused by it.
    """
    mock_cluster.create_topic("faulty", 1)
    async with Producer(mock_cluster.bootstrap_servers, linger_ms=0) as producer:
        await producer.send("faulty", b"warm-up")

        def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("a bug in answer handling")

        monkeypatch.setattr(IdempotenceState, "on_response", broken)
        with pytest.raises(InternalError, match="a bug") as failed:
            await asyncio.wait_for(producer.send("faulty", b"v"), 10)
        assert isinstance(failed.value.__cause__, RuntimeError)
        monkeypatch.undo()
        assert (await producer.send("faulty", b"after")).offset >= 1


async def test_the_sender_wakes_for_a_lingering_batch_at_its_due_time_not_a_whole_delay_after_now(
    mock_cluster: MockCluster,
) -> None:
    """The sender slept `delay` ms from the real time although the delay was counted from the clock cut to whole
    milliseconds: a lingering batch went out up to 1 ms after linger_ms (beyond the selector's own rounding), which
    an idle `send` paid in full. Its timer is now set at the batch's due time (created_ms + linger_ms, + 0.1 ms so
    the clock then reads that millisecond)."""
    mock_cluster.create_topic("due", 1)
    linger_ms = 200
    async with Producer(mock_cluster.bootstrap_servers, linger_ms=linger_ms) as producer:
        await producer.send("due", b"warm")
        loop = asyncio.get_running_loop()
        timers: list[float] = []
        original = loop.call_at

        def recording_call_at(when: float, callback: object, *args: object, **kwargs: object) -> asyncio.TimerHandle:
            timers.append(when)
            return original(when, callback, *args, **kwargs)  # type: ignore[arg-type]

        loop.call_at = recording_call_at  # type: ignore[method-assign]
        try:
            delivery = await producer.enqueue("due", b"x")
            batch = producer._accumulator.queues["due", 0][0]
            for _ in range(5):
                await asyncio.sleep(0)
        finally:
            del loop.call_at
        due_s = (batch.created_ms + linger_ms) / 1000
        assert any(abs(when - (due_s + 0.0001)) < 1e-9 for when in timers), (due_s, timers)
        assert (await delivery).offset == 1


@pytest.mark.parametrize("call", ["send_many", "send_table"])
async def test_a_call_waiting_for_its_records_leaves_other_records_to_linger(
    mock_cluster: MockCluster, call: str
) -> None:
    """Bug: while a send_many or send_table call waited for its records, every batch of every caller was ready at
    once (the call flushed), so under a pipeline of such calls (Spark's tasks keep several send_table calls going)
    linger_ms never applied and batches went out in fragments. The call's own last batches still go out at once;
    a record buffered meanwhile, to another partition, must wait its linger_ms."""
    import pyarrow as pa

    mock_cluster.create_topic("pipeline", 2)
    for partition in (0, 1):
        mock_cluster.set_partition_leader("pipeline", partition, 1)
    linger_ms = 1500
    async with Producer(mock_cluster.bootstrap_servers, linger_ms=linger_ms, batch_size=1 << 20) as producer:
        await producer.send("pipeline", b"warm-up", partition=0)
        mock_cluster.set_broker_rtt(1, 400)  # the call waits about 400 ms for its answer
        loop = asyncio.get_running_loop()
        started = loop.time()
        if call == "send_many":
            waiting = asyncio.ensure_future(producer.send_many([ProducerRecord("pipeline", b"a", partition=0)]))
        else:
            table = pa.table({"value": [b"a"], "partition": pa.array([0], pa.int32())})
            waiting = asyncio.ensure_future(
                producer.send_table(table, topic="pipeline", value="value", partition="partition")
            )
        await asyncio.sleep(0.1)  # the call is waiting for its answer now
        assert not waiting.done()
        other = producer.enqueue_nowait("pipeline", b"b", partition=1)
        buffered = loop.time()
        await waiting
        assert loop.time() - started < linger_ms / 1000 * 0.8, "the call's own batch waited for linger_ms"
        await asyncio.sleep(0.3)
        assert not other.done(), "a record buffered while another call waited went out before its linger_ms"
        await other
        assert loop.time() - buffered >= linger_ms / 1000
