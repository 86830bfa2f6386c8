"""Executor side: one Arrow record batch of sink columns → the producer's records. The only place rows become
records, so a columnar producer entry point can replace it whole; never sees a Spark Row.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

from aioproducer import ProducerRecord
from aioproducer.spark._deps import require

__all__ = ["records_from_arrow"]


def records_from_arrow(batch: Any, topic: str | None) -> list[ProducerRecord]:
    """The records of a `pyarrow.RecordBatch`, in row order; `topic`, when given, overrides the topic column.

    String columns are sent as their UTF-8 bytes. A null topic, partition or header key is left for the producer
    to reject (or, for a partition, to choose one), so that one bad row fails only itself.
    """
    names = set(batch.schema.names)
    rows = batch.num_rows
    values = _bytes_column(batch.column("value"))
    keys = _bytes_column(batch.column("key")) if "key" in names else repeat(None, rows)
    topics = repeat(topic, rows) if topic is not None else batch.column("topic").to_pylist()
    partitions = batch.column("partition").to_pylist() if "partition" in names else repeat(None, rows)
    headers = _headers(batch.column("headers")) if "headers" in names else repeat(None, rows)
    fields = zip(topics, values, keys, headers, partitions, repeat(None, rows), strict=True)
    # ProducerRecord is a NamedTuple: tuple.__new__ is what its `_make` does, without a Python call per row.
    return list(map(tuple.__new__, repeat(ProducerRecord), fields))


def _bytes_column(column: Any) -> list[Any]:
    types = require("pyarrow").types
    if not (types.is_binary(column.type) or types.is_large_binary(column.type)):
        # Spark's sink sends a string column's UTF-8 bytes; the Arrow cast reuses the same buffers.
        column = column.cast(require("pyarrow").large_binary())
    values: list[Any] = column.to_pylist()
    return values


def _headers(column: Any) -> list[list[tuple[Any, Any]] | None]:
    return [[(h["key"], h["value"]) for h in row] if row else None for row in column.to_pylist()]
