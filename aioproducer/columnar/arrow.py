"""The pure-Python twin of the columnar accessors, and the choice between it and the compiled `_arrow`.

`PureBytesColumnView`, `PureIntColumnView` and `PureHeadersColumnView` read the rows of one batch's column out of
the struct `layout` filled after its checks (ctypes over the producer's Arrow buffers: no pyarrow, no copy of the
column), with the null and error semantics stated in `layout`. `PURE_KERNELS` are the buffer scans of those checks.
The compiled twin offers the same classes and kernels, plus `cdef` accessors for Cython callers; it is chosen at the
bottom of this module unless AIOPRODUCER_NO_EXTENSIONS is set or it was not built. Both behave the same (the test
suite runs both on the same tables, hostile ones included); only the speed differs.
"""

from __future__ import annotations

import ctypes
import importlib
import operator
import struct
from typing import TYPE_CHECKING, Any, NamedTuple

from aioproducer.accelerated import EXTENSIONS_DISABLED
from aioproducer.columnar import cdata, layout, schema
from aioproducer.columnar.export import PureInt64Array
from aioproducer.models import Header

__all__ = [
    "COMPILED",
    "IMPLEMENTATION",
    "PURE",
    "PURE_KERNELS",
    "BytesColumnView",
    "HeadersColumnView",
    "Implementation",
    "Int64Array",
    "IntColumnView",
    "PureBytesColumnView",
    "PureHeadersColumnView",
    "PureIntColumnView",
    "load_compiled",
]

_INDEX_FORMATS = {(1, True): "b", (1, False): "B", (2, True): "h", (2, False): "H", (4, True): "i", (4, False): "I"}
_INDEX_FORMATS.update({(8, True): "q", (8, False): "Q"})
_VIEW = struct.Struct("=iiii")  # length, prefix, buffer index, offset (native order, as the C data interface)
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


# -- kernels: the buffer scans of layout's batch checks ---------------------------------------------------------------
def _bitmap(address: int, first_bit: int, rows: int) -> tuple[memoryview, int] | None:
    if not address:
        return None
    shift = first_bit & 7
    return cdata.memory(address + (first_bit >> 3), (shift + rows + 7) >> 3), shift


def _is_set(bitmap: tuple[memoryview, int] | None, row: int) -> bool:
    if bitmap is None:
        return True
    bits, shift = bitmap
    row += shift
    return bool(bits[row >> 3] >> (row & 7) & 1)


def first_bad_offsets(address: int, rows: int, width: int) -> int:
    offsets = cdata.integers(address, rows + 1, "i" if width == 4 else "q")
    if offsets[0] < 0:
        return 0
    if all(map(operator.le, offsets[:-1], offsets[1:])):
        return -1
    return next(k for k in range(1, rows + 1) if offsets[k] < offsets[k - 1])


def first_bad_view(views: int, validity: int, bit: int, rows: int, sizes: int, n_buffers: int) -> int:
    bitmap = _bitmap(validity, bit, rows)
    size_of = cdata.integers(sizes, n_buffers, "q")
    for row, (length, _prefix, buffer, offset) in enumerate(_VIEW.iter_unpack(cdata.memory(views, rows * 16))):
        if 0 <= length <= 12 or not _is_set(bitmap, row):
            continue  # inline (or null): nothing outside the view to check
        if length < 0 or not 0 <= buffer < n_buffers or offset < 0 or offset + length > size_of[buffer]:
            return row
    return -1


def first_bad_index(indices: int, validity: int, bit: int, rows: int, width: int, signed: bool, limit: int) -> int:
    values = cdata.integers(indices, rows, _INDEX_FORMATS[(width, signed)])
    if not rows or (min(values) >= 0 and max(values) < limit):
        return -1
    bitmap = _bitmap(validity, bit, rows)
    return next((row for row, index in enumerate(values) if not 0 <= index < limit and _is_set(bitmap, row)), -1)


PURE_KERNELS = layout.Kernels(first_bad_offsets, first_bad_view, first_bad_index)


