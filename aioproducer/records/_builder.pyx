# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of `aioproducer.records.builder.BatchBuilder`: records appended into one C buffer.

The rules (what a record may hold, when a batch is full, how a record is laid out, how a batch closes) are the
pure module's; this twin writes the same bytes faster, and takes records from raw pointers too (`append_raw`, for
the columnar path), which the pure twin does from Python values.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.stdint cimport int64_t
from libc.string cimport memcpy

from aioproducer.records._varint cimport put_varint, varint_size

from aioproducer.records.compression import CompressionType, compress
from aioproducer.errors import AioProducerError, InvalidRecordError
from aioproducer.records.builder import ClosedBatch, check_builder_settings, encode_headers, record_size_upper_bound
from aioproducer.records.layout import BATCH_HEADER_SIZE as _BATCH_HEADER_SIZE

cdef Py_ssize_t BATCH_HEADER_SIZE = _BATCH_HEADER_SIZE
cdef int64_t INT64_MAX = 0x7FFFFFFFFFFFFFFF
cdef int64_t INT64_MIN = -INT64_MAX - 1
cdef object _NONE_CODEC = CompressionType.NONE
_TYPE_MESSAGE = "record timestamp must be an int, key, value and header values bytes or None"


cdef bytes _bytes_of(object data):
    """Key, value or header bytes as `bytes` (bytes-like objects are accepted, as the pure twin's join accepts them)."""
    if PyBytes_Check(data):
        return <bytes>data
    try:
        return memoryview(data).tobytes()
    except TypeError as exc:
        raise InvalidRecordError(f"{_TYPE_MESSAGE}: {exc}") from exc


cdef int64_t _timestamp_of(object timestamp_ms) except? -1:
    cdef int overflow = 0
    cdef long long value
    if PyLong_CheckExact(timestamp_ms):
        value = PyLong_AsLongLongAndOverflow(timestamp_ms, &overflow)
        if not overflow:
            return value
    if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int) or not INT64_MIN <= timestamp_ms <= INT64_MAX:
        raise InvalidRecordError(f"record timestamp must be an int64 of milliseconds, got {timestamp_ms!r}")
    return <int64_t>timestamp_ms


