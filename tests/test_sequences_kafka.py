"""Real Apache Kafka as the judge of the idempotent producer's sequence and epoch rules (aioproducer.idempotence):
batches split after the broker's own MESSAGE_TOO_LARGE keep their order, and a stream restarted under an epoch the
producer bumped itself (KIP-360) is taken. Only a broker that enforces sequences can show either."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest
from fault_helpers import judge, read_back_async, running_producer, settle, workload

from aioproducer import ProducerRecord, RecordMetadata
from aioproducer.errors import InvalidRecordError
from aioproducer.testing import KafkaCluster


def _topic(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


async def test_batches_split_after_the_brokers_message_too_large_keep_their_order(
    kafka_cluster: KafkaCluster,
) -> None:
    """Regression: a batch split after MESSAGE_TOO_LARGE was queued behind the batches that followed it, so 40
    records of one partition were stored as 8..39, 0..7. Here the broker's own `max.message.bytes` refuses every
    batch the producer builds; the halves must inherit their batch's sequences and place, every record be stored
    once, in send order."""
    topic = await asyncio.to_thread(
        kafka_cluster.create_topic, _topic("split-real"), 1, config={"max.message.bytes": "700"}
    )
    records = workload("split", 200, keys=1, topic=topic)
    # ~40 records of ~30 bytes per batch: each is split twice before the broker takes it.
    settings = {"batch_size": 1400, "linger_ms": 20, "retry_backoff_ms": 20, "max_in_flight_requests_per_connection": 5}
    async with running_producer(kafka_cluster.bootstrap_servers, close_timeout_s=10, **settings) as producer:
        futures = [await producer.enqueue(r.topic, r.value, key=r.key, partition=0) for r in records]
        results = await settle(futures, 30)
    assert [r for r in results if not isinstance(r, RecordMetadata)][:3] == []
    stored = await read_back_async(kafka_cluster.bootstrap_servers, topic)
    verdict = judge(stored, records)
    assert verdict.ok, str(verdict)
    offsets = [r.offset for r in results if isinstance(r, RecordMetadata)]
    assert offsets == list(range(len(records))), "acknowledged offsets are not the records' own"


async def test_a_stream_restarted_under_a_locally_bumped_epoch_is_taken(
    kafka_cluster: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch the broker refuses for good (a keyless record in a compacted topic: INVALID_RECORD) leaves a hole in
    its partition's sequences; the batches behind it, refused as out of order, restart at sequence 0 under an epoch
    the producer bumps itself (KIP-360, no InitProducerId). Kafka must take them, in order, each once."""
    topic = await asyncio.to_thread(
        kafka_cluster.create_topic, _topic("bumped"), 1, config={"cleanup.policy": "compact"}
    )
    records = [
        ProducerRecord(topic, b"v%03d" % i, key=None if i == 60 else b"k%03d" % i, partition=0) for i in range(120)
    ]
    settings = {"batch_size": 300, "linger_ms": 5, "retry_backoff_ms": 20, "max_in_flight_requests_per_connection": 5}
    caplog.set_level(logging.INFO, logger="aioproducer.idempotence")
    async with running_producer(kafka_cluster.bootstrap_servers, close_timeout_s=10, **settings) as producer:
        await producer.send(topic, b"warm", key=b"warm", partition=0)
        results = await producer.send_many(records)
    failed = [i for i, r in enumerate(results) if not isinstance(r, RecordMetadata)]
    assert 60 in failed and all(isinstance(results[i], InvalidRecordError) for i in failed), failed
    assert failed == list(range(failed[0], failed[-1] + 1)), "only the refused batch may fail"
    stored = [r.value for r in await read_back_async(kafka_cluster.bootstrap_servers, topic)]
    expected = [b"warm"] + [r.value for i, r in enumerate(records) if i not in failed]
    assert stored == expected
    assert any("epoch bumped to 1" in r.getMessage() for r in caplog.records), "no local epoch bump happened"
