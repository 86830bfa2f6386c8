"""Reading a whole table through a twin, and what pyarrow (the independent judge) says the same columns hold."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

from aioproducer.columnar import ArrowReader, arrow

_compiled = None if os.environ.get("AIOPRODUCER_NO_EXTENSIONS") else arrow.load_compiled()
# The pure twin always; the compiled one except in the pure-Python session, where it is not what that install runs.
TWINS = [arrow.PURE, *([_compiled] if _compiled is not None else [])]


def values_of(role: str, column: Any) -> list[Any]:
    """A column's rows through its per-row accessors (not to_pylist: the accessors are what the producer uses)."""
    rows = range(len(column))
    if role in ("key", "value"):
        return [column.bytes_at(row) for row in rows]
    if role == "topic":
        return [column.text_at(row) for row in rows]
    if role in ("partition", "timestamp"):
        return [column.int_at(row) for row in rows]
    return [None if column.is_null(row) else column.headers_at(row) for row in rows]


def read_all(data: object, twin: arrow.Implementation, **roles: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {role: [] for role in roles}
    with ArrowReader(data, implementation=twin, **roles) as reader:
        for batch in reader:
            assert batch.num_rows > 0
            for role in roles:
                column = getattr(batch, role)
                assert len(column) == batch.num_rows
                out[role].extend(values_of(role, column))
    return out


def _bytes(value: Any) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


_TO_MS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


def judge(table: pa.Table, **roles: str) -> dict[str, list[Any]]:
    """The same columns as pyarrow reads them, in the form the accessors give."""
    out: dict[str, list[Any]] = {}
    for role, name in roles.items():
        column = table.column(name)
        kind = column.type
        if role in ("key", "value"):
            out[role] = [_bytes(value) for value in column.to_pylist()]
        elif role == "timestamp" and pa.types.is_timestamp(kind):
            multiplier, divisor = _TO_MS[kind.unit]
            raw = column.cast(pa.int64()).to_pylist()
            out[role] = [None if v is None else v * multiplier // divisor for v in raw]
        elif role == "timestamp" and pa.types.is_date64(kind):
            out[role] = column.cast(pa.int64()).to_pylist()
        elif role == "headers":
            out[role] = [
                None
                if entries is None
                else [
                    (entry["key"], _bytes(entry["value"])) if isinstance(entry, dict) else (entry[0], _bytes(entry[1]))
                    for entry in entries
                ]
                for entries in column.to_pylist()
            ]
        else:
            out[role] = column.to_pylist()
    return out