cdef class BatchBuilder:
    """Twin of `aioproducer.records.builder.BatchBuilder`: the same bytes, sizes, limits and errors."""

    record_size_upper_bound = staticmethod(record_size_upper_bound)

    def __init__(self, *, compression=_NONE_CODEC, compression_level=None, size_limit=16384):
        self._compression = check_builder_settings(compression, compression_level, size_limit)
        self._compression_level = compression_level
        self._size_limit = min(size_limit, <Py_ssize_t>1 << 62)
        self._size = BATCH_HEADER_SIZE
        self._base_timestamp = -1
        self._max_timestamp = -1

    def __dealloc__(self):
        PyMem_Free(self._buf)

    @property
    def record_count(self):
        """Records appended so far."""
        return self._count

    @property
    def estimated_size(self):
        """Bytes of the whole batch (61-byte header included) if it were sent uncompressed."""
        return self._size

    def try_append(self, timestamp_ms, key, value, headers=()):
        """Append one record and return its offset delta, or None when it does not fit (see the original)."""
        cdef Py_ssize_t index = self.append_record(timestamp_ms, key, value, headers)
        return None if index < 0 else index

    cdef Py_ssize_t append_record(self, object timestamp_ms, object key, object value, object headers) except -2:
        """The offset delta of the appended record, or -1 when it does not fit."""
        if self._closed is not None:
            raise AioProducerError("cannot append to a batch that was closed")
        cdef int64_t timestamp = _timestamp_of(timestamp_ms)
        cdef bytes key_bytes = None if key is None else _bytes_of(key)
        cdef bytes value_bytes = None if value is None else _bytes_of(value)
        cdef bytes header_bytes = None
        if headers:
            try:
                header_bytes = encode_headers(headers)
            except TypeError as exc:
                raise InvalidRecordError(f"{_TYPE_MESSAGE}: {exc}") from exc
        return self.append_raw(
            timestamp,
            NULL if key_bytes is None else <const unsigned char*>PyBytes_AS_STRING(key_bytes),
            -1 if key_bytes is None else PyBytes_GET_SIZE(key_bytes),
            NULL if value_bytes is None else <const unsigned char*>PyBytes_AS_STRING(value_bytes),
            -1 if value_bytes is None else PyBytes_GET_SIZE(value_bytes),
            NULL if header_bytes is None else <const unsigned char*>PyBytes_AS_STRING(header_bytes),
            0 if header_bytes is None else PyBytes_GET_SIZE(header_bytes),
        )

    cdef Py_ssize_t append_raw(self, int64_t timestamp, const unsigned char* key, Py_ssize_t key_len,
                               const unsigned char* value, Py_ssize_t value_len, const unsigned char* headers,
                               Py_ssize_t headers_len) except -2:
        """Append one record from raw bytes (a length of -1 is null; `headers` is the encoded header section, its
        count first, or NULL for none): its offset delta, or -1 when it does not fit."""
        if self._closed is not None:
            raise AioProducerError("cannot append to a batch that was closed")
        cdef int64_t delta = 0
        if self._count:
            if (self._base_timestamp < 0 and timestamp > INT64_MAX + self._base_timestamp) or (
                self._base_timestamp > 0 and timestamp < INT64_MIN + self._base_timestamp
            ):
                return -1  # the delta overflows int64: this record cannot share the batch's base timestamp
            delta = timestamp - self._base_timestamp
        cdef Py_ssize_t body = 1 + varint_size(delta) + varint_size(self._count)
        body += varint_size(key_len) + (key_len if key_len > 0 else 0)
        body += varint_size(value_len) + (value_len if value_len > 0 else 0)
        body += headers_len if headers != NULL else 1
        cdef Py_ssize_t record = varint_size(body) + body
        cdef Py_ssize_t size = self._size + record
        if size > self._size_limit and self._count:
            return -1
        self._reserve(record)
        cdef unsigned char* out = self._buf + self._len
        out = put_varint(out, body)
        out[0] = 0  # record attributes
        out = put_varint(out + 1, delta)
        out = put_varint(out, self._count)
        out = put_varint(out, key_len)
        if key_len > 0:
            memcpy(out, key, key_len)
            out += key_len
        out = put_varint(out, value_len)
        if value_len > 0:
            memcpy(out, value, value_len)
            out += value_len
        if headers == NULL:
            out[0] = 0  # no headers
        else:
            memcpy(out, headers, headers_len)
        self._len += record
        self._size = size
        cdef Py_ssize_t index = self._count
        self._count += 1
        if index == 0:
            self._base_timestamp = self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return index

    cdef int _reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t needed = self._len + extra
        if needed <= self._capacity:
            return 0
        cdef Py_ssize_t capacity = max(needed, self._capacity * 2, 4096)
        cdef unsigned char* grown = <unsigned char*>PyMem_Realloc(self._buf, capacity)
        if grown == NULL:
            raise MemoryError()
        self._buf, self._capacity = grown, capacity
        return 0

    cdef int finish(self, object closed) except -1:
        """The batch was closed elsewhere (the compiled pipeline read the buffer): take `closed` as the result of
        `close` and give the buffer back."""
        self._closed = closed
        PyMem_Free(self._buf)
        self._buf, self._len, self._capacity = NULL, 0, 0
        self._size_limit = -1
        return 0

    def close(self):
        """Finish the batch (idempotent): compress the records once, or send them uncompressed when that is
        not smaller (see the original)."""
        if self._closed is not None:
            return self._closed
        records = PyBytes_FromStringAndSize(<char*>self._buf, self._len)
        codec = self._compression
        if codec is not _NONE_CODEC:
            packed = compress(codec, records, self._compression_level) if records else records
            if len(packed) < len(records):
                records = packed
            else:
                codec = _NONE_CODEC
        self._closed = ClosedBatch(
            records_section=records,
            compression=codec,
            record_count=self._count,
            base_timestamp=self._base_timestamp,
            max_timestamp=self._max_timestamp,
        )
        PyMem_Free(self._buf)
        self._buf, self._len, self._capacity = NULL, 0, 0
        self._size_limit = -1
        return self._closed
