"""A topic the producer keeps sending to stays in its metadata refreshes (Java's ProducerMetadata keeps a topic while
it is used, `metadata_max_idle_ms`), on whichever appender this session runs: compiled or pure. Targets: the rule
without I/O, librdkafka's mock cluster, and real Apache Kafka for what only it shows (a real CreatePartitions, a
leader elected after its predecessor was killed)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.append.appender import Appender
from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.config import ProducerConfig
from aioproducer.deliveries.delivery import BatchOutcome, Delivery
from aioproducer.network.metadata import BrokerInfo, ClusterMetadata, MetadataState, PartitionInfo, TopicInfo
from aioproducer.partitioner import partition_for_key
from aioproducer.producer import _resolve_partitioner
from aioproducer.records.compression import CompressionType
from aioproducer.serializers import resolve_serializer
from aioproducer.testing import KafkaCluster, MockCluster

IDLE_MS = 5000


def layout(topic: str, count: int) -> TopicInfo:
    return TopicInfo(topic, tuple(PartitionInfo(p, 1) for p in range(count)), tuple(range(count)))


def appender_in_use(state: MetadataState, accumulator: RecordAccumulator, clock: list[int]) -> Any:
    """The appender the producer would build in this session (the compiled twin unless disabled)."""
    return Appender(
        accumulator=accumulator,
        pool=accumulator.pool,
        cluster_state=state,
        partitioner=_resolve_partitioner(ProducerConfig(bootstrap_servers=("h:1",), batch_size=300)),
        key_serializer=resolve_serializer(None, role="key"),
        value_serializer=resolve_serializer(None),
        plain_bytes_keys=True,
        plain_bytes_values=True,
        max_record_bytes=10_000,
        size_limit_message="too large",
        clock_ms=lambda: clock[0],
        wake_sender=lambda: None,
    )


def test_a_topic_in_constant_use_is_kept_and_one_no_longer_used_is_dropped() -> None:
    """The append path never marked a topic as used (only the first send, which waited for metadata, did): after
    metadata_max_idle_ms a topic in constant use was left out of every metadata refresh, and its layout froze."""
    clock = [0]
    state = MetadataState(max_age_ms=1000, max_idle_ms=IDLE_MS, retry_backoff_ms=100)
    for topic in ("busy", "quiet"):
        state.add_topic(topic, 0)
    state.on_response(
        ClusterMetadata({1: BrokerInfo(1, "h", 1)}, {"busy": layout("busy", 3), "quiet": layout("quiet", 3)}),
        ["busy", "quiet"],
        0,
    )
    accumulator = RecordAccumulator(
        batch_size=300,
        linger_ms=5,
        buffer_memory=1 << 24,
        compression=CompressionType.NONE,
        compression_level=None,
        new_outcome=lambda tp: BatchOutcome(tp[0], tp[1], None),
    )
    appender = appender_in_use(state, accumulator, clock)
    appender.append_now("quiet", b"once", None, None, None, None)
    for now in range(0, 4 * IDLE_MS, 50):
        clock[0] = now
        delivery = appender.append_now("busy", b"x" * 200, None, None, None, None)  # about one batch per record
        assert isinstance(delivery, Delivery)
        if now % 1000 == 0:
            assert "busy" in state.topics_to_request(now), f"dropped as idle at {now} ms"
    assert state.topics_to_request(clock[0]) == ["busy"]  # "quiet" was idle for longer than IDLE_MS


def test_a_topic_with_undelivered_records_is_in_use_however_old_its_last_batch() -> None:
    state = MetadataState(max_age_ms=1000, max_idle_ms=IDLE_MS, retry_backoff_ms=100)
    state.add_topic("waiting", 0)
    state.add_topic("done", 0)
    assert state.topics_to_request(IDLE_MS + 1, in_use=["waiting"]) == ["waiting"]
    assert state.topics_to_request(2 * IDLE_MS, in_use=[]) == ["waiting"]  # idle counts from when it was in use
    assert state.topics_to_request(2 * IDLE_MS + IDLE_MS + 2, in_use=["never-added"]) == []


async def test_a_grown_topic_in_constant_use_is_seen_after_metadata_max_idle_ms(mock_cluster: MockCluster) -> None:
    """Sent to without pause for longer than metadata_max_idle_ms, a topic stopped being refreshed: new partitions
    were never used."""
    mock_cluster.create_topic("busy", 2)
    key = next(b"k%d" % i for i in range(100) if partition_for_key(b"k%d" % i, 3) == 2)
    settings = {
        "metadata_max_idle_ms": IDLE_MS,
        "metadata_max_age_ms": 200,
        "linger_ms": 2,
        "allow_auto_create_topics": False,  # see MockCluster.delete_topic
    }
    async with Producer(mock_cluster.bootstrap_servers, **settings) as producer:
        loop = asyncio.get_running_loop()
        until = loop.time() + IDLE_MS / 1000 + 1.0
        while loop.time() < until:  # only enqueue: partitions_for would mark the topic used by itself
            await producer.enqueue("busy", b"steady", key=key)
            await asyncio.sleep(0.01)
        mock_cluster.delete_topic("busy")  # the mock has no CreatePartitions: delete and create it larger
        mock_cluster.create_topic("busy", 3)
        until = loop.time() + 3.0
        partition = -1
        while partition != 2 and loop.time() < until:
            partition = (await asyncio.wait_for(producer.send("busy", b"probe", key=key), 5)).partition
            await asyncio.sleep(0.05)
    assert partition == 2, "the producer never saw the topic's third partition"


async def test_a_topic_whose_records_wait_for_a_dead_leader_stays_in_refreshes(mock_cluster: MockCluster) -> None:
    """A topic whose records were stuck behind a dead leader, and that got no new batch for metadata_max_idle_ms,
    dropped out of metadata refreshes while its records waited: the new leader was never seen and they expired."""
    mock_cluster.create_topic("stuck", 1)
    mock_cluster.set_partition_leader("stuck", 0, 1)
    settings = {
        "metadata_max_idle_ms": IDLE_MS,
        "metadata_max_age_ms": 200,
        "linger_ms": 1,
        "request_timeout_ms": 2000,
        "delivery_timeout_ms": 30_000,
    }
    async with Producer(mock_cluster.bootstrap_servers, **settings) as producer:
        await producer.send("stuck", b"first")
        # Broker 1 stays listed but answers nothing in time (a stalled host): requests time out, the batch waits.
        mock_cluster.set_broker_rtt(1, 120_000)
        waiting = asyncio.ensure_future(producer.send("stuck", b"waits for a leader"))
        await asyncio.sleep(IDLE_MS / 1000 + 1.0)
        assert not waiting.done()
        mock_cluster.set_partition_leader("stuck", 0, 2)
        sent = await asyncio.wait_for(waiting, 10)
    assert sent.partition == 0


async def send_steadily(producer: Producer, topic: str, seconds: float, key: bytes | None = None) -> None:
    """enqueue (never partitions_for, which would mark the topic used by itself) every 10 ms for `seconds`."""
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    while loop.time() < until:
        await producer.enqueue(topic, b"steady", key=key)
        await asyncio.sleep(0.01)


async def test_real_kafka_partition_growth_is_seen_by_a_producer_in_constant_use(kafka_cluster: KafkaCluster) -> None:
    """Kafka grew a topic (CreatePartitions) that the producer had been sending to for longer than
    metadata_max_idle_ms: the producer no longer refreshed that topic and never used the new partition."""
    topic = kafka_cluster.create_topic(f"grows-{uuid.uuid4().hex[:8]}", 2)
    key = next(b"k%d" % i for i in range(100) if partition_for_key(b"k%d" % i, 3) == 2)
    settings = {"metadata_max_idle_ms": IDLE_MS, "metadata_max_age_ms": 300, "linger_ms": 2}
    async with Producer(kafka_cluster.bootstrap_servers, **settings) as producer:
        await send_steadily(producer, topic, IDLE_MS / 1000 + 1.0, key)
        grown = asyncio.ensure_future(asyncio.to_thread(kafka_cluster.add_partitions, topic, 3))
        await send_steadily(producer, topic, 0.2, key)  # the producer stays busy while Kafka grows the topic
        await grown
        loop = asyncio.get_running_loop()
        until = loop.time() + 5.0
        partition = -1
        while partition != 2 and loop.time() < until:
            partition = (await asyncio.wait_for(producer.send(topic, b"probe", key=key), 10)).partition
            await asyncio.sleep(0.05)
    assert partition == 2, "the producer never saw the partition Kafka added"


async def test_real_kafka_leader_killed_after_metadata_max_idle_ms_is_followed(kafka_cluster_3: KafkaCluster) -> None:
    """After metadata_max_idle_ms of constant use a topic's layout froze: once its leader was killed and Kafka
    elected another, every record for the partition kept waiting for the dead node and failed with
    DeliveryTimeoutError."""
    topic = kafka_cluster_3.create_topic(f"moves-{uuid.uuid4().hex[:8]}", 1)
    settings = {
        "metadata_max_idle_ms": IDLE_MS,
        "metadata_max_age_ms": 500,
        "linger_ms": 2,
        "request_timeout_ms": 5000,
        "delivery_timeout_ms": 30_000,
    }
    async with Producer(kafka_cluster_3.bootstrap_servers, **settings) as producer:
        await send_steadily(producer, topic, IDLE_MS / 1000 + 1.0)
        old = kafka_cluster_3.leader_of(topic, 0)
        kafka_cluster_3.kill(old)
        after = [ProducerRecord(topic, b"after-%d" % i) for i in range(20)]
        results = await asyncio.wait_for(producer.send_many(after), 40)
    new = kafka_cluster_3.leader_of(topic, 0)
    assert new not in (old, -1)
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
