# cython: language_level=3
"""Zigzag varints (Kafka's record-level integers, as protobuf's sint32/sint64) for the compiled twins: inline C,
the same encoding as `aioproducer.records.layout.zigzag_varint`."""

from libc.stdint cimport int64_t, uint64_t


cdef inline int varint_size(int64_t value) noexcept nogil:
    cdef uint64_t z = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef int size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


cdef inline unsigned char* put_varint(unsigned char* out, int64_t value) noexcept nogil:
    cdef uint64_t z = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    while z >= 0x80:
        out[0] = <unsigned char>((z & 0x7F) | 0x80)
        out += 1
        z >>= 7
    out[0] = <unsigned char>z
    return out + 1
