# cython: language_level=3
from libc.stdint cimport int64_t


cdef class _Run:
    cdef int64_t* pairs  # (table row, index in the batch), in the order added
    cdef Py_ssize_t count  # pairs
    cdef Py_ssize_t capacity

    cdef int append(self, int64_t row, int64_t index) except -1


cdef class TableDeliveries:
    cdef dict _runs  # pending outcome -> _Run
    cdef object _last_outcome
    cdef _Run _last_run
    cdef Py_ssize_t _delivered
    cdef dict _per_partition
    cdef dict _ranges
    cdef dict _failures  # (error class, message) -> [error, _Run of (row, 0)]
    cdef bint _offsets_asked
    cdef int64_t* _offsets
    cdef unsigned char* _known  # 1 where _offsets holds an offset
    cdef Py_ssize_t _offsets_capacity
    cdef object _waiter

    cdef int add_row(self, int64_t row, object outcome, Py_ssize_t index) except -1
    cdef int _set_offset(self, int64_t row, int64_t offset) except -1
    cdef _Run _failure_run(self, object error)
    cdef _fail_run(self, object error, _Run run)
