# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of `aioproducer.append.table_appender.TableAppender`: the rows of Arrow column batches read in C (the
columnar views' accessors), partitioned (murmur2 over the key's bytes where they lie, or sticky), encoded into the
partitions' open batches and charged to buffer memory, with no Python object per row. The row rules are the pure
twin's; a row that fails asks the shared Python helpers for its error (the same words on both twins), and a row
that starts a new batch goes through the accumulator as the pure twin's rows do.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcmp, memcpy

from aioproducer.buffer._batch cimport ProducerBatch
from aioproducer.buffer._pool cimport BufferPool
from aioproducer._partitioner cimport DefaultPartitioner
from aioproducer.deliveries._table cimport TableDeliveries
from aioproducer.columnar._arrow cimport (
    ROW_INVALID, ROW_NULL, ROW_VALUE, BytesColumn, BytesColumnView, HeadersColumn, HeadersColumnView, IntColumn,
    IntColumnView, bytes_at, header_at, header_count, int_at, text_at,
)
from aioproducer.records._builder cimport BatchBuilder
from aioproducer.records._varint cimport put_varint, varint_size

from aioproducer.append.appender import RECORD_MEMORY_OVERHEAD, unknown_partition
from aioproducer.errors import AioProducerError, RecordTooLargeError
from aioproducer.partitioner import choose_partition
from aioproducer.records.layout import MAX_RECORD_OVERHEAD
from aioproducer.append.table_appender import TableWait, null_topic, row_error
from aioproducer.validation import HEADER_OVERHEAD_BYTES, check_partition, check_timestamp, check_topic

cdef Py_ssize_t RECORD_OVERHEAD = MAX_RECORD_OVERHEAD
cdef Py_ssize_t HEADER_OVERHEAD = HEADER_OVERHEAD_BYTES
cdef Py_ssize_t MEMORY_OVERHEAD = RECORD_MEMORY_OVERHEAD


cdef inline Py_ssize_t utf8_characters(const uint8_t* data, Py_ssize_t size) noexcept nogil:
    """Code points in valid UTF-8 (validation.record_size counts a header key's characters)."""
    cdef Py_ssize_t count = 0, i
    for i in range(size):
        if (data[i] & 0xC0) != 0x80:
            count += 1
    return count


cdef class _Slot:
    """A partition's key in the accumulator's queues and the batch the appender last put rows in (see the
    record appender's _PartitionSlot)."""

    cdef tuple tp
    cdef ProducerBatch open_batch

    def __cinit__(self, tuple tp):
        self.tp = tp


cdef class _TopicState:
    """What one topic's rows need: its layout (refreshed with each metadata snapshot) and its partitions' slots."""

    cdef str name
    cdef object info
    cdef object snapshot  # the metadata snapshot `info` was read from
    cdef list slots


