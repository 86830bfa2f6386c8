# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of `aioproducer.deliveries.table.TableDeliveries`: each pending batch's (row, index) pairs in a C
array, settled in C; the same report (see the original)."""

from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport int64_t
from libc.stdlib cimport qsort
from libc.string cimport memset

import asyncio
from functools import partial

from aioproducer.columnar._arrow cimport Int64Array, int64_array_new, int64_array_set_null

from aioproducer.deliveries.delivery import resolve
from aioproducer.models import RowFailures, TableReport
from aioproducer.deliveries.table import widened


cdef int _compare_rows(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const int64_t*>a)[0]
    cdef int64_t y = (<const int64_t*>b)[0]
    return (x > y) - (x < y)


cdef class _Run:
    def __dealloc__(self):
        PyMem_Free(self.pairs)

    cdef int append(self, int64_t row, int64_t index) except -1:
        cdef Py_ssize_t capacity
        cdef int64_t* grown
        if self.count == self.capacity:
            capacity = max(self.capacity * 2, 256)
            grown = <int64_t*>PyMem_Realloc(self.pairs, capacity * 2 * sizeof(int64_t))
            if grown == NULL:
                raise MemoryError()
            self.pairs, self.capacity = grown, capacity
        self.pairs[2 * self.count] = row
        self.pairs[2 * self.count + 1] = index
        self.count += 1
        return 0


cdef class TableDeliveries:
    """Twin of `aioproducer.deliveries.table.TableDeliveries`."""

    def __init__(self, offsets=False):
        self._runs = {}
        self._per_partition = {}
        self._ranges = {}
        self._failures = {}
        self._offsets_asked = bool(offsets)

    def __dealloc__(self):
        PyMem_Free(self._offsets)
        PyMem_Free(self._known)

    def add(self, row, outcome, index):
        """Row `row` is the record at `index` of the batch settled through `outcome`."""
        self.add_row(row, outcome, index)

    cdef int add_row(self, int64_t row, object outcome, Py_ssize_t index) except -1:
        cdef _Run run
        if outcome is self._last_outcome:
            run = self._last_run
        else:
            run = self._runs.get(outcome)
            if run is None:
                run = self._runs[outcome] = _Run()
                outcome.add_waiter(partial(self._settled, outcome))
            self._last_outcome, self._last_run = outcome, run
        return run.append(row, index)

    def refuse(self, row, error):
        """Row `row` failed before it was buffered (at the call) with `error`."""
        self._fail_rows(error, [row])

    @property
    def pending(self):
        """Batches whose rows are not settled yet."""
        return len(self._runs)

    async def settled(self):
        """Until every row added is settled."""
        if self._runs:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter

    def report(self, rows):
        """What happened to each of the call's `rows` rows (every one settled)."""
        cdef list failures = []
        cdef Py_ssize_t failed = 0
        cdef _Run run
        cdef Int64Array indices
        cdef Py_ssize_t i
        for error, run in self._failures.values():
            qsort(run.pairs, run.count, 2 * sizeof(int64_t), _compare_rows)
            indices = int64_array_new(run.count, "row")
            for i in range(run.count):
                indices.values[i] = run.pairs[2 * i]
            failures.append(RowFailures(error, indices))
            failed += run.count
        offsets = None
        cdef Int64Array column
        if self._offsets_asked:
            column = int64_array_new(rows, "offset")
            for i in range(rows):
                if i < self._offsets_capacity and self._known[i]:
                    column.values[i] = self._offsets[i]
                else:
                    int64_array_set_null(column, i)
            offsets = column
        return TableReport(rows, self._delivered, failed, tuple(failures), dict(self._per_partition),
                           dict(self._ranges), offsets)

    def _settled(self, outcome):
        cdef _Run run = self._runs.pop(outcome)
        if outcome is self._last_outcome:
            self._last_outcome = self._last_run = None
        cdef Py_ssize_t i
        cdef int64_t base, low, high
        if outcome.first is not None:  # split: each row waits on the half that carries it
            for i in range(run.count):
                half, index = resolve(outcome, run.pairs[2 * i + 1])
                self.add_row(run.pairs[2 * i], half, index)
        elif outcome.error is not None:
            self._fail_run(outcome.error, run)
        else:
            self._delivered += run.count
            tp = (outcome.topic, outcome.partition)
            self._per_partition[tp] = self._per_partition.get(tp, 0) + run.count
            base = outcome.base_offset
            low = high = run.pairs[1]
            for i in range(1, run.count):
                if run.pairs[2 * i + 1] < low:
                    low = run.pairs[2 * i + 1]
                elif run.pairs[2 * i + 1] > high:
                    high = run.pairs[2 * i + 1]
            self._ranges[tp] = widened(self._ranges.get(tp), base, low, high)
            if self._offsets_asked:
                if base >= 0:
                    for i in range(run.count):
                        self._set_offset(run.pairs[2 * i], base + run.pairs[2 * i + 1])
        if not self._runs and self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    cdef _Run _failure_run(self, object error):
        key = (type(error), str(error))
        entry = self._failures.get(key)
        if entry is None:
            entry = self._failures[key] = (error, _Run())
        return entry[1]

    def _fail_rows(self, error, rows):
        cdef _Run failed = self._failure_run(error)
        for row in rows:
            failed.append(row, 0)

    cdef _fail_run(self, object error, _Run run):
        cdef _Run failed = self._failure_run(error)
        cdef Py_ssize_t i
        for i in range(run.count):
            failed.append(run.pairs[2 * i], 0)

    cdef int _set_offset(self, int64_t row, int64_t offset) except -1:
        cdef Py_ssize_t capacity
        cdef int64_t* grown
        cdef unsigned char* known
        if row >= self._offsets_capacity:
            capacity = max(row + 1, self._offsets_capacity * 2, 4096)
            grown = <int64_t*>PyMem_Realloc(self._offsets, capacity * sizeof(int64_t))
            if grown == NULL:
                raise MemoryError()
            self._offsets = grown
            known = <unsigned char*>PyMem_Realloc(self._known, capacity)
            if known == NULL:
                raise MemoryError()
            memset(known + self._offsets_capacity, 0, capacity - self._offsets_capacity)
            self._known, self._offsets_capacity = known, capacity
        self._offsets[row] = offset
        self._known[row] = 1
        return 0
