"""Turning record keys and values into bytes: the built-in serializers, `resolve_serializer`, and `RecordSerializer`
for serializers that need the record's context or are async.

A serializer is a callable of the value (the fast path, run by the appender), or an object whose
`serialize(topic, headers, value)` also sees the topic and the record's headers, which it may extend (Java's
`Serializer.serialize(topic, headers, data)`); either may be `async`. Those two kinds run in `RecordSerializer`,
before the appender, and are awaited only when async. Imports nothing from aioproducer but `errors` and
`validation`; does no I/O of its own.
"""

from __future__ import annotations

import codecs
import dataclasses
import difflib
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias

from aioproducer.errors import AioProducerError, ConfigError, InvalidRecordError
from aioproducer.validation import check_topic, header_pairs, not_a_record

__all__ = [
    "BUILTIN_SERIALIZERS",
    "ContextSerializer",
    "RecordSerializer",
    "Role",
    "Serializer",
    "bytes_serializer",
    "json_serializer",
    "resolve_serializer",
    "str_serializer",
]

Serializer: TypeAlias = Callable[[Any], bytes | None]
Role: TypeAlias = Literal["key", "value"]
Headers: TypeAlias = list[tuple[str, "bytes | None"]]


class ContextSerializer(Protocol):
    """A serializer that sees the record's topic and headers (a list it may append to), as Java's Serializer.

    `serialize` may be `async def`: the producer then awaits it (only then) before buffering the record.
    """

    def serialize(self, topic: str, headers: Headers, value: Any) -> Any: ...


BUILTIN_SERIALIZERS = ("bytes", "str", "json")
_BINARY = (bytes, bytearray, memoryview)


def _other_serializers(role: Role) -> str:
    return f"set {role}_serializer to 'str', 'json' or a callable returning bytes"


@dataclass(frozen=True)
class _BytesSerializer:
    """Passes bytes through; the default, like Java's ByteArraySerializer. `None` stays `None` (null key, tombstone)."""

    role: Role = "value"

    def __call__(self, obj: Any) -> bytes | None:
        if obj is None or type(obj) is bytes:
            return obj
        if isinstance(obj, _BINARY):
            return bytes(obj)
        raise InvalidRecordError(
            f"{self.role} must be bytes, bytearray or memoryview, got {type(obj).__name__}: "
            f"encode it yourself, or {_other_serializers(self.role)}"
        )

    def __repr__(self) -> str:
        return "bytes_serializer"


