"""The producer's metrics: the pure model (histogram buckets, immutable snapshots, Java's names), and what
`producer.metrics()` reports after real traffic (real Kafka) and after injected errors (librdkafka's mock)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from aioproducer import Producer, ProducerRecord
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import BufferExhaustedError, KafkaError
from aioproducer.observability.metrics import Gauges, Histogram, ProducerMetrics
from aioproducer.testing import MockCluster
from aioproducer.validation import record_size
from tests.twins import TWINS, use_twin

PRODUCE = 0
NOT_ENOUGH_REPLICAS, INVALID_RECORD = ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.INVALID_RECORD
FAST = {"linger_ms": 1, "retry_backoff_ms": 10, "retry_backoff_max_ms": 50, "reconnect_backoff_ms": 20}


# -- the pure model ----------------------------------------------------------------------------------------------
def test_histogram_counts_each_value_in_the_first_bucket_whose_bound_holds_it() -> None:
    histogram = Histogram((1, 10, 100))
    for value in (0, 1, 1.5, 10, 11, 100, 101, 10_000):
        histogram.observe(value)
    snapshot = histogram.snapshot()
    assert snapshot.buckets == (2, 2, 2, 2)  # ≤1, ≤10, ≤100, above
    assert snapshot.count == 8
    assert snapshot.sum == pytest.approx(10_224.5)
    assert snapshot.max == 10_000
    assert snapshot.avg == pytest.approx(10_224.5 / 8)


def test_observing_a_requests_values_at_once_equals_observing_each() -> None:
    one_by_one, at_once = Histogram((1, 10, 100)), Histogram((1, 10, 100))
    values = [0, 1, 7, 10, 99, 100, 101, 5000, 3]
    for value in values:
        one_by_one.observe(value)
    at_once.observe_all(values[:4])
    at_once.observe_all([])
    at_once.observe_all(values[4:])
    assert at_once.snapshot() == one_by_one.snapshot()


def test_record_size_avg_counts_each_record_once_on_its_first_send() -> None:
    metrics = ProducerMetrics(buffer_total_bytes=1000)
    metrics.request_written(
        1, records=3, request_bytes=300, batch_sizes=[300], queue_times_ms=[2], sized_records=3, sized_bytes=360
    )
    metrics.request_written(
        1, records=3, request_bytes=300, batch_sizes=[300], queue_times_ms=[], sized_records=0, sized_bytes=0
    )  # the same batch retried
    snapshot = metrics.snapshot(Gauges())
    assert snapshot.producer["record-size-avg"] == 120
    assert snapshot.histograms["batch-size-bytes"].count == 2
    assert snapshot.histograms["record-queue-time-ms"].count == 1
    assert snapshot.nodes["node-1"]["request-total"] == 2


def test_snapshot_is_immutable_and_does_not_move_with_later_events() -> None:
    metrics = ProducerMetrics(buffer_total_bytes=1000)
    metrics.batch_sent("t", records=3, wire_bytes=100, uncompressed_bytes=200, queue_time_ms=4)
    before = metrics.snapshot(Gauges(buffer_available_bytes=900))
    metrics.batch_sent("t", records=2, wire_bytes=100, uncompressed_bytes=100, queue_time_ms=None)
    after = metrics.snapshot(Gauges())
    assert before.producer["record-send-total"] == 3 and after.producer["record-send-total"] == 5
    assert before.topics["t"]["record-send-total"] == 3
    assert before.producer["compression-rate-avg"] == pytest.approx(0.5)
    assert after.producer["compression-rate-avg"] == pytest.approx(200 / 300)
    assert before.producer["buffer-available-bytes"] == 900
    with pytest.raises(TypeError):
        before.producer["record-send-total"] = 0  # type: ignore[index]
    with pytest.raises(TypeError):
        before.topics["t"]["record-send-total"] = 0  # type: ignore[index]
    assert before.histograms["record-queue-time-ms"].count == 1 == after.histograms["record-queue-time-ms"].count


def test_metadata_age_is_absent_until_metadata_arrived() -> None:
    """Bug: `metadata-age` read 0 before any metadata had arrived (a cluster that never answered looked fresh)."""
    assert "metadata-age" not in ProducerMetrics(1).snapshot(Gauges()).producer
    assert ProducerMetrics(1).snapshot(Gauges(metadata_age_s=2.5)).producer["metadata-age"] == 2.5


def test_bytes_of_closed_connections_are_kept_in_the_totals() -> None:
    metrics = ProducerMetrics(buffer_total_bytes=1)
    metrics.connection_closed(1, outgoing_bytes=100, incoming_bytes=10)
    snapshot = metrics.snapshot(Gauges(outgoing_bytes={1: 5, 2: 7}, incoming_bytes={1: 1}))
    assert snapshot.producer["outgoing-byte-total"] == 112
    assert snapshot.producer["incoming-byte-total"] == 11
    assert snapshot.nodes["node-1"]["outgoing-byte-total"] == 105
    assert snapshot.nodes["node-2"]["outgoing-byte-total"] == 7
    assert snapshot.producer["connection-close-total"] == 1


def test_snapshot_uses_the_java_producers_names() -> None:
    names = set(ProducerMetrics(1).snapshot(Gauges(metadata_age_s=1.5)).producer)
    java = {
        "record-send-total",
        "record-error-total",
        "record-retry-total",
        "batch-size-avg",
        "batch-size-max",
        "records-per-request-avg",
        "compression-rate-avg",
        "record-queue-time-avg",
        "record-queue-time-max",
        "request-latency-avg",
        "request-latency-max",
        "requests-in-flight",
        "buffer-total-bytes",
        "buffer-available-bytes",
        "bufferpool-wait-time-ns-total",
        "buffer-exhausted-total",
        "metadata-age",
        "batch-split-total",
        "produce-throttle-time-avg",
        "produce-throttle-time-max",
        "connection-count",
        "connection-creation-total",
        "connection-close-total",
        "outgoing-byte-total",
        "incoming-byte-total",
        "waiting-threads",
        "record-size-avg",
        "flush-time-ns-total",
        "metadata-wait-time-ns-total",
        "txn-init-time-ns-total",
        "txn-begin-time-ns-total",
        "txn-send-offsets-time-ns-total",
        "txn-commit-time-ns-total",
        "txn-abort-time-ns-total",
    }
    assert java <= names, java - names


# -- a real producer -----------------------------------------------------------------------------------------------
async def test_metrics_after_real_traffic_count_every_record_batch_and_request(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=2)
    async with Producer(bootstrap, compression_type="gzip", **FAST) as producer:
        before = producer.metrics()
        assert before.producer["record-send-total"] == 0
        records = [ProducerRecord(topic, b"x" * 200, key=b"k%d" % i) for i in range(300)]
        results = await producer.send_many(records)
        assert all(not isinstance(r, BaseException) for r in results)
        await producer.send(topic, b"one more")
        snapshot = producer.metrics()
    p = snapshot.producer
    # Each attempt counts as a send (Java's rule); a fresh topic on real Kafka may answer NOT_LEADER_OR_FOLLOWER to
    # the first requests, so retries are allowed, and every retried record was sent once more.
    assert p["record-send-total"] - p["record-retry-total"] == 301
    assert snapshot.topics[topic]["record-send-total"] == p["record-send-total"]
    assert p["record-error-total"] == 0
    # gzip over repetitive values: the batches shrink a lot.
    assert 0 < p["compression-rate-avg"] < 0.5
    assert 0 < snapshot.topics[topic]["compression-rate"] < 0.5
    assert p["request-total"] >= 2 and p["response-total"] == p["request-total"]
    assert p["records-per-request-avg"] == pytest.approx(p["record-send-total"] / p["request-total"])
    assert p["batch-size-max"] >= p["batch-size-avg"] > 0
    assert p["request-latency-max"] >= p["request-latency-avg"] >= 0
    assert snapshot.histograms["request-latency-ms"].count == p["response-total"]
    assert snapshot.histograms["delivery-latency-ms"].count >= 2
    assert 0 < snapshot.histograms["record-queue-time-ms"].count <= snapshot.histograms["batch-size-bytes"].count
    assert p["connection-count"] >= 1 and p["connection-creation-total"] >= 2  # bootstrap + the leader
    assert p["outgoing-byte-total"] > p["byte-total"] > 0 and p["incoming-byte-total"] > 0
    assert p["producer-id"] >= 0 and p["producer-epoch"] >= 0
    assert p["buffer-available-bytes"] == p["buffer-total-bytes"] == 33554432  # everything delivered, released
    assert p["requests-in-flight"] == 0
    assert 0 <= p["metadata-age"] < 60
    # Each record once, as buffered (gzip does not change it), however often its batch was sent.
    sizes = [record_size(r.key, r.value, ()) for r in records] + [record_size(None, b"one more", ())]
    assert p["record-size-avg"] == pytest.approx(sum(sizes) / 301)
    assert p["metadata-wait-time-ns-total"] > 0  # the first send_many waited for the new topic's metadata
    assert p["flush-time-ns-total"] == 0 and p["txn-commit-time-ns-total"] == 0
    nodes = [name for name, values in snapshot.nodes.items() if values["request-total"] > 0]
    assert nodes and all(name.startswith("node-") for name in nodes)
    assert sum(snapshot.nodes[n]["request-total"] for n in nodes) == p["request-total"]


async def test_retried_and_failed_records_are_counted_per_topic(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("flaky", 1)
    async with Producer(mock_cluster.bootstrap_servers, **FAST) as producer:
        await producer.partitions_for("flaky")
        mock_cluster.push_request_errors(PRODUCE, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS)
        await producer.send("flaky", b"retried twice")
        mock_cluster.push_request_errors(PRODUCE, INVALID_RECORD)
        with pytest.raises(KafkaError) as refused:
            await producer.send("flaky", b"refused")
        assert refused.value.code == INVALID_RECORD
        snapshot = producer.metrics()
    assert snapshot.producer["record-retry-total"] == 2
    assert snapshot.topics["flaky"]["record-retry-total"] == 2
    assert snapshot.producer["record-error-total"] == 1
    assert snapshot.topics["flaky"]["record-error-total"] == 1
    # Each attempt is a send, as in Java: 3 for the first record, 1 for the second.
    assert snapshot.producer["record-send-total"] == 4


async def test_waiting_for_buffer_memory_is_timed_and_exhaustion_counted(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("slow", 1)
    settings = {**FAST, "buffer_memory": 4096, "max_block_ms": 300, "batch_size": 1024, "linger_ms": 0}
    async with Producer(mock_cluster.bootstrap_servers, **settings) as producer:
        await producer.partitions_for("slow")
        mock_cluster.set_broker_down(1)
        mock_cluster.set_broker_down(2)
        mock_cluster.set_broker_down(3)
        deliveries = []
        with pytest.raises(BufferExhaustedError):
            for _ in range(100):
                deliveries.append(await producer.enqueue("slow", b"v" * 900))
        snapshot = producer.metrics()
        assert snapshot.producer["buffer-exhausted-total"] == 1
        assert snapshot.producer["bufferpool-wait-time-ns-total"] >= 250_000_000  # waited about max_block_ms
        assert snapshot.producer["buffer-available-bytes"] < 1000
        for broker in (1, 2, 3):
            mock_cluster.set_broker_up(broker)
        await asyncio.gather(*deliveries)


@pytest.mark.parametrize("twin", TWINS)
async def test_the_compiled_and_pure_record_paths_count_alike(
    bootstrap: str, topic_factory: Callable[..., str], twin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting happens per batch in the sender, so the record path in use (compiled or pure) cannot change it."""
    use_twin(monkeypatch, twin)
    topic = topic_factory(partitions=3)
    async with Producer(bootstrap, **FAST) as producer:
        for i in range(40):
            await producer.enqueue(topic, b"e%d" % i, key=b"%d" % (i % 7))
        results = await producer.send_many(
            [ProducerRecord(topic, b"m%d" % i) for i in range(60)] + [ProducerRecord("bad topic!", b"x")]
        )
        await producer.flush()
        snapshot = producer.metrics()
    assert isinstance(results[-1], Exception)
    p = snapshot.producer
    assert p["record-send-total"] - p["record-retry-total"] == 100  # retries (a fresh topic's first answers) resend
    assert snapshot.topics[topic]["record-send-total"] == p["record-send-total"]
    assert snapshot.producer["record-error-total"] == 0
    assert "bad topic!" not in snapshot.topics
    assert snapshot.producer["compression-rate-avg"] == 1.0  # no compression: exactly 1
