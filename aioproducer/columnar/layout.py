"""The rules of the columnar input: which Arrow types each producer column accepts, and the checks that make a
batch safe to read. Their one home: this module checks a column and fills its struct (`cdata`), then either twin
of `aioproducer.columnar.arrow` reads rows from that struct. The compiled twin only runs the per-buffer scans
(`Kernels`) faster; it holds no rule of its own.

Checked before any row of a batch is read (a failure raises `InvalidTableError` naming the column):
- the type of each selected column, once, from the schema, before the first batch (`schema`);
- per batch: lengths and offsets not negative; the buffer and child counts of the layout; children, and a table's
  columns, not shorter than their parent; a NULL buffer only where it would hold no byte, and a validity bitmap
  wherever the array counts nulls; offsets that start at 0 or more and never decrease (and, in a list, end within
  its entries); views whose buffer index names one of the array's variadic buffers and whose (offset, length)
  lies inside the size the array declares for it; dictionary indices within the dictionary.
Trusted, as by every Arrow consumer, because the interface does not carry them: that each buffer is as large as its
array's offset + length demands (a data buffer as its last offset), that pointers point at readable memory, and
that the producer leaves the data unchanged while we hold it.
Checked per row, by the accessors: a topic and a header key must be valid UTF-8 (else that row fails, as does a null
topic, a null header key or a null header entry), and a timestamp in seconds must fit int64 milliseconds.
Null means: a null key or value is Kafka's null; a null partition lets the partitioner choose; a null timestamp
means "now"; a null headers list means no headers. A validity bitmap, where there is one, says which rows are null
whatever null_count claims (as pyarrow reads it); without one, no row is.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import NamedTuple

from aioproducer.columnar import cdata
from aioproducer.columnar.schema import (
    LAYOUT_FIXED,
    LAYOUT_OFFSETS32,
    LAYOUT_OFFSETS64,
    LAYOUT_VIEWS,
    BytesType,
    ColumnPlan,
    HeadersType,
    IntType,
    TablePlan,
)
from aioproducer.errors import InvalidRecordError, InvalidTableError

__all__ = [
    "Kernels",
    "bind_column",
    "check_batch",
    "header_key_error",
    "row_error",
    "text_error",
    "timestamp_error",
]

# Rows (offset + length) beyond this cannot describe memory (2^48 rows of even 1 bit exceed any address space), and
# staying below it keeps the accessors' int64 index and byte arithmetic from overflowing.
_MAX_EXTENT = 1 << 48
_MAX_VARIADIC = 1 << 20  # a views array with more data buffers than this is not one we could have been handed


class Kernels(NamedTuple):
    """The per-buffer scans of the batch checks. Each returns the first offending row of its window, or -1; the
    pure versions are in `arrow`, the compiled ones in `_arrow`, and both must agree everywhere."""

    # (address of the window's first offset, rows, offset width) → first bad entry in 0..rows
    first_bad_offsets: Callable[[int, int, int], int]
    # (views address, validity address, validity bit of the first row, rows, address of the variadic buffers' int64
    #  sizes, number of variadic buffers) → first non-null row whose view is bad
    first_bad_view: Callable[[int, int, int, int, int, int], int]
    # (indices address, validity address, validity bit, rows, index width, signed, dictionary length) → first
    #  non-null row whose index is outside [0, dictionary length)
    first_bad_index: Callable[[int, int, int, int, int, bool, int], int]


# -- buffers --------------------------------------------------------------------------------------------------------
_READERS = {(1, True): ctypes.c_int8, (1, False): ctypes.c_uint8, (2, True): ctypes.c_int16}
_READERS.update({(2, False): ctypes.c_uint16, (4, True): ctypes.c_int32, (4, False): ctypes.c_uint32})
_READERS.update({(8, True): ctypes.c_int64, (8, False): ctypes.c_uint64})


def _read_int(address: int, index: int, width: int, signed: bool = True) -> int:
    return int(_READERS[(width, signed)].from_address(address + index * width).value)


class _Node(NamedTuple):
    """One array's place: where its rows start in its buffers (its offset plus its parents'), its validity bitmap
    (0 for none: no row is null) and its buffer addresses (0 for NULL)."""

    offset: int
    validity: int
    buffers: tuple[int, ...]
    array: cdata.ArrowArray


def _node(
    pointer: object, where: str, parent_offset: int, parent_length: int, n_buffers: int, n_children: int, *,
    more_buffers: bool = False,
) -> _Node:  # fmt: skip
    if not pointer:
        raise InvalidTableError(f"{where}: the Arrow array is NULL")
    array: cdata.ArrowArray = pointer.contents  # type: ignore[attr-defined]
    if array.length < 0 or array.offset < 0:
        raise InvalidTableError(f"{where}: negative length ({array.length}) or offset ({array.offset})")
    if array.length < parent_offset + parent_length:
        raise InvalidTableError(
            f"{where}: {array.length} rows, shorter than its parent's {parent_offset + parent_length}"
            + (f" ({parent_length} from row {parent_offset})" if parent_offset else "")
        )
    offset = array.offset + parent_offset
    if offset + max(array.length, parent_length) > _MAX_EXTENT:
        raise InvalidTableError(f"{where}: offset {offset} and length {array.length} lie beyond any memory")
    if array.n_buffers != n_buffers and not (more_buffers and n_buffers < array.n_buffers <= _MAX_VARIADIC):
        wanted = f"at least {n_buffers}" if more_buffers else str(n_buffers)
        raise InvalidTableError(f"{where}: {array.n_buffers} buffers where its layout has {wanted}")
    if array.n_children != n_children:
        raise InvalidTableError(f"{where}: {array.n_children} children where its layout has {n_children}")
    if array.n_buffers and not array.buffers:
        raise InvalidTableError(f"{where}: the array's buffer list is NULL")
    if array.n_children and not array.children:
        raise InvalidTableError(f"{where}: the array's child list is NULL")
    buffers = tuple(array.buffers[i] or 0 for i in range(array.n_buffers))
    validity = buffers[0] if buffers else 0
    if not validity and array.null_count > 0:
        raise InvalidTableError(f"{where}: {array.null_count} nulls but no validity bitmap")
    return _Node(offset, validity, buffers, array)


def _check_offsets(node: _Node, address: int, start: int, rows: int, width: int, kernels: Kernels, where: str) -> None:
    if not rows:
        return
    if not address:
        raise InvalidTableError(f"{where}: the offsets buffer is NULL")
    bad = kernels.first_bad_offsets(address + (node.offset + start) * width, rows, width)
    if bad < 0:
        return
    at = node.offset + start + bad
    current = _read_int(address, at, width)
    if bad == 0:
        raise InvalidTableError(f"{where}: row {start} starts at a negative offset ({current})")
    previous = _read_int(address, at - 1, width)
    raise InvalidTableError(f"{where}: offsets go from {previous} to {current} at row {start + bad - 1}")


def _bind_values(
    pointer: object, kind: BytesType, where: str, parent_offset: int, parent_length: int, start: int, stop: int,
    kernels: Kernels,
) -> cdata.BytesArray:  # fmt: skip
    """Check a plain binary-like array's rows start..stop (relative to the parent's first row) and describe it."""
    layout = kind.layout
    node = _node(pointer, where, parent_offset, parent_length, 2 if layout == LAYOUT_FIXED else 3, 0,
                 more_buffers=layout == LAYOUT_VIEWS)  # fmt: skip
    values = cdata.BytesArray(offset=node.offset, length=parent_length, validity=node.validity, layout=layout)
    rows = stop - start
    if layout in (LAYOUT_OFFSETS32, LAYOUT_OFFSETS64):
        width = 4 if layout == LAYOUT_OFFSETS32 else 8
        offsets, data = node.buffers[1], node.buffers[2]
        _check_offsets(node, offsets, start, rows, width, kernels, where)
        if rows and not data:
            first = _read_int(offsets, node.offset + start, width)
            if _read_int(offsets, node.offset + stop, width) != first:
                raise InvalidTableError(f"{where}: the data buffer is NULL but its rows hold bytes")
        values.offsets, values.data = offsets or cdata.EMPTY_ADDRESS, data or cdata.EMPTY_ADDRESS
    elif layout == LAYOUT_VIEWS:
        views, sizes, variadic = node.buffers[1], node.buffers[-1], len(node.buffers) - 3
        if rows and not views:
            raise InvalidTableError(f"{where}: the views buffer is NULL")
        if variadic and not sizes:
            raise InvalidTableError(f"{where}: the buffer sizes of its {variadic} data buffers are NULL")
        for i in range(variadic):
            size = _read_int(sizes, i, 8)
            if size < 0 or (size and not node.buffers[2 + i]):
                raise InvalidTableError(f"{where}: data buffer {i} is {'NULL' if size >= 0 else 'of'} size {size}")
        buffer_list = cdata.address_of(node.array.buffers) + 2 * ctypes.sizeof(ctypes.c_void_p)
        if rows:
            first = node.offset + start
            bad = kernels.first_bad_view(views + first * 16, node.validity, first, rows, sizes, variadic)
            if bad >= 0:
                problem = _view_problem(views, first + bad, sizes, variadic)
                raise InvalidTableError(f"{where}: row {start + bad} {problem}")
        values.offsets, values.variadic = views or cdata.EMPTY_ADDRESS, buffer_list
    else:
        data = node.buffers[1]
        if (node.offset + parent_length) * kind.fixed_size > _MAX_EXTENT << 8:
            raise InvalidTableError(f"{where}: {node.offset + parent_length} rows of {kind.fixed_size} bytes")
        if rows and kind.fixed_size and not data:
            raise InvalidTableError(f"{where}: the data buffer is NULL")
        values.data, values.fixed_size = data or cdata.EMPTY_ADDRESS, kind.fixed_size
    return values


def _view_problem(views: int, index: int, sizes: int, variadic: int) -> str:
    length, _, buffer, offset = (_read_int(views + index * 16, i, 4) for i in range(4))
    if length < 0:
        return f"has a negative length ({length})"
    if not 0 <= buffer < variadic:
        return f"points into data buffer {buffer}, but the array has {variadic}"
    size = _read_int(sizes, buffer, 8)
    return f"points at bytes {offset}..{offset + length} of data buffer {buffer}, which holds {size}"


def _bind_bytes(
    pointer: object, kind: BytesType, where: str, parent_offset: int, parent_length: int, start: int, stop: int,
    kernels: Kernels,
) -> cdata.BytesColumn:  # fmt: skip
    if not kind.index_width:
        values = _bind_values(pointer, kind, where, parent_offset, parent_length, start, stop, kernels)
        return cdata.BytesColumn(values.offset, values.length, values.validity, None, 0, 0, values)
    node = _node(pointer, where, parent_offset, parent_length, 2, 0)
    indices, rows = node.buffers[1], stop - start
    if rows and not indices:
        raise InvalidTableError(f"{where}: the dictionary indices buffer is NULL")
    if not node.array.dictionary:
        raise InvalidTableError(f"{where}: a dictionary-encoded array without its dictionary")
    dictionary = node.array.dictionary.contents
    size = max(dictionary.length, 0)
    values = _bind_values(node.array.dictionary, kind, f"the dictionary of {where}", 0, size, 0, size, kernels)
    if rows:
        first, width = node.offset + start, kind.index_width
        bad = kernels.first_bad_index(
            indices + first * width, node.validity, first, rows, width, kind.index_signed, dictionary.length
        )
        if bad >= 0:
            index = _read_int(indices, first + bad, width, kind.index_signed)
            raise InvalidTableError(
                f"{where}: row {start + bad} has dictionary index {index}, outside the dictionary's {size} values"
            )
    column = cdata.BytesColumn(node.offset, parent_length, node.validity, indices or cdata.EMPTY_ADDRESS)
    column.index_width, column.index_signed, column.values = kind.index_width, int(kind.index_signed), values
    return column


def _bind_int(pointer: object, kind: IntType, where: str, parent_offset: int, length: int) -> cdata.IntColumn:
    node = _node(pointer, where, parent_offset, length, 2, 0)
    if length and not node.buffers[1]:
        raise InvalidTableError(f"{where}: the data buffer is NULL")
    data = node.buffers[1] or cdata.EMPTY_ADDRESS
    return cdata.IntColumn(node.offset, length, node.validity, data, kind.width, int(kind.signed), kind.multiplier,
                           kind.divisor)  # fmt: skip


def _bind_headers(
    pointer: object, kind: HeadersType, where: str, parent_offset: int, length: int, kernels: Kernels
) -> cdata.HeadersColumn:
    node = _node(pointer, where, parent_offset, length, 2, 1)
    offsets, width = node.buffers[1], kind.offset_width
    _check_offsets(node, offsets, 0, length, width, kernels, where)
    first = _read_int(offsets, node.offset, width) if length else 0
    last = _read_int(offsets, node.offset + length, width) if length else 0
    entries = _node(node.array.children[0], f"the entries of {where}", 0, 0, 1, 2)
    if last > entries.array.length:
        raise InvalidTableError(f"{where}: its offsets reach entry {last}, but it holds {entries.array.length}")
    e, size = entries.offset, entries.array.length
    children = entries.array.children
    keys_at, values_at = children[kind.key_position], children[kind.value_position]
    keys = _bind_bytes(keys_at, kind.key, f"the header keys of {where}", e, size, first, last, kernels)
    values = _bind_bytes(values_at, kind.value, f"the header values of {where}", e, size, first, last, kernels)
    return cdata.HeadersColumn(node.offset, length, node.validity, offsets or cdata.EMPTY_ADDRESS, width, 0, e,
                               entries.validity, keys, values)  # fmt: skip


def check_batch(top: cdata.ArrowArray, plan: TablePlan) -> tuple[int, int]:
    """Check a batch's top-level struct against the planned table; its (offset, number of rows)."""
    if not top.release:
        raise InvalidTableError("the Arrow batch was already released")
    if top.length < 0 or top.offset < 0 or top.offset + top.length > _MAX_EXTENT:
        raise InvalidTableError(f"the Arrow batch has length {top.length} and offset {top.offset}")
    if top.n_children != len(plan.names) or (top.n_children and not top.children):
        raise InvalidTableError(f"the Arrow batch has {top.n_children} columns, its schema {len(plan.names)}")
    if top.null_count > 0:
        raise InvalidTableError(f"{top.null_count} rows of the Arrow batch are null as a whole")
    return top.offset, top.length


