# cython: language_level=3
# The compiled twin's C API, for Cython callers: `from aioproducer.columnar._arrow cimport ...`.
#
# The structs are filled by aioproducer.columnar.layout after it checked the batch (ctypes mirrors in
# aioproducer.columnar.cdata, compared field by field by the tests); a view object (BytesColumnView, IntColumnView,
# HeadersColumnView) holds one in its `column` field and keeps the producer's buffers alive. The accessors below read
# one row in a few instructions, without the GIL and without a Python object:
#
#   bint bytes_at(const BytesColumn* c, Py_ssize_t row, const uint8_t** data, Py_ssize_t* size)
#       True and the row's bytes; False for null (*data = NULL, *size = -1).
#   int text_at(const BytesColumn* c, Py_ssize_t row, const uint8_t** data, Py_ssize_t* size)
#       ROW_VALUE, ROW_NULL, or ROW_INVALID when the bytes are not valid UTF-8 (a topic: that row fails).
#   int int_at(const IntColumn* c, Py_ssize_t row, int64_t* value)
#       ROW_VALUE (timestamps in epoch ms, sub-ms units floored), ROW_NULL (a partition: let the partitioner choose;
#       a timestamp: now), ROW_INVALID when a timestamp in seconds does not fit int64 milliseconds.
#   Py_ssize_t header_count(const HeadersColumn* h, Py_ssize_t row)
#       the row's number of headers; 0 for a null list.
#   int header_at(const HeadersColumn* h, Py_ssize_t row, Py_ssize_t index, key, key_size, value, value_size)
#       for 0 <= index < header_count(h, row): ROW_VALUE with the key (valid UTF-8) and the value (NULL and -1 when
#       null); ROW_INVALID when the entry or its key is null or the key is not valid UTF-8 (that row fails).
#   bint utf8_valid(const uint8_t* data, Py_ssize_t size)
#       Python's strict UTF-8 decoder's verdict (no surrogates, no overlong forms, nothing above U+10FFFF).
#
# `row` must lie in [0, c.length): the accessors do not check it (the Python-level methods do).

cimport cython
from libc.stdint cimport INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef enum:
    ROW_INVALID = -1
    ROW_NULL = 0
    ROW_VALUE = 1

cdef enum:
    LAYOUT_OFFSETS32 = 1  # binary, utf8: int32 offsets + data
    LAYOUT_OFFSETS64 = 2  # large_binary, large_utf8: int64 offsets + data
    LAYOUT_VIEWS = 3  # binary_view, utf8_view: 16-byte views + variadic data buffers
    LAYOUT_FIXED = 4  # fixed_size_binary

ctypedef struct BytesArray:
    int64_t offset  # of row 0 in the buffers: the array's own offset plus its parents'
    int64_t length
    const uint8_t* validity  # NULL: no nulls
    const void* offsets  # int32 / int64 offsets, or the views
    const uint8_t* data  # offsets and fixed-size layouts; never NULL
    const uint8_t** variadic  # the views' data buffers
    int32_t layout
    int32_t fixed_size

ctypedef struct BytesColumn:
    int64_t offset
    int64_t length
    const uint8_t* validity
    const void* indices  # dictionary indices (index_width > 0)
    int32_t index_width  # 0: the values are the column
    int32_t index_signed
    BytesArray values

ctypedef struct IntColumn:
    int64_t offset
    int64_t length
    const uint8_t* validity
    const void* data
    int32_t width
    int32_t is_signed
    int64_t multiplier  # to milliseconds: value * multiplier // divisor
    int64_t divisor

ctypedef struct HeadersColumn:
    int64_t offset
    int64_t length
    const uint8_t* validity
    const void* offsets  # into the entries
    int32_t offset_width
    int32_t reserved
    int64_t entries_offset  # locates entry k's validity bit; keys and values include it in their own offsets
    const uint8_t* entries_validity
    BytesColumn keys
    BytesColumn values


cdef inline bint is_valid(const uint8_t* validity, int64_t index) noexcept nogil:
    return validity == NULL or (validity[index >> 3] >> (index & 7)) & 1


cdef inline bint values_at(const BytesArray* a, int64_t row, const uint8_t** data, Py_ssize_t* size) noexcept nogil:
    cdef int64_t i = a.offset + row
    cdef int64_t start
    cdef const int32_t* view
    if not is_valid(a.validity, i):
        data[0] = NULL
        size[0] = -1
        return False
    if a.layout == LAYOUT_OFFSETS32:
        start = (<const int32_t*>a.offsets)[i]
        data[0] = a.data + start
        size[0] = <Py_ssize_t>((<const int32_t*>a.offsets)[i + 1] - start)
    elif a.layout == LAYOUT_OFFSETS64:
        start = (<const int64_t*>a.offsets)[i]
        data[0] = a.data + start
        size[0] = <Py_ssize_t>((<const int64_t*>a.offsets)[i + 1] - start)
    elif a.layout == LAYOUT_VIEWS:
        view = <const int32_t*>(<const uint8_t*>a.offsets + i * 16)
        size[0] = view[0]
        if view[0] <= 12:
            data[0] = <const uint8_t*>view + 4
        else:
            data[0] = a.variadic[view[2]] + view[3]
    else:
        data[0] = a.data + i * a.fixed_size
        size[0] = a.fixed_size
    return True


