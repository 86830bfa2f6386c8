"""Arrow C data built by hand, for hostile input and release accounting: an exporter whose structures are anything
a test writes (negative offsets, NULL buffers, lying lengths), whose release callbacks count their calls, and whose
stream can fail on demand.

The structures are declared here again from the Arrow C data interface specification, independently of
aioproducer.columnar.cdata, so that a mistake there is not repeated here.
"""

from __future__ import annotations

import ctypes
import itertools
import struct
from collections import Counter
from ctypes import POINTER, c_char_p, c_int, c_int64, c_void_p
from dataclasses import dataclass, field
from typing import Any


class Schema(ctypes.Structure):
    pass


class Array(ctypes.Structure):
    pass


class Stream(ctypes.Structure):
    pass


SchemaRelease = ctypes.CFUNCTYPE(None, POINTER(Schema))
ArrayRelease = ctypes.CFUNCTYPE(None, POINTER(Array))
Schema._fields_ = [
    ("format", c_char_p),
    ("name", c_char_p),
    ("metadata", c_char_p),
    ("flags", c_int64),
    ("n_children", c_int64),
    ("children", POINTER(POINTER(Schema))),
    ("dictionary", POINTER(Schema)),
    ("release", SchemaRelease),
    ("private_data", c_void_p),
]
Array._fields_ = [
    ("length", c_int64),
    ("null_count", c_int64),
    ("offset", c_int64),
    ("n_buffers", c_int64),
    ("n_children", c_int64),
    ("buffers", POINTER(c_void_p)),
    ("children", POINTER(POINTER(Array))),
    ("dictionary", POINTER(Array)),
    ("release", ArrayRelease),
    ("private_data", c_void_p),
]
GetSchema = ctypes.CFUNCTYPE(c_int, POINTER(Stream), POINTER(Schema))
GetNext = ctypes.CFUNCTYPE(c_int, POINTER(Stream), POINTER(Array))
GetLastError = ctypes.CFUNCTYPE(c_void_p, POINTER(Stream))
StreamRelease = ctypes.CFUNCTYPE(None, POINTER(Stream))
Stream._fields_ = [
    ("get_schema", GetSchema),
    ("get_next", GetNext),
    ("get_last_error", GetLastError),
    ("release", StreamRelease),
    ("private_data", c_void_p),
]

