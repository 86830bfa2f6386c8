"""The vocabulary for declaring Kafka messages: fields, version ranges, defaults; mirrors Kafka's message JSON.

Owns declarations only. Encoding lives in codec.py and the messages themselves in messages.py.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PRIMITIVE_TYPES",
    "Field",
    "Message",
    "VersionRange",
    "f",
    "versions",
]

# Kafka's "N+" means "from N on"; the generator caps it at Short.MAX_VALUE.
_HIGHEST = 0x7FFF
NO_VERSIONS = (0, -1)

PRIMITIVE_TYPES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "string", "bytes", "records", "uuid"}
)

_ZERO_DEFAULTS: dict[str, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "uint32": 0,
    "int64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    # Java's generator leaves a records field null by default (MessageDataGenerator).
    "records": None,
    "uuid": uuid.UUID(int=0),
}


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of API versions, written as Kafka does: "3+", "8-10", "5", "none"."""

    low: int
    high: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def __str__(self) -> str:
        if self.low > self.high:
            return "none"
        if self.high == _HIGHEST:
            return f"{self.low}+"
        return f"{self.low}" if self.low == self.high else f"{self.low}-{self.high}"


def versions(spec: str) -> VersionRange:
    """Parse Kafka's version syntax ("0+", "3-5", "7", "none") into a VersionRange."""
    spec = spec.strip()
    if spec == "none":
        return VersionRange(*NO_VERSIONS)
    if spec.endswith("+"):
        return VersionRange(int(spec[:-1]), _HIGHEST)
    low, _, high = spec.partition("-")
    return VersionRange(int(low), int(high or low))


class _Unset:
    """Marks a field declared without a JSON `default`."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message or struct, as in Kafka's JSON: a snake_case name and Kafka's own type string.

    `type` is a primitive ("int32", "string", ...), an array ("[]int32", "[]TopicProduceData") or a struct name;
    struct types carry their `fields`. `flexible` overrides the message's flexible versions (RequestHeader.ClientId).
    """

    name: str
    type: str
    versions: VersionRange
    nullable: VersionRange
    tag: int | None
    tagged: VersionRange
    declared_default: Any
    fields: tuple[Field, ...]
    flexible: VersionRange | None

    @property
    def is_array(self) -> bool:
        """True for `[]T` fields."""
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        """The type of one element (`int32` for `[]int32`), or the type itself for non-arrays."""
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """True when the field (or each element) is a nested struct with its own fields."""
        return self.element_type not in PRIMITIVE_TYPES

    def default(self) -> Any:
        """The value a field takes when a version lacks it or an encoder is not given it (fresh for containers)."""
        value = self.declared_default
        if value is not UNSET:
            return list(value) if isinstance(value, list) else value
        if self.is_array:
            return []
        if self.is_struct:
            return {sub.name: sub.default() for sub in self.fields}
        return _ZERO_DEFAULTS[self.type]


def f(
    name: str,
    type_: str,
    present: str = "0+",
    *fields: Field,
    nullable: str = "none",
    tag: int | None = None,
    default: Any = UNSET,
    flexible: str | None = None,
) -> Field:
    """Declare a field compactly: `f("acks", "int16")`, `f("topics", "[]Topic", "0+", f(...), nullable="1+")`.

    A tagged field is present (as a tag) in exactly its `present` versions, as every tagged field we speak is.
    """
    present_range = versions(present)
    return Field(
        name=name,
        type=type_,
        versions=present_range,
        nullable=versions(nullable),
        tag=tag,
        tagged=present_range if tag is not None else VersionRange(*NO_VERSIONS),
        declared_default=default,
        fields=fields,
        flexible=versions(flexible) if flexible is not None else None,
    )


@dataclass(frozen=True, slots=True)
class Message:
    """A request, response or header: the versions aioproducer speaks, the flexible ones, and the fields."""

    name: str
    api_key: int | None
    supported: VersionRange
    flexible: VersionRange
    fields: tuple[Field, ...] = field(default_factory=tuple)
