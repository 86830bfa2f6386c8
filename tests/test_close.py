"""Closing the producer: every pending call resolves with ProducerClosedError (never a bare cancellation, a
ValueError or a hang), `async with` closes within `close_timeout_ms`, and a crashed sender still shuts down.
Runs on librdkafka's mock cluster."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

import pytest

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.errors import ProducerClosedError
from aioproducer.testing import MockCluster

BROKERS = (1, 2, 3)


async def started(mock_cluster: MockCluster, **settings: Any) -> Producer:
    producer = Producer(mock_cluster.bootstrap_servers, **settings)
    await producer.start()
    return producer


async def test_close_while_enqueue_waits_for_metadata_raises_producer_closed(mock_cluster: MockCluster) -> None:
    """close() while enqueue waited for a topic's metadata cancelled the caller's task (CancelledError) instead of
    raising ProducerClosedError."""
    producer = await started(mock_cluster, allow_auto_create_topics=False, max_block_ms=30_000)
    waiting = asyncio.ensure_future(producer.enqueue("nowhere", b"v"))
    sizing = asyncio.ensure_future(producer.partitions_for("nowhere"))
    await asyncio.sleep(0.2)
    assert not waiting.done() and not sizing.done()
    started_at = time.monotonic()
    await asyncio.wait_for(producer.close(), 10)
    for call in (waiting, sizing):
        with pytest.raises(ProducerClosedError):
            await asyncio.wait_for(call, 1)
    assert time.monotonic() - started_at < 5  # at once, not after max_block_ms


async def fill_buffer(producer: Producer, mock_cluster: MockCluster, topic: str) -> list[Any]:
    """Buffer records until buffer_memory is full, with every broker down so nothing drains."""
    await producer.send(topic, b"warm-up")  # metadata known
    for broker in BROKERS:
        mock_cluster.set_broker_down(broker)
    deliveries = []
    while producer._accumulator.has_room(400):
        deliveries.append(await asyncio.wait_for(producer.enqueue(topic, b"x" * 200), 1))
    return deliveries


async def test_close_while_enqueue_waits_for_buffer_memory_raises_producer_closed(mock_cluster: MockCluster) -> None:
    """close() while enqueue waited for buffer memory raised ValueError (a removal from the emptied queue of
    waiters) instead of ProducerClosedError."""
    mock_cluster.create_topic("t", 1)
    producer = await started(mock_cluster, buffer_memory=8_000, max_block_ms=30_000, linger_ms=0)
    deliveries = await fill_buffer(producer, mock_cluster, "t")
    waiting = [asyncio.ensure_future(producer.enqueue("t", b"y" * 200)) for _ in range(3)]
    await asyncio.sleep(0.1)
    assert not any(w.done() for w in waiting)
    started_at = time.monotonic()
    await asyncio.wait_for(producer.close(timeout=0.2), 10)
    for call in waiting:
        with pytest.raises(ProducerClosedError):
            await asyncio.wait_for(call, 1)
    outcomes = await asyncio.gather(*deliveries, return_exceptions=True)
    assert {type(o) for o in outcomes} == {ProducerClosedError}
    assert time.monotonic() - started_at < 5


@pytest.mark.parametrize("close_timeout", [None, 0.0], ids=["close()", "close(timeout=0)"])
async def test_send_many_resolves_every_record_when_close_runs_while_it_buffers(
    mock_cluster: MockCluster, close_timeout: float | None
) -> None:
    """send_many hung forever when close() ran while it was buffering: it kept appending after the queues were
    failed, and no sender was left to settle those batches."""
    mock_cluster.create_topic("t", 4)
    producer = await started(mock_cluster, linger_ms=5)
    await producer.send("t", b"warm-up")
    records = [ProducerRecord("t", b"%06d" % i + b"x" * 1000) for i in range(30_000)]
    call = asyncio.ensure_future(producer.send_many(records))
    # Close at send_many's first yield (after 64 KiB and half a millisecond, of its 30 MB), not after a fixed time: a
    # fast machine once buffered all 30,000 records within 50 ms, and the close found nothing left to refuse.
    while producer._accumulator.used_bytes == 0 and not call.done():  # noqa: ASYNC110 (no event to wait on)
        await asyncio.sleep(0)
    assert not call.done(), "send_many ended before close: make the workload longer"
    await asyncio.wait_for(producer.close(close_timeout), 30)
    results = await asyncio.wait_for(call, 10)
    kinds = Counter(type(r) for r in results)
    assert set(kinds) <= {RecordMetadata, ProducerClosedError} and kinds[ProducerClosedError] > 0, kinds
    # Once one record failed for the close, no later one was buffered.
    first_closed = next(i for i, r in enumerate(results) if isinstance(r, ProducerClosedError))
    assert all(not isinstance(r, RecordMetadata) for r in results[first_closed:] if close_timeout is None)
    assert not producer._accumulator.has_incomplete() and producer._accumulator.used_bytes == 0


async def test_async_with_closes_within_close_timeout_ms(mock_cluster: MockCluster) -> None:
    """`async with` waited for every record however long that took (up to delivery_timeout_ms with the cluster
    down), so a service's shutdown overran its grace period: close_timeout_ms bounds it."""
    mock_cluster.create_topic("t", 1)
    deliveries = []
    async with Producer(mock_cluster.bootstrap_servers, close_timeout_ms=500, buffer_memory=8_000) as producer:
        deliveries = await fill_buffer(producer, mock_cluster, "t")
        left_at = time.monotonic()
    took = time.monotonic() - left_at
    assert 0.4 <= took < 10, took  # bounded by close_timeout_ms, not by delivery_timeout_ms (a loaded machine is slow)
    outcomes = await asyncio.gather(*deliveries, return_exceptions=True)
    assert {type(o) for o in outcomes} == {ProducerClosedError}


