"""acks=0 through a slow reader, a close, a connection asyncio closes under a write, and a topic with a small
max.message.bytes, on real Kafka (`kafka_cluster`) and librdkafka's mock cluster, each behind the fault proxy
(fault_proxy.py). With acks=0 a record is delivered once its bytes are in the broker's socket: the proxy's record of
what it read off the producer's socket is the judge, and nothing may hang."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from fault_helpers import read_back_async
from fault_proxy import FaultProxy

from aioproducer import Producer
from aioproducer.errors import ProducerClosedError
from aioproducer.testing import KafkaCluster, MockCluster

pytestmark = pytest.mark.timeout(240)

# Far longer than any test waits: a record that waited for it would mean the sender slept through its chance.
DELIVERY_TIMEOUT_MS = 600_000
# 20 MB: more than the loopback socket buffers of three connections hold (the kernel grows a send buffer up to
# 4 MiB), so a stalled reader makes the producer's transport push back.
BURST_RECORDS, VALUE_BYTES = 40_000, 500


@dataclass
class Target:
    name: str
    bootstrap_servers: str
    create_topic: Callable[[str, int, dict[str, str]], None]


@pytest.fixture(params=["kafka", "mock"])
async def target(request: pytest.FixtureRequest) -> AsyncIterator[Target]:
    if request.param == "kafka":
        cluster: KafkaCluster = request.getfixturevalue("kafka_cluster")

        def create(topic: str, partitions: int, config: dict[str, str]) -> None:
            cluster.create_topic(topic, partitions, config=config)

        yield Target("kafka", cluster.bootstrap_servers, create)
    else:
        mock: MockCluster = request.getfixturevalue("mock_cluster")
        yield Target(
            "mock", mock.bootstrap_servers, lambda topic, partitions, _config: mock.create_topic(topic, partitions)
        )


async def warm_up(producer: Producer, topic: str, partitions: int) -> None:
    """A record to each partition: every leader's connection is open before the broker stops reading (a stalled
    proxy would hold a new connection's handshake too)."""
    for partition in range(partitions):
        await producer.send(topic, b"warm-up", partition=partition)


async def check_stored(target: Target, topic: str, delivered: set[bytes]) -> None:
    """On Kafka every record the proxy passed on is in the log. The mock keeps only the last 5 MB of a partition's
    log (librdkafka's mock partitions trim beyond that), so there the proxy's record is the whole judge."""
    if target.name != "kafka":
        return
    stored = {r.value for r in await read_back_async(target.bootstrap_servers, topic, timeout_s=60)}
    missing = delivered - stored
    assert not missing, f"{len(missing)} of {len(delivered)} records delivered are not in the log"


def values(tag: str, count: int) -> list[bytes]:
    return [b"%s-%06d-" % (tag.encode(), i) + b"x" * (VALUE_BYTES - 16) for i in range(count)]


def outcomes(deliveries: list[asyncio.Future[object]]) -> tuple[list[int], list[BaseException]]:
    delivered = [i for i, d in enumerate(deliveries) if d.done() and not d.cancelled() and d.exception() is None]
    failed = [d.exception() for d in deliveries if d.done() and not d.cancelled() and d.exception() is not None]
    return delivered, [e for e in failed if e is not None]


async def test_a_producer_pushed_back_by_a_slow_reader_sends_again_as_soon_as_the_broker_reads(target: Target) -> None:
    """Regression: when a connection's write buffer filled, the sender skipped that connection and nothing woke it
    when the buffer drained (resume_writing only cleared a flag, and acks=0 brings no answers to wake it): the
    records waited for delivery_timeout_ms and failed "not sent" while the broker read normally, and flush() hung as
    long. A broker that stopped reading for 0.5 s cost 2,072 of 8,000 records and a 14.5 s flush on the mock."""
    topic = f"slow-reader-{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(target.create_topic, topic, 3, {})
    proxy = FaultProxy(observe_records=True)
    producer = Producer(
        await proxy.bootstrap(target.bootstrap_servers), acks=0, delivery_timeout_ms=DELIVERY_TIMEOUT_MS
    )
    await producer.start()
    try:
        await warm_up(producer, topic, 3)
        proxy.stop_reading()
        sent = values("burst", BURST_RECORDS)
        deliveries = [await producer.enqueue(topic, value) for value in sent]
        await asyncio.sleep(0.5)  # the sender writes until the transport pushes back
        assert not all(d.done() for d in deliveries), "the burst fit in the socket buffers: the test proves nothing"
        proxy.resume_reading()
        started = time.monotonic()
        # Waiting on the records themselves wakes nobody: only the transport's taking bytes again can wake the
        # sender now. Far below delivery_timeout_ms: the sender must not wait for it.
        _, pending = await asyncio.wait(deliveries, timeout=60)  # type: ignore[type-var]
        assert not pending, f"{len(pending)} records still pending 60 s after the broker read again"
        settled_s = time.monotonic() - started
        await producer.flush(timeout=60)
    finally:
        await producer.close(timeout=5)
        assert await proxy.idle(60), "the producer's connections did not end after close"
        await proxy.close()
    delivered, failed = outcomes(deliveries)  # type: ignore[arg-type]
    assert not failed, f"{len(failed)} records failed, e.g. {failed[0]!r}"
    assert len(delivered) == len(sent)
    assert set(sent) <= proxy.records_read, "a record reported delivered never reached the broker's socket"
    await check_stored(target, topic, set(sent))
    print(f"{target.name}: the records settled {settled_s:.2f} s after the broker read again")


