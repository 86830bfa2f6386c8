# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of `aioproducer.buffer.batch.ProducerBatch`: the same fields in a C struct, so the compiled appender and
encoders read and write them without a Python call; the same methods (see the original for what each field means
and who writes it). Also the twin of `queued_bytes`, which reads those fields."""

from aioproducer.buffer.batch import LOAD_SAMPLE_BATCHES
from aioproducer.idempotence.sequences import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE

cdef Py_ssize_t _SAMPLE = LOAD_SAMPLE_BATCHES


cdef class ProducerBatch:
    """Twin of `aioproducer.buffer.batch.ProducerBatch`."""

    def __init__(self, tp, builder, created_ms, outcome):
        self.tp = tp
        self.topic, self.partition = tp
        self.builder = builder
        self.closed = None
        self.outcome = outcome
        self.created_ms = created_ms
        self.attempts = 0
        self.retry_at_ms = 0
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self.last_error = None
        self.leader_id = -1
        self.leader_epoch = -1
        self.reserved_bytes = 0
        self.full = False
        self.expedited = False
        self.sealed = False
        self.compressing = False
        self.in_flight = False
        self.maybe_written = False
        self.done_callbacks = []

    @property
    def record_count(self):
        """Records in the batch."""
        if self.closed is not None:
            return self.closed.record_count
        return self.builder.record_count if self.builder is not None else 0

    def seal(self):
        """No more appends: the next record for this partition starts a new batch."""
        self.sealed = True

    def close(self):
        """The encoded (compressed) batch; the builder is dropped once closed."""
        if self.closed is None:
            self.sealed = True
            self.closed = self.builder.close()
            self.builder = None
        return self.closed

    @property
    def size_in_bytes(self):
        """Bytes of the batch on the wire once closed; until then, as if sent uncompressed (an upper bound)."""
        if self.closed is not None:
            return self.closed.size_in_bytes
        return self.builder.estimated_size if self.builder is not None else self.reserved_bytes

    def __repr__(self):
        return f"<ProducerBatch {self.topic}-{self.partition} records={self.record_count} seq={self.base_sequence}>"


def queued_bytes(queue):
    """Twin of `aioproducer.buffer.batch.queued_bytes`: the same sample and estimate, the fields read from C."""
    cdef Py_ssize_t length = len(queue)
    cdef Py_ssize_t total = 0
    cdef Py_ssize_t read = 0
    for item in queue:
        if read == _SAMPLE:
            break
        if type(item) is ProducerBatch:
            total += (<ProducerBatch>item).reserved_bytes
        else:
            total += item.reserved_bytes
        read += 1
    if length <= _SAMPLE:
        return total
    return total * length // _SAMPLE
