"""What only a real broker judges, on the session's single Apache Kafka node (target: `kafka_cluster`).

Partition growth through a real CreatePartitions; MESSAGE_TOO_LARGE from a topic's real `max.message.bytes` (with
the producer splitting batches); every codec decompressed and recompressed by Kafka's own code; topics that do
not exist, with the producer's auto-creation flag honoured by the broker; partitions that do not exist (Tansu
drops such records silently).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import pytest
from fault_helpers import judge, read_back_async, running_producer, workload

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.errors import KafkaTimeoutError, RecordTooLargeError, UnknownPartitionError
from aioproducer.kafka_errors import MessageTooLargeError
from aioproducer.partitioner import partition_for_key
from aioproducer.testing import ConsumedRecord, KafkaCluster, read_back

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
KEYS = [b"user-%d" % i for i in range(24)]


async def create(cluster: KafkaCluster, name: str, partitions: int, **config: str) -> str:
    return await asyncio.to_thread(cluster.create_topic, name, partitions, config=config)


# -- partition growth --------------------------------------------------------------------------------------------


def keyed(tag: str, topic: str, rounds: int = 2) -> list[ProducerRecord]:
    return [ProducerRecord(topic, b"%s-%s-%d" % (tag.encode(), key, n), key=key) for n in range(rounds) for key in KEYS]


def keyless(tag: str, topic: str, count: int) -> list[ProducerRecord]:
    return [ProducerRecord(topic, b"%s-free-%04d" % (tag.encode(), i)) for i in range(count)]


async def test_partitions_added_by_create_partitions_are_used_after_the_next_refresh(
    kafka_cluster: KafkaCluster,
) -> None:
    before, after = 3, 5
    assert any(partition_for_key(key, after) >= before for key in KEYS)
    topic = await create(kafka_cluster, "growing", before)
    # Small batches: the sticky partitioner moves on every dozen keyless records, so all partitions get some.
    settings = {"linger_ms": 1, "batch_size": 512, "metadata_max_age_ms": 500}
    first = keyless("before", topic, 300) + keyed("before", topic)
    second = keyless("after", topic, 600) + keyed("after", topic)
    async with running_producer(kafka_cluster.bootstrap_servers, **settings) as producer:
        results = await producer.send_many(first)
        await asyncio.to_thread(kafka_cluster.add_partitions, topic, after)
        loop = asyncio.get_running_loop()
        began = loop.time()
        while len(await producer.partitions_for(topic)) != after:
            assert loop.time() - began < 10, "the producer never saw the new partitions"
            await asyncio.sleep(0.05)
        # The first metadata that counts a new partition may not name its leader yet, and keyless records skip a
        # partition without one (Java's BuiltInPartitioner does too): a call's keyless records all missed partition
        # 3 once (Kafka 3.9.2). A record sent to each new partition is acknowledged only once its leader is known.
        for partition in range(before, after):
            await producer.send(topic, b"probe-%d" % partition, partition=partition)
        results += await producer.send_many(second)
    failed = [r for r in results if not isinstance(r, RecordMetadata)]
    assert failed == [], failed[:3]
    stored = await read_back_async(kafka_cluster.bootstrap_servers, topic)
    phase = {**{r.value: before for r in first}, **{r.value: after for r in second}}
    for record in stored:
        if record.key is not None:
            assert record.partition == partition_for_key(record.key, phase[record.value]), record
    later = [r for r in stored if r.value is not None and r.value.startswith(b"after-")]
    assert {r.partition for r in later if r.key is None} == set(range(after))
    for tag, sent in (("before", first), ("after", second)):
        verdict = judge([r for r in stored if r.value is not None and r.value.startswith(tag.encode())], sent)
        assert verdict.ok, f"{tag}: {verdict}"


# -- sizes -------------------------------------------------------------------------------------------------------


async def test_a_record_over_the_topics_max_message_bytes_fails_with_message_too_large(
    kafka_cluster: KafkaCluster,
) -> None:
    topic = await create(kafka_cluster, "small-messages", 1, **{"max.message.bytes": "2000"})
    async with Producer(kafka_cluster.bootstrap_servers) as producer:
        # Well under the producer's own max_request_size: only the broker can refuse it.
        with pytest.raises(MessageTooLargeError) as caught:
            await producer.send(topic, os.urandom(4000))
        assert isinstance(caught.value, RecordTooLargeError)
        assert (await producer.send(topic, b"small")).offset == 0
    assert [r.value for r in await read_back_async(kafka_cluster.bootstrap_servers, topic)] == [b"small"]


async def test_batches_over_the_topics_limit_are_split_until_they_fit(kafka_cluster: KafkaCluster) -> None:
    """Regression: when two batches of a partition in flight were both refused as too large, the halves of the
    second were queued ahead of the first's (each split pushes its halves to the queue's front, with fresh
    sequences), so a key's records came back as 10-19, 0-9, 30-39, 20-29. Java's splitAndReenqueue gives the
    pieces the big batch's sequence range and inserts them in sequence order. Neither Tansu nor the mock cluster
    has a size limit, so only real Kafka shows it."""
    topic = await create(kafka_cluster, "split-batches", 2, **{"max.message.bytes": "3000"})
    # 40 keyed records of 500 random bytes: batches of up to 64 KiB that the broker refuses until split to ~5.
    records = [ProducerRecord(topic, b"%04d-" % i + os.urandom(500), key=b"k%d" % (i % 4)) for i in range(40)]
    async with running_producer(
        kafka_cluster.bootstrap_servers, close_timeout_s=20, linger_ms=50, batch_size=65536
    ) as producer:
        results = await producer.send_many(records)
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    verdict = judge(await read_back_async(kafka_cluster.bootstrap_servers, topic), records)
    assert verdict.ok, str(verdict)


async def test_batches_grow_past_batch_size_while_they_wait_and_kafka_takes_them(kafka_cluster: KafkaCluster) -> None:
    """With one request in flight per connection, a partition's next batch waits for the last one's answer and
    keeps taking records until batch_max_size: Kafka gets fewer, larger batches, in order, and checks each CRC."""
    topic = await create(kafka_cluster, "grown-batches", 1)
    records = [ProducerRecord(topic, b"%05d-" % i + os.urandom(400), key=b"k%d" % (i % 3)) for i in range(3000)]
    async with Producer(
        kafka_cluster.bootstrap_servers, max_in_flight_requests_per_connection=1, compression_type="lz4"
    ) as producer:
        results = await producer.send_many(records)
        largest = producer.metrics().producer["batch-size-max"]
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    # Random bytes barely compress: a batch on the wire about as large as its records were (compressed batches grow
    # to 1 MiB less the request's framing).
    assert 16384 * 2 < largest <= 1024 * 1024, largest
    verdict = judge(await read_back_async(kafka_cluster.bootstrap_servers, topic), records)
    assert verdict.ok, str(verdict)


async def test_a_topic_that_refuses_grown_batches_gets_batches_of_batch_size(kafka_cluster: KafkaCluster) -> None:
    """A topic whose max.message.bytes is above batch_size but below grown batches: after the first refusal (a
    split), that topic's batches stay at batch_size, and every record arrives once and in order."""
    topic = await create(kafka_cluster, "no-growth", 1, **{"max.message.bytes": "40000"})
    first = [ProducerRecord(topic, b"a%05d-" % i + os.urandom(400), key=b"k%d" % (i % 3)) for i in range(3000)]
    then = [ProducerRecord(topic, b"b%05d-" % i + os.urandom(400), key=b"k%d" % (i % 3)) for i in range(1000)]
    async with Producer(kafka_cluster.bootstrap_servers, max_in_flight_requests_per_connection=1) as producer:
        results = await producer.send_many(first)
        before = producer.metrics().producer["batch-split-total"]
        results += await producer.send_many(then)
        splits_after = producer.metrics().producer["batch-split-total"] - before
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    assert before >= 1 and splits_after == 0, (before, splits_after)
    verdict = judge(await read_back_async(kafka_cluster.bootstrap_servers, topic), first + then)
    assert verdict.ok, str(verdict)


