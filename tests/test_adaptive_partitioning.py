"""Adaptive partitioning (KIP-794) on three real Kafka nodes, one of them slowed or stopped by the fault proxy:
keyless records keep flowing to the healthy brokers, keyed records stay where their key hashes.

The topic has six partitions of one replica each, two per node, so a node that stops taking requests holds back
only its own partitions (no follower makes acks=all wait). The proxy slows or stops only the producer's path to
that node: the cluster still names it leader, so only the producer's own view can steer records away."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fault_proxy import FaultProxy

from aioproducer import Producer
from aioproducer.partitioner import partition_for_key
from aioproducer.testing import KafkaCluster

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 6
VALUE = b"v" * 1000


def node_of(partition: int) -> int:
    return partition % 3 + 1  # the replica assignment below


@dataclass
class Run:
    """Records enqueued by a keyless load, by the time they were placed and their partition."""

    placed: list[tuple[float, int]] = field(default_factory=list)
    acknowledged: list[float] = field(default_factory=list)
    failed: list[BaseException] = field(default_factory=list)

    def share_of(self, node: int, start: float, end: float) -> tuple[float, int]:
        """The share of records placed on `node`'s partitions in [start, end), and how many were placed."""
        window = [p for t, p in self.placed if start <= t < end]
        return (sum(1 for p in window if node_of(p) == node) / len(window) if window else 0.0), len(window)


@pytest.fixture
async def cluster_behind_proxy(kafka_cluster_3: KafkaCluster) -> AsyncIterator[tuple[KafkaCluster, FaultProxy, str]]:
    proxy = FaultProxy(receive_buffer=None)
    bootstrap = ",".join([await proxy.front(kafka_cluster_3.bootstrap(nodes=[n])) for n in kafka_cluster_3.node_ids])
    try:
        yield kafka_cluster_3, proxy, bootstrap
    finally:
        proxy.resume_reading()
        await proxy.close()


async def keyless_load(producer: Producer, topic: str, run: Run, stop: asyncio.Event) -> None:
    """Enqueue keyless records as fast as buffer memory lets, noting when each was placed and where it went."""
    loop = asyncio.get_running_loop()

    def settled(delivery: Any, *, placed_at: float) -> None:
        if delivery.exception() is not None:
            run.failed.append(delivery.exception())
            return
        run.acknowledged.append(loop.time())
        run.placed.append((placed_at, delivery.result().partition))

    n = 0
    while not stop.is_set():
        delivery = await producer.enqueue(topic, VALUE)
        delivery.add_done_callback(functools.partial(settled, placed_at=loop.time()))
        n += 1
        if n % 50 == 0:
            await asyncio.sleep(0)


async def stalled_run(cluster: KafkaCluster, proxy: FaultProxy, bootstrap: str, **settings: Any) -> tuple[Run, float]:
    """One producer under a keyless load: 1.5 s with every node healthy, then 4 s with node 3 taking nothing."""
    topic = cluster.create_topic(
        f"adaptive-{uuid.uuid4().hex[:8]}", PARTITIONS, replica_assignment=[[node_of(p)] for p in range(PARTITIONS)]
    )
    run = Run()
    producer = Producer(bootstrap, linger_ms=5, buffer_memory=4 << 20, delivery_timeout_ms=120_000, **settings)
    await producer.start()
    try:
        for partition in range(PARTITIONS):  # every leader's connection is open
            await producer.send(topic, b"warm-up", partition=partition)
        stop = asyncio.Event()
        load = asyncio.ensure_future(keyless_load(producer, topic, run, stop))
        await asyncio.sleep(1.5)
        stalled_at = asyncio.get_running_loop().time()
        proxy.stop_reading(cluster.bootstrap(nodes=[3]))
        await asyncio.sleep(4.0)
        proxy.resume_reading()
        stop.set()
        await load
        await producer.flush(timeout=60)
    finally:
        await producer.close(timeout=10)
    return run, stalled_at


