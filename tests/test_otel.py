"""The OpenTelemetry hook, judged with the SDK's in-memory exporters against real Kafka (librdkafka's mock cluster
where the broker plays no part): a record's span ends when
the broker acknowledged it and carries its offset, the context travels in the record's headers, send_many gets a
CLIENT span over its records, and the two messaging.client.* metrics are recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
from opentelemetry import propagate, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

from aioproducer import Producer, ProducerRecord
from aioproducer.contrib.opentelemetry import OpenTelemetryHook
from aioproducer.errors import ProducerClosedError, UnknownPartitionError
from aioproducer.testing import ConsumedRecord, MockCluster

# max_block_ms: a send to a partition that does not exist waits this long for it to appear (Java waits max.block.ms).
FAST = {"linger_ms": 1, "max_block_ms": 5000}


class Telemetry:
    def __init__(self, sampler: object = None) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(**({"sampler": sampler} if sampler is not None else {}))
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def hook(self) -> OpenTelemetryHook:
        return OpenTelemetryHook(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, client_id="otel-test"
        )

    def metric_points(self, name: str) -> list[object]:
        data = self.reader.get_metrics_data()
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    t = Telemetry()
    yield t
    t.tracer_provider.shutdown()
    t.meter_provider.shutdown()


async def test_a_records_span_ends_at_delivery_with_its_offset_and_its_context_reaches_the_consumer(
    bootstrap: str,
    topic_factory: Callable[..., str],
    read_back_records: Callable[..., list[ConsumedRecord]],
    telemetry: Telemetry,
) -> None:
    topic = topic_factory(partitions=2)
    tracer = telemetry.tracer_provider.get_tracer("test")
    async with Producer(bootstrap, hooks=[telemetry.hook()], linger_ms=300) as producer:
        with tracer.start_as_current_span("handler") as parent:
            delivery = await producer.enqueue(topic, b"value", key=b"order-7")
        # Buffered but not delivered yet (linger_ms): the span is still open, unlike enqueue-time instrumentations.
        assert [s.name for s in telemetry.spans.get_finished_spans()] == ["handler"]
        metadata = await delivery
        await asyncio.sleep(0)  # the acknowledgement callback runs on the next loop turn
    (span,) = [s for s in telemetry.spans.get_finished_spans() if s.name == f"send {topic}"]
    assert span.kind == SpanKind.PRODUCER
    assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
    attributes = dict(span.attributes or {})
    assert attributes["messaging.system"] == "kafka"
    assert attributes["messaging.operation.name"] == "send"
    assert attributes["messaging.destination.name"] == topic
    assert attributes["messaging.destination.partition.id"] == str(metadata.partition)
    assert attributes["messaging.kafka.offset"] == metadata.offset
    assert attributes["messaging.kafka.message.key"] == "order-7"
    assert attributes["messaging.client.id"] == "otel-test"
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    assert (attributes["server.address"], attributes["server.port"]) == (host, int(port))
    assert "error.type" not in attributes
    assert span.status.status_code != StatusCode.ERROR
    # The span lasted until the acknowledgement: at least the linger time.
    assert span.end_time - span.start_time >= 250_000_000
    # A consumer extracting the header continues the same trace, under the PRODUCER span.
    (stored,) = read_back_records(topic)
    carrier = {name: value.decode() for name, value in stored.headers if value is not None}
    extracted = trace.get_current_span(propagate.extract(carrier)).get_span_context()
    assert extracted.trace_id == span.context.trace_id
    assert extracted.span_id == span.context.span_id
    # The two messaging.client.* metrics.
    (sent,) = telemetry.metric_points("messaging.client.sent.messages")
    assert sent.value == 1 and sent.attributes["messaging.destination.name"] == topic
    (duration,) = telemetry.metric_points("messaging.client.operation.duration")
    assert duration.count == 1 and duration.sum >= 0.25


async def test_a_traceparent_set_by_the_caller_is_kept(
    bootstrap: str,
    topic_factory: Callable[..., str],
    read_back_records: Callable[..., list[ConsumedRecord]],
    telemetry: Telemetry,
) -> None:
    topic = topic_factory(partitions=1)
    mine = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with Producer(bootstrap, hooks=[telemetry.hook()], **FAST) as producer:
        await producer.send(topic, b"v", headers=[("traceparent", mine)])
        await asyncio.sleep(0)
    (stored,) = read_back_records(topic)
    assert [value for name, value in stored.headers if name == "traceparent"] == [mine]
    assert [s.name for s in telemetry.spans.get_finished_spans()] == [f"send {topic}"]  # ended all the same


@pytest.mark.parametrize("headers", [{"tenant": b"7", "empty": None}, {"ab": b"7"}], ids=["word", "two-letter"])
async def test_headers_given_as_a_dict_keep_their_entries_and_gain_a_traceparent(
    bootstrap: str,
    topic_factory: Callable[..., str],
    read_back_records: Callable[..., list[ConsumedRecord]],
    telemetry: Telemetry,
    headers: dict[str, bytes | None],
) -> None:
    """A caller's headers given as a dict reached the hook as the dict, which it read as pairs: iterating gave the
    keys, so a key like "tenant" made the hook fail (no traceparent, an error logged), and a two-letter key unpacked
    into two names, after which the record the hook returned was refused as not a list of pairs."""
    topic = topic_factory(partitions=1)
    async with Producer(bootstrap, hooks=[telemetry.hook()], **FAST) as producer:
        await producer.send(topic, b"v", headers=headers)
        await asyncio.sleep(0)
        assert producer.metrics().producer["hook-error-total"] == 0
    (stored,) = read_back_records(topic)
    assert [name for name, _ in stored.headers] == [*headers, "traceparent"]
    assert [(name, value) for name, value in stored.headers if name != "traceparent"] == list(headers.items())
    assert [s.name for s in telemetry.spans.get_finished_spans()] == [f"send {topic}"]


async def test_a_failed_record_ends_its_span_with_the_error_type(bootstrap: str, telemetry: Telemetry) -> None:
    async with Producer(bootstrap, hooks=[telemetry.hook()], **FAST) as producer:
        topic = "otel-fail-topic"
        await producer.partitions_for(topic)
        with pytest.raises(UnknownPartitionError):
            await producer.send(topic, b"v", partition=1000)
    (span,) = telemetry.spans.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"] == "UnknownPartitionError"
    (sent,) = telemetry.metric_points("messaging.client.sent.messages")
    assert sent.attributes["error.type"] == "UnknownPartitionError"


async def test_send_many_gets_a_client_span_over_create_spans(
    bootstrap: str, topic_factory: Callable[..., str], telemetry: Telemetry
) -> None:
    topic = topic_factory(partitions=2)
    async with Producer(bootstrap, hooks=[telemetry.hook()], **FAST) as producer:
        results = await producer.send_many([ProducerRecord(topic, b"%d" % i) for i in range(5)])
    spans = telemetry.spans.get_finished_spans()
    (batch,) = [s for s in spans if s.kind == SpanKind.CLIENT]
    creates = [s for s in spans if s.kind == SpanKind.PRODUCER]
    assert batch.name == f"send {topic}" and batch.attributes["messaging.batch.message_count"] == 5
    assert len(creates) == 5 and all(s.name == f"create {topic}" for s in creates)
    assert all(s.parent is not None and s.parent.span_id == batch.context.span_id for s in creates)
    offsets = sorted((r.partition, r.offset) for r in results)  # type: ignore[union-attr]
    assert (
        sorted(
            (int(s.attributes["messaging.destination.partition.id"]), s.attributes["messaging.kafka.offset"])
            for s in creates
        )
        == offsets
    )
    assert all(s.end_time <= batch.end_time for s in creates)


async def test_enqueue_many_gets_a_client_span_that_ends_and_does_not_parent_later_records(
    bootstrap: str, topic_factory: Callable[..., str], telemetry: Telemetry
) -> None:
    """The hooks ended an enqueue_many call in another task than the one that started it: the hook's context
    variable could not be reset there, so the CLIENT span never ended, and the caller's later records were made
    `create` spans under it."""
    topic = topic_factory(partitions=2)
    async with Producer(bootstrap, hooks=[telemetry.hook()], **FAST) as producer:
        deliveries = await producer.enqueue_many([ProducerRecord(topic, b"%d" % i) for i in range(5)])
        alone = await producer.send(topic, b"after")
        results = await deliveries
        errors = producer.metrics().producer["hook-error-total"]
    assert errors == 0
    spans = telemetry.spans.get_finished_spans()
    (batch,) = [s for s in spans if s.kind == SpanKind.CLIENT]
    creates = [s for s in spans if s.name == f"create {topic}"]
    (sent,) = [s for s in spans if s.name == f"send {topic}" and s.kind == SpanKind.PRODUCER]
    assert batch.attributes["messaging.batch.message_count"] == 5
    assert len(creates) == 5 and all(
        s.parent is not None and s.parent.span_id == batch.context.span_id for s in creates
    )
    assert sent.parent is None or sent.parent.span_id != batch.context.span_id
    assert sent.attributes["messaging.kafka.offset"] == alone.offset
    assert sorted(s.attributes["messaging.kafka.offset"] for s in creates) == sorted(r.offset for r in results)  # type: ignore[union-attr]


async def test_unsampled_records_are_delivered_without_span_attributes(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    telemetry = Telemetry(sampler=ALWAYS_OFF)
    topic = topic_factory(partitions=1)
    async with Producer(bootstrap, hooks=[telemetry.hook()], **FAST) as producer:
        metadata = await producer.send(topic, b"v", key=b"k")
        await asyncio.sleep(0)
    assert metadata.offset >= 0
    assert telemetry.spans.get_finished_spans() == ()
    (sent,) = telemetry.metric_points("messaging.client.sent.messages")
    assert sent.value == 1


class _Started(SpanProcessor):
    """Every span the provider started, ended or not (the exporter hears only of ended ones)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: object = None) -> None:
        self.spans.append(span)


