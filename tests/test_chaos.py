"""The fault campaign (chaos_campaign.py), one short seed per target, and the producer's idle cost while no broker is
up (targets: `kafka_cluster_3`, three real Kafka nodes; librdkafka's mock cluster). `nox -s chaos` runs many seeds
for minutes; a failing seed here is reproduced there with `--first-seed N --seeds 1`."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from chaos_campaign import DELIVERY_TIMEOUT_MS, Outcome, ProducerPlan, judge, kafka_seed, mock_seed
from fault_helpers import running_producer
from sender_probe import IDLE_CPU_SHARE, IDLE_PASSES_PER_SECOND, idle_use

from aioproducer import RecordMetadata
from aioproducer.errors import DeliveryTimeoutError
from aioproducer.testing import ConsumedRecord, KafkaCluster, MockCluster

pytestmark = pytest.mark.timeout(300)


async def test_a_short_fault_campaign_on_real_kafka_loses_duplicates_reorders_and_fails_nothing(
    kafka_cluster_3: KafkaCluster,
) -> None:
    outcome = await kafka_seed(kafka_cluster_3, seed=1, duration_s=8, producers=6, rate=120)
    print(outcome)
    assert outcome.clean, str(outcome)
    assert outcome.acknowledged == outcome.sent > 500
    assert sum(outcome.faults.values()) >= 3, outcome.faults


async def test_a_short_fault_campaign_on_the_mock_cluster_loses_duplicates_reorders_and_fails_nothing() -> None:
    outcome = await mock_seed(seed=1, duration_s=6, producers=6, rate=300)
    print(outcome)
    # Clean allows only failures an injected MESSAGE_TOO_LARGE forces (a batch of one record cannot be split).
    assert outcome.clean, str(outcome)
    assert outcome.sent > 500
    assert sum(outcome.faults.values()) >= 5, outcome.faults


async def test_the_producer_idles_while_every_broker_is_down(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("idle", 3)
    settings = {"linger_ms": 1, "reconnect_backoff_max_ms": 1000, "retry_backoff_max_ms": 1000}
    async with running_producer(mock_cluster.bootstrap_servers, close_timeout_s=0.5, **settings) as producer:
        await producer.send("idle", b"warm", key=b"k")
        for broker in (1, 2, 3):
            await asyncio.to_thread(mock_cluster.set_broker_down, broker)
        waiting = [await producer.enqueue("idle", b"%d" % i, key=b"k%d" % i) for i in range(200)]
        await asyncio.sleep(1.0)  # the producer notices the outage and backs off
        use = await idle_use(producer, 3.0)
        assert not any(f.done() for f in waiting)
    assert use.cpu_s < IDLE_CPU_SHARE * use.elapsed_s, (
        f"{use.cpu_s:.2f} s of CPU in {use.elapsed_s:.2f} s while every broker was down"
    )
    # The CPU bound tells a spin from a wait; polling a few hundred times a second stays under it but not under this.
    assert use.passes < IDLE_PASSES_PER_SECOND * use.elapsed_s, f"{use.passes} sender passes in {use.elapsed_s:.2f} s"


async def test_the_campaign_judge_counts_each_kind_of_damage() -> None:
    plan = ProducerPlan(0, keyed=True, compression="none", in_flight=5, topics=("t",))
    loop = asyncio.get_running_loop()
    values = [b"p0|k1|s%d|pad" % i for i in range(5)]
    for offset, value in enumerate(values):
        future: asyncio.Future[RecordMetadata] = loop.create_future()
        future.set_result(RecordMetadata("t", 0, offset, 0, 5, len(value)))
        plan.sent.append(("t", value, b"key-1"))
        plan.futures.append(future)
        plan.appended_at.append(0.0)
        plan.done_at[offset] = 0.5
    refused: asyncio.Future[RecordMetadata] = loop.create_future()
    refused.set_exception(DeliveryTimeoutError("expired"))
    plan.sent.append(("t", b"p0|k1|s5|pad", b"key-1"))
    plan.futures.append(refused)
    plan.appended_at.append(0.0)
    plan.done_at[5] = DELIVERY_TIMEOUT_MS / 1000 + 2  # late, too
    # Stored: s0, s2, s1 (reordered, and s1/s2 away from their acknowledged offsets), s2 again; s3 and s4 lost.
    stored = [values[0], values[2], values[1], values[2]]
    records = [ConsumedRecord("t", 0, offset, b"key-1", value, (), 0, 0) for offset, value in enumerate(stored)]
    outcome = Outcome("kafka", 0, [], Counter())
    judge(outcome, [plan], {"t": records}, mock=False)
    assert (outcome.sent, outcome.acknowledged, outcome.lost, outcome.duplicated) == (6, 5, 2, 1)
    assert (outcome.reordered, outcome.misplaced, outcome.late) == (1, 2, 1)
    assert outcome.failed == Counter({"DeliveryTimeoutError": 1}) and not outcome.clean