async def test_keyless_records_skip_a_broker_that_stopped_taking_requests(
    cluster_behind_proxy: tuple[KafkaCluster, FaultProxy, str],
) -> None:
    """KIP-794's partitioner.availability.timeout.ms: once node 3's ready batches have waited longer than the
    timeout, keyless records go to nodes 1 and 2 only, and the load goes on at their pace. Without adaptive
    partitioning a third of the records keep going to node 3, until its queues fill buffer memory and the load
    stalls."""
    cluster, proxy, bootstrap = cluster_behind_proxy
    adaptive, stalled_at = await stalled_run(cluster, proxy, bootstrap, partitioner_availability_timeout_ms=300)
    share, placed = adaptive.share_of(3, stalled_at + 1.0, stalled_at + 4.0)
    before, _ = adaptive.share_of(3, stalled_at - 1.5, stalled_at)
    print(f"adaptive: node 3 took {before:.0%} before, {share:.1%} of {placed} records while stopped")
    assert not adaptive.failed
    assert before > 0.15, "the load did not reach node 3 while it was healthy: the test proves nothing"
    assert placed > 1000, f"only {placed} records placed in 3 s while two brokers were healthy"
    assert share < 0.02, f"{share:.1%} of the keyless records still went to the stopped broker"

    uniform, stalled_at = await stalled_run(cluster, proxy, bootstrap, partitioner_adaptive_partitioning_enable=False)
    control, control_placed = uniform.share_of(3, stalled_at + 1.0, stalled_at + 4.0)
    print(f"uniform sticky: node 3 took {control:.1%} of {control_placed} records while stopped")
    assert not uniform.failed
    # The records bound for node 3 fill buffer memory, and the load stalls with them.
    assert control_placed < placed / 4, "the control did not suffer: the test proves nothing"


async def test_keyless_records_go_less_to_a_slow_broker_and_keyed_records_stay_put(
    cluster_behind_proxy: tuple[KafkaCluster, FaultProxy, str],
) -> None:
    """KIP-794's queue-size weighting (with partitioner.availability.timeout.ms at its default, 0): a broker that
    answers slowly collects longer queues, and keyless records go less to its partitions; keyed records keep their
    partition (murmur2 over every partition), slow broker or not."""
    cluster, proxy, bootstrap = cluster_behind_proxy
    topic = cluster.create_topic(
        f"weighted-{uuid.uuid4().hex[:8]}", PARTITIONS, replica_assignment=[[node_of(p)] for p in range(PARTITIONS)]
    )
    slow = cluster.bootstrap(nodes=[3])
    keys = [b"key-%d" % i for i in range(60)]
    shares = {}
    for adaptive in (True, False):
        run = Run()
        producer = Producer(
            bootstrap, linger_ms=5, buffer_memory=8 << 20, partitioner_adaptive_partitioning_enable=adaptive
        )
        await producer.start()
        try:
            for partition in range(PARTITIONS):
                await producer.send(topic, b"warm-up", partition=partition)
            proxy.delay(slow, 0.05)  # every request to node 3 waits 50 ms at the proxy
            stop = asyncio.Event()
            load = asyncio.ensure_future(keyless_load(producer, topic, run, stop))
            keyed = [await producer.enqueue(topic, b"keyed", key=key) for key in keys]
            await asyncio.sleep(4.0)
            stop.set()
            await load
            await producer.flush(timeout=60)
            assert [d.result().partition for d in keyed] == [partition_for_key(k, PARTITIONS) for k in keys]
        finally:
            proxy.delay(slow, 0.0)
            await producer.close(timeout=10)
        assert not run.failed
        shares[adaptive] = run.share_of(3, 0.0, float("inf"))
    print(f"slow node 3's share: adaptive {shares[True][0]:.1%} of {shares[True][1]}, uniform {shares[False][0]:.1%}")
    assert shares[False][0] > 0.25, "uniform sticky did not reach the slow broker: the test proves nothing"
    assert shares[True][0] < 0.75 * shares[False][0]