@pytest.mark.parametrize("call", ["send_many", "enqueue_many"])
async def test_a_bulk_calls_client_span_ends_when_the_producer_closed_during_its_serializer(
    mock_cluster: MockCluster, telemetry: Telemetry, call: str
) -> None:
    """A bulk call still in its async serializer when close() ran ended after the hooks were closed, so its end never
    reached the hook and its CLIENT span was never ended: the hook's close() ended the records' spans only."""
    gate = asyncio.Event()

    async def held(value: bytes) -> bytes:
        await gate.wait()
        return value

    started = _Started()
    telemetry.tracer_provider.add_span_processor(started)
    mock_cluster.create_topic("t", 1)
    producer = Producer(mock_cluster.bootstrap_servers, value_serializer=held, hooks=[telemetry.hook()], **FAST)
    await producer.start()
    running = asyncio.ensure_future(getattr(producer, call)([ProducerRecord("t", b"x")]))
    await asyncio.sleep(0.05)  # the call is in its serializer: its CLIENT span and its record's span started
    assert [span.kind for span in started.spans] == [SpanKind.CLIENT, SpanKind.PRODUCER]
    await asyncio.wait_for(producer.close(), 10)
    gate.set()
    outcome = await asyncio.wait_for(running, 5)
    results = await asyncio.wait_for(outcome, 5) if call == "enqueue_many" else outcome
    assert [type(r) for r in results] == [ProducerClosedError]
    assert [span.name for span in started.spans if span.end_time is None] == []
    assert sorted(span.kind.value for span in telemetry.spans.get_finished_spans()) == [
        SpanKind.CLIENT.value,
        SpanKind.PRODUCER.value,
    ]
