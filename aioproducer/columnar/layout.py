"""The rules of the columnar input: which Arrow types each producer column accepts, and the checks that make a
batch safe to read. Their one home: this module checks a column and fills its struct (`cdata`), then either twin
of `aioproducer.columnar.arrow` reads rows from that struct. The compiled twin only runs the per-buffer scans
(`Kernels`) faster; it holds no rule of its own.

Checked before any row of a batch is read (a failure raises `InvalidTableError` naming the column):
- the type of each selected column, once, from the schema (before the first batch);
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
means "now"; a null headers list means no headers. A validity bitmap counts only when null_count is not 0.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import InvalidRecordError, InvalidTableError
from . import cdata

__all__ = [
    "BYTES_ROLES",
    "LAYOUT_FIXED",
    "LAYOUT_OFFSETS32",
    "LAYOUT_OFFSETS64",
    "LAYOUT_VIEWS",
    "ROLES",
    "BytesType",
    "ColumnPlan",
    "HeadersType",
    "IntType",
    "Kernels",
    "TablePlan",
    "bind_column",
    "check_batch",
    "header_key_error",
    "plan_table",
    "row_error",
    "text_error",
    "timestamp_error",
]

LAYOUT_OFFSETS32 = 1  # binary, utf8
LAYOUT_OFFSETS64 = 2  # large_binary, large_utf8
LAYOUT_VIEWS = 3  # binary_view, utf8_view
LAYOUT_FIXED = 4  # fixed_size_binary

# Rows (offset + length) beyond this cannot describe memory (2^48 rows of even 1 bit exceed any address space), and
# staying below it keeps the accessors' int64 index and byte arithmetic from overflowing.
_MAX_EXTENT = 1 << 48
_MAX_DEPTH = 8  # the deepest type a producer column uses is list<struct<key, value: dictionary>>

_PLAIN_BYTES = {"z": LAYOUT_OFFSETS32, "u": LAYOUT_OFFSETS32, "Z": LAYOUT_OFFSETS64, "U": LAYOUT_OFFSETS64}
_PLAIN_BYTES.update({"vz": LAYOUT_VIEWS, "vu": LAYOUT_VIEWS})
_TEXT = frozenset({"u", "U", "vu"})
_INTEGERS = {"c": (1, True), "C": (1, False), "s": (2, True), "S": (2, False), "i": (4, True), "I": (4, False)}
_INTEGERS.update({"l": (8, True), "L": (8, False)})
_PARTITION_FORMATS = frozenset("csilCSI")  # uint64 could hold values no partition number reaches
# Arrow timestamp units → (multiplier, divisor) to epoch milliseconds; the time zone after ':' does not matter.
_TIMESTAMP_UNITS = {"tss:": (1000, 1), "tsm:": (1, 1), "tsu:": (1, 1000), "tsn:": (1, 1_000_000)}
_FORMAT_NAMES = {
    "z": "binary", "Z": "large_binary", "vz": "binary_view", "u": "utf8", "U": "large_utf8", "vu": "utf8_view",
    "c": "int8", "C": "uint8", "s": "int16", "S": "uint16", "i": "int32", "I": "uint32", "l": "int64", "L": "uint64",
    "n": "null", "b": "bool", "e": "float16", "f": "float32", "g": "float64", "tdD": "date32", "tdm": "date64",
    "+s": "struct", "+l": "list", "+L": "large_list", "+m": "map", "+vl": "list_view", "+vL": "large_list_view",
}  # fmt: skip
_BYTES_KINDS = "binary or string (binary, large_binary, binary_view, utf8, large_utf8, utf8_view, fixed_size_binary)"
_TEXT_KINDS = "a string (utf8, large_utf8 or utf8_view)"
_OR_DICTIONARY = ", or a dictionary of these"

ROLES = ("key", "value", "topic", "partition", "timestamp", "headers")
BYTES_ROLES = frozenset({"key", "value"})


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


# -- types ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    """One node of an Arrow schema, read out of the C structure (which we release right after)."""

    name: str
    format: str
    children: tuple[Field, ...]
    dictionary: Field | None


@dataclass(frozen=True)
class BytesType:
    layout: int
    fixed_size: int = 0
    index_width: int = 0  # 0: not dictionary-encoded
    index_signed: bool = False


@dataclass(frozen=True)
class IntType:
    width: int
    signed: bool
    multiplier: int = 1
    divisor: int = 1


@dataclass(frozen=True)
class HeadersType:
    offset_width: int
    key_position: int
    value_position: int
    key: BytesType
    value: BytesType


@dataclass(frozen=True)
class ColumnPlan:
    role: str
    name: str
    position: int  # among the table's columns
    type: BytesType | IntType | HeadersType


@dataclass(frozen=True)
class TablePlan:
    names: tuple[str, ...]
    columns: tuple[ColumnPlan, ...]


def _describe(fmt: str) -> str:
    if fmt.startswith("w:"):
        return f"fixed_size_binary({fmt[2:]})"
    if fmt[:3] in ("tss", "tsm", "tsu", "tsn"):
        return f"timestamp[{fmt[2]}]" + (f" with time zone {fmt[4:]}" if len(fmt) > 4 else "")
    return _FORMAT_NAMES.get(fmt, f"format {fmt!r}")


def _type_name(field: Field) -> str:
    if field.dictionary is not None:
        return f"dictionary<{_describe(field.format)} indices, {_type_name(field.dictionary)} values>"
    return _describe(field.format)


def _read_field(schema: cdata.ArrowSchema, where: str, depth: int) -> Field:
    if depth > _MAX_DEPTH:
        raise InvalidTableError(f"{where}: the Arrow schema nests deeper than any producer column can")
    if not schema.format:
        raise InvalidTableError(f"{where}: the Arrow schema has no format string")
    fmt = schema.format.decode("utf-8", "replace")
    name = (schema.name or b"").decode("utf-8", "replace")
    if schema.n_children < 0 or (schema.n_children and not schema.children):
        raise InvalidTableError(f"{where}: the Arrow schema declares {schema.n_children} children but gives none")
    children = []
    for i in range(schema.n_children):
        if not schema.children[i]:
            raise InvalidTableError(f"{where}: child {i} of the Arrow schema is NULL")
        children.append(_read_field(schema.children[i].contents, where, depth + 1))
    dictionary = _read_field(schema.dictionary.contents, where, depth + 1) if schema.dictionary else None
    return Field(name, fmt, tuple(children), dictionary)


def _bytes_type(field: Field, where: str, *, text: bool) -> BytesType:
    index_width, index_signed = 0, False
    values = field
    if field.dictionary is not None:
        if field.format not in _INTEGERS:
            raise InvalidTableError(f"{where} has dictionary indices of type {_describe(field.format)}")
        index_width, index_signed = _INTEGERS[field.format]
        values = field.dictionary
    fmt = values.format
    kinds = _TEXT_KINDS if text else _BYTES_KINDS
    if values.dictionary is None and text and fmt in _TEXT:
        return BytesType(_PLAIN_BYTES[fmt], 0, index_width, index_signed)
    if values.dictionary is None and not text:
        if fmt in _PLAIN_BYTES:
            return BytesType(_PLAIN_BYTES[fmt], 0, index_width, index_signed)
        if fmt.startswith("w:") and fmt[2:].isdigit() and int(fmt[2:]) < 1 << 31:
            return BytesType(LAYOUT_FIXED, int(fmt[2:]), index_width, index_signed)
    raise InvalidTableError(f"{where} is {_type_name(field)}; it must be {kinds}{_OR_DICTIONARY}")


def _column_type(role: str, field: Field, where: str) -> BytesType | IntType | HeadersType:
    if role in BYTES_ROLES:
        return _bytes_type(field, where, text=False)
    if role == "topic":
        return _bytes_type(field, where, text=True)
    if role == "partition":
        if field.dictionary is None and field.format in _PARTITION_FORMATS:
            return IntType(*_INTEGERS[field.format])
        raise InvalidTableError(
            f"{where} is {_type_name(field)}; it must be an integer (int8 to int64, uint8 to uint32)"
        )
    if role == "timestamp":
        if field.dictionary is None and field.format in ("l", "tdm"):
            return IntType(8, True)
        if field.dictionary is None and field.format[:4] in _TIMESTAMP_UNITS:
            return IntType(8, True, *_TIMESTAMP_UNITS[field.format[:4]])
        raise InvalidTableError(
            f"{where} is {_type_name(field)}; it must be int64 milliseconds since the epoch, an Arrow timestamp "
            "(any unit, with or without time zone) or date64"
        )
    return _headers_type(field, where)


def _headers_type(field: Field, where: str) -> HeadersType:
    expected = "a list of struct<key: string, value: binary or string>, or a map of string to binary or string"
    if field.dictionary is not None or field.format not in ("+l", "+L", "+m") or len(field.children) != 1:
        raise InvalidTableError(f"{where} is {_type_name(field)}; it must be {expected}")
    entries = field.children[0]
    if entries.format != "+s" or entries.dictionary is not None or len(entries.children) != 2:
        raise InvalidTableError(f"{where} holds {_type_name(entries)} entries; it must be {expected}")
    if field.format == "+m":
        key_position, value_position = 0, 1  # a map's entries are (key, value) by position, whatever their names
    else:
        names = [child.name for child in entries.children]
        if sorted(names) != ["key", "value"]:
            raise InvalidTableError(f"{where} holds structs with fields {names}; header structs need 'key' and 'value'")
        key_position, value_position = names.index("key"), names.index("value")
    key = _bytes_type(entries.children[key_position], f"{where}'s header keys", text=True)
    value = _bytes_type(entries.children[value_position], f"{where}'s header values", text=False)
    return HeadersType(8 if field.format == "+L" else 4, key_position, value_position, key, value)


def plan_table(schema: cdata.ArrowSchema, roles: Mapping[str, str | None]) -> TablePlan:
    """Check the schema of a table (a struct of columns) against the columns the producer was told to read: each
    named column must exist once and have a type its role accepts."""
    if not schema.format:
        raise InvalidTableError("the Arrow schema has no format string")
    fmt = schema.format.decode("utf-8", "replace")
    if fmt != "+s" or schema.dictionary:
        raise InvalidTableError(f"the data is an Arrow {_describe(fmt)}, not a table (a struct of columns)")
    if schema.n_children < 0 or (schema.n_children and not schema.children):
        raise InvalidTableError(f"the Arrow schema declares {schema.n_children} columns but gives none")
    names = []
    for i in range(schema.n_children):
        if not schema.children[i]:
            raise InvalidTableError(f"the Arrow schema of column {i} is NULL")
        names.append((schema.children[i].contents.name or b"").decode("utf-8", "replace"))
    columns = []
    for role in ROLES:
        name = roles.get(role)
        if name is None:
            continue
        positions = [i for i, candidate in enumerate(names) if candidate == name]
        if not positions:
            raise InvalidTableError(f"the table has no column {name!r} (its columns: {names})", column=name)
        if len(positions) > 1:
            raise InvalidTableError(f"the table has {len(positions)} columns named {name!r}", column=name)
        where = f"the {role} column {name!r}"
        try:
            field = _read_field(schema.children[positions[0]].contents, where, 0)
            column_type = _column_type(role, field, where)
        except InvalidTableError as exc:
            raise InvalidTableError(str(exc), column=name) from None
        columns.append(ColumnPlan(role, name, positions[0], column_type))
    return TablePlan(tuple(names), tuple(columns))


# -- buffers --------------------------------------------------------------------------------------------------------
_READERS = {(1, True): ctypes.c_int8, (1, False): ctypes.c_uint8, (2, True): ctypes.c_int16}
_READERS.update({(2, False): ctypes.c_uint16, (4, True): ctypes.c_int32, (4, False): ctypes.c_uint32})
_READERS.update({(8, True): ctypes.c_int64, (8, False): ctypes.c_uint64})


def _read_int(address: int, index: int, width: int, signed: bool = True) -> int:
    return int(_READERS[(width, signed)].from_address(address + index * width).value)


class _Node(NamedTuple):
    """One array's place: where its rows start in its buffers (its offset plus its parents'), its validity bitmap
    (0 when it counts no null) and its buffer addresses (0 for NULL)."""

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
    if array.n_buffers != n_buffers and not (more_buffers and array.n_buffers > n_buffers):
        wanted = f"at least {n_buffers}" if more_buffers else str(n_buffers)
        raise InvalidTableError(f"{where}: {array.n_buffers} buffers where its layout has {wanted}")
    if array.n_children != n_children:
        raise InvalidTableError(f"{where}: {array.n_children} children where its layout has {n_children}")
    if array.n_buffers and not array.buffers:
        raise InvalidTableError(f"{where}: the array's buffer list is NULL")
    if array.n_children and not array.children:
        raise InvalidTableError(f"{where}: the array's child list is NULL")
    buffers = tuple(array.buffers[i] or 0 for i in range(array.n_buffers))
    validity = buffers[0] if buffers and array.null_count != 0 else 0
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
    values = _bind_values(node.array.dictionary, kind, f"{where}'s dictionary", 0, size, 0, size, kernels)
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
    entries = _node(node.array.children[0], f"{where}'s entries", 0, 0, 1, 2)
    if last > entries.array.length:
        raise InvalidTableError(f"{where}: its offsets reach entry {last}, but it holds {entries.array.length}")
    e, size = entries.offset, entries.array.length
    children = entries.array.children
    keys = _bind_bytes(children[kind.key_position], kind.key, f"{where}'s header keys", e, size, first, last, kernels)
    values = _bind_bytes(
        children[kind.value_position], kind.value, f"{where}'s header values", e, size, first, last, kernels
    )
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
