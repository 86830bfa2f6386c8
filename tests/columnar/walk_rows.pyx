# cython: language_level=3, boundscheck=False, wraparound=False
"""A Cython caller of the columnar accessors, as the producer's encoder is one: it cimports _arrow.pxd and walks
rows without a Python object per row. Compiled by the tests (it pins the C-level API) and the micro-benchmark."""

from libc.stdint cimport int64_t, uint8_t

from aioproducer.columnar._arrow cimport (
    ROW_INVALID,
    ROW_NULL,
    ROW_VALUE,
    BytesColumnView,
    HeadersColumnView,
    Int64Array,
    IntColumnView,
    bytes_at,
    header_at,
    header_count,
    int64_array_new,
    int64_array_set_null,
    int_at,
    text_at,
    utf8_valid,
)


def checksum(BytesColumnView keys, BytesColumnView values):
    """Walk two bytes columns: (rows, bytes seen, nulls seen, a byte sum), all without the GIL."""
    cdef const uint8_t* data
    cdef Py_ssize_t size, row, rows = keys.column.length
    cdef int64_t total = 0, nulls = 0, mix = 0
    with nogil:
        for row in range(rows):
            if bytes_at(&keys.column, row, &data, &size):
                total += size
                if size:
                    mix += data[0] + data[size - 1]
            else:
                nulls += 1
            if bytes_at(&values.column, row, &data, &size):
                total += size
                if size:
                    mix += data[0] + data[size - 1]
            else:
                nulls += 1
    return rows, total, nulls, mix


def bytes_rows(BytesColumnView column):
    cdef const uint8_t* data
    cdef Py_ssize_t size
    out = []
    for row in range(column.column.length):
        if bytes_at(&column.column, row, &data, &size):
            out.append((<const char*>data)[:size])
        else:
            out.append((data == NULL, size))
    return out


def text_rows(BytesColumnView column):
    cdef const uint8_t* data
    cdef Py_ssize_t size
    cdef int status
    out = []
    for row in range(column.column.length):
        status = text_at(&column.column, row, &data, &size)
        out.append((status, (<const char*>data)[:size] if status != ROW_NULL else None))
    return out


def int_rows(IntColumnView column):
    cdef int64_t value
    cdef int status
    out = []
    for row in range(column.column.length):
        value = 12345
        status = int_at(&column.column, row, &value)
        out.append((status, value if status == ROW_VALUE else None))
    return out


def header_rows(HeadersColumnView column):
    cdef const uint8_t* key
    cdef const uint8_t* value
    cdef Py_ssize_t key_size, value_size, index
    out = []
    for row in range(column.column.length):
        headers = []
        for index in range(header_count(&column.column, row)):
            status = header_at(&column.column, row, index, &key, &key_size, &value, &value_size)
            if status == ROW_INVALID:
                headers.append(ROW_INVALID)
            else:
                headers.append(((<const char*>key)[:key_size], None if value == NULL else (<const char*>value)[:value_size]))
        out.append(headers)
    return out


def is_utf8(bytes data):
    return utf8_valid(<const uint8_t*><const char*>data, len(data))


def offsets_with_gaps(Py_ssize_t length, Py_ssize_t every):
    """An Int64Array built through the C-level API: row i holds i * 10, every `every`-th row null."""
    cdef Int64Array array = int64_array_new(length, "offset")
    cdef Py_ssize_t row
    for row in range(length):
        array.values[row] = row * 10
        if every and row % every == 0:
            int64_array_set_null(array, row)
    return array
