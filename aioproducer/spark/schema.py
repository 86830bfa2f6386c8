"""The driver-side check of a DataFrame's columns against Spark's Kafka sink conventions (KafkaWriter.validateQuery).

Reads only field names and Spark's type strings, so it imports no Spark; the projection itself is `publish`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aioproducer.errors import InvalidRecordError

__all__ = ["HEADERS_TYPE", "SinkColumns", "check_columns", "check_schema"]

VALUE, KEY, TOPIC, PARTITION, HEADERS = "value", "key", "topic", "partition", "headers"
HEADERS_TYPE = "array<struct<key:string,value:binary>>"
_BYTES_TYPES = ("string", "binary")
_ALLOWED = {
    VALUE: _BYTES_TYPES,
    KEY: _BYTES_TYPES,
    TOPIC: ("string",),
    PARTITION: ("int",),
    HEADERS: (HEADERS_TYPE,),
}


@dataclass(frozen=True)
class SinkColumns:
    """The sink columns a DataFrame has, each with its Spark type string, or None when absent (or overridden)."""

    value: str
    key: str | None = None
    topic: str | None = None
    partition: str | None = None
    headers: str | None = None

    def present(self) -> dict[str, str]:
        """Column name → Spark type string of every column the executors need, in the sink's order."""
        named = {VALUE: self.value, KEY: self.key, TOPIC: self.topic, PARTITION: self.partition, HEADERS: self.headers}
        return {name: kind for name, kind in named.items() if kind is not None}


def check_schema(schema: Any, topic_option: str | None) -> SinkColumns:
    """Check a `pyspark.sql.types.StructType` for the sink; raise InvalidRecordError with Spark's wording.

    Names match exactly, as in Spark's sink; other columns are ignored. A `topic` option makes the column unused.
    """
    fields = [(field.name, field.dataType.simpleString()) for field in schema.fields]
    return check_columns(dict(fields), topic_option, duplicates=_duplicated(name for name, _ in fields))


def check_columns(types: Mapping[str, str], topic_option: str | None, *, duplicates: frozenset[str]) -> SinkColumns:
    """`check_schema` on column name → Spark type string (`DataType.simpleString()`)."""
    wanted = {VALUE, KEY, PARTITION, HEADERS} | ({TOPIC} if topic_option is None else set())
    ambiguous = sorted(duplicates & wanted)
    if ambiguous:
        raise InvalidRecordError(f"attribute(s) {ambiguous} appear more than once: the sink cannot tell them apart")
    if topic_option is None and TOPIC not in types:
        raise InvalidRecordError(
            "topic option required when no 'topic' attribute is present. Use the topic option for setting a topic."
        )
    if VALUE not in types:
        raise InvalidRecordError("Required attribute 'value' not found")
    columns = SinkColumns(
        value=types[VALUE],
        key=types.get(KEY),
        topic=types.get(TOPIC) if topic_option is None else None,
        partition=types.get(PARTITION),
        headers=types.get(HEADERS),
    )
    for name, kind in columns.present().items():
        _check_type(name, kind, _ALLOWED[name])
    return columns


def _check_type(name: str, kind: str, allowed: tuple[str, ...]) -> None:
    if kind not in allowed:
        raise InvalidRecordError(
            f"{name} attribute unsupported type {kind}. {name} must be a(n) {' or '.join(allowed)}"
        )


def _duplicated(names: Iterable[str]) -> frozenset[str]:
    return frozenset(name for name, count in Counter(names).items() if count > 1)
