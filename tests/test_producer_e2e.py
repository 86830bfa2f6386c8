"""The producer end to end against the session's broker (real Kafka, or AIOPRODUCER_BOOTSTRAP), judged by an independent
consumer (confluent-kafka with check.crcs=true) that reads everything back."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable

import pytest

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.errors import InvalidRecordError, ProducerClosedError, RecordTooLargeError, UnknownPartitionError
from aioproducer.partitioner import partition_for_key
from aioproducer.testing import ConsumedRecord

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def by_position(records: list[ConsumedRecord]) -> dict[tuple[int, int], ConsumedRecord]:
    return {(r.partition, r.offset): r for r in records}


async def test_send_returns_metadata_and_the_record_reads_back(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic = topic_factory(4)
    async with Producer(bootstrap) as producer:
        md = await producer.send(
            topic, b"hello", key=b"k1", headers=[("trace", b"1"), ("empty", None)], timestamp_ms=1_700_000_000_123
        )
    assert isinstance(md, RecordMetadata)
    assert (md.topic, md.partition) == (topic, partition_for_key(b"k1", 4))
    assert md.offset == 0 and md.serialized_key_size == 2 and md.serialized_value_size == 5
    [record] = read_back_records(topic)
    assert (record.partition, record.offset, record.key, record.value) == (md.partition, 0, b"k1", b"hello")
    assert record.headers == (("trace", b"1"), ("empty", None))
    assert record.timestamp_ms == 1_700_000_000_123


@pytest.mark.parametrize("codec", CODECS)
async def test_every_codec_reads_back_exactly(
    codec: str,
    bootstrap: str,
    topic_factory: Callable[..., str],
    read_back_records: Callable[..., list[ConsumedRecord]],
) -> None:
    topic = topic_factory(3)
    records = [
        ProducerRecord(
            topic,
            (b"value-%d-" % i) * (i % 7 + 1) if i % 11 else None,
            key=(b"key-%d" % (i % 13)) if i % 2 else None,
            headers=[("n", str(i).encode()), ("h\u00e9", b"")] if i % 3 == 0 else None,
            timestamp_ms=1_600_000_000_000 + i,
        )
        for i in range(300)
    ]
    async with Producer(bootstrap, compression_type=codec, linger_ms=20, batch_size=4096) as producer:
        results = await producer.send_many(records)
    assert all(isinstance(r, RecordMetadata) for r in results), [
        r for r in results if not isinstance(r, RecordMetadata)
    ][:3]
    consumed = by_position(read_back_records(topic))
    assert len(consumed) == len(records)
    for sent, md in zip(records, results, strict=True):
        assert isinstance(md, RecordMetadata)
        got = consumed[(md.partition, md.offset)]
        assert (got.key, got.value, got.timestamp_ms) == (sent.key, sent.value, sent.timestamp_ms)
        assert got.headers == tuple(sent.headers or ())
        if sent.key is not None:
            assert md.partition == partition_for_key(sent.key, 3)


async def test_enqueue_futures_resolve_in_order_per_partition(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(2)
    async with Producer(bootstrap, linger_ms=1) as producer:
        futures = [await producer.enqueue(topic, b"%d" % i, partition=i % 2) for i in range(200)]
        results = await asyncio.gather(*futures)
    for partition in (0, 1):
        offsets = [md.offset for md in results if md.partition == partition]
        assert offsets == list(range(100))


@pytest.mark.parametrize("acks", [0, 1, "all"])
async def test_acks_levels_deliver(
    acks: int | str,
    bootstrap: str,
    topic_factory: Callable[..., str],
    read_back_records: Callable[..., list[ConsumedRecord]],
) -> None:
    topic = topic_factory(1)
    async with Producer(bootstrap, acks=acks) as producer:
        results = await asyncio.gather(*(producer.send(topic, b"v%d" % i) for i in range(20)))
    if acks == 0:
        assert all(md.offset == -1 for md in results)  # acks=0: nobody tells us the offset
    else:
        assert sorted(md.offset for md in results) == list(range(20))
    assert sorted(r.value for r in read_back_records(topic)) == sorted(b"v%d" % i for i in range(20))


async def test_flush_and_close_deliver_everything_buffered(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic = topic_factory(4)
    producer = Producer(bootstrap, linger_ms=60_000, batch_size=1_000_000)
    await producer.start()
    first = [await producer.enqueue(topic, b"a%d" % i) for i in range(50)]
    await producer.flush()
    assert all(f.done() and not f.exception() for f in first)
    second = [await producer.enqueue(topic, b"b%d" % i) for i in range(50)]
    await producer.close()
    assert all(f.done() and not f.exception() for f in second)
    assert len(read_back_records(topic)) == 100


async def test_bad_input_raises_typed_errors_at_the_call(bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(2)
    # max_block_ms: a partition beyond the topic is waited for (metadata may show it later), for at most that long.
    async with Producer(bootstrap, max_request_size=10_000, max_block_ms=500) as producer:
        with pytest.raises(InvalidRecordError, match="invalid topic name"):
            await producer.send("bad topic!", b"v")
        with pytest.raises(InvalidRecordError, match="value"):
            await producer.send(topic, 12345)
        with pytest.raises(InvalidRecordError, match="header"):
            await producer.send(topic, b"v", headers=[("k", "not-bytes")])  # type: ignore[list-item]
        with pytest.raises(UnknownPartitionError, match=r"partitions 0\.\.1"):
            await producer.send(topic, b"v", partition=2)
        with pytest.raises(UnknownPartitionError):
            await producer.send(topic, b"v", partition=-1)
        with pytest.raises(RecordTooLargeError, match="max_request_size"):
            await producer.send(topic, b"x" * 20_000)
        results = await producer.send_many(
            [ProducerRecord(topic, b"ok"), ProducerRecord(topic, 3), ProducerRecord(topic, b"ok2")]
        )
        assert isinstance(results[0], RecordMetadata) and isinstance(results[2], RecordMetadata)
        assert isinstance(results[1], InvalidRecordError)


async def test_closed_or_unstarted_producer_raises_at_once(bootstrap: str) -> None:
    producer = Producer(bootstrap)
    with pytest.raises(ProducerClosedError, match="not started"):
        await producer.send("t", b"v")
    await producer.start()
    await producer.close()
    with pytest.raises(ProducerClosedError, match="closed"):
        await asyncio.wait_for(producer.send("t", b"v"), 1)
    with pytest.raises(ProducerClosedError):
        await producer.send_many([ProducerRecord("t", b"v")])


async def test_large_compressed_batches_are_compressed_off_the_loop(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic = topic_factory(1)
    payloads = [bytes([i % 251]) * 1000 + str(i).encode() for i in range(600)]
    async with Producer(bootstrap, compression_type="zstd", batch_size=512 * 1024, linger_ms=50) as producer:
        results = await producer.send_many([ProducerRecord(topic, p) for p in payloads])
    assert [md.offset for md in results if isinstance(md, RecordMetadata)] == list(range(600))
    assert [r.value for r in read_back_records(topic)] == payloads


async def test_close_leaves_no_tasks_behind(bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(2)
    before = asyncio.all_tasks()
    async with Producer(bootstrap) as producer:
        await producer.send(topic, b"v")
    await asyncio.sleep(0)
    assert asyncio.all_tasks() - before == set()


async def test_a_tight_enqueue_loop_lets_the_sender_and_other_tasks_run(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    """Regression: enqueue only suspended when it had to wait, so a tight loop of calls held the event loop until
    buffer_memory was full — the sender sent nothing meanwhile and other tasks stalled for hundreds of ms."""
    topic = topic_factory(2)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async with Producer(bootstrap, linger_ms=0) as producer:
        await producer.send(topic, b"warm-up")
        task = asyncio.create_task(ticker())
        futures = [await producer.enqueue(topic, b"x" * 100) for _ in range(20_000)]
        delivered_during_loop = sum(f.done() for f in futures)
        task.cancel()
        await asyncio.gather(*futures)
    assert ticks >= 10
    assert delivered_during_loop > 0


async def test_wait_gives_every_idiom_the_same_exact_results_as_the_broker_holds(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    """`producer.wait(deliveries)`, `asyncio.gather` over the same deliveries and a done-callback per record agree
    with each other and with what an independent consumer reads back, record by record, across partitions."""
    topic = topic_factory(3)
    async with Producer(bootstrap, linger_ms=5, batch_size=1024) as producer:
        deliveries = [await producer.enqueue(topic, b"v%d" % i, key=b"k%d" % (i % 7)) for i in range(600)]
        called: dict[int, object] = {}
        for i, delivery in enumerate(deliveries):
            delivery.add_done_callback(lambda d, i=i: called.__setitem__(i, d.result()))
        waited = await producer.wait(reversed(deliveries))
        gathered = await asyncio.gather(*deliveries)
        await asyncio.sleep(0)  # the done callbacks run at the loop's next turn
    assert list(reversed(waited)) == gathered == [called[i] for i in range(600)]
    stored = by_position(read_back_records(topic))
    assert len(stored) == 600
    for i, md in enumerate(gathered):
        assert isinstance(md, RecordMetadata) and stored[md.partition, md.offset].value == b"v%d" % i


async def test_a_handle_in_a_reference_cycle_is_freed(bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """The compiled handles were once untracked by the cyclic collector (and not traversed), so a handle in a
    reference cycle was never freed: this checks that a handle whose callback refers back to it (as an awaiting
    task's does) is freed once its batch settled and the callback ran, on both paths."""

    class Callback:
        def __init__(self) -> None:
            self.delivery: object = None
            self.calls = 0

        def __call__(self, delivery: object) -> None:
            assert delivery is self.delivery
            self.calls += 1

    topic = topic_factory(1)
    async with Producer(bootstrap) as producer:
        delivery = await producer.enqueue(topic, b"v")
        assert gc.is_tracked(delivery)
        callback = Callback()
        callback.delivery = delivery  # a cycle: handle -> its callbacks -> callback -> handle
        delivery.add_done_callback(callback)
        watched = weakref.ref(callback)
        await producer.flush()
        await asyncio.sleep(0)  # the callback runs at the loop's next turn
        assert callback.calls == 1
        del callback, delivery
        gc.collect()
        assert watched() is None
