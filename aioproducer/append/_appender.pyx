# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of `aioproducer.append.appender.Appender`: the same checks, errors, partitions and batches.

The usual record — bytes or None key and value, no headers or checked ones, an int timestamp or none — takes its
whole path here in C: validation, the default partitioner, the append to its partition's open batch, the memory
charge and its Delivery. Anything else calls the same Python rules the pure twin calls (`validation`,
`choose_partition`, the serializers, the accumulator for a new batch).
"""

from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from cpython.tuple cimport PyTuple_Check, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdint cimport int64_t

from aioproducer.buffer._batch cimport ProducerBatch
from aioproducer.buffer._pool cimport BufferPool
from aioproducer.deliveries._bulk cimport BulkDeliveries
from aioproducer.deliveries._delivery cimport make_delivery
from aioproducer._partitioner cimport DefaultPartitioner
from aioproducer.records._builder cimport BatchBuilder

from aioproducer.append.appender import (
    LET_THE_LOOP_RUN,
    RECORD_MEMORY_OVERHEAD,
    YIELD_AFTER_BYTES,
    YIELD_AFTER_BYTES_MAX,
    YIELD_AFTER_S,
    PreparedRecord,
    must_wait_for,
    not_a_record,
    unknown_partition,
)
from aioproducer.errors import AioProducerError, RecordTooLargeError, WouldBlockError
from aioproducer.partitioner import choose_partition
from aioproducer.records.layout import MAX_RECORD_OVERHEAD
from aioproducer.validation import check_headers, check_partition, check_timestamp, check_topic, record_size

cdef extern from "time.h" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec *tp)
    int CLOCK_REALTIME
    int CLOCK_MONOTONIC

# validation.record_size's bound for a record without headers is the record's overhead plus its key and value.
cdef Py_ssize_t RECORD_OVERHEAD_BYTES = MAX_RECORD_OVERHEAD
cdef Py_ssize_t MEMORY_OVERHEAD = RECORD_MEMORY_OVERHEAD
cdef Py_ssize_t _YIELD_AFTER_BYTES = YIELD_AFTER_BYTES
cdef Py_ssize_t _YIELD_AFTER_BYTES_MAX = YIELD_AFTER_BYTES_MAX
cdef double _YIELD_AFTER_S = YIELD_AFTER_S


cdef inline double _monotonic_s() noexcept:
    """time.monotonic() (the same clock) without a Python call."""
    cdef timespec now
    clock_gettime(CLOCK_MONOTONIC, &now)
    return now.tv_sec + now.tv_nsec * 1e-9


cdef inline int64_t wall_clock_ms() noexcept nogil:
    cdef timespec now
    clock_gettime(CLOCK_REALTIME, &now)
    return <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000


cdef class _PartitionSlot:
    """A partition's key in the accumulator's queues, and the batch the appender last put records in. That batch
    takes more only while unsealed: the accumulator seals every batch that stops being its queue's last."""

    cdef tuple tp
    cdef ProducerBatch open_batch

    def __cinit__(self, tuple tp):
        self.tp = tp


