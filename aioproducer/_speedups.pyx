# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twins of the per-record hot path: record encoding, murmur2, the default partitioner, the fields of a
delivery handle, and the appender that ties them together.

Each part behaves exactly as its pure-Python original (named in its docstring), which stays the reference and the
fallback; `aioproducer.accelerated` decides which one runs. Only the common case is compiled: anything unusual
(headers, custom serializers, a partitioner switch) calls the same Python helpers the pure path uses.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from cpython.unicode cimport PyUnicode_CheckExact
from cpython.tuple cimport PyTuple_Check, PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_SET_ITEM
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcpy

from asyncio import InvalidStateError
from contextvars import copy_context

from aioproducer.compression import CompressionType, compress
from aioproducer.models import RecordMetadata
from aioproducer.errors import AioProducerError, ConfigError, InvalidRecordError, RecordTooLargeError, UnknownPartitionError
from aioproducer.partitioner import _as_bytes, _candidates, _pick_other, _still_usable, choose_partition
from aioproducer.records.builder import BatchBuilder as _PureBatchBuilder
from aioproducer.records.builder import ClosedBatch, _encode_headers, check_builder_settings
from aioproducer.validation import check_headers, check_partition, check_timestamp, check_topic, record_size

cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject* type, Py_ssize_t nitems)
    void PyObject_GC_UnTrack(object op)
    int PyGC_Disable()
    int PyGC_Enable()

cdef extern from "time.h" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec *tp)
    int CLOCK_REALTIME

cdef enum:
    BATCH_HEADER_SIZE = 61
    RECORD_OVERHEAD_BYTES = 21  # validation.record_size's bound for a record without headers

cdef int64_t INT64_MAX = 0x7FFFFFFFFFFFFFFF
cdef int64_t INT64_MIN = -INT64_MAX - 1
cdef object _NONE_CODEC = CompressionType.NONE
cdef tuple _NO_ARGS = ()


# -- varints ----------------------------------------------------------------------------------------------------
cdef inline int varint_size(int64_t value) noexcept:
    cdef uint64_t z = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef int size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


cdef inline unsigned char* put_varint(unsigned char* out, int64_t value) noexcept:
    cdef uint64_t z = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    while z >= 0x80:
        out[0] = <unsigned char>((z & 0x7F) | 0x80)
        out += 1
        z >>= 7
    out[0] = <unsigned char>z
    return out + 1


cdef inline int64_t wall_clock_ms() noexcept:
    cdef timespec now
    clock_gettime(CLOCK_REALTIME, &now)
    return <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000


cdef bytes _bytes_of(object data):
    """Key, value or header bytes as `bytes` (bytes-like objects are accepted, as `b"".join` accepts them)."""
    if PyBytes_Check(data):
        return <bytes>data
    try:
        return memoryview(data).tobytes()
    except TypeError as exc:
        raise InvalidRecordError(
            f"record timestamp must be an int, key, value and header values bytes or None: {exc}"
        ) from exc


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


# -- record batches -----------------------------------------------------------------------------------------------
cdef class BatchBuilder:
    """Twin of `aioproducer.records.builder.BatchBuilder`: the same bytes, sizes, limits and errors."""

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

    record_size_upper_bound = staticmethod(_PureBatchBuilder.record_size_upper_bound)

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
        cdef int64_t delta = 0
        if self._count:
            if (self._base_timestamp < 0 and timestamp > INT64_MAX + self._base_timestamp) or (
                self._base_timestamp > 0 and timestamp < INT64_MIN + self._base_timestamp
            ):
                return -1  # the delta overflows int64: this record cannot share the batch's base timestamp
            delta = timestamp - self._base_timestamp
        cdef bytes key_bytes = None if key is None else _bytes_of(key)
        cdef bytes value_bytes = None if value is None else _bytes_of(value)
        cdef bytes header_bytes = None
        if headers:
            try:
                header_bytes = _encode_headers(headers)
            except TypeError as exc:
                raise InvalidRecordError(
                    f"record timestamp must be an int, key, value and header values bytes or None: {exc}"
                ) from exc
        cdef Py_ssize_t key_len = -1 if key_bytes is None else PyBytes_GET_SIZE(key_bytes)
        cdef Py_ssize_t value_len = -1 if value_bytes is None else PyBytes_GET_SIZE(value_bytes)
        cdef Py_ssize_t body = 1 + varint_size(delta) + varint_size(self._count)
        body += varint_size(key_len) + (key_len if key_len > 0 else 0)
        body += varint_size(value_len) + (value_len if value_len > 0 else 0)
        body += 1 if header_bytes is None else PyBytes_GET_SIZE(header_bytes)
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
            memcpy(out, PyBytes_AS_STRING(key_bytes), key_len)
            out += key_len
        out = put_varint(out, value_len)
        if value_len > 0:
            memcpy(out, PyBytes_AS_STRING(value_bytes), value_len)
            out += value_len
        if header_bytes is None:
            out[0] = 0  # no headers
        else:
            memcpy(out, PyBytes_AS_STRING(header_bytes), PyBytes_GET_SIZE(header_bytes))
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


