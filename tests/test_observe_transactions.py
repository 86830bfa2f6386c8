"""What a transactional producer tells its hooks and metrics, judged on real Apache Kafka: `on_transaction` events
(init / begin / commit / abort / fenced) with the transactional id, producer id, epoch and duration; a hook that
raises is logged and counted and the transaction still commits; the txn-*-time-ns-total and flush-time-ns-total
call timings (Java's KafkaProducerMetrics)."""

from __future__ import annotations

import logging
import uuid

import pytest
from transactions_helpers import values

from aioproducer import Producer
from aioproducer.errors import ProducerFencedError
from aioproducer.hooks import TransactionEvent
from aioproducer.testing import KafkaCluster

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(180)


class Transactions:
    """Keeps every transaction event it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, TransactionEvent]] = []

    def on_transaction(self, event: str, detail: TransactionEvent) -> None:
        self.events.append((event, detail))

    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def last(self, name: str) -> TransactionEvent:
        return [detail for event, detail in self.events if event == name][-1]


class Raising:
    def __init__(self) -> None:
        self.calls = 0

    def on_transaction(self, event: str, detail: TransactionEvent) -> None:
        self.calls += 1
        raise RuntimeError(f"hook failure on {event}")


def _transactional(cluster: KafkaCluster, transactional_id: str, hooks: list[object]) -> Producer:
    return Producer(cluster.bootstrap_servers, transactional_id=transactional_id, linger_ms=2, hooks=hooks)


async def test_transaction_events_reach_every_hook_and_a_raising_hook_breaks_nothing(
    kafka_cluster: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    topic = kafka_cluster.create_topic(f"obs-txn-{uuid.uuid4().hex[:10]}", 2)
    transactional_id = f"obs-{uuid.uuid4().hex[:10]}"
    seen, raising = Transactions(), Raising()
    caplog.set_level(logging.ERROR, logger="aioproducer.hooks")
    # The raising hook comes first: the hooks after it are still called, and nothing reaches the caller.
    async with _transactional(kafka_cluster, transactional_id, [raising, seen]) as producer:
        assert seen.names() == ["init"]
        init = seen.last("init")
        assert init.transactional_id == transactional_id
        assert init.producer_id >= 0 and init.producer_epoch >= 0
        assert init.producer_id == producer.metrics().producer["producer-id"]

        await producer.begin_transaction()
        deliveries = [await producer.enqueue(topic, f"c-{i}".encode(), partition=i % 2) for i in range(4)]
        await producer.flush()
        await producer.send_offsets_to_transaction({(topic, 0): 1}, f"obs-group-{uuid.uuid4().hex[:6]}")
        await producer.commit_transaction()
        assert [(await d).offset >= 0 for d in deliveries] == [True] * 4
        begun, committed = seen.last("begin"), seen.last("commit")
        assert (begun.producer_id, begun.producer_epoch) == (committed.producer_id, committed.producer_epoch)
        assert committed.producer_id == init.producer_id
        assert committed.duration_ms > 0 and committed.error is None

        await producer.begin_transaction()
        await producer.enqueue(topic, b"aborted", partition=0)
        await producer.abort_transaction()
        aborted = seen.last("abort")
        assert aborted.producer_id == init.producer_id and aborted.duration_ms > 0

        metrics = producer.metrics().producer
        assert seen.names() == ["init", "begin", "commit", "begin", "abort"]
        assert raising.calls == 5
        assert metrics["hook-error-total"] == 5
        # Caller-side times (Java's): each call lasts at least as long as the operation it waited for.
        assert metrics["txn-commit-time-ns-total"] >= committed.duration_ms * 1e6
        assert metrics["txn-abort-time-ns-total"] >= aborted.duration_ms * 1e6
        for name in ("txn-init", "txn-begin", "txn-send-offsets", "flush"):
            assert metrics[f"{name}-time-ns-total"] > 0, name
        assert metrics["record-size-avg"] > len(b"c-0")  # the buffered size: value plus the record's framing

    raised = [r for r in caplog.records if r.name == "aioproducer.hooks" and r.exc_info]
    assert len(raised) == 5  # each with its traceback
    assert all(isinstance(r.exc_info[1], RuntimeError) for r in raised if r.exc_info)
    assert values(kafka_cluster.bootstrap_servers, topic, "read_committed") == [b"c-0", b"c-2", b"c-1", b"c-3"]


async def test_a_fenced_producer_reports_fenced_once_with_its_identity(kafka_cluster: KafkaCluster) -> None:
    topic = kafka_cluster.create_topic(f"obs-fence-{uuid.uuid4().hex[:10]}", 1)
    transactional_id = f"obs-{uuid.uuid4().hex[:10]}"
    seen = Transactions()
    async with _transactional(kafka_cluster, transactional_id, [seen]) as zombie:
        zombie_id = seen.last("init").producer_id
        await zombie.begin_transaction()
        await (await zombie.enqueue(topic, b"zombie"))
        async with _transactional(kafka_cluster, transactional_id, []):  # its init fences the zombie
            with pytest.raises(ProducerFencedError):
                await zombie.commit_transaction()
            with pytest.raises(ProducerFencedError):
                await zombie.begin_transaction()
        assert seen.names() == ["init", "begin", "fenced"]
        fenced = seen.last("fenced")
        assert fenced.transactional_id == transactional_id and fenced.producer_id == zombie_id
        assert isinstance(fenced.error, ProducerFencedError)
        assert zombie.metrics().producer["txn-commit-time-ns-total"] == 0  # the failed call adds nothing (Java)
        health = zombie.health()
        assert health.last_error is not None and "Fenced" in health.last_error
        # Fenced is fatal: only a restart (a new producer) mends it, so the liveness probe fails.
        assert not health.live and not health.ready and "fatal" in (health.reason or "")
