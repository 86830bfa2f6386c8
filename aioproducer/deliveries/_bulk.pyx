# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of `aioproducer.deliveries.bulk.BulkDeliveries`: each record's delivery as five integers in one C
array, not an object per record (which the cyclic garbage collector would walk again and again while a call runs).
The same entries, in the same order, and the same results (see the original)."""

cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.stdint cimport int64_t

from aioproducer.deliveries._delivery cimport Delivery, metadata_of, offset_of, record_metadata, timestamp_of

cdef extern from "Python.h":
    int PyGC_Disable()
    int PyGC_Enable()

cdef enum:
    COLUMNS = 5  # per record: batch run, index in the batch, timestamp, key size, value size
    NOT_A_DELIVERY = -1  # the run of a record whose entry is in `_others`


cdef class BulkDeliveries:
    """Twin of `aioproducer.deliveries.bulk.BulkDeliveries`."""

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
        """Append a record's Delivery, or the error it failed with at the call."""
        cdef Delivery delivery
        if isinstance(item, Delivery):
            delivery = <Delivery>item
            self.add_record(delivery._outcome, delivery._index, delivery._timestamp_ms, delivery._key_size,
                            delivery._value_size)
            return
        self._grow()
        self._columns[self._count * COLUMNS] = NOT_A_DELIVERY
        self._others[self._count] = item
        self._count += 1

    def add_waitables(self, items):
        """Twin of the original's: a Delivery not cancelled as a record, anything else as a placeholder."""
        cdef dict others = {}
        cdef Delivery delivery
        for item in items:
            if isinstance(item, Delivery) and not (<Delivery>item)._cancelled:
                delivery = <Delivery>item
                self.add_record(delivery._outcome, delivery._index, delivery._timestamp_ms, delivery._key_size,
                                delivery._value_size)
            else:
                others[self._count] = item
                self._grow()
                self._columns[self._count * COLUMNS] = NOT_A_DELIVERY
                self._others[self._count] = None
                self._count += 1
        return others

    def is_delivery(self, Py_ssize_t position):
        """Whether the record at `position` was buffered (holds a Delivery), rather than refused at the call."""
        if not 0 <= position < self._count:
            raise IndexError(position)
        return self._columns[position * COLUMNS] != NOT_A_DELIVERY

    cdef Py_ssize_t _end_of(self, object stop) except -1:
        """Where records `start` to `stop` end, as the original's slice of its list reads `stop` (None: all; a
        negative one counts from the end)."""
        if stop is None:
            return self._count
        cdef Py_ssize_t end = stop
        if end < 0:
            end = max(self._count + end, 0)
        return min(end, self._count)

    def outcomes(self, Py_ssize_t start=0, stop=None):
        """Each batch outcome the records `start` to `stop` (default: all) went to, once."""
        cdef Py_ssize_t end = self._end_of(stop)
        start = max(start, 0)
        if start == 0 and end == self._count:
            return list(self._outcomes)
        cdef list outcomes = []
        cdef set runs = set()
        cdef int64_t run, last = NOT_A_DELIVERY
        cdef Py_ssize_t position
        for position in range(start, end):
            run = self._columns[position * COLUMNS]
            if run == NOT_A_DELIVERY or run == last:  # records of one batch are mostly consecutive
                continue
            last = run
            if run not in runs:
                runs.add(run)
                outcomes.append(self._outcomes[run])
        return outcomes

    def results(self, resolve, Py_ssize_t start=0, stop=None):
        """Each record's RecordMetadata or error, in order, for records `start` to `stop` (default: all; every
        outcome they went to must be settled); `resolve` is `aioproducer.deliveries.delivery.resolve`, used for batches that
        were split."""
        cdef Py_ssize_t end = self._end_of(stop)
        start = max(start, 0)
        cdef list results = [None] * max(end - start, 0)
        # The new list is young: every young collection that its items' allocations trigger would walk it again.
        # Nothing here can form a cycle, so the collector pauses until the list is built.
        cdef int collecting = PyGC_Disable()
        try:
            self._fill(resolve, results, start, start, end, False, None)
        finally:
            if collecting:
                PyGC_Enable()
        return results

    def fill_settled(self, resolve, list results, Py_ssize_t start, Py_ssize_t stop, unbuilt):
        """Twin of the original's `fill_settled`."""
        if len(results) != self._count:
            raise ValueError("fill_settled takes a list with one entry per record")
        cdef Py_ssize_t end = min(max(stop, 0), self._count)
        cdef int collecting = PyGC_Disable()
        try:
            return self._fill(resolve, results, 0, max(start, 0), end, True, unbuilt)
        finally:
            if collecting:
                PyGC_Enable()

    # Checked indexing: `resolve` is the caller's, and could shrink the list under the loop (the original raises
    # IndexError then; unchecked, a write would land past the list's end).
    @cython.boundscheck(True)
    cdef Py_ssize_t _fill(self, resolve, list results, Py_ssize_t offset, Py_ssize_t start, Py_ssize_t end,
                          bint settled_only, object unbuilt) except -1:
        """Put the result of record `position` (start <= position < end) at `results[position - offset]`; with
        `settled_only`, only where that entry is `unbuilt` and the record's batch has settled. Returns the first
        position whose entry is left unbuilt (`end` when none)."""
        cdef int64_t* row
        cdef Py_ssize_t position, index, first_unbuilt = end
        cdef int64_t run = NOT_A_DELIVERY, base_offset = -1, log_append_time_ms = -1
        cdef object outcome = None, error = None, topic = None, partition = None, half
        cdef bint settled = True
        # Records of one call mostly share their timestamp (the call's) and their sizes: consecutive equal values
        # share one int object rather than each allocating its own. Fewer objects per record can also keep CPython's
        # small-object arenas from being released and mapped afresh at every call: in a process making send_many
        # calls of 10 k records of 100 B to a Kafka node, 23-30 page faults per 1000 records with an int per
        # timestamp, 0-7 with them shared (how many a process takes depends on what else it allocates).
        cdef _SharedInt timestamps = _SharedInt(), key_sizes = _SharedInt(), value_sizes = _SharedInt()
        for position in range(start, end):
            if settled_only and results[position - offset] is not unbuilt:
                continue
            row = self._columns + position * COLUMNS
            if row[0] == NOT_A_DELIVERY:
                results[position - offset] = self._others[position]
                continue
            index = row[1]
            if row[0] != run:
                # Records of one batch are mostly consecutive: read each outcome once per run of them.
                run = row[0]
                outcome = self._outcomes[run]
                settled = outcome.first is not None or outcome.done  # a split one: each record's half says
                error, topic, partition = outcome.error, outcome.topic, outcome.partition
                base_offset, log_append_time_ms = outcome.base_offset, outcome.log_append_time_ms
            if outcome.first is not None:  # split: read the half that carries this record
                half, index = resolve(outcome, index)
                if settled_only and not half.done:
                    first_unbuilt = min(first_unbuilt, position)
                elif half.error is not None:
                    results[position - offset] = half.error
                else:
                    results[position - offset] = record_metadata(
                        half.topic, half.partition, half.base_offset, half.log_append_time_ms, index, row[2], row[3],
                        row[4])
            elif settled_only and not settled:
                first_unbuilt = min(first_unbuilt, position)
            elif error is not None:
                results[position - offset] = error
            else:
                results[position - offset] = metadata_of(
                    topic, partition, offset_of(base_offset, index),
                    timestamps.of(timestamp_of(log_append_time_ms, row[2])), key_sizes.of(row[3]),
                    value_sizes.of(row[4]))
        return first_unbuilt


cdef class _SharedInt:
    """The int object of the last value asked for, handed out again while the value stays the same."""

    cdef int64_t value
    cdef object number

    cdef inline object of(self, int64_t value):
        if self.number is None or value != self.value:
            self.value, self.number = value, value
        return self.number
