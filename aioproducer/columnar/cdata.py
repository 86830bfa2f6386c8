"""The C structures of the columnar input, as ctypes: Arrow's C data and C stream interfaces, moving them out of
their PyCapsules, calling their producer's callbacks; and the column structs both twins read rows from.

ABI only: no rule about what the data may be lives here (that is `layout`). The column structs mirror the `cdef
struct`s of `_arrow.pxd` field for field (a test compares the two layouts): the compiled twin copies them bit for
bit, the pure one reads through them.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_int, c_int32, c_int64, c_void_p
from typing import Any, TypeVar

__all__ = [
    "ArrowArray",
    "ArrowArrayStream",
    "ArrowSchema",
    "BytesArray",
    "BytesColumn",
    "CapsuleError",
    "HeadersColumn",
    "IntColumn",
    "address_of",
    "is_capsule",
    "integers",
    "memory",
    "move_from_capsule",
    "release",
]


class ArrowSchema(ctypes.Structure):
    """`struct ArrowSchema` of the Arrow C data interface."""


class ArrowArray(ctypes.Structure):
    """`struct ArrowArray` of the Arrow C data interface."""


class ArrowArrayStream(ctypes.Structure):
    """`struct ArrowArrayStream` of the Arrow C stream interface."""


# CFUNCTYPE (not PYFUNCTYPE): ctypes lets go of the GIL around the call, so a producer whose callback takes the GIL
# itself, or waits for threads that need it (a DuckDB query scanning a pandas frame), cannot deadlock on us.
SchemaRelease = ctypes.CFUNCTYPE(None, POINTER(ArrowSchema))
ArrayRelease = ctypes.CFUNCTYPE(None, POINTER(ArrowArray))
StreamGetSchema = ctypes.CFUNCTYPE(c_int, POINTER(ArrowArrayStream), POINTER(ArrowSchema))
StreamGetNext = ctypes.CFUNCTYPE(c_int, POINTER(ArrowArrayStream), POINTER(ArrowArray))
StreamGetLastError = ctypes.CFUNCTYPE(c_void_p, POINTER(ArrowArrayStream))
StreamRelease = ctypes.CFUNCTYPE(None, POINTER(ArrowArrayStream))

ArrowSchema._fields_ = [
    ("format", c_char_p),
    ("name", c_char_p),
    ("metadata", c_void_p),
    ("flags", c_int64),
    ("n_children", c_int64),
    ("children", POINTER(POINTER(ArrowSchema))),
    ("dictionary", POINTER(ArrowSchema)),
    ("release", SchemaRelease),
    ("private_data", c_void_p),
]
ArrowArray._fields_ = [
    ("length", c_int64),
    ("null_count", c_int64),
    ("offset", c_int64),
    ("n_buffers", c_int64),
    ("n_children", c_int64),
    ("buffers", POINTER(c_void_p)),
    ("children", POINTER(POINTER(ArrowArray))),
    ("dictionary", POINTER(ArrowArray)),
    ("release", ArrayRelease),
    ("private_data", c_void_p),
]
ArrowArrayStream._fields_ = [
    ("get_schema", StreamGetSchema),
    ("get_next", StreamGetNext),
    ("get_last_error", StreamGetLastError),
    ("release", StreamRelease),
    ("private_data", c_void_p),
]

ArrowStruct = ArrowSchema | ArrowArray | ArrowArrayStream
Struct = TypeVar("Struct", ArrowSchema, ArrowArray, ArrowArrayStream)


# -- the column structs (mirrors of _arrow.pxd) ------------------------------------------------------------------
class BytesArray(ctypes.Structure):
    """One plain binary-like array: a column's values, or a dictionary's. Offsets are effective (the array's own
    offset plus its parents'); `data` is never NULL (an array whose rows hold no byte points at an empty buffer)."""

    _fields_ = [
        ("offset", c_int64),
        ("length", c_int64),
        ("validity", c_void_p),  # NULL: no nulls
        ("offsets", c_void_p),  # int32 / int64 offsets, or the 16-byte views
        ("data", c_void_p),  # the data buffer (offsets, fixed-size layouts)
        ("variadic", c_void_p),  # `const uint8_t* const*`: the views' data buffers
        ("layout", c_int32),  # schema.LAYOUT_*
        ("fixed_size", c_int32),
    ]


class BytesColumn(ctypes.Structure):
    """A bytes column: its values directly, or dictionary indices into them (`indices` not NULL)."""

    _fields_ = [
        ("offset", c_int64),
        ("length", c_int64),
        ("validity", c_void_p),
        ("indices", c_void_p),
        ("index_width", c_int32),  # 0: not dictionary-encoded; else 1, 2, 4 or 8 bytes
        ("index_signed", c_int32),
        ("values", BytesArray),
    ]


class IntColumn(ctypes.Structure):
    """An integer column; timestamps carry their conversion to milliseconds (value * multiplier // divisor)."""

    _fields_ = [
        ("offset", c_int64),
        ("length", c_int64),
        ("validity", c_void_p),
        ("data", c_void_p),
        ("width", c_int32),
        ("is_signed", c_int32),
        ("multiplier", c_int64),
        ("divisor", c_int64),
    ]


class HeadersColumn(ctypes.Structure):
    """A list (or map) of key/value structs. `entries_offset` locates entry k's validity bit; the key and value
    columns already include it in their own offsets."""

    _fields_ = [
        ("offset", c_int64),
        ("length", c_int64),
        ("validity", c_void_p),
        ("offsets", c_void_p),
        ("offset_width", c_int32),
        ("reserved", c_int32),
        ("entries_offset", c_int64),
        ("entries_validity", c_void_p),
        ("keys", BytesColumn),
        ("values", BytesColumn),
    ]


# -- capsules ----------------------------------------------------------------------------------------------------
class CapsuleError(ValueError):
    """An object is not the capsule it should be, or its structure was already consumed."""


_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.argtypes = [ctypes.py_object, c_char_p]
_capsule_is_valid.restype = c_int
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes = [ctypes.py_object, c_char_p]
_capsule_pointer.restype = c_void_p


def is_capsule(obj: object) -> bool:
    return type(obj).__name__ == "PyCapsule"


def move_from_capsule(capsule: object, name: bytes, struct_type: type[Struct]) -> Struct:
    """Move the structure out of an exporter's capsule (the PyCapsule interface's hand-over): copy it into memory
    we own and mark the capsule's copy released, so the capsule's destructor leaves it alone and its release
    callback is ours to call, exactly once."""
    if not is_capsule(capsule) or not _capsule_is_valid(capsule, name):
        raise CapsuleError(f"expected a PyCapsule named {name.decode()!r}, got {type(capsule).__name__}")
    address = _capsule_pointer(capsule, name)
    source = struct_type.from_address(address)
    if not source.release:
        raise CapsuleError(f"the {name.decode()!r} capsule was already consumed (its release callback is NULL)")
    owned = struct_type()
    ctypes.memmove(ctypes.addressof(owned), address, ctypes.sizeof(struct_type))
    c_void_p.from_address(address + struct_type.release.offset).value = None
    return owned


def release(struct: ArrowStruct) -> None:
    """Call a structure's release callback if it is still set, then clear it ourselves: even a producer that forgets
    to mark its structure released is never called twice."""
    callback = struct.release
    if callback:
        callback(ctypes.byref(struct))
        c_void_p.from_address(ctypes.addressof(struct) + type(struct).release.offset).value = None


def address_of(pointer: object) -> int:
    """The address a ctypes pointer (or c_void_p) holds; 0 for NULL."""
    return ctypes.cast(pointer, c_void_p).value or 0  # type: ignore[arg-type]


_EMPTY = ctypes.create_string_buffer(1)
EMPTY_ADDRESS = ctypes.addressof(_EMPTY)  # where a buffer that holds no byte points, instead of NULL


def memory(address: int, size: int) -> memoryview:
    """A read-only byte view of `size` bytes at `address` (an empty view for 0 bytes, whatever the address)."""
    if size <= 0:
        return memoryview(b"")
    return memoryview((ctypes.c_char * size).from_address(address)).cast("B").toreadonly()


def integers(address: int, count: int, fmt: str) -> memoryview:
    """A read-only view of `count` native integers of struct format `fmt` (b, B, h, H, i, I, q, Q) at `address`."""
    view: Any = memory(address, count * ctypes.sizeof(_INTEGER_TYPES[fmt]))
    return view.cast(fmt)  # type: ignore[no-any-return]


_INTEGER_TYPES = {"b": ctypes.c_int8, "B": ctypes.c_uint8, "h": ctypes.c_int16, "H": ctypes.c_uint16}
_INTEGER_TYPES.update({"i": ctypes.c_int32, "I": ctypes.c_uint32, "q": ctypes.c_int64, "Q": ctypes.c_uint64})
