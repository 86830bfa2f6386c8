# cython: language_level=3
from libc.stdint cimport int64_t


cdef class ProducerBatch:
    cdef public object tp
    cdef public object topic
    cdef public object partition
    cdef public object builder
    cdef public object closed
    cdef public object outcome
    cdef public int64_t created_ms
    cdef public Py_ssize_t attempts
    cdef public int64_t retry_at_ms
    cdef public int64_t producer_id
    cdef public int producer_epoch
    cdef public int64_t base_sequence
    cdef public object last_error
    cdef public Py_ssize_t leader_id
    cdef public Py_ssize_t leader_epoch
    cdef public Py_ssize_t reserved_bytes
    cdef public bint full
    cdef public bint expedited
    cdef public bint sealed
    cdef public bint compressing
    cdef public bint in_flight
    cdef public bint maybe_written
    cdef public list done_callbacks
