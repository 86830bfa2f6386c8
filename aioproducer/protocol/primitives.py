"""Kafka's wire primitives: fixed-width integers, (zigzag) varints, strings, bytes, UUIDs, and a bounds-checked Reader.

Owns byte-level encoding only; knows nothing of messages, sockets or the clock. Decoding never trusts a length.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from aioproducer.errors import ProtocolError

__all__ = [
    "BOOLEAN",
    "FLOAT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT16",
    "UINT32",
    "Reader",
    "decode_uvarint",
    "decode_varint",
    "decode_varlong",
    "encode_uvarint",
    "encode_varint",
    "encode_varlong",
    "uvarint_size",
    "varint_size",
    "varlong_size",
    "zigzag32",
    "zigzag64",
]

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
BOOLEAN = struct.Struct(">?")

_U32_MAX = 0xFFFFFFFF
_U64_MAX = 0xFFFFFFFFFFFFFFFF
# Java's ByteUtils rejects a varint longer than 5 bytes (int) or 10 bytes (long) as malformed.
_MAX_VARINT_BYTES = 5
_MAX_VARLONG_BYTES = 10


def zigzag32(value: int) -> int:
    """Map a signed 32-bit int onto an unsigned one so small magnitudes stay small (protobuf's zigzag)."""
    if not -(1 << 31) <= value < (1 << 31):
        raise ProtocolError(f"varint out of int32 range: {value}")
    return ((value << 1) ^ (value >> 31)) & _U32_MAX


def zigzag64(value: int) -> int:
    """Map a signed 64-bit int onto an unsigned one so small magnitudes stay small (protobuf's zigzag)."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ProtocolError(f"varlong out of int64 range: {value}")
    return ((value << 1) ^ (value >> 63)) & _U64_MAX


def _encode_unsigned(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Lengths, counts and tags are small; precomputing them keeps the common case to one lookup.
_SMALL_UVARINTS = tuple(_encode_unsigned(i) for i in range(0x4000))


def encode_uvarint(value: int) -> bytes:
    """Kafka's UNSIGNED_VARINT (lengths and tags in flexible versions): 7 bits a byte, low bits first."""
    if 0 <= value < 0x4000:
        return _SMALL_UVARINTS[value]
    if 0x4000 <= value < 0x200000:  # record batch lengths in flexible Produce requests land here
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    if not 0 <= value <= _U32_MAX:
        raise ProtocolError(f"unsigned varint out of range: {value}")
    return _encode_unsigned(value)


def encode_varint(value: int) -> bytes:
    """Kafka's VARINT: a zigzag-encoded signed 32-bit int (record lengths and deltas in record batches v2)."""
    return _encode_unsigned(zigzag32(value))


def encode_varlong(value: int) -> bytes:
    """Kafka's VARLONG: a zigzag-encoded signed 64-bit int (record timestamp deltas)."""
    return _encode_unsigned(zigzag64(value))


def _decode_unsigned(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    for i in range(max_bytes):
        if pos + i >= end:
            raise ProtocolError("truncated varint")
        byte = buf[pos + i]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos + i + 1
        shift += 7
    raise ProtocolError(f"varint longer than {max_bytes} bytes")


def decode_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read an UNSIGNED_VARINT at `pos`; return `(value, next_pos)`. Raises ProtocolError if truncated or too long."""
    value, pos = _decode_unsigned(buf, pos, _MAX_VARINT_BYTES, len(buf))
    if value > _U32_MAX:
        raise ProtocolError("unsigned varint exceeds 32 bits")
    return value, pos


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read a zigzag VARINT (signed 32-bit) at `pos`; return `(value, next_pos)`."""
    raw, pos = _decode_unsigned(buf, pos, _MAX_VARINT_BYTES, len(buf))
    if raw > _U32_MAX:
        raise ProtocolError("varint exceeds 32 bits")
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read a zigzag VARLONG (signed 64-bit) at `pos`; return `(value, next_pos)`."""
    raw, pos = _decode_unsigned(buf, pos, _MAX_VARLONG_BYTES, len(buf))
    if raw > _U64_MAX:
        raise ProtocolError("varlong exceeds 64 bits")
    return (raw >> 1) ^ -(raw & 1), pos


def uvarint_size(value: int) -> int:
    """How many bytes `encode_uvarint(value)` takes."""
    size = 1
    while value > 0x7F:
        value >>= 7
        size += 1
    return size


def varint_size(value: int) -> int:
    """How many bytes `encode_varint(value)` takes."""
    return uvarint_size(zigzag32(value))


def varlong_size(value: int) -> int:
    """How many bytes `encode_varlong(value)` takes."""
    return uvarint_size(zigzag64(value))


class Reader:
    """A cursor over received bytes. Every read checks bounds and raises ProtocolError instead of reading short."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        view = memoryview(data)
        self.buf = view if view.format == "B" and view.ndim == 1 else view.cast("B")
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    @property
    def remaining(self) -> int:
        """Bytes left before the end of this reader's window."""
        return self.end - self.pos

    def _need(self, size: int) -> int:
        start = self.pos
        if size < 0 or start + size > self.end:
            raise ProtocolError(f"truncated message: need {size} bytes at offset {start}, have {self.end - start}")
        self.pos = start + size
        return start

    def fixed(self, fmt: struct.Struct) -> Any:
        """Read one fixed-width value with the given struct format."""
        return fmt.unpack_from(self.buf, self._need(fmt.size))[0]

    def int8(self) -> int:
        """Read a signed byte."""
        value: int = self.fixed(INT8)
        return value

    def int16(self) -> int:
        """Read a big-endian int16."""
        value: int = self.fixed(INT16)
        return value

    def int32(self) -> int:
        """Read a big-endian int32."""
        value: int = self.fixed(INT32)
        return value

    def int64(self) -> int:
        """Read a big-endian int64."""
        value: int = self.fixed(INT64)
        return value

    def float64(self) -> float:
        """Read a big-endian IEEE 754 double."""
        value: float = self.fixed(FLOAT64)
        return value

    def boolean(self) -> bool:
        """Read a BOOLEAN; like Java, any non-zero byte is true."""
        return self.buf[self._need(1)] != 0

    def uvarint(self) -> int:
        """Read an UNSIGNED_VARINT."""
        value, self.pos = _decode_unsigned(self.buf, self.pos, _MAX_VARINT_BYTES, self.end)
        if value > _U32_MAX:
            raise ProtocolError("unsigned varint exceeds 32 bits")
        return value

    def raw(self, size: int) -> memoryview:
        """Take `size` bytes as a view (no copy)."""
        start = self._need(size)
        return self.buf[start : start + size]

    def skip(self, size: int) -> None:
        """Step over `size` bytes."""
        self._need(size)

    def text(self, size: int) -> str:
        """Take `size` bytes as UTF-8 text."""
        start = self._need(size)
        try:
            return str(self.buf[start : start + size], "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"string at offset {start} is not valid UTF-8") from exc

    def uuid(self) -> uuid.UUID:
        """Read a 16-byte UUID."""
        start = self._need(16)
        return uuid.UUID(bytes=bytes(self.buf[start : start + 16]))
