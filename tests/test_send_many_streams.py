"""`send_many` and `enqueue_many` over an iterator (a generator): its records are read as the call goes, a chunk at a
time, never all at once; one result per record read, in order, as for a list. Collections are read whole first."""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from aioproducer import Producer, RecordMetadata
from aioproducer.errors import InvalidRecordError, ProducerClosedError, RecordSourceError
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
async def test_records_a_generator_yielded_before_it_raised_are_delivered_and_their_results_kept(
    mock_cluster: MockCluster, call: str
) -> None:
    """A generator that raised part of the way through a chunk lost the records of that chunk it had yielded (read,
    never buffered, never answered), and the error it raised left the caller no way to learn the outcome of the
    records sent before."""
    yielded = 2 * STREAM_CHUNK + 88

    def failing() -> Iterator[tuple[Any, ...]]:
        yield from records("t", yielded - 1)
        yield ("t", "not bytes", None, None, None, None)  # a bad record among them fails alone, in its place
        raise ValueError("the caller's data ran dry")

    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, **FAST) as producer:
        with pytest.raises(RecordSourceError, match="ran dry") as raised:
            await getattr(producer, call)(failing())
        results = await raised.value.deliveries
    assert isinstance(raised.value.__cause__, ValueError)
    assert [r.offset for r in results[:-1]] == list(range(yielded - 1))  # type: ignore[union-attr]
    assert isinstance(results[-1], InvalidRecordError)
    sent = [r.value for r in read_back(mock_cluster.bootstrap_servers, "t")]
    assert sent == [b"%06d" % n for n in range(yielded - 1)]


async def test_records_read_whole_first_are_none_of_them_sent_when_reading_raises(mock_cluster: MockCluster) -> None:
    class Hook:
        def on_record_acknowledged(self, record: Any, metadata: Any, error: Any) -> None:
            pass

    def failing() -> Iterator[tuple[Any, ...]]:
        yield from records("t", 10)
        raise ValueError("the caller's data ran dry")

    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, hooks=[Hook()], **FAST) as producer:  # reads whole first
        with pytest.raises(RecordSourceError, match="none was sent") as raised:
            await producer.send_many(failing())
        assert await raised.value.deliveries == []
        await producer.send("t", b"after")
    assert [r.value for r in read_back(mock_cluster.bootstrap_servers, "t")] == [b"after"]


async def test_a_collection_is_read_whole_first_so_changing_it_meanwhile_breaks_nothing(
    mock_cluster: MockCluster,
) -> None:
    """A dict's values were read across the call's waits: another task adding to the dict meanwhile made the call
    raise RuntimeError (dictionary changed size during iteration) with a quarter of the records sent."""
    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, **FAST) as producer:
        outbox = {n: ("t", b"%04d" % n, None, None, None, None) for n in range(1000)}

        async def add_to_the_outbox() -> None:
            await asyncio.sleep(0)
            outbox[-1] = ("t", b"late", None, None, None, None)

        adding = asyncio.ensure_future(add_to_the_outbox())
        results = await producer.send_many(outbox.values())  # its first record waits for the topic's metadata
        await adding
    assert len(results) == 1000 and all(isinstance(r, RecordMetadata) for r in results)


async def test_an_iterator_is_not_asked_again_once_it_said_it_had_ended(mock_cluster: MockCluster) -> None:
    """After a short chunk the call asked the iterator again: one that refills (a queue drained by each pass) gave
    records after it had ended, which list() and the mock never read."""

    class Drainer:
        def __init__(self) -> None:
            self.pending = [b"a0", b"a1", b"a2"]
            self.asked_after_the_end = 0

        def __iter__(self) -> Drainer:
            return self

        def __next__(self) -> tuple[Any, ...]:
            if self.pending:
                return ("t", self.pending.pop(0), None, None, None, None)
            self.asked_after_the_end += 1
            self.pending = [b"b0", b"b1"]  # refilled meanwhile
            raise StopIteration

    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, **FAST) as producer:
        drainer = Drainer()
        results = await producer.send_many(drainer)
    assert len(results) == 3 and drainer.asked_after_the_end == 1


