# cython: language_level=3
from libc.stdint cimport int64_t


cdef class BatchBuilder:
    cdef unsigned char* _buf
    cdef Py_ssize_t _len
    cdef Py_ssize_t _capacity
    cdef Py_ssize_t _count
    cdef Py_ssize_t _size
    cdef Py_ssize_t _size_limit
    cdef int64_t _base_timestamp
    cdef int64_t _max_timestamp
    cdef object _compression
    cdef object _compression_level
    cdef object _closed

    cdef Py_ssize_t append_record(self, object timestamp_ms, object key, object value, object headers) except -2
    cdef Py_ssize_t append_raw(self, int64_t timestamp, const unsigned char* key, Py_ssize_t key_len,
                               const unsigned char* value, Py_ssize_t value_len, const unsigned char* headers,
                               Py_ssize_t headers_len) except -2
    cdef int _reserve(self, Py_ssize_t extra) except -1
    cdef int finish(self, object closed) except -1
