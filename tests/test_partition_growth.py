"""Partition growth seen by a running producer: librdkafka's mock cluster has no CreatePartitions, so the topic is
deleted and created again with one partition more, and the producer must start using it after its next metadata
refresh — keyless records through the sticky partitioner, keyed records by murmur2 over the new count."""

from __future__ import annotations

import asyncio

from fault_helpers import judge, read_back_async, running_producer

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.partitioner import partition_for_key
from aioproducer.testing import ConsumedRecord, MockCluster

BEFORE, AFTER = 3, 4
KEYS = [b"user-%d" % i for i in range(24)]
# Small batches make the sticky partitioner move on every dozen keyless records or so: over a few hundred of them
# the chance of never picking one given partition is below one in a million.
SETTINGS = {
    "linger_ms": 1,
    "batch_size": 512,
    "metadata_max_age_ms": 200,
    "retry_backoff_ms": 20,
    "allow_auto_create_topics": False,  # see MockCluster.delete_topic
}


def records(tag: str, topic: str, keyless: int) -> list[ProducerRecord]:
    """Keyless records first, then two rounds over every key; values are unique ids."""
    made = [ProducerRecord(topic, b"%s-free-%04d" % (tag.encode(), i)) for i in range(keyless)]
    made += [ProducerRecord(topic, b"%s-%s-%d" % (tag.encode(), key, n), key=key) for n in range(2) for key in KEYS]
    return made


async def produce(producer: Producer, batch: list[ProducerRecord]) -> None:
    results = await asyncio.wait_for(producer.send_many(batch), 10)
    failed = [r for r in results if not isinstance(r, RecordMetadata)]
    assert failed == [], failed[:3]


async def wait_for_partition_count(producer: Producer, topic: str, count: int, timeout_s: float) -> float:
    """Seconds until the producer's metadata shows `count` partitions (it refreshes every metadata_max_age_ms)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while len(await producer.partitions_for(topic)) != count:
        if loop.time() - started > timeout_s:
            raise AssertionError(f"the producer still sees {len(await producer.partitions_for(topic))} partitions")
        await asyncio.sleep(0.02)
    return loop.time() - started


def assert_partitioned(stored: list[ConsumedRecord], partitions: int) -> None:
    """Keyed records sit where murmur2 puts them; keyless ones used every partition."""
    for record in stored:
        if record.key is not None:
            assert record.partition == partition_for_key(record.key, partitions), record
    assert {r.partition for r in stored if r.key is None} == set(range(partitions))


def test_the_keys_move_when_the_partition_count_grows() -> None:
    # Guards the test data: some keys must map to the new partition, so keyed records are seen to use it.
    assert any(partition_for_key(key, AFTER) == AFTER - 1 for key in KEYS)
    assert any(partition_for_key(key, BEFORE) != partition_for_key(key, AFTER) for key in KEYS)


async def test_a_grown_topic_is_used_after_the_next_metadata_refresh(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("growing", BEFORE)
    before = records("before", "growing", keyless=600)
    after = records("after", "growing", keyless=600)
    async with running_producer(mock_cluster.bootstrap_servers, **SETTINGS) as producer:
        await produce(producer, before)
        stored_before = await read_back_async(mock_cluster.bootstrap_servers, "growing")
        # Deleting drops the records written so far: they were judged above, the new topic starts empty.
        mock_cluster.delete_topic("growing")
        mock_cluster.create_topic("growing", AFTER)
        waited_s = await wait_for_partition_count(producer, "growing", AFTER, timeout_s=2.0)
        await produce(producer, after)
    verdict = judge(stored_before, before)
    assert verdict.ok, str(verdict)
    assert_partitioned(stored_before, BEFORE)
    assert waited_s <= 0.2 + 0.3, f"the new partition count took {waited_s:.2f} s to be seen"
    stored_after = await read_back_async(mock_cluster.bootstrap_servers, "growing")
    verdict = judge(stored_after, after)
    assert verdict.ok, str(verdict)
    assert_partitioned(stored_after, AFTER)
    assert {r.partition for r in stored_after if r.key is not None} == set(range(AFTER))
