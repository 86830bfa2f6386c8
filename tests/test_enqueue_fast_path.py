"""A plain producer's `enqueue` (running; no record serializers, record hooks or transaction) is its appender's
`enqueue_plain_async`, which buffers the record at once when nothing needs waiting for and otherwise takes the
producer's own method: everything that method does (wait for metadata or memory, let the loop run, refuse the records
of a closing producer) must still happen, on both twins."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any
from unittest import mock

import pytest

from aioproducer import Delivery, Producer
from aioproducer.errors import ProducerClosedError
from aioproducer.testing import MockCluster
from tests.twins import TWINS, use_twin


@pytest.fixture(autouse=True, params=TWINS)
def twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    use_twin(monkeypatch, request.param)
    return request.param  # type: ignore[no-any-return]


async def test_enqueue_held_from_the_running_state_refuses_records_once_the_producer_closes(
    mock_cluster: MockCluster,
) -> None:
    """A caller that kept the running producer's `enqueue` (a bound method of its appender) and awaits it while or
    after the producer closes must get ProducerClosedError, never a record buffered where no sender will send it."""
    mock_cluster.create_topic("t", 1)
    producer = Producer(mock_cluster.bootstrap_servers, linger_ms=1)
    async with producer:
        enqueue = producer.enqueue
        assert (await (await enqueue("t", b"first"))).offset == 0
        closing = asyncio.ensure_future(producer.close())
        await asyncio.sleep(0)  # close() has begun: the producer is closing
        with pytest.raises(ProducerClosedError, match=r"closing|closed"):
            await enqueue("t", b"while closing")
        await closing
    with pytest.raises(ProducerClosedError):
        await enqueue("t", b"after close")
    assert producer.metrics().producer["record-send-total"] == 1


async def test_it_waits_for_buffer_memory_and_delivers_every_record_in_order(mock_cluster: MockCluster) -> None:
    """Records that do not fit the buffer take the producer's own path, which waits for memory: none is refused,
    lost or reordered."""
    mock_cluster.create_topic("t", 1)
    values = [b"%05d" % i + b"x" * 1000 for i in range(600)]
    async with Producer(mock_cluster.bootstrap_servers, linger_ms=1, buffer_memory=64 * 1024) as producer:
        deliveries = [await producer.enqueue("t", value) for value in values]
        offsets = [(await delivery).offset for delivery in deliveries]
    assert offsets == list(range(600))


async def test_a_long_enqueue_loop_lets_the_loop_run(mock_cluster: MockCluster) -> None:
    """A loop of `await enqueue` that never has to wait must still let other tasks run now and then (the producer's
    method yields after each YIELD_AFTER_BYTES buffered): buffering at once every time would starve them."""
    mock_cluster.create_topic("t", 1)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async with Producer(mock_cluster.bootstrap_servers, linger_ms=1) as producer:
        await producer.send("t", b"metadata")
        task = asyncio.ensure_future(ticker())
        await asyncio.sleep(0)
        before = ticks
        for _ in range(20_000):
            await producer.enqueue("t", b"v" * 100)
        during = ticks - before
        task.cancel()
    assert during >= 5, f"other tasks ran {during} times while 2 MB were buffered"


async def test_enqueue_is_a_coroutine_function_call_that_tasks_take(mock_cluster: MockCluster) -> None:
    """What the plain producer's `enqueue` returns must be a coroutine asyncio takes everywhere a coroutine goes
    (create_task, wait_for, gather), as the method's was."""
    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, linger_ms=1) as producer:
        await producer.send("t", b"metadata")
        pending = producer.enqueue("t", b"as a task")
        assert inspect.isawaitable(pending) and asyncio.iscoroutine(pending)
        delivery = await asyncio.create_task(pending)
        both = await asyncio.gather(producer.enqueue("t", b"a"), asyncio.wait_for(producer.enqueue("t", b"b"), 5))
        assert [(await d).offset for d in (delivery, *both)] == [1, 2, 3]


async def test_a_subclass_that_overrides_enqueue_keeps_its_override(mock_cluster: MockCluster) -> None:
    """The plain producer's own `enqueue` is an instance attribute: it must not shadow a subclass's method (which
    `send` calls too)."""
    mock_cluster.create_topic("t", 1)
    calls: list[bytes] = []

    class Counting(Producer):
        async def enqueue(self, topic: str, value: Any = None, **kwargs: Any) -> Delivery:
            calls.append(value)
            return await super().enqueue(topic, value, **kwargs)

    async with Counting(mock_cluster.bootstrap_servers, linger_ms=1) as producer:
        await producer.send("t", b"sent")
        assert (await (await producer.enqueue("t", b"enqueued"))).offset == 1
    assert calls == [b"sent", b"enqueued"]


async def test_enqueue_patched_on_the_class_before_start_or_on_the_producer_is_what_a_plain_producer_calls(
    mock_cluster: MockCluster,
) -> None:
    """A patch of Producer.enqueue before start, or of the producer itself at any time, must be what the producer
    calls (docs/testing.md)."""
    mock_cluster.create_topic("t", 1)
    general = Producer.enqueue
    with mock.patch.object(Producer, "enqueue", autospec=True, side_effect=general) as on_the_class:
        async with Producer(mock_cluster.bootstrap_servers, linger_ms=1) as producer:
            await producer.enqueue("t", b"watched")
    assert on_the_class.call_count == 1
    async with Producer(mock_cluster.bootstrap_servers, linger_ms=1) as producer:
        await producer.send("t", b"metadata")
        with mock.patch.object(producer, "enqueue", wraps=producer.enqueue) as on_the_producer:
            await producer.enqueue("t", b"watched")
        assert on_the_producer.call_count == 1
        assert (await (await producer.enqueue("t", b"after the patch"))).offset == 3