@dataclass(frozen=True)
class _StrSerializer:
    """Encodes `str` with one text encoding, like Java's StringSerializer (which also defaults to UTF-8)."""

    encoding: str = "utf-8"
    role: Role = "value"

    def __call__(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if not isinstance(obj, str):
            raise InvalidRecordError(
                f"{self.role} must be str for {self.role}_serializer='str', got {type(obj).__name__}: "
                f"convert it first, or choose another {self.role}_serializer ('bytes', 'json' or a callable)"
            )
        try:
            return obj.encode(self.encoding)
        except UnicodeEncodeError as exc:
            raise InvalidRecordError(f"{self.role} cannot be encoded as {self.encoding}: {exc}") from exc

    def __repr__(self) -> str:
        return f"str_serializer({self.encoding!r})"


@dataclass(frozen=True)
class _JsonSerializer:
    """Compact UTF-8 JSON. `None` stays `None`: a tombstone must not become the four bytes `null`."""

    role: Role = "value"

    def __call__(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        try:
            # allow_nan=False: NaN/Infinity are not JSON (RFC 8259), and consumers in other languages reject them.
            text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            return text.encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidRecordError(
                f"{self.role} cannot be serialized as JSON ({exc}): convert it to dicts, lists, str, int, "
                f"finite float, bool and None first, or set {self.role}_serializer to a callable returning bytes"
            ) from exc

    def __repr__(self) -> str:
        return "json_serializer"


@dataclass(frozen=True)
class _CheckedSerializer:
    """Wraps a user callable so a wrong return type or an exception becomes an `InvalidRecordError` at `send()`."""

    function: Serializer
    role: Role = "value"

    def __call__(self, obj: Any) -> bytes | None:
        try:
            data = self.function(obj)
        except AioProducerError:
            raise
        except Exception as exc:
            raise InvalidRecordError(
                f"{self.role}_serializer {self.function!r} failed on a {type(obj).__name__}: {exc!r}"
            ) from exc
        if data is None or type(data) is bytes:
            return data
        if isinstance(data, _BINARY):
            return bytes(data)
        raise InvalidRecordError(
            f"{self.role}_serializer {self.function!r} returned {type(data).__name__}: it must return bytes or None"
        )


_Builtin: TypeAlias = _BytesSerializer | _StrSerializer | _JsonSerializer | _CheckedSerializer

bytes_serializer = _BytesSerializer()
"""Serializer for values that already are bytes (bytearray and memoryview are copied to bytes)."""

json_serializer = _JsonSerializer()
"""Serializer writing compact UTF-8 JSON; `None` stays `None` (a tombstone), NaN and Infinity are refused."""


def str_serializer(encoding: str = "utf-8") -> Serializer:
    """Serializer encoding `str` values with `encoding`; an unknown encoding is a `ConfigError` here, not at send."""
    try:
        canonical = codecs.lookup(encoding).name
    except (LookupError, TypeError) as exc:
        raise ConfigError(f"unknown text encoding {encoding!r} for str_serializer: use e.g. 'utf-8'") from exc
    return _StrSerializer(canonical)


def resolve_serializer(spec: str | Serializer | None, *, role: Role = "value") -> Serializer:
    """The serializer a `key_serializer`/`value_serializer` setting names; `role` words its error messages.

    None or "bytes" → bytes only; "str" → UTF-8 text; "json" → compact JSON; a callable is wrapped so that a
    wrong return type or an exception it raises reaches the caller as `InvalidRecordError`. An object with
    `serialize(topic, headers, value)` or an async callable is run by `RecordSerializer` instead.
    """
    if spec is None or spec == "bytes" or _needs_context(spec):
        # A context-aware or async serializer runs before the appender (`RecordSerializer`): bytes arrive here.
        return _BytesSerializer(role)
    if spec == "str":
        return _StrSerializer("utf-8", role)
    if spec == "json":
        return _JsonSerializer(role)
    if isinstance(spec, _Builtin):
        return _rebind(spec, role)
    if isinstance(spec, str):
        raise ConfigError(f"unknown {role}_serializer {spec!r}: use {_names()} or a callable{_did_you_mean(spec)}")
    if not callable(spec):
        raise ConfigError(
            f"{role}_serializer must be None, {_names()} or a callable taking one object and returning bytes, "
            f"got {type(spec).__name__}"
        )
    return _CheckedSerializer(spec, role)


def _rebind(spec: _Builtin, role: Role) -> Serializer:
    # A built-in passed as a callable (key_serializer=json_serializer) gets the role of the setting it sits in,
    # so its errors name the key or the value correctly; it needs no wrapping.
    return dataclasses.replace(spec, role=role)


def _names() -> str:
    return ", ".join(repr(name) for name in BUILTIN_SERIALIZERS)


def _did_you_mean(spec: str) -> str:
    close = difflib.get_close_matches(spec.lower(), BUILTIN_SERIALIZERS, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _needs_context(spec: object) -> bool:
    """An object with `serialize(topic, headers, value)`, or an async callable of the value."""
    if isinstance(spec, str | _Builtin):
        return False
    return callable(getattr(spec, "serialize", None)) or _is_async(spec)


def _is_async(function: object) -> bool:
    # An `async def` function or method, or an object whose class defines `async def __call__`.
    if inspect.iscoroutinefunction(function):
        return True
    for klass in type(function).__mro__ if callable(function) else ():
        if "__call__" in vars(klass):
            return inspect.iscoroutinefunction(vars(klass)["__call__"])
    return False


@dataclass(frozen=True)
class _Step:
    """One role's context-aware or async serializer, with the checks `_CheckedSerializer` makes."""

    target: Any
    role: Role

    @property
    def function(self) -> Callable[..., Any]:
        serialize = getattr(self.target, "serialize", None)
        return serialize if callable(serialize) else self.target  # type: ignore[no-any-return]

    @property
    def takes_context(self) -> bool:
        return callable(getattr(self.target, "serialize", None))

    @property
    def is_async(self) -> bool:
        return _is_async(self.function)

    def call(self, topic: str, headers: Headers, obj: Any) -> Any:
        try:
            return self.function(topic, headers, obj) if self.takes_context else self.function(obj)
        except AioProducerError:
            raise
        except Exception as exc:
            raise self.failure(obj, exc) from exc

    def failure(self, obj: Any, exc: BaseException) -> InvalidRecordError:
        return InvalidRecordError(f"{self.role}_serializer {self.target!r} failed on a {type(obj).__name__}: {exc!r}")

    def check(self, data: Any) -> bytes | None:
        if data is None or type(data) is bytes:
            return data
        if isinstance(data, _BINARY):
            return bytes(data)
        if inspect.isawaitable(data):
            if inspect.iscoroutine(data):
                data.close()  # never awaited: close it rather than leak a warning
            raise InvalidRecordError(
                f"{self.role}_serializer {self.target!r} returned an awaitable from a plain function: declare it "
                "`async def` so the producer awaits it"
            )
        raise InvalidRecordError(
            f"{self.role}_serializer {self.target!r} returned {type(data).__name__}: it must return bytes or None"
        )


class RecordSerializer:
    """Runs the context-aware and async serializers of a producer, key then value (as Java's KafkaProducer.doSend),
    before the record reaches the appender. Built only when a setting needs it (`for_settings`), so producers with
    plain serializers never pay for it.
    """

    __slots__ = ("_key", "_value", "is_async")

    def __init__(self, key: _Step | None, value: _Step | None) -> None:
        self._key, self._value = key, value
        self.is_async = any(step is not None and step.is_async for step in (key, value))

    @classmethod
    def for_settings(cls, key_serializer: object, value_serializer: object) -> RecordSerializer | None:
        key = _Step(key_serializer, "key") if _needs_context(key_serializer) else None
        value = _Step(value_serializer, "value") if _needs_context(value_serializer) else None
        return cls(key, value) if key is not None or value is not None else None

    def apply(self, topic: str, key: Any, value: Any, headers: Any) -> tuple[Any, Any, Headers | Any]:
        """Serialized (key, value, headers) of a record, for serializers that are all synchronous."""
        check_topic(topic)  # Java validates the topic (waitOnMetadata) before it serializes
        headers = _header_list(headers)
        if self._key is not None:
            key = self._key.check(self._key.call(topic, headers, key))
        if self._value is not None:
            value = self._value.check(self._value.call(topic, headers, value))
        return key, value, headers

    async def apply_async(self, topic: str, key: Any, value: Any, headers: Any) -> tuple[Any, Any, Headers | Any]:
        """As `apply`, awaiting the async serializers."""
        check_topic(topic)
        headers = _header_list(headers)
        for role, step in (("key", self._key), ("value", self._value)):
            if step is None:
                continue
            obj = key if role == "key" else value
            data = step.call(topic, headers, obj)
            if step.is_async:
                try:
                    data = await data
                except AioProducerError:
                    raise
                except Exception as exc:
                    raise step.failure(obj, exc) from exc
            if role == "key":
                key = step.check(data)
            else:
                value = step.check(data)
        return key, value, headers

    async def apply_many(self, records: Sequence[Any]) -> tuple[list[tuple[Any, ...]], dict[int, AioProducerError]]:
        """`send_many`'s records serialized (as 6-tuples), and the errors of those refused, by position."""
        done: list[tuple[Any, ...]] = []
        refused: dict[int, AioProducerError] = {}
        for position, record in enumerate(records):
            try:
                topic, value, key, headers, partition, timestamp_ms = record
            except (TypeError, ValueError):  # refused in its place, as the appender refuses it without serializers
                refused[position] = not_a_record(record)
                continue
            try:
                if self.is_async:
                    key, value, headers = await self.apply_async(topic, key, value, headers)
                else:
                    key, value, headers = self.apply(topic, key, value, headers)
            except AioProducerError as exc:
                refused[position] = exc
                continue
            done.append((topic, value, key, headers, partition, timestamp_ms))
        return done, refused

    @staticmethod
    def merge(results: list[Any], refused: Mapping[int, BaseException]) -> list[Any]:
        """The results of the records that were sent, with the refused records' errors back in their places."""
        if not refused:
            return results
        sent = iter(results)
        return [refused[i] if i in refused else next(sent) for i in range(len(results) + len(refused))]


def _header_list(headers: Any) -> Headers | Any:
    # A fresh list the serializers may append to (a schema id header, say); the appender validates it after.
    if headers is None:
        return []
    headers = header_pairs(headers)
    if isinstance(headers, list | tuple):
        return list(headers)
    return headers  # not a sequence: the appender refuses it with its own message
