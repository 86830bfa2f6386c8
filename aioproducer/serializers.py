"""Turning record keys and values into bytes: the built-in serializers and `resolve_serializer`.

Pure functions of their input; imports nothing from aioproducer but `errors`, and does no I/O.
"""

from __future__ import annotations

import codecs
import dataclasses
import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from aioproducer.errors import AioProducerError, ConfigError, InvalidRecordError

__all__ = [
    "BUILTIN_SERIALIZERS",
    "Role",
    "Serializer",
    "bytes_serializer",
    "json_serializer",
    "resolve_serializer",
    "str_serializer",
]

Serializer: TypeAlias = Callable[[Any], bytes | None]
Role: TypeAlias = Literal["key", "value"]

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
    wrong return type or an exception it raises reaches the caller as `InvalidRecordError`.
    """
    if spec is None or spec == "bytes":
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
