"""The magic v2 record batch layout: offsets, struct formats, attribute bits and zigzag varint primitives.

Shared by the builder and the reader; holds no state and knows nothing about compression or producers.
"""

from __future__ import annotations

import struct

from aioproducer.errors import ProtocolError
from aioproducer.protocol.primitives import encode_varlong, varlong_size

# RecordBatch, magic v2 (KIP-98; Java's DefaultRecordBatch). Integers are big-endian.
#
#   offset  size  field
#        0     8  base offset            int64   (0 from a producer; the broker assigns offsets)
#        8     4  batch length           int32   bytes after this field: 49 + len(records section)
#       12     4  partition leader epoch int32
#       16     1  magic                  int8    = 2
#       17     4  CRC-32C                uint32  over bytes 21..end (attributes to the last record)
#       21     2  attributes             int16   bits 0-2 codec, 3 timestamp type (1 = log append),
#                                                4 transactional, 5 control
#       23     4  last offset delta      int32   record count - 1
#       27     8  base timestamp         int64   the first record's timestamp
#       35     8  max timestamp          int64
#       43     8  producer id            int64   -1 without idempotence
#       51     2  producer epoch         int16
#       53     4  base sequence          int32
#       57     4  record count           int32
#       61     -  records section, compressed as a whole when the codec is not none
#
# Record (all varints are zigzag, as in protobuf's sint32/sint64):
#   varint length (of what follows) | int8 attributes (unused, 0) | varlong timestamp delta (may be negative)
#   | varint offset delta | varint key length (-1 = null) | key | varint value length (-1 = null) | value
#   | varint header count | headers: varint key length | utf-8 key | varint value length (-1 = null) | value

MAGIC = 2
BATCH_HEADER_SIZE = 61
LENGTH_FIELD_END = 12  # base offset + batch length: the bytes `batch length` does not count
CRC_START = 21  # the CRC covers attributes through the end of the batch

# Java's DefaultRecord.MAX_RECORD_OVERHEAD: length (5) + attributes (1) + timestamp delta (10) + offset delta (5).
MAX_RECORD_OVERHEAD = 21

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# base offset, batch length, partition leader epoch, magic, crc
PREFIX = struct.Struct(">qiibI")
# attributes, last offset delta, base timestamp, max timestamp, producer id, producer epoch, base sequence, count
HEADER_TAIL = struct.Struct(">hiqqqhii")


def zigzag_varint(value: int) -> bytes:
    """The zigzag varint of a signed 64-bit value (callers keep it inside int64)."""
    z = (value << 1) ^ (value >> 63)
    if z < 0x4000:
        return bytes((z & 0x7F | 0x80, z >> 7)) if z > 0x7F else bytes((z,))
    if z < 0x200000:
        return bytes((z & 0x7F | 0x80, (z >> 7) & 0x7F | 0x80, z >> 14))
    return encode_varlong(value)


# Precomputed encodings of 0..VARINT_TABLE_SIZE-1: offset deltas, timestamp deltas and lengths are almost always
# small, and a tuple lookup is several times cheaper than encoding on the per-record hot path.
VARINT_TABLE_SIZE = 1 << 12
VARINTS: tuple[bytes, ...] = tuple(zigzag_varint(n) for n in range(VARINT_TABLE_SIZE))


def varint_size(value: int) -> int:
    """Bytes the zigzag varint of `value` occupies."""
    return varlong_size(value)


def read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode the zigzag varint at `pos` (not past `end`); return (value, next position)."""
    if pos < end:
        byte = data[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise ProtocolError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift >= 70:
            raise ProtocolError("varint longer than 10 bytes")
