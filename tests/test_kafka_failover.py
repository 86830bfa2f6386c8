"""Real Kafka clusters losing nodes under a running producer (targets: `kafka_cluster_3`, three combined nodes, and
`kafka_cluster_3_one_controller`, whose nodes 2 and 3 can both go down while the quorum lives on).

Judged by read-back: every acknowledged record is in the log exactly once, in send order per key, at the offset
it was acknowledged with. Failover timing is tuned in `aioproducer.testing.kafka_config.FAILOVER_TUNING`.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from fault_helpers import judge, read_back_async, running_producer, workload

from aioproducer import Producer, RecordMetadata
from aioproducer.errors import DeliveryTimeoutError, KafkaTimeoutError
from aioproducer.testing import KafkaCluster

# Starting a cluster counts towards the first test's time limit; three JVMs on two busy cores take up to a minute.
pytestmark = pytest.mark.timeout(300)

# Generous timeouts: a dead leader is only replaced once its broker session expires (4 s), and a follower that
# stopped fetching leaves the ISR after 10 s, while acks=all waits for it.
LOAD = {"linger_ms": 5, "batch_size": 4096, "request_timeout_ms": 8000, "retry_backoff_max_ms": 500}


async def wait_for(condition_async: object, timeout_s: float, what: str) -> None:
    assert callable(condition_async)
    deadline = time.monotonic() + timeout_s
    while not await asyncio.to_thread(condition_async):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("fault", ["kill", "stop", "pause"])
async def test_a_leader_lost_under_load_loses_duplicates_and_reorders_nothing(
    kafka_cluster_3: KafkaCluster, fault: str
) -> None:
    cluster = kafka_cluster_3
    topic = await asyncio.to_thread(cluster.create_topic, f"failover-{fault}", 3)
    victim = await asyncio.to_thread(cluster.leader_of, topic, 0)
    records = workload(fault, 12_000, keys=24, topic=topic)
    async with running_producer(cluster.bootstrap_servers, close_timeout_s=60, **LOAD) as producer:
        futures = []
        for index, record in enumerate(records):
            futures.append(await producer.enqueue(record.topic, record.value, key=record.key))
            if index % 200 == 0:
                await asyncio.sleep(0.02)  # spread the load over a few seconds, so the fault lands mid-stream
            if index == 3000:
                await asyncio.to_thread(getattr(cluster, fault), victim)
        results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 120)
        if fault == "pause":
            cluster.resume(victim)
    new_leader = await asyncio.to_thread(cluster.wait_for_leader, topic, 0, not_on=[victim])
    assert new_leader != victim
    failed = [r for r in results if not isinstance(r, RecordMetadata)]
    assert failed == [], failed[:3]
    stored = await read_back_async(cluster.bootstrap(nodes=[new_leader]), topic, timeout_s=60)
    verdict = judge(stored, records)
    assert verdict.ok, str(verdict)
    where = {(r.partition, r.offset): r.value for r in stored}
    assert all(where.get((m.partition, m.offset)) == r.value for m, r in zip(results, records, strict=True))


async def _two_followers_down(cluster: KafkaCluster, topic: str) -> None:
    await asyncio.to_thread(cluster.kill, 2)
    await asyncio.to_thread(cluster.kill, 3)


async def test_acks_all_is_refused_when_two_of_three_brokers_are_down(
    kafka_cluster_3_one_controller: KafkaCluster,
) -> None:
    cluster = kafka_cluster_3_one_controller
    topic = await asyncio.to_thread(cluster.create_topic, "min-isr", 1, replica_assignment=[[1, 2, 3]])
    try:
        await _two_followers_down(cluster, topic)
        # Fenced brokers leave the ISR once their session times out: then min.insync.replicas=2 cannot be met.
        await wait_for(lambda: cluster.partition_state(topic, 0).isr == (1,), 30, "the ISR to shrink to node 1")
        strict = Producer(cluster.bootstrap(nodes=[1]), delivery_timeout_ms=3000, request_timeout_ms=2000)
        async with strict:
            with pytest.raises(DeliveryTimeoutError, match="fewer in-sync replicas than required"):
                await strict.send(topic, b"acks=all")
        async with Producer(cluster.bootstrap(nodes=[1]), acks=1) as lenient:
            assert (await lenient.send(topic, b"acks=1")).offset == 0
        visible = [r.value for r in await read_back_async(cluster.bootstrap(nodes=[1]), topic)]
        # The high watermark does not advance while the ISR is below min.insync.replicas (KIP-966; so on 3.9.1 and
        # 4.1.1 alike): the acks=1 record is acknowledged, but consumers see it only once the ISR recovers.
        assert visible == []
        await asyncio.to_thread(cluster.start_node, 2)
        await wait_for(lambda: 2 in cluster.partition_state(topic, 0).isr, 60, "node 2 to rejoin the ISR")
        async with Producer(cluster.bootstrap(nodes=[1])) as recovered:
            assert (await recovered.send(topic, b"acks=all again")).offset == 1
        # NOT_ENOUGH_REPLICAS is checked before the append: the refused record never reached the log.
        stored = await read_back_async(cluster.bootstrap(nodes=[1]), topic)
        assert [r.value for r in stored] == [b"acks=1", b"acks=all again"]
    finally:
        await asyncio.to_thread(cluster.heal)


async def test_a_write_that_timed_out_unreplicated_is_reported_as_of_unknown_outcome(
    kafka_cluster_3_one_controller: KafkaCluster,
) -> None:
    """Regression: acks=all while both followers had just died. The leader appended the batch, then answered
    REQUEST_TIMED_OUT (or the request timed out first); retries met NOT_ENOUGH_REPLICAS once the ISR shrank, and
    delivery_timeout_ms then failed the record with only "last error: ... fewer in-sync replicas" — yet it is in
    the log. The documentation promises that a failure whose outcome is unknown says so."""
    cluster = kafka_cluster_3_one_controller
    topic = await asyncio.to_thread(cluster.create_topic, "unreplicated", 1, replica_assignment=[[1, 2, 3]])
    try:
        await _two_followers_down(cluster, topic)
        producer = Producer(cluster.bootstrap(nodes=[1]), delivery_timeout_ms=12000, request_timeout_ms=2000)
        async with producer:
            with pytest.raises(DeliveryTimeoutError) as caught:
                await producer.send(topic, b"appended, never replicated")
        # Consumers see it once a follower is back in the ISR and the high watermark moves past it.
        await asyncio.to_thread(cluster.start_node, 2)
        await wait_for(lambda: 2 in cluster.partition_state(topic, 0).isr, 60, "node 2 to rejoin the ISR")
        stored = await read_back_async(cluster.bootstrap(nodes=[1]), topic)
        assert [r.value for r in stored] == [b"appended, never replicated"]
        assert "outcome is unknown" in str(caught.value), str(caught.value)
    finally:
        await asyncio.to_thread(cluster.heal)


async def test_a_topic_that_does_not_exist_is_not_created_and_the_send_fails_within_max_block_ms(
    kafka_cluster_3_one_controller: KafkaCluster,
) -> None:
    cluster = kafka_cluster_3_one_controller
    began = time.monotonic()
    async with Producer(cluster.bootstrap_servers, max_block_ms=2000) as producer:
        with pytest.raises(KafkaTimeoutError, match="never-created"):
            await producer.send("never-created", b"x")
    assert time.monotonic() - began < 10
    import confluent_kafka.admin

    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    topics = await asyncio.to_thread(lambda: admin.list_topics(timeout=10).topics)
    assert "never-created" not in topics
