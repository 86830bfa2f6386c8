# cython: language_level=3


cdef class BufferPool:
    cdef readonly Py_ssize_t total_bytes
    cdef readonly Py_ssize_t used_bytes
    cdef readonly Py_ssize_t waiters