# -- codecs ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("broker_codec", ["producer", "uncompressed"])
async def test_every_codec_is_decoded_by_kafka_itself(
    kafka_cluster: KafkaCluster, codec: str, broker_codec: str
) -> None:
    """With the topic's compression.type other than `producer`, Kafka decompresses each batch we send and writes it
    again in its own codec: a framing mistake would come back as CORRUPT_MESSAGE, not pass unnoticed."""
    topic = await create(kafka_cluster, f"codec-{codec}-{broker_codec}", 2, **{"compression.type": broker_codec})
    records = [
        ProducerRecord(topic, (b"value-%d-" % i) * (i % 9 + 1), key=b"k%d" % (i % 7), headers=[("i", b"%d" % i)])
        for i in range(500)
    ]
    async with Producer(kafka_cluster.bootstrap_servers, compression_type=codec, linger_ms=20) as producer:
        results = await producer.send_many(records)
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    stored = await read_back_async(kafka_cluster.bootstrap_servers, topic)
    verdict = judge(stored, records)
    assert verdict.ok, str(verdict)
    headers = {r.value: r.headers for r in stored}
    assert all(headers[r.value] == tuple(r.headers or ()) for r in records)


# -- topics and partitions that do not exist ---------------------------------------------------------------------


async def test_a_topic_the_producer_may_not_create_is_not_created(kafka_cluster: KafkaCluster) -> None:
    # The broker auto-creates topics, but honours the Metadata request's allow_auto_topic_creation=false.
    async with Producer(kafka_cluster.bootstrap_servers, allow_auto_create_topics=False, max_block_ms=2000) as p:
        with pytest.raises(KafkaTimeoutError, match="no-auto-create"):
            await p.send("no-auto-create", b"x")
    metadata = await asyncio.to_thread(_topics, kafka_cluster)
    assert "no-auto-create" not in metadata


