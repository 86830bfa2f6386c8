"""Int64Array, the int64 results handed back as Arrow (per-row offsets, failed-row indices): pyarrow and polars import
it through the PyCapsule interface without a copy, nulls included, and every export is released exactly once."""

from __future__ import annotations

import gc
import sys

import polars as pl
import pyarrow as pa
import pytest

from aioproducer.columnar import arrow

VALUES = [0, 1, None, -3, 2**63 - 1, -(2**63), None, 42, 7, None]


def test_pyarrow_imports_it_zero_copy_with_its_nulls(twin: arrow.Implementation) -> None:
    offsets = twin.Int64Array(VALUES, name="offset")
    assert len(offsets) == 10 and offsets.null_count == 3 and offsets.to_pylist() == VALUES
    first, second = pa.array(offsets), pa.array(offsets)
    assert first.type == pa.int64() and first.to_pylist() == VALUES and first.null_count == 3
    assert first.buffers()[1].address == second.buffers()[1].address  # both read our buffer: neither copied it
    assert pa.field(offsets).type == pa.int64() and pa.field(offsets).name == "offset"


def test_row_indices_without_nulls_export_no_bitmap(twin: arrow.Implementation) -> None:
    rows = twin.Int64Array(range(5), name="row")
    imported = pa.array(rows)
    assert imported.to_pylist() == [0, 1, 2, 3, 4] and imported.buffers()[0] is None
    assert pa.array(twin.Int64Array([])).to_pylist() == []
    assert pa.array(twin.Int64Array([None])).to_pylist() == [None]


def test_polars_imports_it(twin: arrow.Implementation) -> None:
    series = pl.Series(twin.Int64Array(VALUES, name="offset"))
    assert series.dtype == pl.Int64 and series.to_list() == VALUES


def test_each_export_lets_go_of_the_array_when_released(twin: arrow.Implementation) -> None:
    offsets = twin.Int64Array(VALUES)
    alone = sys.getrefcount(offsets)
    imported = pa.array(offsets)
    assert sys.getrefcount(offsets) == alone + 1  # the export keeps it alive for pyarrow
    del offsets
    gc.collect()
    assert imported.to_pylist() == VALUES  # still readable: the consumer holds it
    del imported
    offsets = twin.Int64Array(VALUES)
    alone = sys.getrefcount(offsets)
    schema, array = offsets.__arrow_c_array__()
    assert sys.getrefcount(offsets) == alone + 1
    del schema, array  # capsules never consumed: their destructors release the export
    assert sys.getrefcount(offsets) == alone
    for _ in range(100):
        pa.array(offsets)
    assert sys.getrefcount(offsets) == alone


def test_values_must_be_int64(twin: arrow.Implementation) -> None:
    with pytest.raises(OverflowError):
        twin.Int64Array([2**63])
    with pytest.raises(TypeError):
        twin.Int64Array(["1"])  # type: ignore[list-item]