cdef class TableAppender:
    """Twin of `aioproducer.append.table_appender.TableAppender`."""

    cdef object _acc
    cdef BufferPool _pool
    cdef Py_ssize_t _batch_size
    cdef object _cluster_state
    cdef object _partitioner
    cdef DefaultPartitioner _default_partitioner
    cdef Py_ssize_t _max_record_bytes
    cdef str _size_limit_message
    cdef object _clock_ms
    cdef object _wake_sender
    cdef dict _checked_topics  # topic -> None, or the error its name fails with
    cdef dict _topics  # topic -> _TopicState
    cdef unsigned char* _scratch  # one row's encoded headers
    cdef Py_ssize_t _scratch_capacity
    cdef public Py_ssize_t unyielded_bytes

    def __init__(self, *, accumulator, BufferPool pool not None, cluster_state, partitioner, Py_ssize_t max_record_bytes,
                 str size_limit_message, clock_ms, wake_sender):
        self._acc = accumulator
        self._pool = pool
        self._batch_size = accumulator.batch_size
        self._cluster_state = cluster_state
        self._partitioner = partitioner
        if isinstance(partitioner, DefaultPartitioner):
            self._default_partitioner = partitioner
        self._max_record_bytes = max_record_bytes
        self._size_limit_message = size_limit_message
        self._clock_ms = clock_ms
        self._wake_sender = wake_sender
        self._checked_topics = {}
        self._topics = {}

    def __dealloc__(self):
        PyMem_Free(self._scratch)

    def append_rows(self, columns, Py_ssize_t start, int64_t first_row, topic, int64_t now_ms,
                    TableDeliveries deliveries not None, Py_ssize_t yield_after_bytes, bint waited):
        """Append rows `start`.. of `columns` (see the original)."""
        cdef Py_ssize_t num_rows = columns.num_rows
        cdef const BytesColumn* key_column = NULL
        cdef const BytesColumn* value_column = NULL
        cdef const BytesColumn* topic_column = NULL
        cdef const IntColumn* partition_column = NULL
        cdef const IntColumn* timestamp_column = NULL
        cdef const HeadersColumn* headers_column = NULL
        cdef BytesColumnView bytes_view
        cdef IntColumnView int_view
        cdef HeadersColumnView headers_view
        if columns.key is not None:
            bytes_view = <BytesColumnView?>columns.key
            key_column = &bytes_view.column
        if columns.value is not None:
            bytes_view = <BytesColumnView?>columns.value
            value_column = &bytes_view.column
        if topic is None:
            bytes_view = <BytesColumnView?>columns.topic
            topic_column = &bytes_view.column
        if columns.partition is not None:
            int_view = <IntColumnView?>columns.partition
            partition_column = &int_view.column
        if columns.timestamp is not None:
            int_view = <IntColumnView?>columns.timestamp
            timestamp_column = &int_view.column
        if columns.headers is not None:
            headers_view = <HeadersColumnView?>columns.headers
            headers_column = &headers_view.column

        cdef _TopicState state = None
        cdef const uint8_t* topic_data = NULL
        cdef Py_ssize_t topic_size = -1
        cdef const uint8_t* last_topic_data = NULL  # the bytes `state` was found for (inside the column's buffers)
        cdef Py_ssize_t last_topic_size = -1
        if topic is not None:
            state = self._topic_state(topic)
        cdef const uint8_t* key
        cdef const uint8_t* value
        cdef const uint8_t* header_key
        cdef const uint8_t* header_value
        cdef Py_ssize_t key_size, value_size, header_key_size, header_value_size
        cdef Py_ssize_t headers, h, size, headers_size, row, chosen, index, memory
        cdef int64_t partition, timestamp
        cdef int status
        cdef unsigned char* out
        cdef object info
        cdef object outcome
        for row in range(start, num_rows):
            # -- the topic ---------------------------------------------------------------------------------------
            if topic_column != NULL:
                status = text_at(topic_column, row, &topic_data, &topic_size)
                if status == ROW_NULL:
                    deliveries.refuse(first_row + row, null_topic(row))
                    continue
                if status == ROW_INVALID:
                    deliveries.refuse(first_row + row, row_error(columns, row))
                    continue
                if state is None or topic_size != last_topic_size or (
                    topic_data != last_topic_data and memcmp(topic_data, last_topic_data, topic_size) != 0
                ):
                    name = PyUnicode_DecodeUTF8(<const char*>topic_data, topic_size, NULL)
                    error = self._topic_error(name)
                    if error is not None:
                        state = None
                        deliveries.refuse(first_row + row, error)
                        continue
                    state = self._topic_state(name)
                    last_topic_data, last_topic_size = topic_data, topic_size
            # -- key, value, headers ---------------------------------------------------------------------------------
            key_size = value_size = -1
            key = value = NULL
            if key_column != NULL:
                bytes_at(key_column, row, &key, &key_size)
            if value_column != NULL:
                bytes_at(value_column, row, &value, &value_size)
            size = RECORD_OVERHEAD + (key_size if key_size > 0 else 0) + (value_size if value_size > 0 else 0)
            headers_size = 0
            if headers_column != NULL:
                headers = header_count(headers_column, row)
                if headers:
                    status = self._encode_headers(headers_column, row, headers, &headers_size, &size)
                    if status != ROW_VALUE:
                        deliveries.refuse(first_row + row, row_error(columns, row))
                        continue
            # -- partition and timestamp ---------------------------------------------------------------------------
            partition = -1
            if partition_column != NULL:
                status = int_at(partition_column, row, &partition)
                if status == ROW_NULL:
                    partition = -1
                elif partition < 0:
                    try:
                        check_partition(partition)
                    except AioProducerError as exc:
                        deliveries.refuse(first_row + row, exc)
                    continue
            timestamp = now_ms
            if timestamp_column != NULL:
                status = int_at(timestamp_column, row, &timestamp)
                if status == ROW_NULL:
                    timestamp = now_ms
                elif status == ROW_INVALID:
                    deliveries.refuse(first_row + row, row_error(columns, row))
                    continue
                elif timestamp < 0:
                    try:
                        check_timestamp(timestamp)
                    except AioProducerError as exc:
                        deliveries.refuse(first_row + row, exc)
                    continue
            if size > self._max_record_bytes:
                deliveries.refuse(first_row + row, RecordTooLargeError(
                    f"the record is {size} bytes when serialized, {self._size_limit_message}"
                ))
                continue
            # -- what it waits for ------------------------------------------------------------------------------------
            info = self._info(state)
            if info is None or (partition >= 0 and partition >= info.num_partitions):
                if not (waited and row == start):
                    return TableWait(row, state.name, None if partition < 0 else partition, 0)
                if info is None:
                    deliveries.refuse(first_row + row, AioProducerError(f"topic {state.name!r} has no metadata"))
                else:
                    deliveries.refuse(first_row + row, unknown_partition(state.name, partition, info))
                continue
            memory = size + MEMORY_OVERHEAD
            if not (waited and row == start) and (
                self._pool.waiters or self._pool.used_bytes + memory > self._pool.total_bytes
            ):
                return TableWait(row, state.name, None if partition < 0 else partition, memory)
            # -- the partition -----------------------------------------------------------------------------------------
            if partition >= 0:
                chosen = partition
            elif self._default_partitioner is not None:
                if key_size >= 0:
                    chosen = self._default_partitioner.choose_for_key(state.name, key, key_size, info)
                else:
                    chosen = self._default_partitioner.sticky_partition(state.name, size, info)
            else:
                try:
                    chosen = choose_partition(self._partitioner, state.name, _bytes_or_none(key, key_size), size,
                                              info)
                except AioProducerError as exc:
                    deliveries.refuse(first_row + row, exc)
                    continue
            # -- the append ------------------------------------------------------------------------------------------
            outcome = self._append(state, chosen, timestamp, key, key_size, value, value_size, headers_size,
                                   memory, columns, row, &index)
            self.unyielded_bytes += size
            deliveries.add_row(first_row + row, outcome, index)
            if self.unyielded_bytes >= yield_after_bytes and row + 1 < num_rows:
                return TableWait(row + 1, "", None, 0)
        return None

    cdef object _append(self, _TopicState state, Py_ssize_t chosen, int64_t timestamp, const uint8_t* key,
                        Py_ssize_t key_size, const uint8_t* value, Py_ssize_t value_size, Py_ssize_t headers_size,
                        Py_ssize_t memory, object columns, Py_ssize_t row, Py_ssize_t* index_out):
        """Append one row to its partition's open batch (or, when that batch is full or sealed, through the
        accumulator, which starts a new one); charge its memory. Returns its batch's outcome."""
        cdef list slots = state.slots
        while len(slots) <= chosen:
            slots.append(_Slot((state.name, len(slots))))
        cdef _Slot slot = <_Slot>slots[chosen]
        cdef ProducerBatch batch = slot.open_batch
        cdef BatchBuilder builder
        cdef Py_ssize_t index = -1
        if batch is not None and not batch.sealed and type(batch.builder) is BatchBuilder:
            builder = <BatchBuilder>batch.builder
            index = builder.append_raw(timestamp, key, key_size, value, value_size,
                                       self._scratch if headers_size else NULL, headers_size)
        if index >= 0:
            batch.reserved_bytes += memory
            self._pool.used_bytes += memory
            if builder._size >= self._batch_size and not batch.full:
                batch.full = True
                self._wake_sender()
        else:
            headers = columns.headers.headers_at(row) if headers_size else ()
            appended, index, wake = self._acc.append(
                slot.tp, timestamp, _bytes_or_none(key, key_size), _bytes_or_none(value, value_size), tuple(headers),
                memory, self._clock_ms
            )
            batch = slot.open_batch = <ProducerBatch?>appended
            if index == 0:
                self._cluster_state.touch(state.name, self._clock_ms())
            if wake:
                self._wake_sender()
        index_out[0] = index
        return batch.outcome

    cdef int _encode_headers(self, const HeadersColumn* column, Py_ssize_t row, Py_ssize_t count,
                             Py_ssize_t* encoded_size, Py_ssize_t* record_size) except -2:
        """The row's header section into the scratch buffer (as records.builder.encode_headers writes it), and its
        share of validation.record_size added to `record_size`; ROW_INVALID for a bad entry."""
        cdef const uint8_t* key
        cdef const uint8_t* value
        cdef Py_ssize_t key_size, value_size, needed, h
        needed = varint_size(count)
        for h in range(count):
            if header_at(column, row, h, &key, &key_size, &value, &value_size) != ROW_VALUE:
                return ROW_INVALID
            needed += varint_size(key_size) + key_size + varint_size(value_size) + (value_size if value_size > 0 else 0)
        self._reserve(needed)
        cdef unsigned char* out = put_varint(self._scratch, count)
        for h in range(count):
            header_at(column, row, h, &key, &key_size, &value, &value_size)
            out = put_varint(out, key_size)
            memcpy(out, key, key_size)
            out += key_size
            out = put_varint(out, value_size)
            if value_size > 0:
                memcpy(out, value, value_size)
                out += value_size
            record_size[0] += HEADER_OVERHEAD + utf8_characters(key, key_size) * 4 + (value_size if value_size > 0 else 0)
        encoded_size[0] = needed
        return ROW_VALUE

    cdef int _reserve(self, Py_ssize_t size) except -1:
        cdef unsigned char* grown
        if size > self._scratch_capacity:
            grown = <unsigned char*>PyMem_Realloc(self._scratch, max(size, 2 * self._scratch_capacity, 256))
            if grown == NULL:
                raise MemoryError()
            self._scratch = grown
            self._scratch_capacity = max(size, 2 * self._scratch_capacity, 256)
        return 0

    cdef object _topic_error(self, str name):
        if name not in self._checked_topics:
            try:
                check_topic(name)
                self._checked_topics[name] = None
            except AioProducerError as exc:
                self._checked_topics[name] = exc
        return self._checked_topics[name]

    cdef _TopicState _topic_state(self, str name):
        cdef _TopicState state = self._topics.get(name)
        if state is None:
            state = _TopicState()
            state.name = name
            state.slots = []
            self._topics[name] = state
        return state

    cdef object _info(self, _TopicState state):
        """The topic's layout in the current metadata snapshot (snapshots are immutable: read once per snapshot)."""
        snapshot = self._cluster_state.cluster
        if snapshot is not state.snapshot:
            state.info = snapshot.topics.get(state.name)
            state.snapshot = snapshot
        return state.info


cdef object _bytes_or_none(const uint8_t* data, Py_ssize_t size):
    return None if size < 0 else PyBytes_FromStringAndSize(<const char*>data, size)