async def test_close_sends_in_full_what_it_reported_delivered_before_it_closes_the_socket(target: Target) -> None:
    """Regression: an acks=0 batch was reported delivered once handed to the asyncio transport, and close() ended
    the connections with transport.abort(), which drops the transport's buffer: records reported delivered never
    left the client (4,193 reported delivered, 130 of them lost, 3 runs of 3)."""
    topic = f"acks0-close-{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(target.create_topic, topic, 3, {})
    proxy = FaultProxy(observe_records=True)
    producer = Producer(
        await proxy.bootstrap(target.bootstrap_servers), acks=0, delivery_timeout_ms=DELIVERY_TIMEOUT_MS
    )
    await producer.start()
    await warm_up(producer, topic, 3)
    proxy.stop_reading()
    sent = values("close", BURST_RECORDS)
    deliveries = [await producer.enqueue(topic, value) for value in sent]
    await asyncio.sleep(0.5)  # a part is in the socket (delivered), the rest waits in the producer
    await producer.close(timeout=0.5)  # the broker still does not read: close gives up on the rest
    proxy.resume_reading()
    assert await proxy.idle(60), "the producer's connections did not end after close"
    await proxy.close()
    delivered, failed = outcomes(deliveries)  # type: ignore[arg-type]
    assert delivered and failed, f"{len(delivered)} delivered, {len(failed)} failed: the test proves nothing"
    assert all(isinstance(error, ProducerClosedError) for error in failed)
    lost = [sent[i] for i in delivered if sent[i] not in proxy.records_read]
    assert not lost, f"{len(lost)} of {len(delivered)} records reported delivered never reached the broker's socket"
    await check_stored(target, topic, {sent[i] for i in delivered})


async def test_acks_zero_batches_fit_a_topic_with_a_small_max_message_bytes(target: Target) -> None:
    """Regression: batches grew to batch_max_size (256 KiB) while they waited; a topic whose max.message.bytes is
    lower refuses them, and under acks=0 the broker can only close the connection, so the split that saves a grown
    batch under acks=1/all never ran: 3,000 records reported delivered, none stored. Batches now stay at
    batch_size under acks=0, as Java's do."""
    topic = f"acks0-small-{uuid.uuid4().hex[:8]}"
    limit = 20_000  # above batch_size (16 KiB), below what a grown batch reaches
    await asyncio.to_thread(target.create_topic, topic, 2, {"max.message.bytes": str(limit)})
    proxy = FaultProxy(observe_records=True, receive_buffer=None)
    if target.name == "mock":
        proxy.max_message_bytes[topic] = limit  # the mock has no such limit: the proxy refuses as Kafka would
    producer = Producer(
        await proxy.bootstrap(target.bootstrap_servers), acks=0, delivery_timeout_ms=DELIVERY_TIMEOUT_MS
    )
    await producer.start()
    try:
        await warm_up(producer, topic, 2)
        sent = [b"small-%05d-" % i + b"y" * 190 for i in range(3000)]
        # Without yielding between records, as a burst does: batches would grow while the sender waits its turn.
        results = await producer.send_many([(topic, value, None, None, None, None) for value in sent])
        await producer.flush(timeout=60)
    finally:
        await producer.close(timeout=5)
        assert await proxy.idle(60), "the producer's connections did not end after close"
        await proxy.close()
    assert not [r for r in results if isinstance(r, BaseException)]
    assert proxy.refused_batches == 0
    assert set(sent) <= proxy.records_read
    stored = {r.value for r in await read_back_async(target.bootstrap_servers, topic, timeout_s=60)}
    assert set(sent) <= stored, f"{len(set(sent) - stored)} of {len(sent)} records reported delivered not stored"


async def test_a_request_a_closing_connection_dropped_is_sent_again_and_reaches_the_broker(target: Target) -> None:
    """Regression: an acks=0 request written to a connection asyncio had already closed (it closes the transport
    itself on a failed send or on the broker's end of stream, and calls connection_lost a turn later) was reported
    delivered though asyncio dropped its bytes, and the record was lost (the fault campaign's 'acks=0 not on socket').
    The request must fail as a lost connection, go out again on a new one, and reach the broker."""
    topic = f"acks0-dropped-{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(target.create_topic, topic, 1, {})
    proxy = FaultProxy(observe_records=True)
    async with Producer(
        await proxy.bootstrap(target.bootstrap_servers), acks=0, delivery_timeout_ms=DELIVERY_TIMEOUT_MS
    ) as producer:
        await warm_up(producer, topic, 1)
        connections = list(producer._cluster._connections.values())
        assert connections

        def closing_before_its_next_write(conn: Any) -> None:
            write = conn._write

            def close_then_write(correlation_id: int, frame: bytes) -> None:
                conn._write = write
                conn._transport.close()  # what asyncio does by itself; connection_lost comes a turn later
                write(correlation_id, frame)

            conn._write = close_then_write

        for conn in connections:
            closing_before_its_next_write(conn)
        metadata = await asyncio.wait_for(producer.send(topic, b"the-dropped-one", partition=0), 30)
        assert metadata.partition == 0
    assert await proxy.idle(60), "the producer's connections did not end after close"
    await proxy.close()
    assert b"the-dropped-one" in proxy.records_read, "reported delivered, never reached the broker's socket"
    await check_stored(target, topic, {b"the-dropped-one"})
