"""Prometheus for aioproducer (prometheus-client): a collector that reads `producer.metrics()` at scrape time.

Owns the mapping of the snapshot to Prometheus families: `aioproducer_<java-name>` with dashes as underscores,
counters for `*-total`, gauges otherwise, labels `client_id` (+ `topic` / `node_id`), and the histograms in
seconds or bytes. Nothing is kept between scrapes. The producer's numbers live on its event loop: a scrape from
another thread (prometheus-client's HTTP server) reads them on that loop, never concurrently with it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator
from typing import Any

from aioproducer.contrib import missing_extra

try:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
except ImportError as exc:  # pragma: no cover - tested in a subprocess without the library
    raise missing_extra("prometheus", "prometheus", exc) from exc

from aioproducer.observability.metrics import HistogramSnapshot, MetricsSnapshot

__all__ = ["ProducerCollector"]

# Histograms in milliseconds are exposed in seconds, as Prometheus names them.
_HISTOGRAMS = {
    "record-queue-time-ms": ("record_queue_time_seconds", 1000.0, "Time a batch waited in the buffer."),
    "request-latency-ms": ("request_latency_seconds", 1000.0, "Produce request latency."),
    "batch-size-bytes": ("batch_size_bytes", 1.0, "Bytes of each batch sent."),
    "delivery-latency-ms": ("delivery_latency_seconds", 1000.0, "From a batch's creation to its acknowledgement."),
}


class ProducerCollector:
    """`REGISTRY.register(ProducerCollector(producer))`. Create it on the producer's event loop (or pass `loop`)
    so that scrapes from other threads read the metrics on that loop; `timeout_s` bounds such a read."""

    def __init__(
        self,
        producer: Any,
        *,
        namespace: str = "aioproducer",
        loop: asyncio.AbstractEventLoop | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        self._producer = producer
        self._namespace = namespace
        self._timeout_s = timeout_s
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
        self._loop = loop

    def describe(self) -> list[Metric]:
        return []  # registering must not take a snapshot (the producer may not be started yet)

    def collect(self) -> Iterator[Metric]:
        yield from families(self._snapshot(), self._namespace, self._producer.config.client_id)

    def _snapshot(self) -> MetricsSnapshot:
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running() or _running_loop() is loop:
            return self._producer.metrics()  # type: ignore[no-any-return]
        result: concurrent.futures.Future[MetricsSnapshot] = concurrent.futures.Future()

        def take() -> None:
            try:
                result.set_result(self._producer.metrics())
            except BaseException as exc:
                result.set_exception(exc)

        loop.call_soon_threadsafe(take)
        return result.result(self._timeout_s)


def families(snapshot: MetricsSnapshot, namespace: str, client_id: str) -> Iterator[Metric]:
    """The Prometheus families of one snapshot."""
    for name, value in snapshot.producer.items():
        yield _family(namespace, name, "", ["client_id"], [([client_id], value)])
    yield from _grouped(namespace, "topic", snapshot.topics, client_id)
    yield from _grouped(namespace, "node_id", snapshot.nodes, client_id, lambda node: node.removeprefix("node-"))
    for key, (name, scale, doc) in _HISTOGRAMS.items():
        histogram = snapshot.histograms.get(key)
        if histogram is not None:
            yield _histogram(f"{namespace}_{name}", doc, client_id, histogram, scale)


def _grouped(
    namespace: str,
    label: str,
    groups: Any,
    client_id: str,
    label_value: Any = str,
) -> Iterator[Metric]:
    by_metric: dict[str, list[tuple[list[str], float]]] = {}
    for group, values in groups.items():
        for name, value in values.items():
            by_metric.setdefault(name, []).append(([client_id, label_value(group)], value))
    prefix = "topic_" if label == "topic" else "node_"
    for name, samples in by_metric.items():
        yield _family(namespace, name, prefix, ["client_id", label], samples)


def _family(
    namespace: str, name: str, prefix: str, labels: list[str], samples: list[tuple[list[str], float]]
) -> Metric:
    metric_name = f"{namespace}_{prefix}{name.replace('-', '_')}"
    doc = f"Kafka producer metric {name!r} (see aioproducer's observability docs)."
    family: Any
    if name.endswith("-total"):
        family = CounterMetricFamily(metric_name.removesuffix("_total"), doc, labels=labels)
    else:
        family = GaugeMetricFamily(metric_name, doc, labels=labels)
    for label_values, value in samples:
        family.add_metric(label_values, value)
    return family  # type: ignore[no-any-return]


def _histogram(name: str, doc: str, client_id: str, histogram: HistogramSnapshot, scale: float) -> Metric:
    family = HistogramMetricFamily(name, doc, labels=["client_id"])
    cumulative = 0
    buckets: list[tuple[str, float]] = []
    for bound, count in zip(histogram.bounds, histogram.buckets, strict=False):
        cumulative += count
        buckets.append((repr(bound / scale), cumulative))
    buckets.append(("+Inf", histogram.count))
    family.add_metric([client_id], buckets, histogram.sum / scale)
    return family


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
