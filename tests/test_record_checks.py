"""What `enqueue` and `send_many` check at the call, on the compiled and the pure path alike: a custom partitioner's
answer, explicit partitions (waiting for metadata as Java does) and timestamps. Runs on the mock cluster, and on
real Apache Kafka for a real CreatePartitions while a send waits."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.errors import InvalidRecordError, PartitionerError, UnknownPartitionError
from aioproducer.testing import KafkaCluster, MockCluster
from tests.fault_helpers import read_back_async
from tests.twins import TWINS, use_twin


class Scripted:
    """A partitioner answering `answer` (or raising it, when it is an exception), else partition 0."""

    def __init__(self) -> None:
        self.answer: Any = 0

    def partition(self, topic: str, key: bytes | None, record_size: int, partitions: Any) -> Any:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer

    def __repr__(self) -> str:
        return "Scripted()"


BAD_ANSWERS = [
    (-1, "returned partition -1 for topic 't', which has partitions 0..3"),
    (4, "returned partition 4 "),
    (2**40, "returned partition 1099511627776 "),
    (2**70, "returned partition 1180591620717411303424 "),
    (None, r"returned None \(NoneType\)"),
    ("1", r"returned '1' \(str\)"),
    (1.0, r"returned 1.0 \(float\)"),
    (True, r"returned True \(a bool\)"),
    (ZeroDivisionError("boom"), r"failed for topic 't': ZeroDivisionError\('boom'\)"),
]


@pytest.mark.parametrize(("answer", "message"), BAD_ANSWERS, ids=[repr(a) for a, _ in BAD_ANSWERS])
@pytest.mark.parametrize("metadata", ["known", "awaited"])
async def test_an_invalid_partitioner_answer_raises_at_the_call(
    mock_cluster: MockCluster, answer: Any, message: str, metadata: str
) -> None:
    """A partitioner's answer was never checked: -1 crashed the process on the compiled path (a segmentation
    fault), a partition beyond the topic was buffered and failed only after delivery_timeout_ms, a huge one made the
    compiled path allocate a slot per partition number, None, a str or a float crashed the pure path's sender task,
    and True was taken as partition 1."""
    mock_cluster.create_topic("t", 4)
    partitioner = Scripted()
    async with Producer(mock_cluster.bootstrap_servers, partitioner=partitioner, linger_ms=1) as producer:
        if metadata == "known":
            await producer.send("t", b"warm-up")  # the fast path: the topic's layout is known at the call
        partitioner.answer = answer
        with pytest.raises(PartitionerError, match=message) as raised:
            await asyncio.wait_for(producer.enqueue("t", b"v"), 5)
        if isinstance(answer, BaseException):
            assert raised.value.__cause__ is answer
        # In send_many the bad answer fails its record only; an explicit partition does not ask the partitioner.
        results = await asyncio.wait_for(
            producer.send_many([ProducerRecord("t", b"a"), ProducerRecord("t", b"b", partition=1)]), 5
        )
        assert isinstance(results[0], PartitionerError) and isinstance(results[1], RecordMetadata)
        partitioner.answer = 3
        after = await asyncio.wait_for(producer.send("t", b"after"), 5)  # the producer goes on, unharmed
        assert after.partition == 3
    assert producer._accumulator.used_bytes == 0  # nothing of the refused records stayed buffered


async def test_an_error_of_ours_from_a_partitioner_passes_through_unwrapped(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("t", 4)
    partitioner = Scripted()
    partitioner.answer = UnknownPartitionError("no partition for this key")
    async with Producer(mock_cluster.bootstrap_servers, partitioner=partitioner) as producer:
        with pytest.raises(UnknownPartitionError, match="no partition for this key"):
            await asyncio.wait_for(producer.send("t", b"v"), 5)


@pytest.mark.parametrize(
    ("timestamp", "message"),
    [
        (-1, "invalid record timestamp -1"),
        (-(2**63), "invalid record timestamp"),
        (2**63, "invalid record timestamp"),
        (True, r"got bool True"),
        (1.5, r"got float 1.5"),
        ("1", r"got str '1'"),
    ],
    ids=repr,
)
async def test_a_timestamp_that_is_not_a_non_negative_int64_raises_at_the_call(
    mock_cluster: MockCluster, timestamp: Any, message: str
) -> None:
    """Negative timestamps were accepted and sent (Java's ProducerRecord rejects them: brokers read -1 as "no
    timestamp")."""
    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, linger_ms=1) as producer:
        await producer.send("t", b"warm-up")
        with pytest.raises(InvalidRecordError, match=message):
            await asyncio.wait_for(producer.send("t", b"v", timestamp_ms=timestamp), 5)
        results = await asyncio.wait_for(producer.send_many([ProducerRecord("t", b"v", timestamp_ms=timestamp)]), 5)
        assert isinstance(results[0], InvalidRecordError)
        edges = [await asyncio.wait_for(producer.send("t", b"v", timestamp_ms=ts), 5) for ts in (0, 2**63 - 1)]
    assert all(isinstance(md, RecordMetadata) for md in edges)  # the bounds themselves are fine