# -- partitioning -------------------------------------------------------------------------------------------------
cdef uint32_t _murmur2(const unsigned char* data, Py_ssize_t length) noexcept nogil:
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


def murmur2(bytes data not None):
    """Twin of `aioproducer.partitioner.murmur2`: Java's Utils.murmur2, as a signed int32."""
    return <int32_t>_murmur2(<const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


cdef class _Sticky:
    cdef Py_ssize_t partition
    cdef Py_ssize_t produced
    cdef object checked_layout

    def __cinit__(self, Py_ssize_t partition):
        self.partition = partition


cdef class DefaultPartitioner:
    """Twin of `aioproducer.partitioner.DefaultPartitioner` (the same picks for the same `rng`)."""

    cdef Py_ssize_t _batch_size
    cdef bint _ignore_keys
    cdef object _rng
    cdef dict _sticky
    cdef object _layout  # the last layout seen, and its partition count
    cdef Py_ssize_t _layout_count

    def __init__(self, batch_size=16384, *, ignore_keys=False, rng=None):
        import random

        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ConfigError(f"partitioner batch_size must be a positive int, got {batch_size!r}")
        self._batch_size = batch_size
        self._ignore_keys = ignore_keys
        self._rng = rng if rng is not None else random.Random()
        self._sticky = {}

    def partition(self, topic, key, Py_ssize_t record_size, partitions):
        """The record's partition; keyless records add `record_size` to the sticky partition's tally."""
        return self.choose(topic, key, record_size, partitions)

    cdef Py_ssize_t choose(self, object topic, object key, Py_ssize_t record_size, object partitions) except -1:
        if key is None or self._ignore_keys:
            return self._sticky_partition(topic, record_size, partitions)
        if partitions is not self._layout:
            self._layout_count = partitions.num_partitions
            self._layout = partitions
        if self._layout_count <= 0:
            raise UnknownPartitionError(f"topic {topic!r} has no partitions")
        cdef bytes data = key if PyBytes_Check(key) else _as_bytes(key)
        cdef uint32_t h = _murmur2(<const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
        return (h & 0x7FFFFFFF) % self._layout_count

    cdef Py_ssize_t _sticky_partition(self, object topic, Py_ssize_t record_size, object partitions) except -1:
        cdef _Sticky state = self._sticky.get(topic)
        if state is None or state.produced >= self._batch_size:
            state = self._switch(topic, state, partitions)
        elif state.checked_layout is not partitions:
            if not _still_usable(state.partition, partitions):
                state = self._switch(topic, state, partitions)
            state.checked_layout = partitions
        state.produced += record_size
        return state.partition

    cdef _Sticky _switch(self, object topic, _Sticky old, object partitions):
        previous = -1 if old is None else old.partition
        state = _Sticky(_pick_other(_candidates(topic, partitions), previous, self._rng))
        self._sticky[topic] = state
        return state


# -- delivery handles ---------------------------------------------------------------------------------------------
cdef class DeliveryFields:
    """Twin of `aioproducer.accelerated.PureDeliveryFields`: what a `Delivery` holds, in a C struct.

    Tracked and traversed by the cyclic garbage collector, as the pure twin is: a handle can sit in a reference
    cycle that only the collector breaks (a caller's frame holding handles of a failed batch, reached again through
    the traceback of the batch's error; a done callback that refers back to its handle while the batch is pending).
    """

    cdef public object _outcome
    cdef public Py_ssize_t _index
    cdef public int64_t _timestamp_ms
    cdef public Py_ssize_t _key_size
    cdef public Py_ssize_t _value_size
    cdef public object _callback
    cdef public object _callback_context
    cdef public object _callbacks
    cdef public bint _cancelled
    cdef public object _cancel_message
    cdef public bint _watching
    cdef public bint _asyncio_future_blocking

    # Twins of `aioproducer.delivery.Delivery`'s methods of the same names (the rules live there; the tests run
    # both). asyncio calls them several times per record waited on (gather: done, cancelled, exception, result).
    def get_loop(self):
        return self._outcome.loop

    def cancelled(self):
        return self._cancelled

    def done(self):
        return self._is_done()

    cdef bint _is_done(self) except -1:
        if self._cancelled:
            return True
        cdef Py_ssize_t index = self._index
        return bool(_resolved(self._outcome, &index).done)

    def result(self):
        """The record's metadata; raises its error, CancelledError, or InvalidStateError while pending."""
        if self._cancelled:
            raise self._make_cancelled_error()
        cdef Py_ssize_t index = self._index
        outcome = _resolved(self._outcome, &index)
        if not outcome.done:
            raise InvalidStateError("the record is not delivered yet")
        error = outcome.error
        if error is not None:
            raise error.with_traceback(outcome.error_traceback)  # see BatchOutcome.error_traceback
        cdef int64_t row[5]
        row[2], row[3], row[4] = self._timestamp_ms, self._key_size, self._value_size
        return _metadata(outcome.topic, outcome.partition, outcome.base_offset, outcome.log_append_time_ms, index,
                         row)

    def exception(self):
        if self._cancelled:
            raise self._make_cancelled_error()
        cdef Py_ssize_t index = self._index
        outcome = _resolved(self._outcome, &index)
        if not outcome.done:
            raise InvalidStateError("the record is not delivered yet")
        return outcome.error

    def add_done_callback(self, fn, *, context=None):
        """Call `fn(delivery)` on the loop once the record is settled (or the delivery cancelled)."""
        if not callable(fn):  # refused here: an empty slot is None, and asyncio would fail only when settling
            raise TypeError(f"a callable object was expected by add_done_callback(), got {fn!r}")
        if context is None:
            context = copy_context()
        if self._is_done():
            self._outcome.loop.call_soon(fn, self, context=context)
            return
        if self._callback is None:
            self._callback = fn
            self._callback_context = context
        elif self._callbacks is None:
            self._callbacks = [(fn, context)]
        else:
            (<list>self._callbacks).append((fn, context))
        cdef Py_ssize_t index
        if not self._watching:
            self._watching = True
            index = self._index
            _resolved(self._outcome, &index).deliveries.append(self)


cdef object _resolved(object outcome, Py_ssize_t* index):
    """Twin of `aioproducer.delivery.resolve`: the outcome that carries the record now (`index` is updated)."""
    cdef Py_ssize_t split_at
    while True:
        first = outcome.first
        if first is None:
            return outcome
        second = outcome.second
        if second is None:
            return outcome
        split_at = outcome.split_at
        if index[0] < split_at:
            outcome = first
        else:
            index[0] -= split_at
            outcome = second


def run_callbacks_of(list deliveries):
    """Twin of `aioproducer.delivery._run_callbacks_of`: run a settled batch's waiting records' done callbacks in
    one loop callback (see the original for the rules on raising callbacks)."""
    cdef Py_ssize_t position = 0
    cdef Py_ssize_t count = len(deliveries)
    cdef DeliveryFields delivery
    cdef list later
    loop = None
    try:
        while position < count:
            delivery = <DeliveryFields?>deliveries[position]
            position += 1
            delivery._watching = False
            fn = delivery._callback
            if delivery._cancelled or fn is None:
                continue
            context = delivery._callback_context
            later = delivery._callbacks
            delivery._callback = None
            delivery._callback_context = None
            delivery._callbacks = None
            while True:
                try:
                    context.run(fn, delivery)
                except (SystemExit, KeyboardInterrupt):
                    if later:
                        delivery._callback, delivery._callback_context = later.pop(0)
                        delivery._callbacks = later or None
                        position -= 1
                    raise
                except BaseException as exc:
                    if loop is None:
                        loop = delivery.get_loop()
                    loop.call_exception_handler(
                        {"message": f"Exception in callback {fn!r}({delivery!r})", "exception": exc,
                         "future": delivery}
                    )
                if not later:
                    break
                fn, context = later.pop(0)
    finally:
        if position < count:
            deliveries[0].get_loop().call_soon(run_callbacks_of, deliveries[position:])


# -- batches and their accumulator --------------------------------------------------------------------------------
cdef class BatchFields:
    """Twin of `aioproducer.accelerated.PureBatchFields`: a ProducerBatch's hot fields, in a C struct."""

    cdef public object builder
    cdef public bint full
    cdef public object outcome
    cdef public Py_ssize_t reserved_bytes
    cdef public bint sealed


cdef class AccumulatorFields:
    """Twin of `aioproducer.accelerated.PureAccumulatorFields`: the RecordAccumulator's hot fields, in a C struct."""

    cdef public Py_ssize_t batch_size
    cdef public Py_ssize_t buffer_memory
    cdef public Py_ssize_t memory_waiters
    cdef public dict queues
    cdef public Py_ssize_t used_bytes


cdef class _PartitionSlot:
    """A partition's key in the accumulator's queues, and the batch the appender last put records in. That batch
    takes more only while unsealed: the accumulator seals every batch that stops being its queue's last."""

    cdef tuple tp
    cdef BatchFields open_batch

    def __cinit__(self, tuple tp):
        self.tp = tp


# -- appending ----------------------------------------------------------------------------------------------------
cdef class Appender:
    """Twin of `aioproducer.appender.Appender`: the same checks, errors, partitions and batches."""

    cdef AccumulatorFields _acc
    cdef object _cluster_state
    cdef object _partitioner
    cdef DefaultPartitioner _default_partitioner
    cdef object _key_serializer
    cdef object _value_serializer
    cdef bint _plain_bytes_keys
    cdef bint _plain_bytes_values
    cdef Py_ssize_t _max_record_bytes
    cdef Py_ssize_t _record_overhead
    cdef str _size_limit_message
    cdef type _delivery_type
    cdef PyTypeObject* _delivery_struct
    cdef object _clock_ms
    cdef object _wake_sender
    cdef object _unknown_partition
    cdef object _not_a_record
    cdef set _checked_topics
    cdef object _snapshot  # the cluster metadata snapshot `_topics` was read from (snapshots are immutable)
    cdef dict _topics
    cdef dict _partition_slots  # topic -> a _PartitionSlot per partition, by partition number
    cdef public Py_ssize_t unyielded_bytes

    def __init__(
        self,
        *,
        accumulator,
        cluster_state,
        partitioner,
        key_serializer,
        value_serializer,
        bint plain_bytes_keys,
        bint plain_bytes_values,
        Py_ssize_t max_record_bytes,
        str size_limit_message,
        delivery_type,
        clock_ms,
        wake_sender,
    ):
        from aioproducer.appender import RECORD_MEMORY_OVERHEAD, not_a_record, unknown_partition

        if not issubclass(delivery_type, DeliveryFields):
            raise TypeError("the compiled appender needs a Delivery type built on the compiled DeliveryFields")
        self._acc = accumulator
        self._cluster_state = cluster_state
        self._partitioner = partitioner
        if isinstance(partitioner, DefaultPartitioner):
            self._default_partitioner = partitioner
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._plain_bytes_keys = plain_bytes_keys
        self._plain_bytes_values = plain_bytes_values
        self._max_record_bytes = max_record_bytes
        self._record_overhead = RECORD_MEMORY_OVERHEAD
        self._size_limit_message = size_limit_message
        self._delivery_type = delivery_type
        self._delivery_struct = <PyTypeObject*>delivery_type
        self._clock_ms = clock_ms
        self._wake_sender = wake_sender
        self._unknown_partition = unknown_partition
        self._not_a_record = not_a_record
        self._checked_topics = set()
        self._partition_slots = {}

    def append_now(self, topic, value, key, headers, partition, timestamp_ms):
        """Buffer the record and return its Delivery, or return it prepared (a tuple) when it must wait first."""
        return self._append_now(topic, value, key, headers, partition, timestamp_ms, None)

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
        cdef AccumulatorFields acc = self._acc
        if (
            info is None
            or (partition is not None and partition >= info.num_partitions)
            or acc.memory_waiters
            or acc.used_bytes + size + self._record_overhead > acc.buffer_memory
        ):
            return key, value, header_list, size, timestamp_ms
        cdef Py_ssize_t index
        outcome = self._buffer(topic, key, value, header_list, size, timestamp_ms, partition, info, &index)
        if bulk is None:
            return self._delivery(outcome, index, timestamp_ms, key, value)
        bulk.add_record(outcome, index, timestamp_ms, -1 if key is None else len(key),
                        -1 if value is None else len(value))
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
                    bulk.add(self._not_a_record(record))
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
                bulk.add(prepared)
                break
            if self.unyielded_bytes >= yield_after_bytes:
                break
        return index

    def place(self, topic, prepared, partition, info):
        """Buffer a prepared record (memory was checked) and return its Delivery."""
        key, value, header_list, size, timestamp_ms = prepared
        cdef Py_ssize_t index
        outcome = self._buffer(topic, key, value, header_list, size, timestamp_ms, partition, info, &index)
        return self._delivery(outcome, index, timestamp_ms, key, value)

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
            raise self._unknown_partition(topic, partition, info)
        else:
            chosen = partition
        self.unyielded_bytes += size
        cdef Py_ssize_t record_bytes = size + self._record_overhead
        cdef Py_ssize_t index = -1
        cdef BatchBuilder builder
        cdef AccumulatorFields acc = self._acc
        cdef _PartitionSlot slot = self._slot(topic, chosen)
        cdef BatchFields batch = slot.open_batch
        if batch is not None and not batch.sealed and type(batch.builder) is BatchBuilder:
            builder = <BatchBuilder>batch.builder
            index = builder.append_record(timestamp_ms, key, value, header_list)
        if index >= 0:
            # The usual case, inlined: the partition's open batch took the record.
            batch.reserved_bytes += record_bytes
            acc.used_bytes += record_bytes
            if builder._size >= acc.batch_size and not batch.full:
                batch.full = True
                self._wake_sender()
        else:
            appended, index, wake = self._acc.append(
                slot.tp, timestamp_ms, key, value, header_list, record_bytes, self._clock_ms
            )
            batch = slot.open_batch = <BatchFields>appended
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

    cdef object _delivery(self, object outcome, Py_ssize_t index, int64_t timestamp_ms, object key, object value):
        # The Delivery subclass adds no fields: allocate it as its compiled base does, without a Python call.
        cdef object handle = self._delivery_struct.tp_new(self._delivery_type, <PyObject*>_NO_ARGS, NULL)
        cdef DeliveryFields fields = <DeliveryFields>handle
        fields._outcome = outcome
        fields._index = index
        fields._timestamp_ms = timestamp_ms
        fields._key_size = -1 if key is None else len(key)
        fields._value_size = -1 if value is None else len(value)
        return handle


# -- settling -------------------------------------------------------------------------------------------------------
cdef inline void _put(object metadata, Py_ssize_t position, object item) noexcept:
    Py_INCREF(item)  # PyTuple_SET_ITEM steals a reference
    PyTuple_SET_ITEM(metadata, position, item)


cdef object _metadata(object topic, object partition, int64_t base_offset, int64_t log_append_time_ms,
                      Py_ssize_t index, int64_t* row):
    """A RecordMetadata, allocated as the named tuple it is, without a Python call."""
    cdef object metadata = PyType_GenericAlloc(<PyTypeObject*>RecordMetadata, 6)
    _put(metadata, 0, topic)
    _put(metadata, 1, partition)
    _put(metadata, 2, base_offset + index if base_offset >= 0 else -1)
    _put(metadata, 3, log_append_time_ms if log_append_time_ms >= 0 else row[2])
    _put(metadata, 4, row[3])
    _put(metadata, 5, row[4])
    # Only a str and ints inside: the collector would untrack it at its next pass anyway.
    PyObject_GC_UnTrack(metadata)
    return metadata


cdef enum:
    COLUMNS = 5  # per record: batch run, index in the batch, timestamp, key size, value size
    NOT_A_DELIVERY = -1  # the run of a record whose entry is in `_others`


cdef class BulkDeliveries:
    """Twin of `aioproducer.bulk_deliveries.BulkDeliveries`: each record's delivery as five integers in one C array, not
    an object per record (which the cyclic garbage collector would walk again and again while a call runs)."""

    cdef int64_t* _columns
    cdef Py_ssize_t _count
    cdef Py_ssize_t _capacity
    cdef list _outcomes  # each distinct batch outcome once; a record's run indexes this list
    cdef dict _run_of
    cdef object _last_outcome
    cdef Py_ssize_t _last_run
    cdef dict _others  # position -> what a record that is not (yet) a delivery holds: its error or prepared form

    def __cinit__(self):
        self._outcomes = []
        self._run_of = {}
        self._others = {}

    def __dealloc__(self):
        PyMem_Free(self._columns)

    def __len__(self):
        return self._count

    cdef int add_record(self, object outcome, Py_ssize_t index, int64_t timestamp_ms, Py_ssize_t key_size,
                        Py_ssize_t value_size) except -1:
        cdef Py_ssize_t run
        if outcome is self._last_outcome:
            run = self._last_run
        else:
            run = self._run_of.get(outcome, -1)
            if run < 0:
                run = len(self._outcomes)
                self._outcomes.append(outcome)
                self._run_of[outcome] = run
            self._last_outcome, self._last_run = outcome, run
        self._grow()
        cdef int64_t* row = self._columns + self._count * COLUMNS
        row[0], row[1], row[2], row[3], row[4] = run, index, timestamp_ms, key_size, value_size
        self._count += 1
        return 0

    cdef int _grow(self) except -1:
        if self._count < self._capacity:
            return 0
        cdef Py_ssize_t capacity = max(self._capacity * 2, 1024)
        cdef int64_t* grown = <int64_t*>PyMem_Realloc(self._columns, capacity * COLUMNS * sizeof(int64_t))
        if grown == NULL:
            raise MemoryError()
        self._columns, self._capacity = grown, capacity
        return 0

    def add(self, item):
        """Append a record's Delivery, or what it failed with at the call, or its prepared form while it waits."""
        if isinstance(item, DeliveryFields):
            fields = <DeliveryFields>item
            return self.add_record(fields._outcome, fields._index, fields._timestamp_ms, fields._key_size,
                                   fields._value_size)
        self._grow()
        self._columns[self._count * COLUMNS] = NOT_A_DELIVERY
        self._others[self._count] = item
        self._count += 1

    def add_waitables(self, items):
        """Twin of the original's: a Delivery not cancelled as a record, anything else as a placeholder."""
        cdef dict others = {}
        cdef DeliveryFields fields
        for item in items:
            if isinstance(item, DeliveryFields) and not (<DeliveryFields>item)._cancelled:
                fields = <DeliveryFields>item
                self.add_record(fields._outcome, fields._index, fields._timestamp_ms, fields._key_size,
                                fields._value_size)
            else:
                others[self._count] = item
                self._grow()
                self._columns[self._count * COLUMNS] = NOT_A_DELIVERY
                self._others[self._count] = None
                self._count += 1
        return others

    def last(self):
        """What the last record holds when it is not a delivery (its error or prepared form), else None."""
        return self._others.get(self._count - 1) if self._count else None

    def set_last(self, item):
        """Replace the last record's entry (a prepared record that has now been placed, or has failed)."""
        self._count -= 1
        self._others.pop(self._count, None)
        self.add(item)

    def outcomes(self):
        """Each batch outcome the records went to, once."""
        return list(self._outcomes)

    def results(self, resolve, Py_ssize_t start=0, stop=None):
        """Each record's RecordMetadata or error, in order, for records `start` to `stop` (default: all; every
        outcome they went to must be settled); `resolve` is `aioproducer.delivery.resolve`, used for batches that
        were split."""
        cdef Py_ssize_t end = self._count if stop is None else min(<Py_ssize_t>stop, self._count)
        # The new list is young and growing: every young collection that its allocations trigger would walk it
        # again. Nothing here can form a cycle, so the collector pauses until the list is built.
        cdef int collecting = PyGC_Disable()
        try:
            return self._results(resolve, max(start, 0), end)
        finally:
            if collecting:
                PyGC_Enable()

    cdef list _results(self, resolve, Py_ssize_t start, Py_ssize_t end):
        cdef list results = []
        cdef int64_t* row
        cdef Py_ssize_t position, index
        cdef int64_t run = NOT_A_DELIVERY, base_offset = -1, log_append_time_ms = -1
        cdef object outcome = None, error = None, topic = None, partition = None
        for position in range(start, end):
            row = self._columns + position * COLUMNS
            if row[0] == NOT_A_DELIVERY:
                results.append(self._others[position])
                continue
            index = row[1]
            if row[0] != run:
                # Records of one batch are mostly consecutive: read each outcome once per run of them.
                run = row[0]
                outcome = self._outcomes[run]
                error, topic, partition = outcome.error, outcome.topic, outcome.partition
                base_offset, log_append_time_ms = outcome.base_offset, outcome.log_append_time_ms
            if outcome.first is not None:  # split: read the half that carries this record
                half, index = resolve(outcome, index)
                if half.error is not None:
                    results.append(half.error)
                else:
                    results.append(
                        _metadata(half.topic, half.partition, half.base_offset, half.log_append_time_ms, index, row)
                    )
            elif error is not None:
                results.append(error)
            else:
                results.append(_metadata(topic, partition, base_offset, log_append_time_ms, index, row))
        return results


# -- records --------------------------------------------------------------------------------------------------------
_PRODUCER_RECORD = None  # aioproducer.models.ProducerRecord, set by install_producer_record


def install_producer_record(record_type):
    """Make `record_type.__new__` the compiled constructor below (records of that exact type only are untracked)."""
    global _PRODUCER_RECORD
    _PRODUCER_RECORD = record_type
    record_type.__new__ = staticmethod(new_producer_record)


def new_producer_record(cls, topic, value=None, *, key=None, headers=None, partition=None, timestamp_ms=None):
    """`ProducerRecord.__new__`, compiled: the named tuple's generated constructor is a Python function."""
    cdef object record = PyType_GenericAlloc(<PyTypeObject*>cls, 6)
    _put(record, 0, topic)
    _put(record, 1, value)
    _put(record, 2, key)
    _put(record, 3, headers)
    _put(record, 4, partition)
    _put(record, 5, timestamp_ms)
    if (
        cls is _PRODUCER_RECORD and _atomic(topic) and _atomic(value) and _atomic(key) and headers is None
        and _atomic(partition) and _atomic(timestamp_ms)
    ):
        # Nothing inside can refer back to the record, so it can never be part of a reference cycle (a user's
        # subclass may carry attributes that do: it stays tracked). CPython
        # untracks plain tuples like this at their first collection, but not a subclass: a send_many caller's
        # chunk of records otherwise survived young collections into the old generation and triggered a full
        # collection every ~70 k records (a pause of ~10 ms or more).
        PyObject_GC_UnTrack(record)
    return record


cdef inline bint _atomic(object item) noexcept:
    """None, bytes, str or int (exactly): objects that hold no references the cyclic collector follows."""
    return item is None or PyBytes_CheckExact(item) or PyUnicode_CheckExact(item) or PyLong_CheckExact(item)
