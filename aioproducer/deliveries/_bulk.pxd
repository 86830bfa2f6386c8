# cython: language_level=3
from libc.stdint cimport int64_t


cdef class BulkDeliveries:
    cdef int64_t* _columns
    cdef Py_ssize_t _count
    cdef Py_ssize_t _capacity
    cdef list _outcomes  # each distinct batch outcome once; a record's run indexes this list
    cdef dict _run_of
    cdef object _last_outcome
    cdef Py_ssize_t _last_run
    cdef dict _others  # position -> the error of a record refused at the call (or a wait's placeholder)

    cdef int add_record(self, object outcome, Py_ssize_t index, int64_t timestamp_ms, Py_ssize_t key_size,
                        Py_ssize_t value_size) except -1
    cdef int _grow(self) except -1
    cdef Py_ssize_t _end_of(self, object stop) except -1
    cdef Py_ssize_t _fill(self, resolve, list results, Py_ssize_t offset, Py_ssize_t start, Py_ssize_t end,
                          bint settled_only, object unbuilt) except -1
