"""Producer hooks: user objects told about records, batches, requests and connections, and the chain that calls them.

Owns the hook protocol (every method optional, franz-go style), the mapping of Java's `interceptor.classes`
(`on_send` / `on_acknowledgement`, Java's ProducerInterceptor), and the rule that a hook can break nothing: its
exception is logged and counted, never propagated, and the record goes on unchanged. Hooks are resolved once, when
the producer starts, into one list per event: an event nobody listens to costs one falsy check.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aioproducer.models import ProducerRecord, RecordMetadata, record_of
from aioproducer.validation import header_pairs

__all__ = [
    "BatchWritten",
    "Hook",
    "HookChain",
    "RequestDone",
    "TransactionEvent",
    "load_interceptor",
    "with_header_pairs",
]

log = logging.getLogger("aioproducer.hooks")

# The methods a hook may implement; anything else on the object is ignored.
EVENTS = (
    "on_record_buffered",
    "on_record_acknowledged",
    "on_send_many_start",
    "on_send_many_end",
    "on_batch_written",
    "on_request",
    "on_throttle",
    "on_connect",
    "on_disconnect",
    "on_transaction",
)


@dataclass(frozen=True)
class BatchWritten:
    """One batch written to a broker in a Produce request (each attempt is an event)."""

    node_id: int
    host: str
    port: int
    topic: str
    partition: int
    records: int
    uncompressed_bytes: int  # estimated from the records' sizes before compression
    compressed_bytes: int  # the encoded batch on the wire
    attempt: int  # 0 for the first


@dataclass(frozen=True)
class RequestDone:
    """A Produce request answered (or failed without an answer)."""

    node_id: int
    api: str
    version: int
    request_bytes: int
    latency_ms: float
    error: BaseException | None


@dataclass(frozen=True)
class TransactionEvent:
    """A step of a transactional producer, given to `on_transaction(event, detail)` with `event` one of:
    `init` (init_transactions done: the producer id and epoch it got), `begin`, `commit` and `abort` (each once it
    succeeded; the id and epoch are the transaction's, before any bump that ending it brought), and `fenced` (a newer
    producer with the same transactional id took over; `error` says how it was seen)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    duration_ms: float  # from the operation's start (the first call, if a timed-out call was resumed) to its end
    error: BaseException | None = None


class Hook(Protocol):
    """What a hook may implement; every method is optional and runs on the producer's event loop, so keep it fast.

    - `on_record_buffered(record) -> ProducerRecord | None`: before the record is serialized and buffered; return a
      changed record (e.g. with more headers) or None to keep it (Java's `onSend`). The record's headers are None
      or a list of (key, value) pairs, also when the caller gave a dict.
    - `on_record_acknowledged(record, metadata, error)`: once per record, delivered or failed, including records
      refused before they were buffered (Java's `onAcknowledgement`).
    - `on_send_many_start(records) -> token` / `on_send_many_end(token, results)`: around one `send_many` call.
    - `on_batch_written(BatchWritten)`, `on_request(RequestDone)`, `on_throttle(node_id, throttle_ms)`,
      `on_connect(node_id, host, port)`, `on_disconnect(node_id, host, port)`,
      `on_transaction(event, TransactionEvent)` (event: init / begin / commit / abort / fenced).
    - `close()`: when the producer closes.
    """


def with_header_pairs(record: ProducerRecord) -> ProducerRecord:
    """The record with its headers as pairs: every hook sees them so, as the serializers do, whatever form a caller
    or an earlier hook gave (a dict built by `_make` or `_replace`, which skip the constructor that turns it into
    pairs). A hook reading or extending them as pairs (the OpenTelemetry hook's traceparent) never meets a mapping."""
    headers = record.headers
    if headers is None or type(headers) is list or type(headers) is tuple:
        return record
    return record._replace(headers=header_pairs(headers))


class _JavaInterceptor:
    """A Java-style interceptor (`on_send(record) -> record`, `on_acknowledgement(metadata, exception)`) as a hook."""

    def __init__(self, interceptor: Any) -> None:
        self.interceptor = interceptor
        if hasattr(interceptor, "on_send"):
            self.on_record_buffered = interceptor.on_send
        if hasattr(interceptor, "on_acknowledgement"):
            self.on_record_acknowledged = self._acknowledged

    def _acknowledged(
        self, record: ProducerRecord, metadata: RecordMetadata | None, error: BaseException | None
    ) -> None:
        # Java hands onAcknowledgement the metadata (topic and partition at least) even on failure.
        self.interceptor.on_acknowledgement(metadata, error)

    def close(self) -> None:
        close = getattr(self.interceptor, "close", None)
        if close is not None:
            close()


