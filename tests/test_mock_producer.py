"""MockProducer: the Producer's API in memory, judged against the Producer itself (signatures, partitions, errors)."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
from collections.abc import Callable

import pytest

from aioproducer import Delivery, Producer, ProducerRecord, RecordMetadata, errors
from aioproducer.kafka_errors import NotEnoughReplicasError
from aioproducer.partitioner import partition_for_key
from aioproducer.testing import MockProducer, SentRecord, read_back

PUBLIC_API = (
    "start",
    "close",
    "send",
    "enqueue",
    "send_many",
    "enqueue_many",
    "wait",
    "flush",
    "partitions_for",
    "__aenter__",
    "__aexit__",
)


@pytest.mark.parametrize("name", PUBLIC_API)
def test_every_producer_method_has_the_same_signature(name: str) -> None:
    mine = inspect.signature(getattr(MockProducer, name))
    theirs = inspect.signature(getattr(Producer, name))
    # A method mixed into Producer names the host it needs as its self's type (`self: BulkHost`).
    unhosted = re.sub(r"^\(self: '\w+Host'", "(self", str(theirs))
    assert str(mine).replace("MockProducer", "Producer") == unhosted
    assert inspect.iscoroutinefunction(getattr(MockProducer, name)) == inspect.iscoroutinefunction(
        getattr(Producer, name)
    )


async def test_keyed_records_land_where_the_producer_puts_them_on_a_broker(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(5)
    keys = [f"user-{i}".encode() for i in range(200)] + [b"", b"\x00\xff" * 9]
    async with Producer(bootstrap, linger_ms=1) as real, MockProducer(topics={topic: 5}) as mock:
        real_md = await real.send_many([ProducerRecord(topic, b"v", key=k) for k in keys])
        mock_md = await mock.send_many([ProducerRecord(topic, b"v", key=k) for k in keys])
    assert [m.partition for m in mock_md] == [m.partition for m in real_md]  # type: ignore[union-attr]
    assert [m.partition for m in mock_md] == [partition_for_key(k, 5) for k in keys]  # type: ignore[union-attr]
    on_broker = read_back(bootstrap, topic)
    assert sorted((r.partition, r.key) for r in on_broker) == sorted((r.partition, r.key) for r in mock.records(topic))


async def test_each_partition_has_its_own_contiguous_offsets() -> None:
    async with MockProducer(topics={"orders": 3}) as mock:
        results = [await mock.send("orders", b"x", key=str(i % 9).encode()) for i in range(60)]
    for partition in range(3):
        offsets = [md.offset for md in results if md.partition == partition]
        assert offsets == list(range(len(offsets))) and offsets
        log = mock.records("orders", partition)
        assert [r.offset for r in log] == offsets
        assert all(r.partition == partition for r in log)
    assert len(mock.records()) == 60


async def test_keyless_records_stick_to_one_partition_per_batch_size_as_the_producer_does() -> None:
    async with MockProducer(topics={"t": 4}, batch_size=1000) as mock:
        results = await mock.send_many([ProducerRecord("t", b"x" * 80) for _ in range(100)])
    partitions = [md.partition for md in results]  # type: ignore[union-attr]
    runs = [p for i, p in enumerate(partitions) if i == 0 or partitions[i - 1] != p]
    assert len(runs) > 3  # it moved on ...
    assert all(a != b for a, b in itertools.pairwise(runs))  # ... to another partition each time
    assert max(partitions.count(p) for p in set(partitions)) >= 10  # and stuck around ~batch_size bytes


async def test_serializers_and_headers_are_applied_and_the_history_keeps_what_was_given() -> None:
    async with MockProducer(value_serializer="json", key_serializer="str") as mock:
        md = await mock.send("events", {"user": "ada", "n": 1}, key="ada", headers=[("trace", b"1")], timestamp_ms=7)
    (record,) = mock.records("events")
    assert record == SentRecord("events", 0, 0, 7, b"ada", b'{"user":"ada","n":1}', (("trace", b"1"),))
    assert md == RecordMetadata("events", 0, 0, 7, 3, len(record.value or b""))
    assert mock.history() == [
        ProducerRecord("events", {"user": "ada", "n": 1}, key="ada", headers=[("trace", b"1")], timestamp_ms=7)
    ]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda m: m.send("not a topic", b"v"), errors.InvalidRecordError),
        (lambda m: m.send("t", "text"), errors.InvalidRecordError),
        (lambda m: m.send("t", b"v", partition=2), errors.UnknownPartitionError),
        (lambda m: m.send("t", b"x" * 2000), errors.RecordTooLargeError),
        (lambda m: m.send("t", b"v", headers=[("h", "not bytes")]), errors.InvalidRecordError),
    ],
)
async def test_bad_records_raise_at_the_call_as_the_producer_and_leave_no_trace(
    call: Callable[[MockProducer], object], error: type[Exception]
) -> None:
    async with MockProducer(topics={"t": 2}, max_request_size=1500) as mock:
        with pytest.raises(error):
            await call(mock)  # type: ignore[misc]
    assert mock.history() == [] and mock.records() == []


async def test_a_topic_is_created_on_first_use_unless_auto_creation_is_off() -> None:
    async with MockProducer(default_partitions=6) as mock:
        assert await mock.partitions_for("new") == [0, 1, 2, 3, 4, 5]
    async with MockProducer(allow_auto_create_topics=False, topics={"known": 1}) as strict:
        with pytest.raises(errors.MetadataTimeoutError, match="allow_auto_create_topics=False"):
            await strict.send("unknown", b"v")
        assert (await strict.send("known", b"v")).offset == 0
        [result] = await strict.send_many([ProducerRecord("unknown", b"v")])
        assert isinstance(result, errors.MetadataTimeoutError)


async def test_manual_completion_waits_for_the_test_and_fails_with_the_given_error() -> None:
    async with MockProducer(auto_complete=False) as mock:
        first = asyncio.ensure_future(mock.send("t", b"1"))
        await asyncio.sleep(0)  # let it enqueue first
        second = await mock.enqueue("t", b"2")
        third = await mock.enqueue("t", b"3")
        await asyncio.sleep(0)
        assert not first.done() and not second.done() and mock.pending == 3
        assert mock.complete_next()
        assert (await first).offset == 0
        assert mock.fail_next(NotEnoughReplicasError("injected"))
        with pytest.raises(NotEnoughReplicasError, match="injected"):
            await second
        assert not third.done()
        await mock.flush()  # as Java's MockProducer: flush completes everything pending
        assert (await third).offset == 1  # the failed record took no offset
        assert mock.flushed and mock.pending == 0
        assert not mock.complete_next() and not mock.fail_next(RuntimeError())


async def test_injected_errors_hit_the_next_records_of_their_topic_only() -> None:
    async with MockProducer() as mock:
        mock.inject_error(errors.DeliveryTimeoutError("boom"), count=2, topic="a")
        results = await mock.send_many([ProducerRecord(t, b"v") for t in ("b", "a", "b", "a", "a")])
    kinds = [type(r).__name__ for r in results]
    delivered, failed = "RecordMetadata", "DeliveryTimeoutError"
    assert kinds == [delivered, failed, delivered, failed, delivered]
    assert [r.offset for r in mock.records("a")] == [0]
    assert len(mock.history()) == 5  # accepted, then failed: still sent, as in Java's history()


async def test_an_error_injected_without_a_count_lasts_until_cleared() -> None:
    async with MockProducer() as mock:
        mock.inject_error(errors.KafkaTimeoutError("down"), count=None)
        for _ in range(3):
            with pytest.raises(errors.KafkaTimeoutError):
                await mock.send("t", b"v")
        mock.clear()
        assert (await mock.send("t", b"v")).offset == 0
        assert mock.history() == [ProducerRecord("t", b"v")]


async def test_send_error_raises_at_every_call_and_fails_each_record_of_send_many() -> None:
    async with MockProducer() as mock:
        mock.send_error = errors.BufferExhaustedError("no memory")
        with pytest.raises(errors.BufferExhaustedError):
            await mock.enqueue("t", b"v")
        results = await mock.send_many([ProducerRecord("t", b"1"), ProducerRecord("t", b"2")])
        assert all(isinstance(r, errors.BufferExhaustedError) for r in results)
        mock.send_error = None
        assert (await mock.send("t", b"3")).offset == 0
    assert mock.history() == [ProducerRecord("t", b"3")]


async def test_latency_delays_completion_and_flush_waits_for_it() -> None:
    loop = asyncio.get_running_loop()
    async with MockProducer(latency_ms=50) as mock:
        started = loop.time()
        delivery = await mock.enqueue("t", b"v")
        assert isinstance(delivery, Delivery) and not delivery.done()
        await mock.flush()
        assert delivery.done() and loop.time() - started >= 0.045
        results = await asyncio.gather(*[await mock.enqueue("t", b"w") for _ in range(3)])
        assert [md.offset for md in results] == [1, 2, 3]


@pytest.mark.parametrize("timeout", [None, 5.0])
async def test_flush_returns_after_every_records_callback_ran(timeout: float | None) -> None:
    """MockProducer.flush woke from the last batch's waiter, which a batch runs before it schedules its records'
    callbacks: flush returned before they ran (the Producer's flush returns after)."""
    async with MockProducer(latency_ms=5) as mock:
        seen: list[int] = []
        for _ in range(3):
            delivery = await mock.enqueue("t", b"v")
            delivery.add_done_callback(lambda done: seen.append(done.result().offset))
        await mock.flush(timeout)
        assert seen == [0, 1, 2]
        await mock.flush(0)  # nothing pending: at once, even with no time to wait


async def test_flush_times_out_while_records_are_slower_than_the_timeout() -> None:
    async with MockProducer(latency_ms=5000) as mock:
        await mock.enqueue("t", b"v")
        with pytest.raises(errors.KafkaTimeoutError):
            await mock.flush(timeout=0.05)
        delivery = await mock.enqueue("t", b"w")
        await mock.close(timeout=0.05)
    with pytest.raises(errors.ProducerClosedError):
        await delivery


async def test_lifecycle_follows_the_producer() -> None:
    mock = MockProducer()
    with pytest.raises(errors.ProducerClosedError, match="not started"):
        await mock.send("t", b"v")
    await mock.start()
    with pytest.raises(errors.ProducerClosedError):
        await mock.start()
    await mock.close()
    assert mock.closed
    with pytest.raises(errors.ProducerClosedError, match="closed"):
        await mock.enqueue("t", b"v")
    await mock.close()  # idempotent


def test_settings_are_validated_by_the_producers_config() -> None:
    with pytest.raises(errors.ConfigError, match="linger"):
        MockProducer(linger_ms=-1)
    with pytest.raises(errors.ConfigError):
        MockProducer(topics={"t": 0})
    with pytest.raises(errors.ConfigError):
        MockProducer(default_partitions=0)
    assert MockProducer(config={"bootstrap.servers": "b:1", "linger.ms": 9}).config.linger_ms == 9


async def test_a_custom_partitioner_is_used() -> None:
    class Last:
        def partition(self, topic: str, key: bytes | None, record_size: int, partitions: object) -> int:
            return 2

    def to_json(value: object) -> bytes:
        return json.dumps(value).encode()

    async with MockProducer(topics={"t": 3}, partitioner=Last(), value_serializer=to_json) as mock:
        md = await mock.send("t", {"a": 1})
    assert md.partition == 2 and mock.records("t")[0].value == b'{"a": 1}'


async def test_wait_gives_each_records_outcome_as_the_producers_wait_does() -> None:
    """Bug: `await mock_producer.wait(deliveries)` raised AttributeError, though the docs recommend `producer.wait`
    for many deliveries: code under test that used it could not run against the mock."""
    async with MockProducer(auto_complete=False) as mock:
        deliveries = [await mock.enqueue("t", b"v%d" % n) for n in range(3)]
        waiting = asyncio.ensure_future(mock.wait([*deliveries, asyncio.sleep(0, "not a delivery")]))
        await asyncio.sleep(0)
        assert not waiting.done()  # manual mode: nothing completed yet
        mock.complete_next()
        mock.fail_next(NotEnoughReplicasError("one replica"))
        mock.complete_next()
        results = await waiting
    assert [type(r) for r in results] == [RecordMetadata, NotEnoughReplicasError, RecordMetadata, str]
    assert [r.offset for r in results if isinstance(r, RecordMetadata)] == [0, 1]
    assert results[3] == "not a delivery"