def bind_column(
    top: cdata.ArrowArray, column: ColumnPlan, kernels: Kernels
) -> cdata.BytesColumn | cdata.IntColumn | cdata.HeadersColumn:
    """Check one planned column of a batch (after `check_batch`) and describe it for the accessors."""
    offset, length = top.offset, top.length
    pointer, where = top.children[column.position], f"the {column.role} column {column.name!r}"
    kind = column.type
    try:
        if isinstance(kind, BytesType):
            return _bind_bytes(pointer, kind, where, offset, length, 0, length, kernels)
        if isinstance(kind, IntType):
            return _bind_int(pointer, kind, where, offset, length)
        return _bind_headers(pointer, kind, where, offset, length, kernels)
    except InvalidTableError as exc:
        raise InvalidTableError(str(exc), column=column.name) from None


# -- per-row failures (raised by the Python-level accessors of both twins) -------------------------------------------
def row_error(column: str, row: int, length: int) -> IndexError:
    return IndexError(f"row {row} is outside column {column!r}, which has {length} rows")


def text_error(column: str, row: int) -> InvalidRecordError:
    return InvalidRecordError(f"column {column!r} row {row}: not valid UTF-8")


def header_key_error(column: str, row: int, index: int) -> InvalidRecordError:
    return InvalidRecordError(
        f"column {column!r} row {row}: header {index} has no valid key (a header is a struct with a non-null UTF-8 key)"
    )


def timestamp_error(column: str, row: int) -> InvalidRecordError:
    return InvalidRecordError(f"column {column!r} row {row}: the timestamp does not fit int64 milliseconds")