@pytest.mark.parametrize(("partition", "message"), [(-1, "never negative"), (True, "got bool"), ("0", "got str")])
async def test_an_explicit_partition_that_is_not_a_non_negative_int_raises_at_once(
    mock_cluster: MockCluster, partition: Any, message: str
) -> None:
    mock_cluster.create_topic("t", 2)
    async with Producer(mock_cluster.bootstrap_servers, max_block_ms=60_000) as producer:
        started = time.monotonic()
        with pytest.raises(UnknownPartitionError, match=message):
            await asyncio.wait_for(producer.send("t", b"v", partition=partition), 5)
        assert time.monotonic() - started < 10  # not max_block_ms: no metadata can make this partition valid


async def test_an_explicit_partition_beyond_the_known_count_waits_for_the_topic_to_grow(
    mock_cluster: MockCluster,
) -> None:
    """A partition beyond the count the producer last saw failed at once, although the topic may have grown since
    its last metadata refresh: Java refreshes metadata and waits up to max_block_ms for the partition."""
    mock_cluster.create_topic("grows", 2)
    settings = {
        "metadata_max_age_ms": 600_000,
        "max_block_ms": 60_000,
        "retry_backoff_ms": 20,
        "linger_ms": 1,
        "allow_auto_create_topics": False,  # see MockCluster.delete_topic
    }
    async with Producer(mock_cluster.bootstrap_servers, **settings) as producer:
        await producer.send("grows", b"first", partition=1)
        # The mock has no CreatePartitions: delete and create again with more partitions.
        mock_cluster.delete_topic("grows")
        mock_cluster.create_topic("grows", 4)
        started = time.monotonic()
        sent = await asyncio.wait_for(producer.send("grows", b"on the new partition", partition=3), 60)
        assert sent.partition == 3
        assert time.monotonic() - started < 30  # a refresh or two, not the whole max_block_ms
        assert await producer.partitions_for("grows") == [0, 1, 2, 3]


async def test_real_kafka_a_partition_added_while_a_send_waits_for_it_is_used(kafka_cluster: KafkaCluster) -> None:
    """A send to a partition beyond the known count failed at once instead of waiting for the topic to grow."""
    topic = kafka_cluster.create_topic(f"grows-{uuid.uuid4().hex[:8]}", 2)
    async with Producer(kafka_cluster.bootstrap_servers, max_block_ms=30_000, retry_backoff_ms=50) as producer:
        await producer.send(topic, b"first", partition=1)
        waiting = asyncio.ensure_future(producer.send(topic, b"on the new partition", partition=2))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        await asyncio.to_thread(kafka_cluster.add_partitions, topic, 3)
        sent = await asyncio.wait_for(waiting, 20)
    assert (sent.partition, sent.offset) == (2, 0)


@pytest.mark.parametrize("how", ["enqueue", "send_many"])
async def test_an_explicit_partition_that_never_appears_fails_after_max_block_ms(
    mock_cluster: MockCluster, how: str
) -> None:
    mock_cluster.create_topic("t", 2)
    async with Producer(mock_cluster.bootstrap_servers, max_block_ms=600, retry_backoff_ms=20) as producer:
        await producer.send("t", b"warm-up")
        mock_cluster.start_request_tracking()
        started = time.monotonic()
        if how == "enqueue":
            with pytest.raises(UnknownPartitionError, match=r"partition 7 .*after 600 ms.*partitions 0\.\.1"):
                await asyncio.wait_for(producer.enqueue("t", b"v", partition=7), 5)
        else:
            results = await asyncio.wait_for(
                producer.send_many([ProducerRecord("t", b"v", partition=7), ProducerRecord("t", b"w", partition=1)]),
                5,
            )
            assert isinstance(results[0], UnknownPartitionError) and isinstance(results[1], RecordMetadata)
        waited = time.monotonic() - started
        metadata_requests = [r for r in mock_cluster.requests() if r.api_key == 3]
        mock_cluster.stop_request_tracking()
    assert 0.6 <= waited < 10
    assert len(metadata_requests) >= 2  # it asked the cluster again while waiting, as Java does