cdef inline int64_t read_int(const void* data, int64_t i, int32_t width, int32_t is_signed) noexcept nogil:
    # One branch per type: `c ? int32 : uint32` would convert the signed one to unsigned in C.
    if width == 8:
        return (<const int64_t*>data)[i]
    if is_signed:
        if width == 4:
            return (<const int32_t*>data)[i]
        if width == 2:
            return (<const int16_t*>data)[i]
        return (<const int8_t*>data)[i]
    if width == 4:
        return (<const uint32_t*>data)[i]
    if width == 2:
        return (<const uint16_t*>data)[i]
    return (<const uint8_t*>data)[i]


cdef inline bint bytes_at(const BytesColumn* c, Py_ssize_t row, const uint8_t** data, Py_ssize_t* size) noexcept nogil:
    cdef int64_t i
    if c.index_width == 0:
        return values_at(&c.values, row, data, size)
    i = c.offset + row
    if not is_valid(c.validity, i):
        data[0] = NULL
        size[0] = -1
        return False
    return values_at(&c.values, read_int(c.indices, i, c.index_width, c.index_signed), data, size)


cdef inline bint utf8_valid(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef uint8_t b, second
    while i < n:
        b = s[i]
        if b < 0x80:
            i += 1
        elif b < 0xC2:  # a continuation byte, or an overlong 2-byte form
            return False
        elif b < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
        elif b < 0xF0:
            if i + 2 >= n:
                return False
            second = s[i + 1]
            if (second & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80:
                return False
            if (b == 0xE0 and second < 0xA0) or (b == 0xED and second >= 0xA0):  # overlong; surrogates
                return False
            i += 3
        elif b < 0xF5:
            if i + 3 >= n:
                return False
            second = s[i + 1]
            if (second & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80 or (s[i + 3] & 0xC0) != 0x80:
                return False
            if (b == 0xF0 and second < 0x90) or (b == 0xF4 and second >= 0x90):  # overlong; above U+10FFFF
                return False
            i += 4
        else:
            return False
    return True


cdef inline int text_at(const BytesColumn* c, Py_ssize_t row, const uint8_t** data, Py_ssize_t* size) noexcept nogil:
    if not bytes_at(c, row, data, size):
        return ROW_NULL
    return ROW_VALUE if utf8_valid(data[0], size[0]) else ROW_INVALID


@cython.cdivision(True)
cdef inline int int_at(const IntColumn* c, Py_ssize_t row, int64_t* value) noexcept nogil:
    cdef int64_t i = c.offset + row
    cdef int64_t v, quotient
    if not is_valid(c.validity, i):
        return ROW_NULL
    v = read_int(c.data, i, c.width, c.is_signed)
    if c.multiplier != 1:
        # C division truncates: v * m overflows exactly when v lies outside [INT64_MIN / m, INT64_MAX / m].
        if v > INT64_MAX / c.multiplier or v < INT64_MIN / c.multiplier:
            return ROW_INVALID
        v *= c.multiplier
    if c.divisor != 1:
        quotient = v / c.divisor
        if v % c.divisor < 0:  # floor, as Python's // and Java's Math.floorDiv (Instant.toEpochMilli)
            quotient -= 1
        v = quotient
    value[0] = v
    return ROW_VALUE


cdef inline int64_t header_start(const HeadersColumn* h, int64_t i) noexcept nogil:
    return (<const int32_t*>h.offsets)[i] if h.offset_width == 4 else (<const int64_t*>h.offsets)[i]


cdef inline Py_ssize_t header_count(const HeadersColumn* h, Py_ssize_t row) noexcept nogil:
    cdef int64_t i = h.offset + row
    if not is_valid(h.validity, i):
        return 0
    return <Py_ssize_t>(header_start(h, i + 1) - header_start(h, i))


cdef inline int header_at(
    const HeadersColumn* h, Py_ssize_t row, Py_ssize_t index, const uint8_t** key, Py_ssize_t* key_size,
    const uint8_t** value, Py_ssize_t* value_size,
) noexcept nogil:
    cdef int64_t entry = header_start(h, h.offset + row) + index
    value[0] = NULL
    value_size[0] = -1
    if not is_valid(h.entries_validity, h.entries_offset + entry):
        key[0] = NULL
        key_size[0] = -1
        return ROW_INVALID
    if text_at(&h.keys, entry, key, key_size) != ROW_VALUE:
        return ROW_INVALID
    bytes_at(&h.values, entry, value, value_size)
    return ROW_VALUE


cdef class BytesColumnView:
    cdef BytesColumn column
    cdef str _name
    cdef object _owner


cdef class IntColumnView:
    cdef IntColumn column
    cdef str _name
    cdef object _owner


cdef class HeadersColumnView:
    cdef HeadersColumn column
    cdef str _name
    cdef object _owner


cdef class Int64Array:
    # Filled before it is exported, never after: consumers read the buffers in place.
    cdef int64_t* values
    cdef uint8_t* validity  # NULL while every row is valid
    cdef Py_ssize_t length
    cdef Py_ssize_t null_count
    cdef str _name


cdef Int64Array int64_array_new(Py_ssize_t length, str name)
cdef int int64_array_set_null(Int64Array array, Py_ssize_t row) except -1