# -- accessors --------------------------------------------------------------------------------------------------------
def _values_reader(values: cdata.BytesArray, rows: int) -> Any:
    """A function reading row j (0 <= j < rows) of a plain binary-like array: its bytes, or None for null."""
    bitmap = _bitmap(values.validity or 0, values.offset, rows)
    kind, first = values.layout, values.offset
    if kind in (schema.LAYOUT_OFFSETS32, schema.LAYOUT_OFFSETS64):
        width = 4 if kind == schema.LAYOUT_OFFSETS32 else 8
        offsets = cdata.integers(values.offsets + first * width, rows + 1 if rows else 0, "i" if width == 4 else "q")
        data = values.data

        def read(row: int) -> bytes | None:
            if not _is_set(bitmap, row):
                return None
            start = offsets[row]
            return ctypes.string_at(data + start, offsets[row + 1] - start)

    elif kind == schema.LAYOUT_VIEWS:
        views, variadic = cdata.memory(values.offsets + first * 16, rows * 16), values.variadic

        def read(row: int) -> bytes | None:
            if not _is_set(bitmap, row):
                return None
            length, _prefix, buffer, offset = _VIEW.unpack_from(views, row * 16)
            if length <= 12:
                return bytes(views[row * 16 + 4 : row * 16 + 4 + length])
            base = ctypes.c_void_p.from_address(variadic + buffer * ctypes.sizeof(ctypes.c_void_p)).value or 0
            return ctypes.string_at(base + offset, length)

    else:
        size, data = values.fixed_size, values.data

        def read(row: int) -> bytes | None:
            if not _is_set(bitmap, row):
                return None
            return ctypes.string_at(data + (first + row) * size, size)

    return read


class PureBytesColumnView:
    """One batch's bytes column (key, value, topic, header keys or values): its rows as bytes, None for null. Reads
    the producer's buffers in place; `owner` keeps them alive (their release callback runs when it goes)."""

    __slots__ = ("_bitmap", "_indices", "_length", "_name", "_owner", "_read")

    def __init__(self, name: str, column: cdata.BytesColumn, owner: object) -> None:
        self._name, self._length, self._owner = name, int(column.length), owner
        self._indices: memoryview | None = None
        self._bitmap = None
        if column.index_width:
            width, signed = column.index_width, bool(column.index_signed)
            start = (column.indices or 0) + column.offset * width
            self._indices = cdata.integers(start, column.length, _INDEX_FORMATS[(width, signed)])
            self._bitmap = _bitmap(column.validity or 0, column.offset, column.length)
            self._read = _values_reader(column.values, column.values.length)
        else:
            self._read = _values_reader(column.values, column.length)

    @property
    def name(self) -> str:
        return self._name

    def __len__(self) -> int:
        return self._length

    def _check(self, row: int) -> None:
        if not 0 <= row < self._length:
            raise layout.row_error(self._name, row, self._length)

    def bytes_at(self, row: int) -> bytes | None:
        """Row `row`'s bytes; None when it is null (a null key or value is Kafka's null)."""
        self._check(row)
        indices = self._indices
        if indices is None:
            result: bytes | None = self._read(row)
            return result
        if not _is_set(self._bitmap, row):
            return None
        found: bytes | None = self._read(indices[row])
        return found

    def is_null(self, row: int) -> bool:
        return self.bytes_at(row) is None

    def text_at(self, row: int) -> str | None:
        """Row `row` as a string (a topic); None when null; `InvalidRecordError` when it is not valid UTF-8."""
        data = self.bytes_at(row)
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise layout.text_error(self._name, row) from None

    def to_pylist(self) -> list[bytes | None]:
        return [self.bytes_at(row) for row in range(self._length)]

    def __repr__(self) -> str:
        return f"<BytesColumnView {self._name!r}: {self._length} rows>"


class PureIntColumnView:
    """One batch's integer column (partition, timestamp): ints, timestamps in epoch milliseconds, None for null."""

    __slots__ = ("_bitmap", "_divisor", "_length", "_multiplier", "_name", "_owner", "_values")

    def __init__(self, name: str, column: cdata.IntColumn, owner: object) -> None:
        self._name, self._length, self._owner = name, int(column.length), owner
        width, signed = column.width, bool(column.is_signed)
        start = (column.data or 0) + column.offset * width
        self._values = cdata.integers(start, column.length, _INDEX_FORMATS[(width, signed)])
        self._bitmap = _bitmap(column.validity or 0, column.offset, column.length)
        self._multiplier, self._divisor = int(column.multiplier), int(column.divisor)

    @property
    def name(self) -> str:
        return self._name

    def __len__(self) -> int:
        return self._length

    def int_at(self, row: int) -> int | None:
        """Row `row`'s value (a timestamp in epoch milliseconds, sub-millisecond units floored); None when null;
        `InvalidRecordError` when a timestamp in seconds does not fit int64 milliseconds."""
        if not 0 <= row < self._length:
            raise layout.row_error(self._name, row, self._length)
        if not _is_set(self._bitmap, row):
            return None
        value: int = self._values[row] * self._multiplier
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise layout.timestamp_error(self._name, row)
        return value // self._divisor

    def is_null(self, row: int) -> bool:
        if not 0 <= row < self._length:
            raise layout.row_error(self._name, row, self._length)
        return not _is_set(self._bitmap, row)

    def to_pylist(self) -> list[int | None]:
        return [self.int_at(row) for row in range(self._length)]

    def __repr__(self) -> str:
        return f"<IntColumnView {self._name!r}: {self._length} rows>"


