# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled twin of `aioproducer.columnar.arrow`: the same column views, buffer scans and Int64Array, with the
per-row accessors as `cdef inline ... noexcept nogil` functions in `_arrow.pxd` for Cython callers.

It holds no rule: `layout` checks each batch (calling the scans below, the compiled speed-up of `arrow`'s) and fills
the structs these views copy; messages come from `layout` too. The pure twin stays the reference.
"""

import ctypes

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset, strlen

from aioproducer.columnar import cdata
from aioproducer.columnar.layout import header_key_error, row_error, text_error, timestamp_error

# The values of the pxd's enums, for the test that holds them equal to layout's.
ROW_CODES = {"ROW_INVALID": ROW_INVALID, "ROW_NULL": ROW_NULL, "ROW_VALUE": ROW_VALUE}
LAYOUTS = {
    "LAYOUT_OFFSETS32": LAYOUT_OFFSETS32,
    "LAYOUT_OFFSETS64": LAYOUT_OFFSETS64,
    "LAYOUT_VIEWS": LAYOUT_VIEWS,
    "LAYOUT_FIXED": LAYOUT_FIXED,
}


def struct_layouts():
    """Each struct's size and field offsets, for the test that holds cdata's ctypes mirrors equal to them."""
    cdef BytesArray a
    cdef BytesColumn b
    cdef IntColumn i
    cdef HeadersColumn h
    cdef char* base
    base = <char*>&a
    arrays = {"offset": <char*>&a.offset - base, "length": <char*>&a.length - base,
              "validity": <char*>&a.validity - base, "offsets": <char*>&a.offsets - base,
              "data": <char*>&a.data - base, "variadic": <char*>&a.variadic - base,
              "layout": <char*>&a.layout - base, "fixed_size": <char*>&a.fixed_size - base}
    base = <char*>&b
    columns = {"offset": <char*>&b.offset - base, "length": <char*>&b.length - base,
               "validity": <char*>&b.validity - base, "indices": <char*>&b.indices - base,
               "index_width": <char*>&b.index_width - base, "index_signed": <char*>&b.index_signed - base,
               "values": <char*>&b.values - base}
    base = <char*>&i
    ints = {"offset": <char*>&i.offset - base, "length": <char*>&i.length - base,
            "validity": <char*>&i.validity - base, "data": <char*>&i.data - base, "width": <char*>&i.width - base,
            "is_signed": <char*>&i.is_signed - base, "multiplier": <char*>&i.multiplier - base,
            "divisor": <char*>&i.divisor - base}
    base = <char*>&h
    headers = {"offset": <char*>&h.offset - base, "length": <char*>&h.length - base,
               "validity": <char*>&h.validity - base, "offsets": <char*>&h.offsets - base,
               "offset_width": <char*>&h.offset_width - base, "reserved": <char*>&h.reserved - base,
               "entries_offset": <char*>&h.entries_offset - base,
               "entries_validity": <char*>&h.entries_validity - base, "keys": <char*>&h.keys - base,
               "values": <char*>&h.values - base}
    return {
        "BytesArray": (sizeof(BytesArray), arrays),
        "BytesColumn": (sizeof(BytesColumn), columns),
        "IntColumn": (sizeof(IntColumn), ints),
        "HeadersColumn": (sizeof(HeadersColumn), headers),
    }


cdef int copy_struct(void* destination, object source, object expected, size_t size) except -1:
    if type(source) is not expected or ctypes.sizeof(source) != size:
        raise TypeError(f"expected a {expected.__name__} of {size} bytes, got {type(source).__name__}")
    memcpy(destination, <void*><size_t>ctypes.addressof(source), size)
    return 0


def is_utf8(bytes data):
    """The compiled UTF-8 check (`utf8_valid`), for the test that holds it equal to Python's strict decoder."""
    return utf8_valid(<const uint8_t*><char*>data, len(data))


# -- kernels: the compiled speed-up of arrow's buffer scans ------------------------------------------------------------
cdef inline bint bit_set(const uint8_t* validity, int64_t index) noexcept nogil:
    return validity == NULL or (validity[index >> 3] >> (index & 7)) & 1


cdef Py_ssize_t scan_offsets(const void* address, Py_ssize_t rows, int width) noexcept nogil:
    cdef Py_ssize_t k
    cdef const int32_t* narrow = <const int32_t*>address
    cdef const int64_t* wide = <const int64_t*>address
    if width == 4:
        if narrow[0] < 0:
            return 0
        for k in range(1, rows + 1):
            if narrow[k] < narrow[k - 1]:
                return k
    else:
        if wide[0] < 0:
            return 0
        for k in range(1, rows + 1):
            if wide[k] < wide[k - 1]:
                return k
    return -1


cdef Py_ssize_t scan_views(
    const uint8_t* views, const uint8_t* bits, int64_t bit, Py_ssize_t rows, const int64_t* sizes, int64_t n_buffers
) noexcept nogil:
    cdef Py_ssize_t row
    cdef const int32_t* view
    cdef int32_t length
    for row in range(rows):
        view = <const int32_t*>(views + row * 16)
        length = view[0]
        if (0 <= length <= 12) or not bit_set(bits, bit + row):
            continue  # inline (or null): nothing outside the view to check
        if length < 0 or view[2] < 0 or view[2] >= n_buffers or view[3] < 0:
            return row
        if <int64_t>view[3] + length > sizes[view[2]]:
            return row
    return -1


cdef Py_ssize_t scan_indices(
    const void* indices, const uint8_t* bits, int64_t bit, Py_ssize_t rows, int width, bint signed, int64_t limit
) noexcept nogil:
    cdef Py_ssize_t row
    cdef uint64_t index
    for row in range(rows):
        if width == 8 and not signed:
            index = (<const uint64_t*>indices)[row]  # beyond int64: compare unsigned
        else:
            index = <uint64_t>read_int(indices, row, width, signed)  # a negative index wraps far past the limit
        if index >= <uint64_t>limit and bit_set(bits, bit + row):
            return row
    return -1


def first_bad_offsets(size_t address, Py_ssize_t rows, int width):
    cdef Py_ssize_t found
    with nogil:
        found = scan_offsets(<const void*>address, rows, width)
    return found


def first_bad_view(size_t views, size_t validity, int64_t bit, Py_ssize_t rows, size_t sizes, int64_t n_buffers):
    cdef Py_ssize_t found
    with nogil:
        found = scan_views(<const uint8_t*>views, <const uint8_t*>validity, bit, rows, <const int64_t*>sizes, n_buffers)
    return found


def first_bad_index(
    size_t indices, size_t validity, int64_t bit, Py_ssize_t rows, int width, bint signed, int64_t limit
):
    cdef Py_ssize_t found
    with nogil:
        found = scan_indices(<const void*>indices, <const uint8_t*>validity, bit, rows, width, signed, limit)
    return found


cdef inline int check_row(str name, Py_ssize_t row, int64_t length) except -1:
    if not 0 <= row < length:
        raise row_error(name, row, length)
    return 0


# -- views -------------------------------------------------------------------------------------------------------------
cdef class BytesColumnView:
    """One batch's bytes column (key, value, topic, header keys or values): its rows as bytes, None for null. Reads
    the producer's buffers in place; `owner` keeps them alive (their release callback runs when it goes)."""

    def __init__(self, str name, column, owner):
        copy_struct(&self.column, column, cdata.BytesColumn, sizeof(BytesColumn))
        self._name = name
        self._owner = owner

    @property
    def name(self):
        return self._name

    def __len__(self):
        return self.column.length

    def bytes_at(self, Py_ssize_t row):
        """Row `row`'s bytes; None when it is null (a null key or value is Kafka's null)."""
        cdef const uint8_t* data
        cdef Py_ssize_t size
        check_row(self._name, row, self.column.length)
        if not bytes_at(&self.column, row, &data, &size):
            return None
        return PyBytes_FromStringAndSize(<const char*>data, size)

    def is_null(self, Py_ssize_t row):
        cdef const uint8_t* data
        cdef Py_ssize_t size
        check_row(self._name, row, self.column.length)
        return not bytes_at(&self.column, row, &data, &size)

    def text_at(self, Py_ssize_t row):
        """Row `row` as a string (a topic); None when null; `InvalidRecordError` when it is not valid UTF-8."""
        cdef const uint8_t* data
        cdef Py_ssize_t size
        cdef int status
        check_row(self._name, row, self.column.length)
        status = text_at(&self.column, row, &data, &size)
        if status == ROW_NULL:
            return None
        if status == ROW_INVALID:
            raise text_error(self._name, row)
        return PyUnicode_DecodeUTF8(<const char*>data, size, NULL)

    def to_pylist(self):
        return [self.bytes_at(row) for row in range(self.column.length)]

    def __repr__(self):
        return f"<BytesColumnView {self._name!r}: {self.column.length} rows>"


cdef class IntColumnView:
    """One batch's integer column (partition, timestamp): ints, timestamps in epoch milliseconds, None for null."""

    def __init__(self, str name, column, owner):
        copy_struct(&self.column, column, cdata.IntColumn, sizeof(IntColumn))
        self._name = name
        self._owner = owner

    @property
    def name(self):
        return self._name

    def __len__(self):
        return self.column.length

    def int_at(self, Py_ssize_t row):
        """Row `row`'s value (a timestamp in epoch milliseconds, sub-millisecond units floored); None when null;
        `InvalidRecordError` when a timestamp in seconds does not fit int64 milliseconds."""
        cdef int64_t value
        cdef int status
        if not 0 <= row < self.column.length:
            raise row_error(self._name, row, self.column.length)
        status = int_at(&self.column, row, &value)
        if status == ROW_NULL:
            return None
        if status == ROW_INVALID:
            raise timestamp_error(self._name, row)
        return value

    def is_null(self, Py_ssize_t row):
        if not 0 <= row < self.column.length:
            raise row_error(self._name, row, self.column.length)
        return not is_valid(self.column.validity, self.column.offset + row)

    def to_pylist(self):
        return [self.int_at(row) for row in range(self.column.length)]

    def __repr__(self):
        return f"<IntColumnView {self._name!r}: {self.column.length} rows>"


cdef class HeadersColumnView:
    """One batch's headers column: per row, a list of (key, value) headers; a null list means no headers."""

    def __init__(self, str name, column, owner):
        copy_struct(&self.column, column, cdata.HeadersColumn, sizeof(HeadersColumn))
        self._name = name
        self._owner = owner

    @property
    def name(self):
        return self._name

    def __len__(self):
        return self.column.length

    def is_null(self, Py_ssize_t row):
        if not 0 <= row < self.column.length:
            raise row_error(self._name, row, self.column.length)
        return not is_valid(self.column.validity, self.column.offset + row)

    def header_count(self, Py_ssize_t row):
        """How many headers row `row` has (0 when its list is null)."""
        if not 0 <= row < self.column.length:
            raise row_error(self._name, row, self.column.length)
        return header_count(&self.column, row)

    def header_at(self, Py_ssize_t row, Py_ssize_t index):
        """Header `index` of row `row` as (key, value), the value None when null; `InvalidRecordError` when the
        entry or its key is null, or the key is not valid UTF-8."""
        cdef const uint8_t* key
        cdef const uint8_t* value
        cdef Py_ssize_t key_size, value_size, count
        count = self.header_count(row)
        if not 0 <= index < count:
            raise IndexError(f"header {index} is outside row {row} of column {self._name!r}, which has {count}")
        if header_at(&self.column, row, index, &key, &key_size, &value, &value_size) != ROW_VALUE:
            raise header_key_error(self._name, row, index)
        return (
            PyUnicode_DecodeUTF8(<const char*>key, key_size, NULL),
            None if value == NULL else PyBytes_FromStringAndSize(<const char*>value, value_size),
        )

    def headers_at(self, Py_ssize_t row):
        return [self.header_at(row, index) for index in range(self.header_count(row))]

    def to_pylist(self):
        return [None if self.is_null(row) else self.headers_at(row) for row in range(self.column.length)]

    def __repr__(self):
        return f"<HeadersColumnView {self._name!r}: {self.column.length} rows>"


# -- Int64Array --------------------------------------------------------------------------------------------------------
cdef struct ArrowSchema:
    const char* format
    const char* name
    const char* metadata
    int64_t flags
    int64_t n_children
    ArrowSchema** children
    ArrowSchema* dictionary
    void (*release)(ArrowSchema*) noexcept nogil
    void* private_data

cdef struct ArrowArray:
    int64_t length
    int64_t null_count
    int64_t offset
    int64_t n_buffers
    int64_t n_children
    const void** buffers
    ArrowArray** children
    ArrowArray* dictionary
    void (*release)(ArrowArray*) noexcept nogil
    void* private_data

cdef struct ExportedArray:  # an exported array's private data: the Int64Array it reads, and its buffer list
    PyObject* owner
    const void* buffers[2]


cdef void release_schema(ArrowSchema* schema) noexcept nogil:
    free(schema.private_data)  # the name's copy
    schema.release = NULL


cdef void release_array(ArrowArray* array) noexcept nogil:
    cdef ExportedArray* exported = <ExportedArray*>array.private_data
    with gil:
        Py_DECREF(<object>exported.owner)
    free(exported)
    array.release = NULL


cdef void destroy_schema_capsule(object capsule) noexcept:
    cdef ArrowSchema* schema = <ArrowSchema*>PyCapsule_GetPointer(capsule, "arrow_schema")
    if schema.release != NULL:  # never handed to a consumer (one that takes it marks it released)
        schema.release(schema)
    free(schema)


cdef void destroy_array_capsule(object capsule) noexcept:
    cdef ArrowArray* array = <ArrowArray*>PyCapsule_GetPointer(capsule, "arrow_array")
    if array.release != NULL:
        array.release(array)
    free(array)


cdef class Int64Array:
    """An int64 Arrow array built from Python ints (None for null), exported zero-copy."""

    def __cinit__(self):
        self.values = NULL
        self.validity = NULL
        self.length = 0
        self.null_count = 0
        self._name = ""

    def __init__(self, values=(), *, str name=""):
        cdef list items = list(values)
        cdef Py_ssize_t row
        int64_array_allocate(self, len(items))
        self._name = name
        for row, item in enumerate(items):
            if item is None:
                int64_array_set_null(self, row)
            else:
                self.values[row] = item

    def __dealloc__(self):
        free(self.values)
        free(self.validity)

    @property
    def name(self):
        return self._name

    @property
    def null_count(self):
        return self.null_count

    def __len__(self):
        return self.length

    def to_pylist(self):
        return [
            self.values[row] if is_valid(self.validity, row) else None for row in range(self.length)
        ]

    def __repr__(self):
        return f"Int64Array({self.to_pylist()!r}, name={self._name!r})"

    def __arrow_c_schema__(self):
        cdef bytes name = self._name.encode()
        cdef ArrowSchema* schema = <ArrowSchema*>calloc(1, sizeof(ArrowSchema))
        if schema == NULL:
            raise MemoryError()
        capsule = PyCapsule_New(schema, "arrow_schema", destroy_schema_capsule)
        schema.private_data = malloc(len(name) + 1)
        if schema.private_data == NULL:
            raise MemoryError()
        memcpy(schema.private_data, <const char*>name, len(name) + 1)
        schema.format = "l"
        schema.name = <const char*>schema.private_data
        schema.flags = 2  # ARROW_FLAG_NULLABLE
        schema.release = release_schema
        return capsule

    def __arrow_c_array__(self, requested_schema=None):
        """The schema and the array as PyCapsules; `requested_schema` is ignored (int64 is the one type we have)."""
        cdef ArrowArray* array = <ArrowArray*>calloc(1, sizeof(ArrowArray))
        cdef ExportedArray* exported
        if array == NULL:
            raise MemoryError()
        capsule = PyCapsule_New(array, "arrow_array", destroy_array_capsule)
        exported = <ExportedArray*>malloc(sizeof(ExportedArray))
        if exported == NULL:
            raise MemoryError()
        Py_INCREF(self)
        exported.owner = <PyObject*>self
        exported.buffers[0] = self.validity if self.null_count else NULL
        exported.buffers[1] = self.values if self.length else NULL
        array.length = self.length
        array.null_count = self.null_count
        array.n_buffers = 2
        array.buffers = exported.buffers
        array.private_data = exported
        array.release = release_array
        return self.__arrow_c_schema__(), capsule


cdef int int64_array_allocate(Int64Array array, Py_ssize_t length) except -1:
    free(array.values)  # a second __init__ starts over
    free(array.validity)
    array.validity = NULL
    array.null_count = 0
    array.values = <int64_t*>calloc(max(length, 1), sizeof(int64_t))
    if array.values == NULL:
        raise MemoryError()
    array.length = length
    return 0


cdef Int64Array int64_array_new(Py_ssize_t length, str name):
    """An Int64Array of `length` zeros, all valid, to fill (values[row] = ..., int64_array_set_null) before export."""
    cdef Int64Array array = Int64Array.__new__(Int64Array)
    int64_array_allocate(array, length)
    array._name = name
    return array


cdef int int64_array_set_null(Int64Array array, Py_ssize_t row) except -1:
    if not 0 <= row < array.length:
        raise IndexError(f"row {row} is outside an Int64Array of {array.length} rows")
    if array.validity == NULL:
        array.validity = <uint8_t*>malloc((array.length + 7) // 8)
        if array.validity == NULL:
            raise MemoryError()
        memset(array.validity, 0xFF, (array.length + 7) // 8)
    if array.validity[row >> 3] >> (row & 7) & 1:
        array.validity[row >> 3] &= ~(1 << (row & 7))
        array.null_count += 1
    array.values[row] = 0
    return 0
