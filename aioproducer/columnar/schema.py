"""Which Arrow types each column of the producer accepts, checked once from a table's schema before any batch is
read: the type half of the columnar input's rules (the buffer half is `layout`).

key, value: binary or string in any layout (binary, large_binary, binary_view, utf8, large_utf8, utf8_view,
fixed_size_binary), or a dictionary of these with any integer indices. topic: a string kind, or a dictionary of
strings. partition: int8 to int64 or uint8 to uint32. timestamp: int64 epoch milliseconds, an Arrow timestamp of any
unit (with or without time zone) or date64. headers: a list or large list of struct<key: string kind, value: bytes
kind> (fields found by name), or a map of string kind to bytes kind (by position). Extension types read as their
storage type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aioproducer.columnar import cdata
from aioproducer.errors import InvalidTableError

__all__ = [
    "BYTES_ROLES",
    "LAYOUT_FIXED",
    "LAYOUT_OFFSETS32",
    "LAYOUT_OFFSETS64",
    "LAYOUT_VIEWS",
    "ROLES",
    "BytesType",
    "ColumnPlan",
    "Field",
    "HeadersType",
    "IntType",
    "TablePlan",
    "plan_table",
]

LAYOUT_OFFSETS32 = 1  # binary, utf8
LAYOUT_OFFSETS64 = 2  # large_binary, large_utf8
LAYOUT_VIEWS = 3  # binary_view, utf8_view
LAYOUT_FIXED = 4  # fixed_size_binary

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


def _bytes_type(field: Field, where: str, *, text: bool, are: bool = False) -> BytesType:
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
    verb, must = ("are", "they must") if are else ("is", "it must")
    raise InvalidTableError(f"{where} {verb} {_type_name(field)}; {must} be {kinds}{_OR_DICTIONARY}")


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
    key = _bytes_type(entries.children[key_position], f"the header keys of {where}", text=True, are=True)
    value = _bytes_type(entries.children[value_position], f"the header values of {where}", text=False, are=True)
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
