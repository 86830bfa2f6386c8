"""The OpenTelemetry hook writes `traceparent` itself when the global propagator is the default one and there is no
baggage or trace state to carry: what it writes must be byte for byte what `propagate.inject` writes for the same
span, and any other setup (baggage in the context, another global propagator, a span that is not sampled) must
still reach the headers through the propagators. No broker: the hook is called as the producer calls it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import baggage, context, propagate, trace
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from aioproducer import ProducerRecord, RecordMetadata
from aioproducer.contrib.opentelemetry import OpenTelemetryHook


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _sent_span_headers(
    hook: OpenTelemetryHook, record: ProducerRecord
) -> tuple[dict[str, bytes | None], dict[str, str]]:
    """The headers the hook added, and what the global propagator writes for the span the hook started."""
    sent = hook.on_record_buffered(record)
    ((span, _),) = hook._spans.values()
    expected: dict[str, str] = {}
    propagate.inject(expected, context=trace.set_span_in_context(span))
    headers = dict(sent.headers or ())
    hook.on_record_acknowledged(sent, RecordMetadata(record.topic, 0, 7, 0, -1, 1), None)
    assert hook._spans == {}  # found again from its header, and ended
    return headers, expected


def test_the_default_propagators_traceparent_is_written_as_propagate_writes_it(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    headers, expected = _sent_span_headers(OpenTelemetryHook(tracer_provider=provider), ProducerRecord("t", b"v"))
    assert set(expected) == {"traceparent"}
    assert headers == {"traceparent": expected["traceparent"].encode()}
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None and span.attributes["messaging.kafka.offset"] == 7


def test_an_unsampled_span_still_passes_its_context_on(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider = TracerProvider(sampler=ALWAYS_OFF)
    headers, expected = _sent_span_headers(OpenTelemetryHook(tracer_provider=provider), ProducerRecord("t", b"v"))
    assert not int(expected["traceparent"].rsplit("-", 1)[1], 16) & 1  # the sampled flag is off
    assert headers == {"traceparent": expected["traceparent"].encode()}


def test_baggage_in_the_context_goes_out_through_the_propagators(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, _ = spans
    token = context.attach(baggage.set_baggage("tenant", "blue"))
    try:
        headers, expected = _sent_span_headers(OpenTelemetryHook(tracer_provider=provider), ProducerRecord("t", b"v"))
    finally:
        context.detach(token)
    assert set(expected) == {"traceparent", "baggage"}
    assert headers == {name: value.encode() for name, value in expected.items()}


class _Custom(TraceContextTextMapPropagator):
    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        super().inject(carrier, context)
        carrier["x-custom"] = "1"


def test_another_global_propagator_is_used_as_configured(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, _ = spans
    hook = OpenTelemetryHook(tracer_provider=provider)
    default = propagate.get_global_textmap()
    hook.on_record_acknowledged(hook.on_record_buffered(ProducerRecord("t", b"v")), None, None)  # the default seen
    propagate.set_global_textmap(CompositePropagator([_Custom()]))
    try:
        headers, expected = _sent_span_headers(hook, ProducerRecord("t", b"v"))
    finally:
        propagate.set_global_textmap(default)
    assert set(expected) == {"traceparent", "x-custom"}
    assert headers == {name: value.encode() for name, value in expected.items()}