cdef class Appender:
    """Twin of `aioproducer.append.appender.Appender`."""

    cdef object _acc
    cdef BufferPool _pool
    cdef Py_ssize_t _batch_size
    cdef object _cluster_state
    cdef object _partitioner
    cdef DefaultPartitioner _default_partitioner
    cdef object _key_serializer
    cdef object _value_serializer
    cdef bint _plain_bytes_keys
    cdef bint _plain_bytes_values
    cdef Py_ssize_t _max_record_bytes
    cdef str _size_limit_message
    cdef object _clock_ms
    cdef object _wake_sender
    cdef set _checked_topics
    cdef object _snapshot  # the cluster metadata snapshot `_topics` was read from (snapshots are immutable)
    cdef dict _topics
    cdef dict _partition_slots  # topic -> a _PartitionSlot per partition, by partition number
    cdef public Py_ssize_t unyielded_bytes
    cdef Py_ssize_t _yield_check_bytes
    cdef double _yielded_at
    cdef public bint plain
    cdef public object general_enqueue
    cdef public object general_enqueue_async

    def __init__(
        self,
        *,
        accumulator,
        BufferPool pool not None,
        cluster_state,
        partitioner,
        key_serializer,
        value_serializer,
        bint plain_bytes_keys,
        bint plain_bytes_values,
        Py_ssize_t max_record_bytes,
        str size_limit_message,
        clock_ms,
        wake_sender,
    ):
        self._acc = accumulator
        self._pool = pool
        self._batch_size = accumulator.batch_size
        self._cluster_state = cluster_state
        self._partitioner = partitioner
        if isinstance(partitioner, DefaultPartitioner):
            self._default_partitioner = partitioner
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._plain_bytes_keys = plain_bytes_keys
        self._plain_bytes_values = plain_bytes_values
        self._max_record_bytes = max_record_bytes
        self._size_limit_message = size_limit_message
        self._clock_ms = clock_ms
        self._wake_sender = wake_sender
        self._checked_topics = set()
        self._partition_slots = {}
        self._yield_check_bytes = _YIELD_AFTER_BYTES
        self._yielded_at = _monotonic_s()

    def yield_due(self):
        """Twin of `aioproducer.append.appender.Appender.yield_due`."""
        return self._yield_due()

    cdef bint _yield_due(self):
        cdef Py_ssize_t buffered = self.unyielded_bytes
        if buffered < self._yield_check_bytes:
            return False
        if buffered >= _YIELD_AFTER_BYTES_MAX or _monotonic_s() - self._yielded_at >= _YIELD_AFTER_S:
            return True
        self._yield_check_bytes = min(buffered + _YIELD_AFTER_BYTES, _YIELD_AFTER_BYTES_MAX)
        return False

    def yielded(self):
        """Twin of `aioproducer.append.appender.Appender.yielded`."""
        self.unyielded_bytes = 0
        self._yield_check_bytes = _YIELD_AFTER_BYTES
        self._yielded_at = _monotonic_s()

    def append_now(self, topic, value, key, headers, partition, timestamp_ms):
        """Buffer the record and return its Delivery, or return it as a PreparedRecord when it must wait first."""
        return self._append_now(topic, value, key, headers, partition, timestamp_ms, None)

    def enqueue_plain(self, topic, value=None, *, key=None, headers=None, partition=None, timestamp_ms=None):
        """`Producer.enqueue_nowait` as a plain producer hands it out, in one C call: buffer the record and return
        its Delivery, or raise WouldBlockError, the record not buffered, when it would have to wait (twin of
        `aioproducer.append.appender.Appender.enqueue_plain`; see `Producer.enqueue_nowait`)."""
        if not self.plain:
            if self.general_enqueue is None:
                raise RuntimeError("enqueue_plain belongs to a producer's appender")
            return self.general_enqueue(
                topic, value, key=key, headers=headers, partition=partition, timestamp_ms=timestamp_ms
            )
        if self.unyielded_bytes >= _YIELD_AFTER_BYTES and self._yield_due():
            raise WouldBlockError(LET_THE_LOOP_RUN)
        delivery = self._append_now(topic, value, key, headers, partition, timestamp_ms, None)
        if type(delivery) is PreparedRecord:
            raise WouldBlockError(must_wait_for(topic))
        return delivery

    async def enqueue_plain_async(self, topic, value=None, *, key=None, headers=None, partition=None,
                                  timestamp_ms=None):
        """`Producer.enqueue` as a plain producer hands it out, a compiled coroutine (twin of
        `aioproducer.append.appender.Appender.enqueue_plain_async`)."""
        if self.plain and (self.unyielded_bytes < _YIELD_AFTER_BYTES or not self._yield_due()):
            delivery = self._append_now(topic, value, key, headers, partition, timestamp_ms, None)
            if type(delivery) is not PreparedRecord:
                return delivery
        if self.general_enqueue_async is None:
            raise RuntimeError("enqueue_plain_async belongs to a producer's appender")
        return await self.general_enqueue_async(
            topic, value, key=key, headers=headers, partition=partition, timestamp_ms=timestamp_ms
        )

    cdef object _append_now(self, object topic, object value, object key, object headers, object partition,
                            object timestamp_ms, BulkDeliveries bulk):
        """As `append_now`; with `bulk`, the record's delivery goes there and None is returned instead."""
        if topic not in self._checked_topics:
            check_topic(topic)
            self._checked_topics.add(topic)
        if partition is not None and (type(partition) is not int or partition < 0):
            check_partition(partition)  # raises: the rule lives there
        if not (self._plain_bytes_keys and (key is None or type(key) is bytes)):
            key = self._key_serializer(key)
        if not (self._plain_bytes_values and (value is None or type(value) is bytes)):
            value = self._value_serializer(value)
        cdef Py_ssize_t size
        if headers:
            header_list = check_headers(headers)
            size = record_size(key, value, header_list)
        else:
            header_list = ()
            size = RECORD_OVERHEAD_BYTES
            if key is not None:
                size += len(key)
            if value is not None:
                size += len(value)
        if size > self._max_record_bytes:
            raise RecordTooLargeError(f"the record is {size} bytes when serialized, {self._size_limit_message}")
        cdef int overflow = 0
        if timestamp_ms is None:
            timestamp_ms = wall_clock_ms()
        elif not (
            PyLong_CheckExact(timestamp_ms)
            and PyLong_AsLongLongAndOverflow(timestamp_ms, &overflow) >= 0
            and not overflow
        ):
            timestamp_ms = check_timestamp(timestamp_ms)  # raises unless the rule takes it
        snapshot = self._cluster_state.cluster
        if snapshot is not self._snapshot:
            self._topics = dict(snapshot.topics)
            self._snapshot = snapshot
        info = self._topics.get(topic)
        cdef BufferPool pool = self._pool
        if (
            info is None
            or (partition is not None and partition >= info.num_partitions)
            or pool.waiters
            or pool.used_bytes + size + MEMORY_OVERHEAD > pool.total_bytes
        ):
            return PreparedRecord(topic, partition, key, value, header_list, size, timestamp_ms)
        cdef Py_ssize_t index
        outcome = self._buffer(topic, key, value, header_list, size, timestamp_ms, partition, info, &index)
        cdef Py_ssize_t key_size = -1 if key is None else len(key)
        cdef Py_ssize_t value_size = -1 if value is None else len(value)
        if bulk is None:
            return make_delivery(outcome, index, timestamp_ms, key_size, value_size)
        bulk.add_record(outcome, index, timestamp_ms, key_size, value_size)
        return None

    def append_many(self, records, Py_ssize_t start, now_wall_ms, BulkDeliveries bulk not None,
                    Py_ssize_t yield_after_bytes):
        """Append `records[start:]` until one must wait or `yield_after_bytes` were buffered (see the original)."""
        cdef Py_ssize_t index = start
        cdef Py_ssize_t count = len(records)
        while index < count:
            record = records[index]
            if PyTuple_Check(record) and PyTuple_GET_SIZE(record) == 6:
                # A ProducerRecord: read its fields in place (a named tuple would be unpacked by iterating it).
                topic, value, key = <object>PyTuple_GET_ITEM(record, 0), <object>PyTuple_GET_ITEM(record, 1), \
                    <object>PyTuple_GET_ITEM(record, 2)
                headers, partition, timestamp_ms = <object>PyTuple_GET_ITEM(record, 3), \
                    <object>PyTuple_GET_ITEM(record, 4), <object>PyTuple_GET_ITEM(record, 5)
            else:
                try:
                    topic, value, key, headers, partition, timestamp_ms = record
                except (TypeError, ValueError):
                    index += 1
                    bulk.add(not_a_record(record))
                    continue
            index += 1
            try:
                prepared = self._append_now(
                    topic, value, key, headers, partition, now_wall_ms if timestamp_ms is None else timestamp_ms,
                    bulk,
                )
            except AioProducerError as exc:
                bulk.add(exc)
                continue
            if prepared is not None:
                return index, prepared
            if self.unyielded_bytes >= yield_after_bytes and self._yield_due():
                break
        return index, None

    def place(self, prepared, info):
        """Buffer a prepared record (memory was checked) and return its Delivery."""
        key, value = prepared.key, prepared.value
        cdef int64_t timestamp_ms = prepared.timestamp_ms
        cdef Py_ssize_t index
        outcome = self._buffer(prepared.topic, key, value, prepared.headers, prepared.size, timestamp_ms,
                               prepared.partition, info, &index)
        return make_delivery(outcome, index, timestamp_ms, -1 if key is None else len(key),
                             -1 if value is None else len(value))

    cdef object _buffer(
        self, object topic, object key, object value, object header_list, Py_ssize_t size, object timestamp_ms,
        object partition, object info, Py_ssize_t* index_out,
    ):
        """Partition and append the record; returns its batch's outcome and sets its index there."""
        cdef Py_ssize_t chosen
        if partition is None:
            if self._default_partitioner is not None:
                chosen = self._default_partitioner.choose(topic, key, size, info)
            else:
                chosen = choose_partition(self._partitioner, topic, key, size, info)
        elif partition >= info.num_partitions:  # checked by _append_now: an int, not negative
            raise unknown_partition(topic, partition, info)
        else:
            chosen = partition
        self.unyielded_bytes += size
        cdef Py_ssize_t record_bytes = size + MEMORY_OVERHEAD
        cdef Py_ssize_t index = -1
        cdef BatchBuilder builder
        cdef _PartitionSlot slot = self._slot(topic, chosen)
        cdef ProducerBatch batch = slot.open_batch
        if batch is not None and not batch.sealed and type(batch.builder) is BatchBuilder:
            builder = <BatchBuilder>batch.builder
            index = builder.append_record(timestamp_ms, key, value, header_list)
        if index >= 0:
            # The usual case, inlined: the partition's open batch took the record (the accumulator's `append`).
            batch.reserved_bytes += record_bytes
            self._pool.used_bytes += record_bytes
            if builder._size >= self._batch_size and not batch.full:
                batch.full = True
                self._wake_sender()
        else:
            appended, index, wake = self._acc.append(
                slot.tp, timestamp_ms, key, value, header_list, record_bytes, self._clock_ms
            )
            batch = slot.open_batch = <ProducerBatch?>appended
            if index == 0:
                # A new batch: the topic is in use (see the original).
                self._cluster_state.touch(topic, self._clock_ms())
            if wake:
                self._wake_sender()
        index_out[0] = index
        return batch.outcome

    cdef _PartitionSlot _slot(self, object topic, Py_ssize_t partition):
        cdef list slots = self._partition_slots.get(topic)
        if slots is None:
            slots = self._partition_slots[topic] = []
        while len(slots) <= partition:
            slots.append(_PartitionSlot((topic, len(slots))))
        return <_PartitionSlot>slots[partition]