async def test_send_many_fails_an_item_that_is_not_a_record_alone(mock_cluster: MockCluster) -> None:
    """An item that was not a ProducerRecord (or 6-tuple) raised a bare ValueError or TypeError out of send_many,
    losing the results of the records buffered before it; a non-iterable argument raised TypeError."""
    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, linger_ms=1) as producer:
        items: list[Any] = [ProducerRecord("t", b"a"), ("t", b"short"), None, ProducerRecord("t", b"b")]
        results = await asyncio.wait_for(producer.send_many(items), 5)
        assert [type(r).__name__ for r in results] == [
            "RecordMetadata",
            "InvalidRecordError",
            "InvalidRecordError",
            "RecordMetadata",
        ]
        assert "send_many takes ProducerRecords" in str(results[1])
        with pytest.raises(InvalidRecordError, match="iterable of ProducerRecords, got NoneType"):
            await producer.send_many(None)  # type: ignore[arg-type]


class _PassingHook:
    def on_record_buffered(self, record: ProducerRecord) -> ProducerRecord:
        return record


async def _upper(value: bytes) -> bytes:
    return value.upper()


@pytest.mark.parametrize("call", ["send_many", "enqueue_many"])
@pytest.mark.parametrize("path", ["async serializer", "record hook"])
async def test_an_item_that_is_not_a_record_fails_alone_with_a_serializer_or_a_hook(
    mock_cluster: MockCluster, call: str, path: str
) -> None:
    """With an async (or context-aware) serializer, or a record hook, an item that was not a record raised a bare
    ValueError or TypeError out of send_many, before anything was buffered: those paths unpacked each item
    themselves, without the appender's check."""
    mock_cluster.create_topic("t", 1)
    settings: dict[str, Any] = (
        {"value_serializer": _upper} if path == "async serializer" else {"hooks": [_PassingHook()]}
    )
    async with Producer(mock_cluster.bootstrap_servers, linger_ms=1, **settings) as producer:
        items: list[Any] = [ProducerRecord("t", b"a"), None, 5, ("t", b"b", None, None, None, None, "seventh")]
        if call == "send_many":
            results = await asyncio.wait_for(producer.send_many(items), 5)
        else:
            results = await asyncio.wait_for(await producer.enqueue_many(items), 5)
    assert [type(r).__name__ for r in results] == ["RecordMetadata"] + ["InvalidRecordError"] * 3
    assert all("send_many takes ProducerRecords" in str(r) for r in results[1:])


@pytest.mark.parametrize("twin", TWINS)
async def test_headers_as_pairs_or_a_dict_arrive_in_order_and_bad_ones_raise_at_once(
    mock_cluster: MockCluster, monkeypatch: pytest.MonkeyPatch, twin: str
) -> None:
    """The forms of `headers` the guide documents, on both twins: pairs kept in order with a repeated key, a dict,
    bytearray and memoryview values copied, None kept; a str value or a non-str key is an InvalidRecordError."""
    use_twin(monkeypatch, twin)
    mock_cluster.create_topic("h", 1)
    async with Producer(mock_cluster.bootstrap_servers, linger_ms=1) as producer:
        await producer.send("h", b"pairs", headers=[("a", b"1"), ("a", b"2"), ("none", None)])
        await producer.send("h", b"dict", headers={"x": bytearray(b"y"), "z": memoryview(b"w")})  # type: ignore[dict-item]
        results = await producer.send_many([ProducerRecord("h", b"bulk", headers={"k": b"v"})])  # type: ignore[arg-type]
        assert isinstance(results[0], RecordMetadata)
        for bad, message in (([("k", "text")], "must be bytes or None, got str"), ({1: b"v"}, "key must be a str")):
            with pytest.raises(InvalidRecordError, match=message):
                await producer.send("h", b"bad", headers=bad)  # type: ignore[arg-type]
    stored = await read_back_async(mock_cluster.bootstrap_servers, "h")
    assert [(r.value, r.headers) for r in stored] == [
        (b"pairs", (("a", b"1"), ("a", b"2"), ("none", None))),
        (b"dict", (("x", b"y"), ("z", b"w"))),
        (b"bulk", (("k", b"v"),)),
    ]
