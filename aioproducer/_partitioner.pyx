# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of `aioproducer.partitioner`'s `murmur2` and `DefaultPartitioner`: the same hashes and picks.

The sticky rules (when to switch, which partitions are candidates, how the next one is drawn) are the pure
module's functions, called here; only the hashing and the per-record bookkeeping are compiled.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_GET_SIZE
from cpython.long cimport PyLong_CheckExact
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.stdint cimport int32_t, uint32_t

from aioproducer.errors import ConfigError, UnknownPartitionError
from aioproducer.partitioner import candidates, key_bytes, load_stats, next_partition, still_usable


cdef uint32_t murmur2_of(const unsigned char* data, Py_ssize_t length) noexcept nogil:
    """Java's Utils.murmur2 (seed 0x9747b28c) over `length` bytes, as an unsigned 32-bit value."""
    cdef uint32_t m = 0x5BD1E995U
    cdef uint32_t h = 0x9747B28CU ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t words_end = length & ~(<Py_ssize_t>3)
    while i < words_end:
        k = data[i] | (<uint32_t>data[i + 1] << 8) | (<uint32_t>data[i + 2] << 16) | (<uint32_t>data[i + 3] << 24)
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
        i += 4
    cdef Py_ssize_t tail = length & 3
    if tail == 3:
        h ^= <uint32_t>data[i + 2] << 16
    if tail >= 2:
        h ^= <uint32_t>data[i + 1] << 8
    if tail >= 1:
        h ^= data[i]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return h


def murmur2(data):
    """Twin of `aioproducer.partitioner.murmur2`: Java's Utils.murmur2, as a signed int32."""
    cdef bytes raw = data if PyBytes_Check(data) else key_bytes(data)
    return <int32_t>murmur2_of(<const unsigned char*>PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))


cdef class _Sticky:
    def __cinit__(self, Py_ssize_t partition, Py_ssize_t switch_at):
        self.partition = partition
        self.switch_at = switch_at


cdef class DefaultPartitioner:
    """Twin of `aioproducer.partitioner.DefaultPartitioner` (the same picks for the same `rng`)."""

    def __init__(self, batch_size=16384, *, ignore_keys=False, rng=None):
        import random

        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ConfigError(f"partitioner batch_size must be a positive int, got {batch_size!r}")
        self._batch_size = batch_size
        self._ignore_keys = ignore_keys
        self._rng = rng if rng is not None else random.Random()
        self._sticky = {}
        self._load = {}
        self._missing_bytes = None

    def follow_batches(self, missing_bytes):
        """Twin of the original's `follow_batches`."""
        self._missing_bytes = missing_bytes

    def update_load_stats(self, topic, queue_sizes, partition_ids, queues):
        """The accumulator's view of `topic` (`aioproducer.partitioner.load_stats`), for the next switch."""
        self._load[topic] = load_stats(queue_sizes, partition_ids, queues)

    def partition(self, topic, key, Py_ssize_t record_size, partitions):
        """The record's partition; keyless records add `record_size` to the sticky partition's tally."""
        return self.choose(topic, key, record_size, partitions)

    cdef Py_ssize_t choose(self, object topic, object key, Py_ssize_t record_size, object partitions) except -1:
        if key is None or self._ignore_keys:
            return self.sticky_partition(topic, record_size, partitions)
        cdef bytes data = key if PyBytes_Check(key) else key_bytes(key)
        return self.choose_for_key(topic, <const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data),
                                   partitions)

    cdef Py_ssize_t choose_for_key(self, object topic, const unsigned char* key, Py_ssize_t key_len,
                                   object partitions) except -1:
        """A keyed record's partition: murmur2 over every partition (Java's BuiltInPartitioner.partitionForKey)."""
        if partitions is not self._layout:
            self._layout_count = partitions.num_partitions
            self._layout = partitions
        if self._layout_count <= 0:
            raise UnknownPartitionError(f"topic {topic!r} has no partitions")
        return (murmur2_of(key, key_len) & 0x7FFFFFFF) % self._layout_count

    cdef Py_ssize_t sticky_partition(self, object topic, Py_ssize_t record_size, object partitions) except -1:
        cdef _Sticky state = self._sticky.get(topic)
        if state is None or (state.produced >= state.switch_at and self._switch_due(topic, state)):
            state = self._switch(topic, state, partitions)
        elif state.checked_layout is not partitions:
            if not still_usable(state.partition, partitions):
                state = self._switch(topic, state, partitions)
            state.checked_layout = partitions
        state.produced += record_size
        return state.partition

    cdef bint _switch_due(self, object topic, _Sticky state) except -1:
        """Twin of the original's `_switch_due`."""
        # Twice batch_size, kept within Py_ssize_t (the original's ints have no bound; batch sizes beyond 2**62 are
        # not a setting anyone reaches, but the sum must not wrap).
        cdef Py_ssize_t cap = 2 * self._batch_size if self._batch_size <= PY_SSIZE_T_MAX // 2 else PY_SSIZE_T_MAX
        if self._missing_bytes is None or state.produced >= cap:
            return True
        missing = self._missing_bytes(topic, state.partition)
        if not PyLong_CheckExact(missing):
            raise TypeError(f"missing_bytes must return an int, got {type(missing).__name__}")
        if missing <= 0:
            return True
        # Compared as Python ints: an answer beyond Py_ssize_t is capped as the original caps it.
        cdef Py_ssize_t room = cap - state.produced
        state.switch_at = state.produced + (room if missing >= room else <Py_ssize_t>missing)
        return False

    cdef _Sticky _switch(self, object topic, _Sticky old, object partitions):
        previous = -1 if old is None else old.partition
        choices = candidates(topic, partitions)
        partition = next_partition(choices, previous, self._rng, self._load.get(topic), partitions.num_partitions)
        state = _Sticky(partition, self._batch_size)
        self._sticky[topic] = state
        return state
