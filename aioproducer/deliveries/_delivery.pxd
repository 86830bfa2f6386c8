# cython: language_level=3
from libc.stdint cimport int64_t


cdef class Delivery:
    cdef public object _outcome
    cdef public Py_ssize_t _index
    cdef public int64_t _timestamp_ms
    cdef public Py_ssize_t _key_size
    cdef public Py_ssize_t _value_size
    cdef public object _callback
    cdef public object _callback_context
    cdef public bint _callback_context_shared
    cdef public object _callbacks
    cdef public bint _cancelled
    cdef public object _cancel_message
    cdef public bint _watching
    cdef public bint _asyncio_future_blocking

    cdef bint _is_done(self) except -1
    cdef void _own_context(self)


cdef Delivery make_delivery(object outcome, Py_ssize_t index, int64_t timestamp_ms, Py_ssize_t key_size,
                            Py_ssize_t value_size)
cdef object resolved(object outcome, Py_ssize_t* index)
cdef object record_metadata(object topic, object partition, int64_t base_offset, int64_t log_append_time_ms,
                            Py_ssize_t index, int64_t timestamp_ms, int64_t key_size, int64_t value_size)
cdef object metadata_of(object topic, object partition, object offset, object timestamp_ms, object key_size,
                        object value_size)


# A delivered record's offset and timestamp, as BatchOutcome.metadata works them out (-1: the offset is unknown; a
# LogAppendTime topic's broker time replaces the record's CreateTime).
cdef inline int64_t offset_of(int64_t base_offset, Py_ssize_t index) noexcept:
    return base_offset + index if base_offset >= 0 else -1


cdef inline int64_t timestamp_of(int64_t log_append_time_ms, int64_t timestamp_ms) noexcept:
    return log_append_time_ms if log_append_time_ms >= 0 else timestamp_ms