_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, c_void_p, c_char_p, c_void_p)(("PyCapsule_New", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(("PyCapsule_GetPointer", ctypes.pythonapi))


# -- buffers ----------------------------------------------------------------------------------------------------------
def i32(*values: int) -> bytes:
    return struct.pack(f"={len(values)}i", *values)


def i64(*values: int) -> bytes:
    return struct.pack(f"={len(values)}q", *values)


def u64(*values: int) -> bytes:
    return struct.pack(f"={len(values)}Q", *values)


def i8(*values: int) -> bytes:
    return struct.pack(f"={len(values)}b", *values)


def bits(*flags: bool | int) -> bytes:
    out = bytearray((len(flags) + 7) // 8 or 1)
    for i, flag in enumerate(flags):
        if flag:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def inline_view(data: bytes) -> bytes:
    assert len(data) <= 12
    return struct.pack("=i", len(data)) + data.ljust(12, b"\0")


def buffer_view(length: int, buffer: int, offset: int, prefix: bytes = b"\0\0\0\0") -> bytes:
    return struct.pack("=i4sii", length, prefix, buffer, offset)


def binary_buffers(values: list[bytes | None], width: int = 4) -> list[bytes | None]:
    """validity, offsets, data of a binary array holding `values`."""
    offsets, data = [0], b""
    for value in values:
        data += value or b""
        offsets.append(len(data))
    pack = i32 if width == 4 else i64
    validity = bits(*(v is not None for v in values)) if None in values else None
    return [validity, pack(*offsets), data]


# -- structures --------------------------------------------------------------------------------------------------------
@dataclass
class Node:
    """One array and its type. A buffer is bytes (kept alive here), None (NULL) or an int (a raw address)."""

    format: str
    length: int
    buffers: list[bytes | int | None] = field(default_factory=list)
    children: list[Node | None] = field(default_factory=list)  # None: a NULL child pointer (arrays only)
    dictionary: Node | None = None
    offset: int = 0
    null_count: int = 0
    name: str = ""
    n_buffers: int | None = None  # to lie about the counts
    n_children: int | None = None


class Ledger:
    """Every structure this exporter hands out, and how often each release callback ran."""

    def __init__(self) -> None:
        self.made: dict[int, str] = {}
        self.released: Counter[int] = Counter()
        self._ids = itertools.count(1)
        self._keep: list[Any] = []

    def new_id(self, what: str) -> int:
        ident = next(self._ids)
        self.made[ident] = what
        return ident

    def keep(self, *objects: Any) -> None:
        self._keep.extend(objects)

    def unreleased(self, *, children: bool = False) -> list[str]:
        """The structures whose release never ran: the base ones handed out (their children too, if asked)."""
        return [
            what for ident, what in self.made.items() if self.released[ident] == 0 and (children or "." not in what)
        ]

    def released_twice(self) -> list[str]:
        return [self.made[ident] for ident, count in self.released.items() if count > 1]

    def assert_clean(self) -> None:
        assert self.released_twice() == [], f"released more than once: {self.released_twice()}"
        assert self.unreleased(children=True) == [], f"never released: {self.unreleased(children=True)}"


def _address(ledger: Ledger, buffer: bytes | int | None) -> int | None:
    if buffer is None:
        return None
    if isinstance(buffer, int):
        return buffer
    block = ctypes.create_string_buffer(buffer, max(len(buffer), 1) + 64)  # aligned enough, and padded
    ledger.keep(block)
    return ctypes.addressof(block)


def build_schema(ledger: Ledger, node: Node, what: str = "schema") -> Schema:
    schema = Schema()
    fmt, name = ctypes.create_string_buffer(node.format.encode()), ctypes.create_string_buffer(node.name.encode())
    ledger.keep(fmt, name)
    schema.format, schema.name = ctypes.cast(fmt, c_char_p), ctypes.cast(name, c_char_p)
    schema.flags = 2
    children = [build_schema(ledger, child, f"{what}.{i}") for i, child in enumerate(node.children) if child]
    pointers = (POINTER(Schema) * max(len(children), 1))(*(ctypes.pointer(c) for c in children))
    ledger.keep(children, pointers)
    schema.n_children = len(children)
    schema.children = ctypes.cast(pointers, POINTER(POINTER(Schema))) if children else None
    if node.dictionary is not None:
        dictionary = build_schema(ledger, node.dictionary, f"{what}.dictionary")
        ledger.keep(dictionary)
        schema.dictionary = ctypes.pointer(dictionary)
    schema.private_data = ledger.new_id(what)
    schema.release = _schema_release(ledger)
    return schema


def build_array(ledger: Ledger, node: Node, what: str = "array") -> Array:
    array = Array(length=node.length, null_count=node.null_count, offset=node.offset)
    addresses = [_address(ledger, buffer) for buffer in node.buffers]
    table = (c_void_p * max(len(addresses), 1))(*addresses)
    ledger.keep(table)
    array.n_buffers = len(addresses) if node.n_buffers is None else node.n_buffers
    array.buffers = ctypes.cast(table, POINTER(c_void_p))
    children = [None if c is None else build_array(ledger, c, f"{what}.{i}") for i, c in enumerate(node.children)]
    targets = [POINTER(Array)() if child is None else ctypes.pointer(child) for child in children]
    pointers = (POINTER(Array) * max(len(children), 1))(*targets)
    ledger.keep(children, pointers)
    array.n_children = len(children) if node.n_children is None else node.n_children
    array.children = ctypes.cast(pointers, POINTER(POINTER(Array))) if children else None
    if node.dictionary is not None:
        dictionary = build_array(ledger, node.dictionary, f"{what}.dictionary")
        ledger.keep(dictionary)
        array.dictionary = ctypes.pointer(dictionary)
    array.private_data = ledger.new_id(what)
    array.release = _array_release(ledger, len(children))
    return array


def _schema_release(ledger: Ledger) -> Any:
    @SchemaRelease
    def release(schema: Any) -> None:
        s = schema.contents
        ledger.released[s.private_data] += 1
        for i in range(s.n_children):  # the producer releases its children (the consumer must not)
            child = s.children[i].contents
            if child.release:
                child.release(s.children[i])
        if s.dictionary and s.dictionary.contents.release:
            s.dictionary.contents.release(s.dictionary)
        s.release = SchemaRelease()

    ledger.keep(release)
    return release


def _array_release(ledger: Ledger, n_children: int) -> Any:
    @ArrayRelease
    def release(array: Any) -> None:
        a = array.contents
        ledger.released[a.private_data] += 1
        for i in range(n_children):  # the real ones, whatever n_children claims
            if a.children[i] and a.children[i].contents.release:
                a.children[i].contents.release(a.children[i])
        if a.dictionary and a.dictionary.contents.release:
            a.dictionary.contents.release(a.dictionary)
        a.release = ArrayRelease()

    ledger.keep(release)
    return release


def _capsule(ledger: Ledger, struct_obj: ctypes.Structure, name: bytes, struct_type: type) -> object:
    @ctypes.CFUNCTYPE(None, c_void_p)
    def destroy(capsule: int) -> None:
        inside = struct_type.from_address(_capsule_pointer(capsule, name))
        if inside.release:  # never consumed: the capsule releases it, as real exporters' capsules do
            inside.release(ctypes.pointer(inside))

    ledger.keep(destroy, struct_obj)
    return _capsule_new(ctypes.addressof(struct_obj), name, ctypes.cast(destroy, c_void_p).value)


# -- exporters ---------------------------------------------------------------------------------------------------------
def table(columns: dict[str, Node | None], length: int, **options: Any) -> Node:
    """A record batch: the top-level struct of `columns`, their nodes renamed to their keys."""
    for name, column in columns.items():
        if column is not None:
            column.name = name
    return Node("+s", length, [None], list(columns.values()), **options)


class HandStream:
    """An exporter speaking `__arrow_c_stream__`: one schema, the given batches, then the end of the stream; or a
    failure with a message at batch `fail_at` (or at the schema, `fail_schema`)."""

    def __init__(
        self,
        schema: Node,
        batches: list[Node],
        *,
        fail_at: int | None = None,
        fail_schema: bool = False,
        message: bytes = b"the exporter broke",
        code: int = 5,  # EIO
    ) -> None:
        self.ledger = Ledger()
        self.schema, self.batches = schema, batches
        self.fail_at, self.fail_schema, self.message, self.code = fail_at, fail_schema, message, code
        self.next_calls = 0

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        ledger = self.ledger
        stream = Stream()
        message = ctypes.create_string_buffer(self.message)
        pending = iter(self.batches)

        @GetSchema
        def get_schema(_stream: Any, out: Any) -> int:
            if self.fail_schema:
                return self.code
            built = build_schema(ledger, self.schema)
            ctypes.memmove(out, ctypes.addressof(built), ctypes.sizeof(Schema))
            return 0

        @GetNext
        def get_next(_stream: Any, out: Any) -> int:
            index = self.next_calls
            self.next_calls += 1
            if index == self.fail_at:
                return self.code
            node = next(pending, None)
            if node is None:
                out.contents.release = ArrayRelease()
                return 0
            built = build_array(ledger, node, f"batch{index}")
            ctypes.memmove(out, ctypes.addressof(built), ctypes.sizeof(Array))
            return 0

        @GetLastError
        def get_last_error(_stream: Any) -> int:
            return ctypes.addressof(message)

        @StreamRelease
        def release(s: Any) -> None:
            ledger.released[s.contents.private_data] += 1
            s.contents.release = StreamRelease()

        ledger.keep(get_schema, get_next, get_last_error, release, message)
        stream.get_schema, stream.get_next, stream.get_last_error, stream.release = (
            get_schema,
            get_next,
            get_last_error,
            release,
        )
        stream.private_data = ledger.new_id("stream")
        return _capsule(ledger, stream, b"arrow_array_stream", Stream)


class HandArray:
    """An exporter speaking `__arrow_c_array__`: one schema and one array."""

    def __init__(self, schema: Node, array: Node) -> None:
        self.ledger = Ledger()
        self.schema, self.array = schema, array

    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]:
        schema = build_schema(self.ledger, self.schema)
        array = build_array(self.ledger, self.array)
        return _capsule(self.ledger, schema, b"arrow_schema", Schema), _capsule(
            self.ledger, array, b"arrow_array", Array
        )