class PureHeadersColumnView:
    """One batch's headers column: per row, a list of (key, value) headers; a null list means no headers."""

    __slots__ = ("_bitmap", "_entries", "_keys", "_length", "_name", "_offsets", "_owner", "_values")

    def __init__(self, name: str, column: cdata.HeadersColumn, owner: object) -> None:
        self._name, self._length, self._owner = name, int(column.length), owner
        width, rows = column.offset_width, column.length
        start = (column.offsets or 0) + column.offset * width
        self._offsets = cdata.integers(start, rows + 1 if rows else 0, "i" if width == 4 else "q")
        self._bitmap = _bitmap(column.validity or 0, column.offset, rows)
        entries = column.keys.length
        self._entries = _bitmap(column.entries_validity or 0, column.entries_offset, entries)
        self._keys = PureBytesColumnView(name, column.keys, owner)
        self._values = PureBytesColumnView(name, column.values, owner)

    @property
    def name(self) -> str:
        return self._name

    def __len__(self) -> int:
        return self._length

    def is_null(self, row: int) -> bool:
        if not 0 <= row < self._length:
            raise layout.row_error(self._name, row, self._length)
        return not _is_set(self._bitmap, row)

    def header_count(self, row: int) -> int:
        """How many headers row `row` has (0 when its list is null)."""
        if self.is_null(row):
            return 0
        return int(self._offsets[row + 1] - self._offsets[row])

    def header_at(self, row: int, index: int) -> Header:
        """Header `index` of row `row` as (key, value), the value None when null; `InvalidRecordError` when the
        entry or its key is null, or the key is not valid UTF-8."""
        count = self.header_count(row)
        if not 0 <= index < count:
            raise IndexError(f"header {index} is outside row {row} of column {self._name!r}, which has {count}")
        entry = self._offsets[row] + index
        key = self._keys.bytes_at(entry) if _is_set(self._entries, entry) else None
        try:
            if key is None:
                raise UnicodeError
            return key.decode("utf-8"), self._values.bytes_at(entry)
        except UnicodeError:
            raise layout.header_key_error(self._name, row, index) from None

    def headers_at(self, row: int) -> list[Header]:
        return [self.header_at(row, index) for index in range(self.header_count(row))]

    def to_pylist(self) -> list[list[Header] | None]:
        return [None if self.is_null(row) else self.headers_at(row) for row in range(self._length)]

    def __repr__(self) -> str:
        return f"<HeadersColumnView {self._name!r}: {self._length} rows>"


# -- the choice -------------------------------------------------------------------------------------------------------
class Implementation(NamedTuple):
    """One twin: what reads the columns, scans the buffers and exports results."""

    name: str
    kernels: layout.Kernels
    BytesColumnView: type[PureBytesColumnView]
    IntColumnView: type[PureIntColumnView]
    HeadersColumnView: type[PureHeadersColumnView]
    Int64Array: type[PureInt64Array]


PURE = Implementation("pure", PURE_KERNELS, PureBytesColumnView, PureIntColumnView, PureHeadersColumnView,
                      PureInt64Array)  # fmt: skip


def load_compiled() -> Implementation | None:
    """The compiled twin, if it was built (whatever AIOPRODUCER_NO_EXTENSIONS says: the tests compare both)."""
    try:
        module: Any = importlib.import_module("aioproducer.columnar._arrow")
    except ImportError:
        return None
    kernels = layout.Kernels(module.first_bad_offsets, module.first_bad_view, module.first_bad_index)
    return Implementation("compiled", kernels, module.BytesColumnView, module.IntColumnView,
                          module.HeadersColumnView, module.Int64Array)  # fmt: skip


COMPILED = None if EXTENSIONS_DISABLED else load_compiled()
IMPLEMENTATION = COMPILED or PURE

if TYPE_CHECKING:
    BytesColumnView = PureBytesColumnView
    IntColumnView = PureIntColumnView
    HeadersColumnView = PureHeadersColumnView
    Int64Array = PureInt64Array
else:
    BytesColumnView, IntColumnView, HeadersColumnView, Int64Array = IMPLEMENTATION[2:]
