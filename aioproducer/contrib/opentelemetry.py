"""OpenTelemetry for aioproducer (`pip install aioproducer[otel]`, opentelemetry-api only): a producer hook that
follows the messaging semantic conventions (v1.44).

Owns the spans and the two `messaging.client.*` metrics. A record's PRODUCER span `send {topic}` starts when it is
enqueued and ends when the broker acknowledged it (or it failed), so it carries the partition, the offset and
`error.type`; its W3C context goes into the record's headers unless the caller set `traceparent`. `send_many` gets
one CLIENT span `send {topic}` whose records are `create {topic}` PRODUCER spans. Attribute work beyond what a
sampler needs is skipped for spans that are not recording.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from aioproducer.contrib import missing_extra

try:
    from opentelemetry import baggage, metrics, propagate, trace
    from opentelemetry.baggage.propagation import W3CBaggagePropagator
    from opentelemetry.metrics import Observation
    from opentelemetry.propagators.composite import CompositePropagator
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # pragma: no cover - tested in a subprocess without the library
    raise missing_extra("opentelemetry", "otel", exc) from exc

from aioproducer import __version__
from aioproducer.hooks import BatchWritten
from aioproducer.models import ProducerRecord, RecordMetadata

__all__ = ["OpenTelemetryHook"]

# The conventions' advised buckets for messaging.client.operation.duration, in seconds.
DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
_TRACEPARENT = "traceparent"


class OpenTelemetryHook:
    """Pass to `Producer(hooks=[OpenTelemetryHook()])`. Uses the global tracer and meter providers unless given;
    `client_id` becomes `messaging.client.id`."""

    def __init__(
        self, *, tracer_provider: Any = None, meter_provider: Any = None, client_id: str | None = None
    ) -> None:
        self._tracer = trace.get_tracer("aioproducer", __version__, tracer_provider)
        meter = metrics.get_meter("aioproducer", __version__, meter_provider)
        # Counted here per (topic, error type) and read by the SDK at collection time: no SDK call per record.
        self._sent_counts: dict[tuple[str, str | None], int] = {}
        meter.create_observable_counter(
            "messaging.client.sent.messages",
            callbacks=[self._observe_sent],
            unit="{message}",
            description="Messages a producer attempted to send.",
        )
        self._metric_attributes: dict[tuple[str, str | None], dict[str, Any]] = {}
        self._duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Duration of a send, from enqueue to acknowledgement.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS_S),
        )
        self._client_id = client_id
        # A record's span until its acknowledgement: keyed by the traceparent injected (it survives later hooks
        # rewriting the record), else by the record object's identity.
        self._spans: dict[object, tuple[Span, float]] = {}
        # Where each partition's batches went last: the broker a record's span reports as server.address/port.
        self._brokers: dict[tuple[str, int], tuple[str, int]] = {}
        self._batch: ContextVar[Span | None] = ContextVar(f"aioproducer_otel_batch_{id(self)}", default=None)
        # The bulk calls' CLIENT spans until their call ends, by identity: a call still in its async serializer when
        # the producer closed ends after the hooks were closed, and never reports its end (see `close`).
        self._calls: dict[int, Span] = {}
        # The global propagator last seen, and whether it is the default one (`_inject` writes traceparent itself).
        self._textmap: object = None
        self._default_textmap = False

    # -- records ------------------------------------------------------------------------------------------------
    def on_record_buffered(self, record: ProducerRecord) -> ProducerRecord:
        topic = record.topic
        batch = self._batch.get()
        operation = "send" if batch is None else "create"
        # All attributes known now go in at the start, in one dict (what samplers may read; one call, not five).
        attributes: dict[str, Any] = {
            "messaging.system": "kafka",
            "messaging.operation.name": operation,
            "messaging.operation.type": operation,
            "messaging.destination.name": topic,
        }
        if record.key is not None:
            attributes["messaging.kafka.message.key"] = _text(record.key)
        if record.value is None:
            attributes["messaging.kafka.message.tombstone"] = True
        if record.partition is not None:
            attributes["messaging.destination.partition.id"] = str(record.partition)
        if self._client_id is not None:
            attributes["messaging.client.id"] = self._client_id
        span = self._tracer.start_span(
            f"{operation} {topic}",
            context=None if batch is None else trace.set_span_in_context(batch),
            kind=SpanKind.PRODUCER,
            attributes=attributes,
        )
        headers = record.headers
        key_of_span: object = None
        if not headers or not any(name == _TRACEPARENT for name, _ in headers):
            added, key_of_span = self._inject(span)
            if added:
                record = record._replace(headers=[*headers, *added] if headers else added)
        if key_of_span is None:
            key_of_span = id(record)
        self._spans[key_of_span] = (span, time.perf_counter())
        return record

    def _inject(self, span: Span) -> tuple[list[tuple[str, bytes]], bytes | None]:
        """The headers carrying `span`'s context, and the traceparent among them. With the default propagators (W3C
        trace context and baggage, as `OTEL_PROPAGATORS` leaves them) and no baggage or trace state to carry,
        `traceparent` is written here, as `TraceContextTextMapPropagator` writes it, without building a context for
        the propagators to read back; any other setup goes through `propagate.inject`."""
        textmap = propagate.get_global_textmap()
        if textmap is not self._textmap:
            self._textmap, self._default_textmap = textmap, _is_default(textmap)
        context = span.get_span_context()
        if self._default_textmap and not context.trace_state and not baggage.get_all():
            if context == trace.INVALID_SPAN_CONTEXT:
                return [], None
            traceparent = b"00-%032x-%016x-%02x" % (context.trace_id, context.span_id, context.trace_flags)
            return [(_TRACEPARENT, traceparent)], traceparent
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        added = [(name, value.encode()) for name, value in carrier.items()]
        return added, next((value for name, value in added if name == _TRACEPARENT), None)

    def on_record_acknowledged(
        self, record: ProducerRecord, metadata: RecordMetadata | None, error: BaseException | None
    ) -> None:
        spans = self._spans
        entry = None
        for name, value in record.headers or ():
            if name == _TRACEPARENT:
                entry = spans.pop(value, None)
                break
        if entry is None:
            entry = spans.pop(id(record), None)
            if entry is None:
                return
        span, started = entry
        if error is None:
            group: tuple[str, str | None] = (record.topic, None)
        else:
            group = (record.topic, type(error).__qualname__)
        self._sent_counts[group] = self._sent_counts.get(group, 0) + 1
        attributes = self._metric_attributes.get(group) or self._attributes_of(group)
        self._duration.record(time.perf_counter() - started, attributes)
        if span.is_recording():
            late: dict[str, Any] = {}
            if metadata is not None:
                late["messaging.destination.partition.id"] = str(metadata.partition)
                if metadata.offset >= 0:
                    late["messaging.kafka.offset"] = metadata.offset
                broker = self._brokers.get((metadata.topic, metadata.partition))
                if broker is not None:
                    late["server.address"], late["server.port"] = broker
            if error is not None:
                late["error.type"] = group[1]
                span.set_status(Status(StatusCode.ERROR, str(error)))
            span.set_attributes(late)
        span.end()

    def _attributes_of(self, group: tuple[str, str | None]) -> dict[str, Any]:
        """The metrics' attributes for one (topic, error type), built once and reused."""
        attributes = self._metric_attributes.get(group)
        if attributes is None:
            attributes = {
                "messaging.system": "kafka",
                "messaging.operation.name": "send",
                "messaging.destination.name": group[0],
            }
            if group[1] is not None:
                attributes["error.type"] = group[1]
            self._metric_attributes[group] = attributes
        return attributes

    def _observe_sent(self, options: Any) -> Iterator[Observation]:
        for group, count in list(self._sent_counts.items()):
            yield Observation(count, self._attributes_of(group))

    def on_batch_written(self, event: BatchWritten) -> None:
        self._brokers[(event.topic, event.partition)] = (event.host, event.port)

    # -- send_many ----------------------------------------------------------------------------------------------
    def on_send_many_start(self, records: list[ProducerRecord]) -> Any:
        topics = {record.topic for record in records}
        topic = next(iter(topics)) if len(topics) == 1 else None
        attributes: dict[str, Any] = {
            "messaging.system": "kafka",
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
            "messaging.batch.message_count": len(records),
        }
        if topic is not None:
            attributes["messaging.destination.name"] = topic
        span = self._tracer.start_span(
            f"send {topic}" if topic is not None else "send", kind=SpanKind.CLIENT, attributes=attributes
        )
        if span.is_recording() and self._client_id is not None:
            span.set_attribute("messaging.client.id", self._client_id)
        self._calls[id(span)] = span
        return span, self._batch.set(span)

    def on_send_many_end(self, token: Any, results: list[Any]) -> None:
        span, reset = token
        self._batch.reset(reset)
        self._calls.pop(id(span), None)
        failed = [result for result in results if isinstance(result, BaseException)]
        if failed and span.is_recording():
            span.set_attribute("error.type", type(failed[0]).__qualname__)
            span.set_status(Status(StatusCode.ERROR, f"{len(failed)} of {len(results)} records failed"))
        span.end()

    def close(self) -> None:
        """Spans still open when the producer closes end here: the records' (their outcome was reported or is lost)
        and the bulk calls' (a call that outlives the hooks is not reported to them when it ends)."""
        spans, self._spans = self._spans, {}
        for span, _ in spans.values():
            span.end()
        calls, self._calls = self._calls, {}
        for call in calls.values():
            call.end()


def _is_default(textmap: object) -> bool:
    """Whether `textmap` is the default global propagator: W3C trace context, then W3C baggage."""
    propagators = getattr(textmap, "_propagators", None) if type(textmap) is CompositePropagator else None
    return (
        propagators is not None
        and len(propagators) == 2
        and type(propagators[0]) is TraceContextTextMapPropagator
        and type(propagators[1]) is W3CBaggagePropagator
    )


def _text(key: Any) -> str:
    if isinstance(key, bytes):
        return key.decode("utf-8", "replace")
    return str(key)
