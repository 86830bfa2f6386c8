"""buffer_memory backpressure: senders wait for space in arrival order, and not longer than max_block_ms."""

from __future__ import annotations

import asyncio
import time

import pytest

from aioproducer import Producer, RecordMetadata
from aioproducer.errors import BufferExhaustedError
from aioproducer.testing import MockCluster, read_back


async def test_waiters_for_buffer_memory_are_served_in_arrival_order(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("fifo", 1)
    settings = {"buffer_memory": 2000, "linger_ms": 0, "max_in_flight_requests_per_connection": 1, "batch_size": 600}
    async with Producer(mock_cluster.bootstrap_servers, **settings) as producer:
        await producer.send("fifo", b"warm-up")
        for broker in (1, 2, 3):
            mock_cluster.set_broker_rtt(broker, 150)  # slow acknowledgements keep the buffer full for a while
        buffered: list[int] = []

        async def enqueue(n: int) -> asyncio.Future[RecordMetadata]:
            future = await producer.enqueue("fifo", b"%03d" % n + b"x" * 400)
            buffered.append(n)
            return future

        tasks = []
        for n in range(12):
            tasks.append(asyncio.create_task(enqueue(n)))
            await asyncio.sleep(0.001)  # a definite arrival order
        futures = await asyncio.gather(*tasks)
        results = await asyncio.gather(*futures)
    assert buffered == list(range(12))
    assert [md.offset for md in results] == list(range(1, 13))
    values = [r.value[:3] for r in read_back(mock_cluster.bootstrap_servers, "fifo")[1:] if r.value]
    assert values == [b"%03d" % n for n in range(12)]


async def test_a_full_buffer_fails_the_call_after_max_block_ms(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("full", 1)
    settings = {"buffer_memory": 2000, "max_block_ms": 400, "linger_ms": 0, "request_timeout_ms": 10_000}
    async with Producer(mock_cluster.bootstrap_servers, **settings) as producer:
        await producer.send("full", b"warm-up")
        for broker in (1, 2, 3):
            mock_cluster.set_broker_rtt(broker, 1200)
        first = await producer.enqueue("full", b"a" * 1000)
        started = time.monotonic()
        with pytest.raises(BufferExhaustedError, match="max_block_ms=400"):
            await producer.enqueue("full", b"b" * 1000)
        assert 0.35 < time.monotonic() - started < 2.0
        for broker in (1, 2, 3):
            mock_cluster.set_broker_rtt(broker, 0)
        assert (await first).offset == 1
    # The record that timed out waiting for memory was never sent.
    assert [r.value for r in read_back(mock_cluster.bootstrap_servers, "full")] == [b"warm-up", b"a" * 1000]