def load_interceptor(spec: Any, configs: dict[str, Any]) -> Any:
    """One entry of `interceptor_classes`: an object, a class, or a "module.Class" / "module:Class" name. Classes
    are built without arguments and then `configure(configs)`d when they have it (Java's Configurable)."""
    target = spec
    if isinstance(spec, str):
        module_name, _, attr = spec.replace(":", ".").rpartition(".")
        target = getattr(importlib.import_module(module_name), attr)
    if isinstance(target, type):
        target = target()
        configure = getattr(target, "configure", None)
        if configure is not None:
            configure(configs)
    if not any(hasattr(target, name) for name in EVENTS) and (
        hasattr(target, "on_send") or hasattr(target, "on_acknowledgement")
    ):
        return _JavaInterceptor(target)
    return target


class HookChain:
    """The hooks of one producer, resolved per event. Calls each in order; a failing hook is logged and counted."""

    def __init__(self, hooks: Iterable[Any], count_error: Callable[[], None] = lambda: None) -> None:
        self.hooks = tuple(hooks)
        self._count_error = count_error
        # Once closed, record events still to come (records settled after the producer's close: a call that was
        # still in an async serializer) reach no hook, as Java calls no interceptor after close().
        self._closed = False
        found = {name: [getattr(h, name) for h in self.hooks if callable(getattr(h, name, None))] for name in EVENTS}
        self._buffered = found["on_record_buffered"]
        self._acknowledged = found["on_record_acknowledged"]
        # (start, end) per hook with either, so each end gets its own start's token.
        self._many = [
            (getattr(h, "on_send_many_start", None), getattr(h, "on_send_many_end", None))
            for h in self.hooks
            if callable(getattr(h, "on_send_many_start", None)) or callable(getattr(h, "on_send_many_end", None))
        ]
        self.batch_written_hooks = found["on_batch_written"]
        self.request_hooks = found["on_request"]
        self._throttle = found["on_throttle"]
        self._connect = found["on_connect"]
        self._disconnect = found["on_disconnect"]
        self._transaction = found["on_transaction"]
        # Whether the producer must wrap enqueue/send_many (else its record path runs untouched).
        self.wants_records = bool(self._buffered or self._acknowledged or self._many)

    def _failed(self, method: Callable[..., Any]) -> None:
        self._count_error()
        log.exception("hook %s raised; the producer carries on", getattr(method, "__qualname__", method))

    # -- record events ------------------------------------------------------------------------------------------
    def record_buffered(self, record: ProducerRecord) -> ProducerRecord:
        record = with_header_pairs(record)
        if self._closed:
            return record
        for method in self._buffered:
            try:
                changed = method(record)
            except Exception:
                self._failed(method)
                continue
            if changed is not None:
                record = with_header_pairs(changed if type(changed) is ProducerRecord else record_of(changed))
        return record

    def record_acknowledged(
        self, record: ProducerRecord, metadata: RecordMetadata | None, error: BaseException | None
    ) -> None:
        if self._closed:
            return
        for method in self._acknowledged:
            try:
                method(record, metadata, error)
            except Exception:
                self._failed(method)

    def send_many_start(self, records: Sequence[ProducerRecord]) -> list[Any]:
        if self._closed:
            return [None] * len(self._many)
        tokens: list[Any] = []
        for start, _ in self._many:
            token = None
            if start is not None:
                try:
                    token = start(records)
                except Exception:
                    self._failed(start)
            tokens.append(token)
        return tokens

    def send_many_end(self, tokens: Sequence[Any], results: Sequence[Any]) -> None:
        if self._closed:
            return
        for (_, end), token in zip(self._many, tokens, strict=True):
            if end is not None:
                try:
                    end(token, results)
                except Exception:
                    self._failed(end)

    # -- batch, request and connection events ----------------------------------------------------------------------
    def _each(self, methods: list[Callable[..., Any]], *args: Any) -> None:
        for method in methods:
            try:
                method(*args)
            except Exception:
                self._failed(method)

    def batch_written(self, event: BatchWritten) -> None:
        self._each(self.batch_written_hooks, event)

    def request(self, event: RequestDone) -> None:
        if self.request_hooks:
            self._each(self.request_hooks, event)

    def throttle(self, node_id: int, throttle_ms: int) -> None:
        if self._throttle:
            self._each(self._throttle, node_id, throttle_ms)

    def connect(self, node_id: int, host: str, port: int) -> None:
        if self._connect:
            self._each(self._connect, node_id, host, port)

    def disconnect(self, node_id: int, host: str, port: int) -> None:
        if self._disconnect:
            self._each(self._disconnect, node_id, host, port)

    def transaction(self, event: str, detail: TransactionEvent) -> None:
        """For the transactional producer: `event` is init / begin / commit / abort / fenced."""
        if self._transaction:
            self._each(self._transaction, event, detail)

    def close(self) -> None:
        self._closed = True
        for hook in self.hooks:
            close = getattr(hook, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    self._failed(close)
