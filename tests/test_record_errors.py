"""KIP-467 on real Kafka: a compacted topic refuses records without a key, and its answer names them (RecordErrors).
Only the named records fail, each with its own error; the others of their batch are sent again and stored in order
(for a transaction, which the refusal dooms, they fail too, telling the caller to abort)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from fault_helpers import read_back_async

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.errors import KafkaError, TransactionRequiresAbortError
from aioproducer.kafka_errors import InvalidRecordError
from aioproducer.testing import KafkaCluster, read_back

pytestmark = pytest.mark.timeout(120)

COMPACTED = {"cleanup.policy": "compact"}


def records(topic: str, count: int, keyless: set[int]) -> list[ProducerRecord]:
    return [
        ProducerRecord(topic, b"v-%03d" % i, key=None if i in keyless else b"k-%03d" % i, partition=0)
        for i in range(count)
    ]


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "acks=1"])
async def test_a_compacted_topic_refuses_only_the_records_without_a_key(
    kafka_cluster: KafkaCluster, idempotent: bool
) -> None:
    """Regression: the answer's RecordErrors were ignored, so every record of a batch the broker refused for one
    keyless record failed with that record's error, the innocent ones included."""
    topic = kafka_cluster.create_topic(f"kip467-{uuid.uuid4().hex[:8]}", 1, config=COMPACTED)
    settings = {} if idempotent else {"acks": 1, "enable_idempotence": False}
    keyless = {3, 7, 8, 19}
    sent = records(topic, 20, keyless)
    async with Producer(kafka_cluster.bootstrap_servers, linger_ms=50, **settings) as producer:
        results = await producer.send_many(sent)  # one batch: linger_ms gathers them
        # Later records, after the refusal: the partition goes on.
        after = await producer.send(topic, b"after", key=b"k-after")
    refused = {i: r for i, r in enumerate(results) if isinstance(r, BaseException)}
    assert set(refused) == keyless, refused
    for error in refused.values():
        assert isinstance(error, InvalidRecordError) and isinstance(error, KafkaError)
        assert "without key" in str(error), error
    stored = await read_back_async(kafka_cluster.bootstrap_servers, topic)
    expected = [r.value for i, r in enumerate(sent) if i not in keyless] + [b"after"]
    assert [r.value for r in stored] == expected, "innocent records lost, duplicated or out of order"
    # Each delivered record's metadata points at its own offset.
    offsets = {r.value: r.offset for r in stored}
    for i, result in enumerate(results):
        if i not in keyless:
            assert isinstance(result, RecordMetadata) and result.offset == offsets[sent[i].value]
    assert after.offset == offsets[b"after"]


async def test_a_refused_record_dooms_its_transaction_and_its_batch_tells_the_caller_to_abort(
    kafka_cluster: KafkaCluster,
) -> None:
    """Regression: under a transaction the whole batch failed with the one refused record's error; now the refused
    record has its own error, the others say the transaction must be aborted, and the producer goes on after it."""
    topic = kafka_cluster.create_topic(f"kip467-txn-{uuid.uuid4().hex[:8]}", 1, config=COMPACTED)
    sent = records(topic, 6, {2})
    async with Producer(
        kafka_cluster.bootstrap_servers, transactional_id=f"kip467-{uuid.uuid4().hex[:8]}", linger_ms=50
    ) as producer:
        await producer.begin_transaction()
        results = await producer.send_many(sent)
        assert isinstance(results[2], InvalidRecordError)
        for i in (0, 1, 3, 4, 5):
            assert isinstance(results[i], TransactionRequiresAbortError), results[i]
        with pytest.raises(TransactionRequiresAbortError):
            await producer.commit_transaction()
        await producer.abort_transaction()
        await producer.begin_transaction()
        await producer.send(topic, b"committed", key=b"k")
        await producer.commit_transaction()
    stored = await asyncio.to_thread(
        read_back, kafka_cluster.bootstrap_servers, topic, timeout_s=30, isolation_level="read_committed"
    )
    committed = [r.value for r in stored]
    assert b"committed" in committed and not {r.value for r in sent} & set(committed)
