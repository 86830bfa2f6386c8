"""The producer's metrics: cumulative counters, gauges and fixed-bucket histograms, and their immutable snapshot.

Owns the numbers and their names (the Java producer's, grouped producer / topic / node). Pure: no I/O, no clock
(times arrive as arguments) and no locks: everything is updated on the producer's event loop, per batch or per
request, never per record. Counters are running totals; rates are an exporter's job (Java keeps windowed rates).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "BATCH_SIZE_BUCKETS",
    "LATENCY_BUCKETS_MS",
    "Gauges",
    "Histogram",
    "HistogramSnapshot",
    "MetricsSnapshot",
    "ProducerMetrics",
    "Stat",
]

# Upper bounds (inclusive) of the histograms' buckets; the last bucket, above the last bound, is implicit (+Inf).
LATENCY_BUCKETS_MS: tuple[float, ...] = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 120000)
BATCH_SIZE_BUCKETS: tuple[float, ...] = (256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
# From this many values at once, a histogram sorts them to count its buckets (fewer: a bisection per value).
_SORT_FROM = 16


class Histogram:
    """Counts of observations per fixed bucket, with their sum and maximum (librdkafka keeps windowed
    percentiles instead; fixed buckets are what Prometheus and OpenTelemetry aggregate)."""

    __slots__ = ("bounds", "buckets", "count", "max", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.buckets = [0] * (len(bounds) + 1)
        self.count = 0
        self.sum = 0.0
        self.max = 0.0

    def observe(self, value: float) -> None:
        self.buckets[bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.sum += value
        if value > self.max:
            self.max = value

    def observe_all(self, values: list[float] | list[int]) -> None:
        """`observe` each value: the producer's form, for many requests' batches at once. Many values are counted
        per bucket from their sorted order (a bisection per bound, in C) rather than one by one."""
        count = len(values)
        if not count:
            return
        buckets, bounds = self.buckets, self.bounds
        if count < _SORT_FROM:
            for value in values:
                buckets[bisect_left(bounds, value)] += 1
            top = max(values)
        else:
            ordered = sorted(values)
            below = 0  # values in the buckets before this one
            for index, bound in enumerate(bounds):
                upto = bisect_right(ordered, bound)  # values <= bound: this bucket and those before
                buckets[index] += upto - below
                below = upto
                if below == count:
                    break
            else:
                buckets[-1] += count - below
            top = ordered[-1]
        self.count += count
        self.sum += sum(values)
        if top > self.max:
            self.max = top

    def snapshot(self) -> HistogramSnapshot:
        return HistogramSnapshot(self.bounds, tuple(self.buckets), self.count, self.sum, self.max)


@dataclass(frozen=True)
class HistogramSnapshot:
    """A histogram at one moment. `buckets[i]` counts observations ≤ `bounds[i]` (and above the bound before);
    the last entry counts those above every bound."""

    bounds: tuple[float, ...]
    buckets: tuple[int, ...]
    count: int
    sum: float
    max: float

    @property
    def avg(self) -> float:
        return self.sum / self.count if self.count else 0.0


class Stat:
    """Count, sum and maximum only: for values reported as avg/max, which need no buckets (cheaper to keep)."""

    __slots__ = ("count", "max", "sum")

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        self.max = 0.0

    def observe(self, value: float) -> None:
        self.count += 1
        self.sum += value
        if value > self.max:
            self.max = value

    def observe_all(self, values: list[int]) -> None:
        """`observe` each of `values` (not empty)."""
        self.count += len(values)
        self.sum += sum(values)
        top = max(values)
        if top > self.max:
            self.max = top

    @property
    def avg(self) -> float:
        return self.sum / self.count if self.count else 0.0


class _TopicStats:
    __slots__ = ("bytes", "errors", "records", "retries", "uncompressed")

    def __init__(self) -> None:
        self.records = self.bytes = self.retries = self.errors = self.uncompressed = 0


class _NodeStats:
    __slots__ = ("latency", "request_size", "requests", "responses")

    def __init__(self) -> None:
        self.requests = self.responses = 0
        self.request_size = Stat()
        self.latency = Stat()


@dataclass(frozen=True)
class Gauges:
    """Values read from the producer's live state when a snapshot is taken (nothing keeps them up to date)."""

    buffer_available_bytes: int = 0
    requests_in_flight: int = 0
    connection_count: int = 0
    metadata_age_s: float | None = None  # None until a broker sent metadata: then `metadata-age` is left out
    producer_id: int = -1
    producer_epoch: int = -1
    buffer_waiters: int = 0
    # Bytes on the wire per node: the live connections' counts (the metrics add those of closed connections).
    outgoing_bytes: Mapping[int, int] = field(default_factory=dict)
    incoming_bytes: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricsSnapshot:
    """The producer's metrics at one moment, under the Java producer's names.

    `producer` holds producer-metrics (e.g. `record-send-total`), `topics[topic]` producer-topic-metrics,
    `nodes["node-N"]` producer-node-metrics, and `histograms` the fixed-bucket distributions
    (`record-queue-time-ms`, `request-latency-ms`, `batch-size-bytes`, `delivery-latency-ms`). Averages are over
    the producer's life, not Java's 30-second window. Immutable: take another snapshot to see newer numbers.
    """

    producer: Mapping[str, float]
    topics: Mapping[str, Mapping[str, float]]
    nodes: Mapping[str, Mapping[str, float]]
    histograms: Mapping[str, HistogramSnapshot]


