# cython: language_level=3
from libc.stdint cimport uint32_t


cdef uint32_t murmur2_of(const unsigned char* data, Py_ssize_t length) noexcept nogil


cdef class _Sticky:
    cdef Py_ssize_t partition
    cdef Py_ssize_t produced
    cdef Py_ssize_t switch_at
    cdef object checked_layout


cdef class DefaultPartitioner:
    cdef Py_ssize_t _batch_size
    cdef bint _ignore_keys
    cdef object _rng
    cdef dict _sticky
    cdef dict _load  # topic -> its PartitionLoadStats or None (adaptive partitioning)
    cdef object _missing_bytes  # the accumulator's, once the partitioner follows its batches
    cdef object _layout  # the last layout seen, and its partition count
    cdef Py_ssize_t _layout_count

    cdef Py_ssize_t choose(self, object topic, object key, Py_ssize_t record_size, object partitions) except -1
    cdef Py_ssize_t choose_for_key(self, object topic, const unsigned char* key, Py_ssize_t key_len,
                                   object partitions) except -1
    cdef Py_ssize_t sticky_partition(self, object topic, Py_ssize_t record_size, object partitions) except -1
    cdef bint _switch_due(self, object topic, _Sticky state) except -1
    cdef _Sticky _switch(self, object topic, _Sticky old, object partitions)