async def test_an_explicit_close_timeout_overrides_the_setting(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("t", 1)
    producer = await started(mock_cluster, close_timeout_ms=60_000, buffer_memory=8_000)
    await fill_buffer(producer, mock_cluster, "t")
    started_at = time.monotonic()
    await asyncio.wait_for(producer.close(timeout=0.1), 30)
    assert time.monotonic() - started_at < 20  # not the setting's 60 s


async def test_a_second_close_waits_for_the_first(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("t", 1)
    producer = await started(mock_cluster, buffer_memory=8_000)
    await fill_buffer(producer, mock_cluster, "t")
    first = asyncio.ensure_future(producer.close(timeout=0.5))
    await asyncio.sleep(0)
    await asyncio.wait_for(producer.close(), 10)  # returns only once the first has closed everything
    assert producer._stopped.done() and not producer._cluster._connections
    # The first close's own coroutine returns within a loop turn or two of it: which of the two waiters wakes first
    # is asyncio's choice, and Python 3.13 wakes the second first.
    await asyncio.wait_for(first, 1)


async def test_close_after_the_sender_crashed_still_shuts_down(
    mock_cluster: MockCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """After the sender task crashed, close() returned at once without closing a connection or failing the records
    in flight, and flush() hung forever."""
    mock_cluster.create_topic("t", 1)
    producer = await started(mock_cluster, linger_ms=10_000, batch_size=1 << 20)
    await producer.partitions_for("t")
    buffered = [await producer.enqueue("t", b"v%d" % i) for i in range(10)]

    def crash(now: int) -> Any:
        raise RuntimeError("injected sender failure")

    with caplog.at_level(logging.ERROR, logger="aioproducer.producer"):
        producer._sender._send_ready = crash  # type: ignore[method-assign]
        producer._sender.wake()
        outcomes = await asyncio.wait_for(asyncio.gather(*buffered, return_exceptions=True), 5)
    assert {type(o) for o in outcomes} == {ProducerClosedError}
    assert "injected sender failure" in str(outcomes[0])
    assert "sender task crashed" in caplog.text
    with pytest.raises(ProducerClosedError, match="sender failed"):
        await producer.enqueue("t", b"after")
    await asyncio.wait_for(producer.flush(), 5)
    await asyncio.wait_for(producer.close(), 5)
    cluster = producer._cluster
    assert cluster._closed and not cluster._connections
    assert cluster._bootstrap_connection is None or cluster._bootstrap_connection.closed
    assert producer._task is not None and producer._task.done()
