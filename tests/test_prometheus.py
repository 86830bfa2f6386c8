"""The Prometheus collector, scraped over real HTTP from prometheus-client's server thread while the producer runs
on its event loop: the families carry the snapshot's numbers under `aioproducer_*` names."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Callable

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from aioproducer import Producer, ProducerRecord
from aioproducer.contrib.prometheus import ProducerCollector


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_a_scrape_over_http_reads_the_producers_metrics(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=2)
    registry = CollectorRegistry()
    async with Producer(bootstrap, client_id="scraped", linger_ms=1) as producer:
        registry.register(ProducerCollector(producer))
        server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
        try:
            port = server.server_address[1]
            await producer.send_many([ProducerRecord(topic, b"v" * 100) for _ in range(50)])
            # The scrape runs in another thread; the collector reads the snapshot on this (running) loop.
            samples = await asyncio.to_thread(scrape, port)
            snapshot = producer.metrics()
        finally:
            server.shutdown()
            server.server_close()
            thread.join(10)
    client = (("client_id", "scraped"),)
    sent = snapshot.producer["record-send-total"]
    assert sent - snapshot.producer["record-retry-total"] == 50  # a fresh topic's first answers may ask for retries
    assert samples[("aioproducer_record_send_total", client)] == sent
    assert samples[("aioproducer_topic_record_send_total", (("client_id", "scraped"), ("topic", topic)))] == sent
    assert samples[("aioproducer_buffer_total_bytes", client)] == snapshot.producer["buffer-total-bytes"]
    assert samples[("aioproducer_request_total", client)] == snapshot.producer["request-total"]
    nodes = [labels for name, labels in samples if name == "aioproducer_node_request_total"]
    assert nodes and all(dict(labels)["node_id"].isdigit() for labels in nodes)
    latency = snapshot.histograms["request-latency-ms"]
    assert samples[("aioproducer_request_latency_seconds_count", client)] == latency.count
    assert samples[("aioproducer_request_latency_seconds_sum", client)] == latency.sum / 1000
    assert samples[("aioproducer_request_latency_seconds_bucket", (*client, ("le", "+Inf")))] == latency.count
    assert samples[("aioproducer_batch_size_bytes_bucket", (*client, ("le", "+Inf")))] >= 1
