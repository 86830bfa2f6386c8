"""MockProducer's `metrics()` and `health()`: the Producer's shapes (same names, same types), counting what the mock
did — records sent and failed per topic, their sizes, flush and transactional call times, the last error."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from aioproducer import Producer
from aioproducer.errors import InvalidRecordError, ProducerClosedError, TransactionAbortedError
from aioproducer.kafka_errors import NotEnoughReplicasError
from aioproducer.observability.health import Health
from aioproducer.observability.metrics import MetricsSnapshot
from aioproducer.testing import MockProducer
from aioproducer.validation import record_size


@pytest.mark.parametrize("name", ["metrics", "health"])
def test_same_signatures_as_the_producer(name: str) -> None:
    assert inspect.signature(getattr(MockProducer, name)) == inspect.signature(getattr(Producer, name))


async def test_a_snapshot_has_the_producers_names() -> None:
    mine, theirs = MockProducer().metrics(), Producer("localhost:9092").metrics()
    assert type(mine) is type(theirs) is MetricsSnapshot
    assert set(mine.producer) == set(theirs.producer)
    assert set(mine.histograms) == set(theirs.histograms)
    assert mine.producer["buffer-total-bytes"] == theirs.producer["buffer-total-bytes"]


async def test_completed_records_are_sent_and_failed_ones_counted_per_topic() -> None:
    sizes = {"a": record_size(b"k", b"x" * 10, ()), "b": record_size(None, b"y" * 50, [("h", b"v")])}
    async with MockProducer(auto_complete=False, topics={"a": 2, "b": 1}) as mock:
        a = [await mock.enqueue("a", b"x" * 10, key=b"k") for _ in range(3)]
        b = [await mock.enqueue("b", b"y" * 50, headers=[("h", b"v")]) for _ in range(2)]
        with pytest.raises(InvalidRecordError):
            await mock.enqueue("a", b"bad", headers=[("h", "not bytes")])  # type: ignore[list-item]
        before = mock.metrics().producer
        assert before["record-send-total"] == 0 and before["buffer-available-bytes"] < mock.config.buffer_memory
        assert mock.fail_next(NotEnoughReplicasError("not enough replicas"))
        mock.inject_error(NotEnoughReplicasError("again"), topic="b")
        mock.complete_all()
        assert [d.exception() is None for d in a] == [False, True, True]
        assert [d.exception() is None for d in b] == [False, True]

        snapshot = mock.metrics()
        producer = snapshot.producer
        assert producer["record-send-total"] == 5  # refused at the call: not counted (as the Producer)
        assert producer["record-error-total"] == 2
        assert snapshot.topics["a"]["record-error-total"] == 1 == snapshot.topics["b"]["record-error-total"]
        assert snapshot.topics["b"]["record-send-total"] == 2
        assert producer["byte-total"] == 3 * sizes["a"] + 2 * sizes["b"]
        assert producer["record-size-avg"] == pytest.approx((3 * sizes["a"] + 2 * sizes["b"]) / 5)
        assert producer["batch-size-max"] == sizes["b"]  # each mock record is a batch of its own
        assert producer["buffer-available-bytes"] == mock.config.buffer_memory
        assert producer["connection-count"] == 1
        assert producer["request-total"] == 0 and producer["record-retry-total"] == 0

        await mock.enqueue("a", b"late")
        await mock.flush()
        assert mock.metrics().producer["flush-time-ns-total"] > 0
        assert mock.metrics().producer["record-send-total"] == 6
    closed = mock.metrics().producer
    assert closed["connection-count"] == 0


def test_numbers_can_be_read_once_the_event_loop_is_gone() -> None:
    mock = MockProducer()

    async def produce() -> None:
        async with mock:
            await mock.send("t", b"v")

    asyncio.run(produce())
    assert mock.metrics().producer["record-send-total"] == 1
    assert not mock.health().ready


async def test_records_failed_unsent_count_as_errors_not_as_sent() -> None:
    mock = MockProducer(latency_ms=60_000)
    await mock.start()
    delivery = await mock.enqueue("t", b"never")
    await mock.close(timeout=0)  # not completed in time: fails unsent
    assert isinstance(delivery.exception(), ProducerClosedError)
    producer = mock.metrics().producer
    assert (producer["record-send-total"], producer["record-error-total"]) == (0, 1)

    async with MockProducer(auto_complete=False, transactional_id="tx") as txn:
        await txn.begin_transaction()
        dropped = await txn.enqueue("t", b"aborted")
        await txn.abort_transaction()
        assert isinstance(dropped.exception(), TransactionAbortedError)
        await txn.begin_transaction()
        await txn.enqueue("t", b"kept")
        await txn.commit_transaction()
        producer = txn.metrics().producer
        assert (producer["record-send-total"], producer["record-error-total"]) == (1, 1)
        for name in ("txn-init", "txn-begin", "txn-commit", "txn-abort"):
            assert producer[f"{name}-time-ns-total"] > 0, name
        assert producer["txn-send-offsets-time-ns-total"] == 0


async def test_health_is_ready_while_running_and_reports_the_last_error() -> None:
    mock = MockProducer(auto_complete=False, topics={"orders": 3})
    assert not mock.health().ready and mock.health().state == "new"
    async with mock:
        health = mock.health()
        assert type(health) is Health
        assert health.ready and health.connected_brokers == (0,)
        assert dict(health.leaders["orders"]) == {0: 0, 1: 0, 2: 0}
        assert health.last_error is None and health.last_error_age_s is None
        await mock.enqueue("orders", b"x" * 100)
        assert mock.health().buffer_used_bytes > 100
        mock.fail_next(NotEnoughReplicasError("no ISR"))
        health = mock.health()
        assert health.buffer_used_bytes == 0
        assert health.last_error is not None and "NotEnoughReplicas" in health.last_error
        assert health.last_error_age_s is not None and health.last_error_age_s >= 0
    assert not mock.health().ready and mock.health().connected_brokers == ()
