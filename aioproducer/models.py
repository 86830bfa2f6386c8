"""The values users hand to the producer and get back: `ProducerRecord`, `RecordMetadata`, and what
`send_table` reports (`TableReport`, `RowFailures`).

Both are named tuples: immutable, cheap to create by the hundred thousand on the bulk path.

`ProducerRecord` takes its topic and value by position and everything else by name. Java's constructors put the key
before the value (`new ProducerRecord<>(topic, key, value)`); a positional key here would let a port of that line
swap key and value silently, so `ProducerRecord(topic, key, value)` is a TypeError instead. The tuple keeps its field
order (topic, value, key, headers, partition, timestamp_ms) for unpacking, `_make` and send_many's plain 6-tuples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from aioproducer.accelerated import compiled_twin
from aioproducer.validation import header_pairs

if TYPE_CHECKING:
    # The class both twins' arrays are typed as (columnar.arrow's Int64Array is declared as it), named from the
    # module that defines it: columnar.arrow imports Header from here, and a module pair must not import each other.
    from aioproducer.columnar.export import PureInt64Array as Int64Array

__all__ = ["Header", "Headers", "ProducerRecord", "RecordMetadata", "RowFailures", "TableReport", "record_of"]

Header = tuple[str, "bytes | None"]
# What a call takes as `headers`: (key, value) pairs in order (a key may repeat, as in Kafka), or a mapping when each
# key appears once; `validation.check_headers` turns either into pairs.
Headers = Sequence[Header] | Mapping[str, "bytes | None"]


class _RecordFields(NamedTuple):
    topic: str
    value: Any = None
    key: Any = None
    headers: Sequence[Header] | None = None  # a mapping given to the constructor is kept as its pairs
    partition: int | None = None
    timestamp_ms: int | None = None


_new_tuple = tuple.__new__


class ProducerRecord(_RecordFields):
    """One record for `Producer.send_many`: `ProducerRecord(topic, value, key=..., headers=..., partition=...,
    timestamp_ms=...)`. `key` and `value` go through the producer's serializers.

    Only the topic and the value are positional (see the module's docstring: Java's argument order would otherwise
    swap key and value silently); `ProducerRecord._make(six_items)` builds one from a tuple in field order.
    """

    __slots__ = ()

    def __new__(
        cls,
        topic: str,
        value: Any = None,
        *,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> ProducerRecord:
        if headers is not None and type(headers) is not list and type(headers) is not tuple:
            headers = header_pairs(headers)  # a mapping: its pairs, so the field holds pairs whatever was given
        return _new_tuple(cls, (topic, value, key, headers, partition, timestamp_ms))

    def __reduce__(self) -> tuple[Any, tuple[tuple[Any, ...]]]:
        # pickle and copy would call __new__ with six positional arguments (the named tuple's __getnewargs__).
        return _record_from_fields, (tuple(self),)


def _record_from_fields(fields: tuple[Any, ...]) -> ProducerRecord:
    return ProducerRecord._make(fields)


_DEFAULTS = (None,) * 6


def record_of(fields: Sequence[Any]) -> ProducerRecord:
    """A ProducerRecord from its fields in order (topic first), the missing ones at their defaults, as
    `ProducerRecord(*fields)` would build a named tuple; TypeError for more than six or none."""
    count = len(fields)
    if not 1 <= count <= 6:
        raise TypeError(f"a ProducerRecord has 1 to 6 fields (topic, value, key, ...), got {count}")
    return ProducerRecord._make((*fields, *_DEFAULTS[count:]))


class RecordMetadata(NamedTuple):
    """Where a delivered record landed.

    `offset` is -1 when it is unknown: with acks=0, or when the broker reported the batch as an already-written
    duplicate (DUPLICATE_SEQUENCE_NUMBER) without saying where. `timestamp_ms` is the broker's LogAppendTime when
    the topic uses it, else the record's CreateTime. Sizes are -1 for a null key or value.
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    serialized_key_size: int
    serialized_value_size: int


class RowFailures(NamedTuple):
    """Rows of a table that failed with one error: `rows` is an Arrow int64 array of their indices in the table (in
    order; `pyarrow.array(failures.rows)` or `polars.Series(failures.rows)` take it without a copy)."""

    error: BaseException
    rows: Int64Array

    def row_numbers(self) -> list[int]:
        """The failed rows' indices as Python ints (a list as long as the failures)."""
        return [row for row in self.rows.to_pylist() if row is not None]


@dataclass(frozen=True)
class TableReport:
    """What `send_table` did with each row of a table: one report per call, not a Python object per row.

    `rows` counts the rows read, `delivered` those acknowledged and `failed` the others (`delivered + failed ==
    rows`); `failures` groups the failed rows by error (its class and message: each distinct error once);
    `per_partition` counts the delivered rows per (topic, partition), and `offset_ranges` gives the lowest and highest
    offset they took there (other writers' records may lie between; -1 where Kafka tells none: acks=0); `offsets`,
    when the call asked for them, is an Arrow int64 array of each row's offset (null for a failed row, or unknown).
    """

    rows: int
    delivered: int
    failed: int
    failures: tuple[RowFailures, ...] = ()
    per_partition: Mapping[tuple[str, int], int] = field(default_factory=dict)
    offset_ranges: Mapping[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    offsets: Int64Array | None = None

    @property
    def ok(self) -> bool:
        """Every row was delivered."""
        return self.failed == 0

    def raise_first(self) -> None:
        """Raise the error of the first failed row (for callers that want all-or-nothing), if any row failed."""
        if self.failures:
            first = min(self.failures, key=lambda failure: failure.row_numbers()[0])
            raise first.error


# The compiled twin of ProducerRecord's constructor, when built (see aioproducer.accelerated): the same signature
# and fields without a Python frame, and a record of plain fields (None, bytes, str, int) untracked by the cyclic
# collector, which otherwise walked a send_many caller's chunks of records again and again (and promoted them into
# full collections). Set here, where the class is defined; PureProducerRecordNew keeps the original.
PureProducerRecordNew = ProducerRecord.__new__
_twin = compiled_twin("aioproducer._models")
if _twin is not None:
    _twin.adopt(ProducerRecord)
    ProducerRecord.__new__ = staticmethod(_twin.ProducerRecord)  # type: ignore[method-assign]
