"""Int64 results handed back as Arrow (per-row offsets, failed-row indices): the pure-Python twin of
`_arrow.Int64Array`, its C structures built with ctypes.

`pyarrow.array(result)`, `polars.Series(result)` and any other consumer of the PyCapsule interface import it without
a copy: the exported array points at our buffers, and the release callback the consumer calls when done lets them
go. The values never change once built.
"""

from __future__ import annotations

import array
import ctypes
import itertools
from collections.abc import Iterable
from ctypes import c_char_p, c_void_p
from typing import Any

from aioproducer.columnar import cdata

__all__ = ["PureInt64Array"]

_SCHEMA_CAPSULE = b"arrow_schema"
_ARRAY_CAPSULE = b"arrow_array"
_FORMAT = ctypes.create_string_buffer(b"l")  # int64
_NULLABLE = 2  # ARROW_FLAG_NULLABLE

# What an exported structure needs until its release callback runs, by the key in its private_data. The consumer may
# move the structure anywhere (the C data interface allows it), so the key, not the address, finds it again.
_exported: dict[int, Any] = {}
# The structures a capsule holds until the capsule dies (a consumer that moves them out leaves a released husk).
_in_capsules: dict[int, Any] = {}
_keys = itertools.count(1)

_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, c_void_p, c_char_p, c_void_p)(("PyCapsule_New", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(("PyCapsule_GetPointer", ctypes.pythonapi))


@cdata.SchemaRelease  # type: ignore[untyped-decorator]
def _release_schema(schema: Any) -> None:
    _exported.pop(schema.contents.private_data or 0, None)
    schema.contents.release = cdata.SchemaRelease()


@cdata.ArrayRelease  # type: ignore[untyped-decorator]
def _release_array(exported: Any) -> None:
    _exported.pop(exported.contents.private_data or 0, None)
    exported.contents.release = cdata.ArrayRelease()


def _capsule_destructor(name: bytes, struct_type: type[cdata.ArrowSchema | cdata.ArrowArray]) -> Any:
    @ctypes.CFUNCTYPE(None, c_void_p)  # type: ignore[untyped-decorator]
    def destroy(capsule: int) -> None:
        address = _capsule_pointer(capsule, name)
        struct = _in_capsules.pop(address, None)
        if struct is not None:
            cdata.release(struct)  # never handed to a consumer: the capsule releases it

    return destroy


_destroy_schema_capsule = _capsule_destructor(_SCHEMA_CAPSULE, cdata.ArrowSchema)
_destroy_array_capsule = _capsule_destructor(_ARRAY_CAPSULE, cdata.ArrowArray)


def _capsule(struct: cdata.ArrowSchema | cdata.ArrowArray, name: bytes, destructor: Any) -> object:
    address = ctypes.addressof(struct)
    _in_capsules[address] = struct
    return _capsule_new(address, name, ctypes.cast(destructor, c_void_p).value)


class PureInt64Array:
    """An int64 Arrow array built from Python ints (None for null), exported zero-copy."""

    __slots__ = ("_name", "_null_count", "_validity", "_values")

    def __init__(self, values: Iterable[int | None] = (), *, name: str = "") -> None:
        items = list(values)
        self._name = name
        self._values = array.array("q", (0 if item is None else item for item in items))
        self._null_count = sum(item is None for item in items)
        self._validity: bytearray | None = None
        if self._null_count:
            bits = bytearray((len(items) + 7) // 8)
            for row, item in enumerate(items):
                if item is not None:
                    bits[row >> 3] |= 1 << (row & 7)
            self._validity = bits

    @property
    def name(self) -> str:
        return self._name

    @property
    def null_count(self) -> int:
        return self._null_count

    def __len__(self) -> int:
        return len(self._values)

    def to_pylist(self) -> list[int | None]:
        bits = self._validity
        if bits is None:
            return list(self._values)
        return [value if bits[row >> 3] >> (row & 7) & 1 else None for row, value in enumerate(self._values)]

    def __repr__(self) -> str:
        return f"Int64Array({self.to_pylist()!r}, name={self._name!r})"

    def _schema(self) -> cdata.ArrowSchema:
        key = next(_keys)
        name = ctypes.create_string_buffer(self._name.encode())
        _exported[key] = name
        schema = cdata.ArrowSchema(format=ctypes.cast(_FORMAT, c_char_p), name=ctypes.cast(name, c_char_p))
        schema.flags, schema.release, schema.private_data = _NULLABLE, _release_schema, key
        return schema

    def __arrow_c_schema__(self) -> object:
        return _capsule(self._schema(), _SCHEMA_CAPSULE, _destroy_schema_capsule)

    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]:
        """The schema and the array as PyCapsules; `requested_schema` is ignored (int64 is the one type we have)."""
        key = next(_keys)
        buffers = (c_void_p * 2)(self._address(self._validity), self._address(self._values))
        _exported[key] = (self, buffers)
        exported = cdata.ArrowArray(length=len(self._values), null_count=self._null_count, offset=0, n_buffers=2)
        exported.buffers = ctypes.cast(buffers, ctypes.POINTER(c_void_p))
        exported.release, exported.private_data = _release_array, key
        schema = self.__arrow_c_schema__()
        return schema, _capsule(exported, _ARRAY_CAPSULE, _destroy_array_capsule)

    @staticmethod
    def _address(buffer: bytearray | array.array[int] | None) -> int | None:
        """Where a buffer's bytes are (None for an empty one). Neither buffer is ever resized, so it stays put."""
        if buffer is None or not len(buffer):
            return None
        if isinstance(buffer, array.array):
            return buffer.buffer_info()[0]
        return ctypes.addressof(ctypes.c_char.from_buffer(buffer))
