"""A topic the producer keeps sending to stays in its metadata refreshes (Java's ProducerMetadata keeps a topic while
it is used, `metadata_max_idle_ms`), on whichever appender this session runs: compiled or pure."""

from __future__ import annotations

import asyncio
from typing import Any

from aioproducer import Producer
from aioproducer.accelerated import speedups
from aioproducer.accumulator import RecordAccumulator
from aioproducer.appender import Appender
from aioproducer.compression import CompressionType
from aioproducer.config import ProducerConfig
from aioproducer.delivery import Delivery
from aioproducer.metadata import BrokerInfo, ClusterMetadata, MetadataState, PartitionInfo, TopicInfo
from aioproducer.partitioner import partition_for_key
from aioproducer.producer import _resolve_partitioner
from aioproducer.serializers import resolve_serializer
from aioproducer.testing import MockCluster

IDLE_MS = 5000


def layout(topic: str, count: int) -> TopicInfo:
    return TopicInfo(topic, tuple(PartitionInfo(p, 1) for p in range(count)), tuple(range(count)))


def appender_in_use(state: MetadataState, accumulator: RecordAccumulator, clock: list[int]) -> Any:
    """The appender the producer would build in this session (the compiled twin unless disabled)."""
    make = speedups.Appender if speedups is not None else Appender
    return make(
        accumulator=accumulator,
        cluster_state=state,
        partitioner=_resolve_partitioner(ProducerConfig(bootstrap_servers=("h:1",), batch_size=300)),
        key_serializer=resolve_serializer(None, role="key"),
        value_serializer=resolve_serializer(None),
        plain_bytes_keys=True,
        plain_bytes_values=True,
        max_record_bytes=10_000,
        size_limit_message="too large",
        delivery_type=Delivery,
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
        batch_size=300, linger_ms=5, buffer_memory=1 << 24, compression=CompressionType.NONE, compression_level=None
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


async def test_a_grown_topic_in_constant_use_is_seen_after_metadata_max_idle_ms(mock_cluster: MockCluster) -> None:
    """Sent to without pause for longer than metadata_max_idle_ms, a topic stopped being refreshed: new partitions
    were never used."""
    mock_cluster.create_topic("busy", 2)
    key = next(b"k%d" % i for i in range(100) if partition_for_key(b"k%d" % i, 3) == 2)
    settings = {"metadata_max_idle_ms": IDLE_MS, "metadata_max_age_ms": 200, "linger_ms": 2}
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
