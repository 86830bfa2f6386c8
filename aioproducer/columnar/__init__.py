"""Columnar input: reading the producer's columns (key, value, topic, partition, timestamp, headers) out of any
Arrow table without a Python object per row, and handing int64 results back as Arrow.

`ArrowReader` reads any exporter of the Arrow PyCapsule interface batch by batch; its `ColumnBatch`es hold column
views whose accessors both twins share (the compiled one also as `cdef` functions: `_arrow.pxd`). `Int64Array`
exports per-row results. The rules are in `schema` (accepted types) and `layout` (buffer checks, null semantics).
"""

from __future__ import annotations

from aioproducer.columnar.arrow import COMPILED, BytesColumnView, HeadersColumnView, Int64Array, IntColumnView
from aioproducer.columnar.reader import ArrowReader, ColumnBatch

__all__ = [
    "COMPILED",
    "ArrowReader",
    "BytesColumnView",
    "ColumnBatch",
    "HeadersColumnView",
    "Int64Array",
    "IntColumnView",
]
