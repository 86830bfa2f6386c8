"""`send_many` and `enqueue_many` over an iterator that is not a sequence (a generator): its records are read as the
call goes, a chunk at a time, never all at once; one result per record, in order, holds as for a list."""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from aioproducer import Producer, RecordMetadata
from aioproducer.errors import AioProducerError, ProducerClosedError
from aioproducer.producer_bulk import STREAM_CHUNK
from aioproducer.testing import ConsumedRecord, MockCluster, MockProducer, read_back

FAST = {"linger_ms": 1, "retry_backoff_ms": 10, "reconnect_backoff_ms": 20, "max_block_ms": 5000}


def records(topic: str, count: int, first: int = 0) -> Iterator[tuple[Any, ...]]:
    return ((topic, b"%06d" % n, None, None, None, None) for n in range(first, first + count))


async def test_a_generators_records_arrive_in_order_each_with_its_own_result(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic = topic_factory(partitions=1)
    count = 10 * STREAM_CHUNK + 17  # whole chunks and a part of one
    async with Producer(bootstrap, **FAST) as producer:
        sent = await producer.send_many(records(topic, count))
        enqueued = await (await producer.enqueue_many(records(topic, count, first=count)))
    offsets = [r.offset for r in [*sent, *enqueued] if isinstance(r, RecordMetadata)]
    assert offsets == list(range(2 * count)), "a result is missing, out of order, or another record's"
    assert [r.value for r in read_back_records(topic)] == [b"%06d" % n for n in range(2 * count)]


@pytest.mark.parametrize("call", ["send_many", "enqueue_many"])
async def test_a_generators_records_are_buffered_while_it_is_still_being_read(
    mock_cluster: MockCluster, call: str
) -> None:
    """The call read the whole iterable into a list before it buffered its first record: a generator's records all
    existed at once, however many there were."""
    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, **FAST) as producer:
        await producer.send("t", b"warm-up")
        mock_cluster.set_broker_rtt(1, 300)  # nothing buffered is answered (and let go) during the call
        free_at: dict[int, int] = {}

        def watched() -> Iterator[tuple[Any, ...]]:
            for n, record in enumerate(records("t", 4 * STREAM_CHUNK)):
                if n in (0, 3 * STREAM_CHUNK):
                    free_at[n] = int(producer.metrics().producer["buffer-available-bytes"])
                yield record

        outcome = await getattr(producer, call)(watched())
        results = outcome if call == "send_many" else await outcome
    assert len(results) == 4 * STREAM_CHUNK and all(isinstance(r, RecordMetadata) for r in results)
    assert free_at[3 * STREAM_CHUNK] < free_at[0], "nothing was buffered before the generator was exhausted"


@pytest.mark.parametrize("call", ["send_many", "enqueue_many"])
async def test_records_a_generator_yielded_before_it_raised_are_delivered(mock_cluster: MockCluster, call: str) -> None:
    """A generator that raised part of the way through a chunk lost the records of that chunk it had yielded: they
    were taken from it, never buffered and never answered."""
    yielded = 2 * STREAM_CHUNK + 88

    def failing() -> Iterator[tuple[Any, ...]]:
        yield from records("t", yielded)
        raise ValueError("the caller's data ran dry")

    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, **FAST) as producer:
        with pytest.raises(ValueError, match="ran dry"):
            await getattr(producer, call)(failing())
        await producer.flush()
    assert [r.value for r in read_back(mock_cluster.bootstrap_servers, "t")] == [b"%06d" % n for n in range(yielded)]


async def test_the_mock_keeps_what_a_raising_generator_yielded_as_the_producer_sends_it() -> None:
    """MockProducer read a raising generator into a list first: the call raised with no record in its history,
    where the Producer sends the records yielded before the error."""

    def failing() -> Iterator[tuple[Any, ...]]:
        yield from records("t", 3)
        raise ValueError("the caller's data ran dry")

    async with MockProducer() as mock:
        with pytest.raises(ValueError, match="ran dry"):
            await mock.send_many(failing())
        assert [record.value for record in mock.history()] == [b"000000", b"000001", b"000002"]


async def test_closing_during_a_streamed_call_fails_each_record_still_to_come_in_its_place(
    mock_cluster: MockCluster,
) -> None:
    mock_cluster.create_topic("t", 1)
    count = 8 * STREAM_CHUNK
    producer = Producer(mock_cluster.bootstrap_servers, **FAST)
    await producer.start()
    await producer.send("t", b"warm-up")
    closing: list[asyncio.Task[None]] = []

    def closes_half_way() -> Iterator[tuple[Any, ...]]:
        for n in range(count):
            if n == count // 2:
                closing.append(asyncio.ensure_future(producer.close(timeout=5)))  # begins at the call's next yield
            yield ("t", b"%06d" % n + bytes(1000), None, None, None, None)  # the call yields at least every 256 KiB

    results = await asyncio.wait_for(producer.send_many(closes_half_way()), 10)
    await asyncio.wait_for(closing[0], 10)
    kinds = Counter(type(r) for r in results)
    assert len(results) == count and set(kinds) <= {RecordMetadata, ProducerClosedError}, kinds
    assert isinstance(results[-1], ProducerClosedError)
    assert all(isinstance(r, (RecordMetadata, AioProducerError)) for r in results)
    delivered = [r.offset for r in results if isinstance(r, RecordMetadata)]
    assert delivered == list(range(1, len(delivered) + 1)) and len(delivered) >= count // 2


async def test_a_generators_records_do_not_set_off_the_cyclic_collector(mock_cluster: MockCluster) -> None:
    """A generator's records were read into one list first: 20 k tuples alive at once set off a young collection
    every 700 allocations, as the caller's own list does."""
    mock_cluster.create_topic("t", 1)
    count = 20_000
    collections: Counter[str] = Counter()
    async with Producer(mock_cluster.bootstrap_servers, **FAST) as producer:
        await producer.send("t", b"warm-up")
        for form in ("list", "generator", "list", "generator"):
            started = sum(stat["collections"] for stat in gc.get_stats())
            argument = list(records("t", count)) if form == "list" else records("t", count)
            results = await producer.send_many(argument)
            del argument
            collections[form] += sum(stat["collections"] for stat in gc.get_stats()) - started
            assert len(results) == count
    # Two calls of 20 k tuples held at once: at least 2 * 20_000 / 700 collections that a chunk of them never causes
    # (the pure build's own bookkeeping sets off as many in either form).
    assert collections["list"] - collections["generator"] >= 2 * count // 700 * 3 // 4, collections