async def test_the_mock_keeps_what_a_raising_generator_yielded_as_the_producer_sends_it() -> None:
    """MockProducer read a raising generator into a list first: the call raised with no record in its history,
    where the Producer sends the records yielded before the error."""

    def failing() -> Iterator[tuple[Any, ...]]:
        yield from records("t", 3)
        raise ValueError("the caller's data ran dry")

    async with MockProducer() as mock:
        with pytest.raises(RecordSourceError, match="ran dry") as raised:
            await mock.send_many(failing())
        assert [record.value for record in mock.history()] == [b"000000", b"000001", b"000002"]
        assert [r.offset for r in await raised.value.deliveries] == [0, 1, 2]  # type: ignore[union-attr]


async def test_closing_during_a_streamed_call_ends_it_and_reads_the_iterator_no_further(
    mock_cluster: MockCluster,
) -> None:
    """Once closing began, a call reading an iterator kept reading it to its end, giving each record the refusal: an
    endless one never let the call end, and its results grew without bound (a long one here, so that the bug fails
    the test rather than hangs it)."""
    mock_cluster.create_topic("t", 1)
    producer = Producer(mock_cluster.bootstrap_servers, **FAST)
    await producer.start()
    await producer.send("t", b"warm-up")
    closing: list[asyncio.Task[None]] = []
    read = 0

    def long() -> Iterator[tuple[Any, ...]]:
        nonlocal read
        for n in range(50 * STREAM_CHUNK):
            read += 1
            if n == 4 * STREAM_CHUNK:
                closing.append(asyncio.ensure_future(producer.close(timeout=5)))  # begins at the call's next yield
            yield ("t", b"%06d" % n + bytes(1000), None, None, None, None)  # the call yields at least every 256 KiB

    results = await asyncio.wait_for(producer.send_many(long()), 30)
    await asyncio.wait_for(closing[0], 10)
    assert len(results) == read, "a record read has no result, or a result no record"
    # It stops within the chunk read when closing began or the next one (the call yields every 254 such records).
    assert read <= 6 * STREAM_CHUNK, read
    # Each record read was delivered, or refused once closing began (none may be, when it began as a chunk ended).
    delivered = [r.offset for r in results if isinstance(r, RecordMetadata)]
    assert delivered == list(range(1, len(delivered) + 1)) and len(delivered) >= STREAM_CHUNK
    assert all(isinstance(r, ProducerClosedError) for r in results[len(delivered) :])


async def test_a_generators_records_do_not_set_off_the_cyclic_collector(mock_cluster: MockCluster) -> None:
    """A generator's records were read into one list first: 20 k tuples alive at once set off a young collection
    every `gc.get_threshold()[0]` allocations (700; 2000 from Python 3.13), as the caller's own list does."""
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
    # Two calls of 20 k tuples held at once: 2 * 20_000 / threshold collections that a chunk of them never causes (the
    # pure build's own bookkeeping sets off as many in either form).
    young_threshold = gc.get_threshold()[0]
    assert collections["list"] - collections["generator"] >= 2 * count // young_threshold * 3 // 4, collections


async def test_the_mock_reads_an_iterator_no_further_once_it_closed() -> None:
    """MockProducer read an iterator whole before it looked at its state: closing during the call did not stop it,
    and an endless iterator hung the event loop (a long one here, so that the bug fails the test rather than hangs
    it)."""
    read = 0
    mock = MockProducer()
    await mock.start()
    closing: list[asyncio.Task[None]] = []

    def long() -> Iterator[tuple[Any, ...]]:
        nonlocal read
        for n in range(400 * STREAM_CHUNK):
            read += 1
            if n == 2 * STREAM_CHUNK:
                closing.append(asyncio.ensure_future(mock.close()))
            yield ("t", b"%d" % n, None, None, None, None)

    results = await asyncio.wait_for(mock.send_many(long()), 30)
    await closing[0]
    assert len(results) == read <= 4 * STREAM_CHUNK
    assert isinstance(results[-1], ProducerClosedError)


@pytest.mark.parametrize("producer_kind", ["producer", "mock"])
async def test_an_iterable_whose_iter_raises_gives_record_source_error(
    mock_cluster: MockCluster, producer_kind: str
) -> None:
    class Unopenable:
        def __iter__(self) -> Iterator[Any]:
            raise OSError("cannot open the source")

    mock_cluster.create_topic("t", 1)
    producer: Any = Producer(mock_cluster.bootstrap_servers, **FAST) if producer_kind == "producer" else MockProducer()
    async with producer:
        with pytest.raises(RecordSourceError, match="none was sent") as raised:
            await producer.send_many(Unopenable())
    assert isinstance(raised.value.__cause__, OSError)
