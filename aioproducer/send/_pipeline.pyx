# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of `aioproducer.send.pipeline.BatchPipeline`: compressed batches are closed on one worker thread
in C (`_native.h`: the codec, the header, the CRC-32C), without the GIL, while the event loop goes on appending.

The loop submits a drained batch with its stamp; the worker reads the builder's buffer and writes the encoded batch
into a bytes object the loop allocated; one byte on a pipe tells the loop that finished batches wait in
`completed()`, in the order submitted. An uncompressed batch is closed at once on the loop by the same C (a copy
and the header; no worker round trip is worth it). A batch that is already closed (a retry), or a codec the build
has no native library for, is done at once as the pure twin does it.
"""

from collections import deque

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t

from aioproducer.buffer._batch cimport ProducerBatch
from aioproducer.records._builder cimport BatchBuilder

import os

from aioproducer.records.compression import CompressionType
from aioproducer.errors import AioProducerError
from aioproducer.records.builder import ClosedBatch
from aioproducer.records.layout import BATCH_HEADER_SIZE, CRC_START
from crc32c import crc32c as _crc32c
from aioproducer.send.pipeline import effective_level

_NONE = CompressionType.NONE

cdef extern from "Python.h":
    PyObject* new_bytes "PyBytes_FromStringAndSize"(const char* data, Py_ssize_t size)
    int _PyBytes_Resize(PyObject** data, Py_ssize_t size) except -1

cdef extern from "_native.h" nogil:
    ctypedef struct apn_codec_state:
        pass
    ctypedef struct apn_job:
        const uint8_t* records
        size_t records_len
        uint8_t* out
        size_t out_cap
        size_t out_len
        int codec
        int level
        int used_codec
        int status
        int64_t producer_id
        int16_t producer_epoch
        int32_t base_sequence
        int transactional
        int32_t record_count
        int64_t base_timestamp
        int64_t max_timestamp
        int32_t partition_leader_epoch
        apn_job* next
        void* owner
    ctypedef struct apn_worker:
        pass
    int apn_native_codec(int codec)
    size_t apn_bound(int codec, int level, size_t n)
    uint32_t apn_crc32c(uint32_t crc, const uint8_t* data, size_t n)
    int apn_worker_init(apn_worker* worker, int wake_fd)
    int apn_worker_submit(apn_worker* worker, apn_job* job)
    apn_job* apn_worker_take_done(apn_worker* worker)
    void apn_worker_stop(apn_worker* worker)
    void apn_worker_destroy(apn_worker* worker)
    void apn_copy_uncompressed(apn_job* job)
    void apn_put32(uint8_t* out, uint32_t value)


def crc32c(data, uint32_t value=0):
    """The CRC-32C the worker computes, over `data` continuing from `value` (crc32c.crc32c's meaning): exposed so
    the tests can hold it against an independent implementation."""
    cdef const uint8_t[:] view = data
    cdef uint32_t result
    with nogil:
        result = apn_crc32c(value, &view[0] if view.shape[0] else NULL, view.shape[0])
    return result


def native_codecs():
    """The codecs this build compresses in C (and so beside the loop)."""
    return frozenset(codec for codec in CompressionType if apn_native_codec(int(codec)))


@cython.no_gc_clear  # the worker may still read its buffers: only dropping the last reference frees them
cdef class _Job:
    """One batch on the worker: keeps its builder (whose buffer the worker reads) and its output alive.

    While the worker holds it, the pipeline owns one more reference to it, which the cyclic collector cannot see: a
    producer dropped unclosed, in a reference cycle, is collected without freeing the buffers the worker is still
    reading and writing (its collection clears the pipeline's queue; the pipeline's own deallocation then waits for
    the worker before letting go). So a job refers to nothing that could lead back into such a cycle: its batch
    waits beside it in the pipeline's queue."""

    cdef apn_job job
    cdef BatchBuilder builder
    cdef PyObject* out  # the encoded batch, a bytes object only this job refers to until it is done

    def __dealloc__(self):
        Py_XDECREF(self.out)


@cython.no_gc_clear  # __dealloc__ must stop the worker while the jobs it reads are still alive
cdef class BatchPipeline:
    """Twin of `aioproducer.send.pipeline.BatchPipeline`."""

    cdef apn_worker _worker
    cdef bint _worker_ready
    cdef int _read_fd
    cdef int _write_fd
    cdef object _compression
    cdef int _codec
    cdef int _level
    cdef object _submitted  # deque of (_Job, batch), in submission order (the worker finishes them in that order)
    cdef readonly bint off_loop

    def __cinit__(self):
        self._read_fd = self._write_fd = -1

    def __init__(self, compression, compression_level):
        self._compression = CompressionType(compression)
        self._codec = int(self._compression)
        self._level = effective_level(self._compression, compression_level)
        self._submitted = deque()
        self.off_loop = self._codec != 0 and apn_native_codec(self._codec) == 1
        if self.off_loop:
            self._read_fd, self._write_fd = os.pipe()
            os.set_blocking(self._read_fd, False)
            if apn_worker_init(&self._worker, self._write_fd) != 0:
                raise MemoryError("cannot set up the batch pipeline's worker")
            self._worker_ready = True

    def __dealloc__(self):
        cdef apn_job* job
        cdef apn_job* following
        if self._worker_ready:
            with nogil:
                apn_worker_stop(&self._worker)
            # The worker is gone: the references it held to the jobs it was given and that were not taken back go.
            job = apn_worker_take_done(&self._worker)
            while job != NULL:
                following = job.next
                Py_DECREF(<object>job.owner)
                job = following
            apn_worker_destroy(&self._worker)
        if self._read_fd >= 0:
            os.close(self._read_fd)
            os.close(self._write_fd)

    def fileno(self):
        """A file descriptor readable when `completed()` has batches to give (-1 when all work is done at once)."""
        return self._read_fd

    @property
    def pending(self):
        """Batches submitted and not given back by `completed()` yet."""
        return len(self._submitted)

    def submit(self, batch, producer_id, producer_epoch, base_sequence, transactional):
        """The batch's bytes when done at once, or None when the worker closes it (see `completed`)."""
        if batch.closed is not None or type(batch) is not ProducerBatch or type(batch.builder) is not BatchBuilder:
            # a retry's closed batch, or a pure twin's batch or builder (the C below reads the compiled ones' fields)
            return self._close_as_pure(batch, producer_id, producer_epoch, base_sequence, transactional)
        cdef ProducerBatch producer_batch = <ProducerBatch>batch  # its type checked above
        cdef BatchBuilder builder = <BatchBuilder>producer_batch.builder
        cdef _Job entry
        if not self.off_loop:
            if self._codec != 0 or builder._count == 0:
                return self._close_as_pure(batch, producer_id, producer_epoch, base_sequence, transactional)
            # Uncompressed: the worker's C (copy the section after the header, stamp it) done at once on the loop,
            # where builder.close() and ClosedBatch.encode cost two copies of the records and a dozen Python calls
            # per batch; checksummed as ClosedBatch.encode does it (the crc32c package is faster than _native.h's).
            try:
                entry = self._job(producer_batch, builder, producer_id, producer_epoch, base_sequence, transactional)
            except OverflowError:  # a stamp out of its field's range: ClosedBatch.encode raises its own error
                return self._close_as_pure(batch, producer_id, producer_epoch, base_sequence, transactional)
            apn_copy_uncompressed(&entry.job)
            apn_put32(entry.job.out + 17, _crc32c(memoryview(<object>entry.out)[CRC_START:]))
            return self._closed(entry, producer_batch)
        if builder._count == 0:
            raise AioProducerError("cannot close an empty batch")
        entry = self._job(producer_batch, builder, producer_id, producer_epoch, base_sequence, transactional)
        producer_batch.compressing = True
        Py_INCREF(entry)  # the worker's reference (see _Job), given back in completed() or __dealloc__
        if apn_worker_submit(&self._worker, &entry.job) != 0:
            Py_DECREF(entry)
            producer_batch.compressing = False
            raise AioProducerError("cannot start the batch pipeline's worker thread")
        self._submitted.append((entry, batch))
        return None

    cdef object _close_as_pure(self, batch, producer_id, producer_epoch, base_sequence, transactional):
        """As the pure twin does it: a retry's closed batch, the pure twin's batch or builder, an empty builder, a codec
        with no native library here, a stamp out of range."""
        closed = batch.close()
        return closed.encode(producer_id=producer_id, producer_epoch=producer_epoch,
                             base_sequence=base_sequence, transactional=transactional)

    cdef _Job _job(self, ProducerBatch producer_batch, BatchBuilder builder, producer_id, producer_epoch,
                   base_sequence, transactional):
        """The job closing the batch: its stamp, the builder's buffer to read and a bytes object to write."""
        cdef _Job entry = _Job()
        cdef size_t capacity = BATCH_HEADER_SIZE + apn_bound(self._codec, self._level, builder._len)
        entry.out = new_bytes(NULL, capacity)
        if entry.out == NULL:
            raise MemoryError()
        entry.builder = builder
        entry.job.records = builder._buf
        entry.job.records_len = builder._len
        entry.job.out = <uint8_t*>PyBytes_AS_STRING(<object>entry.out)
        entry.job.out_cap = capacity
        entry.job.codec = self._codec
        entry.job.level = self._level
        entry.job.producer_id = producer_id
        entry.job.producer_epoch = producer_epoch
        entry.job.base_sequence = base_sequence
        entry.job.transactional = 1 if transactional else 0
        entry.job.record_count = builder._count
        entry.job.base_timestamp = builder._base_timestamp
        entry.job.max_timestamp = builder._max_timestamp
        entry.job.partition_leader_epoch = -1
        entry.job.owner = <void*>entry
        # The builder takes no more records and nothing else closes it while its buffer is read.
        producer_batch.sealed = True
        return entry

    def completed(self):
        """Batches the worker has finished, in the order submitted: (batch, its bytes or the codec's error)."""
        cdef list finished = []
        if not self.off_loop:
            return finished
        try:
            while os.read(self._read_fd, 4096):
                pass
        except BlockingIOError:
            pass
        cdef apn_job* job = apn_worker_take_done(&self._worker)
        cdef _Job entry
        while job != NULL:
            entry, batch = self._submitted.popleft()
            if <void*>entry != job.owner:
                raise AioProducerError("the batch pipeline's worker returned batches out of order")
            job = job.next
            Py_DECREF(entry)  # the worker's reference: `entry` holds one of its own here
            finished.append(self._finish(entry, batch))
        return finished

    cdef tuple _finish(self, _Job entry, ProducerBatch batch):
        batch.compressing = False
        if entry.job.status != 0:
            return batch, AioProducerError(f"{self._compression.name.lower()} compression failed")
        return batch, self._closed(entry, batch)

    cdef object _closed(self, _Job entry, ProducerBatch batch):
        """The finished job's encoded batch; the batch is closed with its section, a view into those bytes."""
        _PyBytes_Resize(&entry.out, entry.job.out_len)
        wire = <object>entry.out
        Py_XDECREF(entry.out)
        entry.out = NULL
        closed = ClosedBatch(
            records_section=memoryview(wire)[BATCH_HEADER_SIZE:],
            compression=_NONE if entry.job.used_codec == 0 else CompressionType(entry.job.used_codec),
            record_count=entry.job.record_count,
            base_timestamp=entry.job.base_timestamp,
            max_timestamp=entry.job.max_timestamp,
        )
        entry.builder.finish(closed)
        batch.closed = closed
        batch.builder = None
        return wire

    def shutdown(self):
        """Finish the batches submitted (they still come out of `completed()`) and stop the worker."""
        if self._worker_ready:
            with nogil:
                apn_worker_stop(&self._worker)