async def test_a_topic_the_producer_may_create_is_created_with_the_brokers_defaults(
    kafka_cluster: KafkaCluster,
) -> None:
    async with Producer(kafka_cluster.bootstrap_servers) as producer:
        metadata = await producer.send("auto-created", b"x")
        assert len(await producer.partitions_for("auto-created")) == 4  # num.partitions
    stored = await asyncio.to_thread(read_back, kafka_cluster.bootstrap_servers, "auto-created")
    assert [(r.partition, r.offset, r.value) for r in stored] == [(metadata.partition, 0, b"x")]


async def test_a_partition_that_does_not_exist_is_refused(
    kafka_cluster: KafkaCluster, read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic = await create(kafka_cluster, "two-partitions", 2)
    async with Producer(kafka_cluster.bootstrap_servers, max_block_ms=2000) as producer:
        with pytest.raises((UnknownPartitionError, KafkaTimeoutError)):
            await producer.send(topic, b"x", partition=2)
        assert (await producer.send(topic, b"y", partition=1)).offset == 0
    assert [r.value for r in await read_back_async(kafka_cluster.bootstrap_servers, topic)] == [b"y"]


def _topics(cluster: KafkaCluster) -> set[str]:
    import confluent_kafka.admin

    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    return set(admin.list_topics(timeout=10).topics)


async def test_every_record_of_a_large_workload_reads_back_once_in_order(kafka_cluster: KafkaCluster) -> None:
    topic = await create(kafka_cluster, "workload", 6)
    records = workload("bulk", 20_000, keys=50, topic=topic)
    async with running_producer(kafka_cluster.bootstrap_servers, close_timeout_s=30, linger_ms=5) as producer:
        futures = [await producer.enqueue(r.topic, r.value, key=r.key) for r in records]
        results = await asyncio.gather(*futures, return_exceptions=True)
    assert all(isinstance(r, RecordMetadata) for r in results)
    stored = await read_back_async(kafka_cluster.bootstrap_servers, topic)
    verdict = judge(stored, records)
    assert verdict.ok, str(verdict)
    where = {(r.partition, r.offset): r.value for r in stored}
    assert all(where[(m.partition, m.offset)] == r.value for m, r in zip(results, records, strict=True))