class ProducerMetrics:
    """The running totals, fed by the sender (per batch and per request) and the producer (buffer waits)."""

    def __init__(self, buffer_total_bytes: int) -> None:
        self.buffer_total_bytes = buffer_total_bytes
        self.topics: dict[str, _TopicStats] = {}
        self.nodes: dict[int, _NodeStats] = {}
        self.queue_time = Histogram(LATENCY_BUCKETS_MS)
        self.request_latency = Histogram(LATENCY_BUCKETS_MS)
        self.batch_size = Histogram(BATCH_SIZE_BUCKETS)
        self.delivery_latency = Histogram(LATENCY_BUCKETS_MS)
        # Throttling: its sum and maximum, touched only when a broker throttles (the average is over responses).
        self.throttle_ms_total = 0
        self.throttle_ms_max = 0
        self.batch_split_total = 0
        self.buffer_exhausted_total = 0
        self.bufferpool_wait_time_ns_total = 0
        self.connection_creation_total = 0
        self.connection_close_total = 0
        self.epoch_bump_total = 0
        self.hook_error_total = 0
        # record-size-avg: the buffered size of each record (validation.record_size), counted once per record on its
        # batch's first send. Per batch, not per record: the record path stays untouched.
        self.record_bytes_total = 0
        self.records_sized = 0
        # Call timings (Java's KafkaProducerMetrics): ns spent in each call, summed over calls. Java adds flush's
        # time whatever the outcome and a transactional call's when it returns normally; so do we.
        self.flush_time_ns_total = 0
        self.metadata_wait_time_ns_total = 0
        self.txn_init_time_ns_total = 0
        self.txn_begin_time_ns_total = 0
        self.txn_send_offsets_time_ns_total = 0
        self.txn_commit_time_ns_total = 0
        self.txn_abort_time_ns_total = 0
        self.closed_outgoing_bytes: dict[int, int] = {}
        self.closed_incoming_bytes: dict[int, int] = {}

    def topic_stats(self, topic: str) -> _TopicStats:
        """The topic's running totals (`records`, `bytes`, `uncompressed`, `retries`, `errors`), made on first use."""
        stats = self.topics.get(topic)
        if stats is None:
            stats = self.topics[topic] = _TopicStats()
        return stats

    def _node(self, node_id: int) -> _NodeStats:
        stats = self.nodes.get(node_id)
        if stats is None:
            stats = self.nodes[node_id] = _NodeStats()
        return stats

    # -- events -------------------------------------------------------------------------------------------------
    def batch_sent(
        self,
        topic: str,
        records: int,
        wire_bytes: int,
        uncompressed_bytes: int,
        queue_time_ms: float | None,
        record_bytes: int = 0,
    ) -> None:
        """One batch sent (each attempt counts, as Java's record-send-total does); `queue_time_ms` and
        `record_bytes` (the records' buffered sizes, summed) are given on its first attempt. The producer reports a
        whole request at once (`request_written`); this per-batch form serves `MockProducer` and tests."""
        stats = self.topic_stats(topic)
        stats.records += records
        stats.bytes += wire_bytes
        stats.uncompressed += uncompressed_bytes
        self.batch_size.observe(wire_bytes)
        if queue_time_ms is not None:
            self.queue_time.observe(queue_time_ms)
        if record_bytes:
            self.record_bytes_total += record_bytes
            self.records_sized += records

    def request_written(
        self,
        node_id: int,
        records: int,
        request_bytes: int,
        batch_sizes: list[int],
        queue_times_ms: list[int],
        sized_records: int,
        sized_bytes: int,
    ) -> None:
        """A Produce request went out with batches of `batch_sizes` bytes; `queue_times_ms` of those on their first
        attempt, whose `sized_records` records take `sized_bytes` buffered. The per-topic totals were added by the
        caller (`topic_stats`), batch by batch: that loop is the one per-batch cost, so it stays in one place."""
        self.batch_size.observe_all(batch_sizes)
        self.queue_time.observe_all(queue_times_ms)
        self.record_bytes_total += sized_bytes
        self.records_sized += sized_records
        node = self.nodes.get(node_id) or self._node(node_id)
        node.requests += 1
        node.request_size.observe(request_bytes)

    def requests_written(
        self,
        node_ids: list[int],
        request_sizes: list[int],
        batch_sizes: list[int],
        queue_times_ms: list[int],
        sized_records: int,
        sized_bytes: int,
    ) -> None:
        """`request_written` for many requests at once, given as columns (request i went to `node_ids[i]` with
        `request_sizes[i]` bytes; the batches' lists are those of all of them): the observer's form, folding what
        it gathered since its last fold in a few builtin calls rather than a loop per request."""
        self.batch_size.observe_all(batch_sizes)
        self.queue_time.observe_all(queue_times_ms)
        self.record_bytes_total += sized_bytes
        self.records_sized += sized_records
        for node_id, sizes in _by_node(node_ids, request_sizes):
            node = self.nodes.get(node_id) or self._node(node_id)
            node.requests += len(sizes)
            node.request_size.observe_all(sizes)

    def responses_received(
        self, node_ids: list[int], latencies_ms: list[int], throttles_ms: list[int], delivery_latencies_ms: list[int]
    ) -> None:
        """`response_received` for many answers at once, as columns (answer i came from `node_ids[i]` after
        `latencies_ms[i]`, throttled `throttles_ms[i]`), with the delivery latencies of the batches they delivered."""
        for node_id, latencies in _by_node(node_ids, latencies_ms):
            node = self.nodes.get(node_id) or self._node(node_id)
            node.responses += len(latencies)
            node.latency.observe_all(latencies)
        self.request_latency.observe_all(latencies_ms)
        self.delivery_latency.observe_all(delivery_latencies_ms)
        if any(throttles_ms):
            self.throttle_ms_total += sum(throttles_ms)
            self.throttle_ms_max = max(self.throttle_ms_max, *throttles_ms)

    def response_received(self, node_id: int, latency_ms: float, throttle_ms: int) -> None:
        stats = self.nodes.get(node_id) or self._node(node_id)
        stats.responses += 1
        stats.latency.observe(latency_ms)
        self.request_latency.observe(latency_ms)
        if throttle_ms:
            self.throttle_ms_total += throttle_ms
            if throttle_ms > self.throttle_ms_max:
                self.throttle_ms_max = throttle_ms

    def batch_failed(self, topic: str, records: int) -> None:
        self.topic_stats(topic).errors += records

    def batch_retried(self, topic: str, records: int) -> None:
        self.topic_stats(topic).retries += records

    def connection_closed(self, node_id: int, outgoing_bytes: int, incoming_bytes: int) -> None:
        self.connection_close_total += 1
        self.closed_outgoing_bytes[node_id] = self.closed_outgoing_bytes.get(node_id, 0) + outgoing_bytes
        self.closed_incoming_bytes[node_id] = self.closed_incoming_bytes.get(node_id, 0) + incoming_bytes

    def buffer_waited(self, wait_ns: int, exhausted: bool) -> None:
        self.bufferpool_wait_time_ns_total += wait_ns
        if exhausted:
            self.buffer_exhausted_total += 1

    # -- snapshot -----------------------------------------------------------------------------------------------
    def snapshot(self, gauges: Gauges) -> MetricsSnapshot:
        topics = self.topics.values()
        sent = sum(t.records for t in topics)
        compressed = sum(t.bytes for t in topics)
        uncompressed = sum(t.uncompressed for t in topics)
        outgoing = _merge(self.closed_outgoing_bytes, gauges.outgoing_bytes)
        incoming = _merge(self.closed_incoming_bytes, gauges.incoming_bytes)
        requests = sum(n.requests for n in self.nodes.values())
        responses = sum(n.responses for n in self.nodes.values())
        producer: dict[str, float] = {
            "record-send-total": sent,
            "record-error-total": sum(t.errors for t in topics),
            "record-retry-total": sum(t.retries for t in topics),
            "byte-total": sum(t.bytes for t in topics),
            "batch-size-avg": self.batch_size.snapshot().avg,
            "record-size-avg": self.record_bytes_total / self.records_sized if self.records_sized else 0.0,
            "batch-size-max": self.batch_size.max,
            "records-per-request-avg": sent / requests if requests else 0.0,
            "compression-rate-avg": compressed / uncompressed if uncompressed else 1.0,
            "record-queue-time-avg": self.queue_time.snapshot().avg,
            "record-queue-time-max": self.queue_time.max,
            "request-latency-avg": self.request_latency.snapshot().avg,
            "request-latency-max": self.request_latency.max,
            "delivery-latency-avg": self.delivery_latency.snapshot().avg,
            "delivery-latency-max": self.delivery_latency.max,
            "produce-throttle-time-avg": self.throttle_ms_total / responses if responses else 0.0,
            "produce-throttle-time-max": self.throttle_ms_max,
            "requests-in-flight": gauges.requests_in_flight,
            "request-total": requests,
            "response-total": responses,
            "buffer-total-bytes": self.buffer_total_bytes,
            "buffer-available-bytes": gauges.buffer_available_bytes,
            "waiting-threads": gauges.buffer_waiters,
            "bufferpool-wait-time-ns-total": self.bufferpool_wait_time_ns_total,
            "buffer-exhausted-total": self.buffer_exhausted_total,
            "batch-split-total": self.batch_split_total,
            "connection-count": gauges.connection_count,
            "connection-creation-total": self.connection_creation_total,
            "connection-close-total": self.connection_close_total,
            "outgoing-byte-total": sum(outgoing.values()),
            "incoming-byte-total": sum(incoming.values()),
            "producer-id": gauges.producer_id,
            "producer-epoch": gauges.producer_epoch,
            "epoch-bump-total": self.epoch_bump_total,
            "hook-error-total": self.hook_error_total,
            "flush-time-ns-total": self.flush_time_ns_total,
            "metadata-wait-time-ns-total": self.metadata_wait_time_ns_total,
            "txn-init-time-ns-total": self.txn_init_time_ns_total,
            "txn-begin-time-ns-total": self.txn_begin_time_ns_total,
            "txn-send-offsets-time-ns-total": self.txn_send_offsets_time_ns_total,
            "txn-commit-time-ns-total": self.txn_commit_time_ns_total,
            "txn-abort-time-ns-total": self.txn_abort_time_ns_total,
        }
        if gauges.metadata_age_s is not None:
            # Java reports (now - 0) s before the first metadata, an age no metadata has: we report nothing.
            producer["metadata-age"] = gauges.metadata_age_s
        topic_metrics = {
            name: _frozen(
                {
                    "record-send-total": t.records,
                    "byte-total": t.bytes,
                    "record-retry-total": t.retries,
                    "record-error-total": t.errors,
                    "compression-rate": t.bytes / t.uncompressed if t.uncompressed else 1.0,
                }
            )
            for name, t in self.topics.items()
        }
        node_ids = set(self.nodes) | set(outgoing) | set(incoming)
        node_metrics = {}
        for node_id in sorted(node_ids):
            n = self.nodes.get(node_id) or _NodeStats()
            node_metrics[f"node-{node_id}"] = _frozen(
                {
                    "request-total": n.requests,
                    "response-total": n.responses,
                    "request-size-avg": n.request_size.avg,
                    "request-size-max": n.request_size.max,
                    "request-latency-avg": n.latency.avg,
                    "request-latency-max": n.latency.max,
                    "outgoing-byte-total": outgoing.get(node_id, 0),
                    "incoming-byte-total": incoming.get(node_id, 0),
                }
            )
        histograms = {
            "record-queue-time-ms": self.queue_time.snapshot(),
            "request-latency-ms": self.request_latency.snapshot(),
            "batch-size-bytes": self.batch_size.snapshot(),
            "delivery-latency-ms": self.delivery_latency.snapshot(),
        }
        return MetricsSnapshot(
            producer=_frozen(producer),
            topics=MappingProxyType(topic_metrics),
            nodes=MappingProxyType(node_metrics),
            histograms=MappingProxyType(histograms),
        )


def _by_node(node_ids: list[int], values: list[int]) -> Iterator[tuple[int, list[int]]]:
    """`values` grouped by the node each belongs to (usually one node: then no loop over them)."""
    if not node_ids:
        return
    first = node_ids[0]
    if node_ids.count(first) == len(node_ids):
        yield first, values
        return
    groups: dict[int, list[int]] = {}
    for node_id, value in zip(node_ids, values, strict=True):
        groups.setdefault(node_id, []).append(value)
    yield from groups.items()


def _frozen(values: dict[str, float]) -> Mapping[str, float]:
    return MappingProxyType(values)


def _merge(closed: Mapping[int, int], live: Mapping[int, int]) -> dict[int, int]:
    merged = dict(closed)
    for node_id, count in live.items():
        merged[node_id] = merged.get(node_id, 0) + count
    return merged
