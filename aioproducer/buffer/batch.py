"""`ProducerBatch`: the records bound for one partition, and everything the producer knows about sending them; pure.

A batch is built once (its `builder` takes records until it is sealed), closed once (compressed into `closed`) and
sent, maybe several times, as one v2 record batch. The accumulator creates and queues it, the appender fills it,
`idempotence` stamps it, the sender sends and settles it; each field below says who may write it. Its records'
deliveries read `outcome`, which the sender settles once for the whole batch.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Sized
from typing import TYPE_CHECKING, Any, Protocol

from aioproducer.accelerated import compiled_twin
from aioproducer.idempotence.sequences import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from aioproducer.records import BatchBuilder, ClosedBatch

__all__ = [
    "LOAD_SAMPLE_BATCHES",
    "ProducerBatch",
    "PureProducerBatch",
    "TopicPartition",
    "pure_queued_bytes",
    "queued_bytes",
]

TopicPartition = tuple[str, int]


class ProducerBatch:
    """Records bound for one partition, built once and sent (maybe several times) as one v2 batch."""

    __slots__ = (
        "attempts",
        "base_sequence",
        "builder",
        "closed",
        "compressing",
        "created_ms",
        "done_callbacks",
        "expedited",
        "full",
        "in_flight",
        "last_error",
        "leader_epoch",
        "leader_id",
        "maybe_written",
        "outcome",
        "partition",
        "producer_epoch",
        "producer_id",
        "reserved_bytes",
        "retry_at_ms",
        "sealed",
        "topic",
        "tp",
    )

    def __init__(self, tp: TopicPartition, builder: BatchBuilder, created_ms: int, outcome: Any) -> None:
        self.tp = tp
        self.topic: str = tp[0]
        self.partition: int = tp[1]
        # Takes records while the batch is open; None once closed (the records then live in `closed`).
        self.builder: BatchBuilder | None = builder
        self.closed: ClosedBatch | None = None  # the compressed records section, set once by `close`
        self.outcome = outcome  # the BatchOutcome its records' deliveries read; settled by the sender only
        self.created_ms = created_ms  # monotonic ms at creation: linger_ms and delivery_timeout_ms count from it
        self.attempts = 0  # sends that came back without a final answer (the accumulator counts them at reenqueue)
        self.retry_at_ms = 0  # not sent again before this (monotonic ms), unless its leader moved
        # The stamp (idempotence.R2): written by `IdempotenceState` only, when first drained.
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self.last_error: BaseException | None = None  # why the last attempt failed, for timeout messages
        # The leader (and its epoch) the last attempt went to: a retry to a newer leader skips its backoff.
        self.leader_id = -1
        self.leader_epoch = -1
        self.reserved_bytes = 0  # buffer memory charged for its records; given back by the accumulator, once
        self.full = False  # holds batch_size bytes: ready at once (set by whoever appends, once)
        # Holds the last records of a caller that now waits for them (send_many, send_table): ready at once.
        self.expedited = False
        self.sealed = False  # takes no more records: the next record for the partition starts a new batch
        self.compressing = False  # being closed beside the event loop: not drained until that is done
        self.in_flight = False  # in a request not answered yet (the accumulator counts these per partition)
        # True once an attempt may have been written (no answer, REQUEST_TIMED_OUT, ...; idempotence.R7).
        self.maybe_written = False
        self.done_callbacks: list[Callable[[], None]] = []  # run once when the batch is released

    @property
    def record_count(self) -> int:
        """Records in the batch."""
        if self.closed is not None:
            return self.closed.record_count
        return self.builder.record_count if self.builder is not None else 0

    def seal(self) -> None:
        """No more appends: the next record for this partition starts a new batch."""
        self.sealed = True

    def close(self) -> ClosedBatch:
        """The encoded (compressed) batch; the builder is dropped once closed."""
        if self.closed is None:
            self.sealed = True
            self.closed = self.builder.close()  # type: ignore[union-attr]  # builder is set until closed is
            self.builder = None
        return self.closed

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the batch on the wire once closed; until then, as if sent uncompressed (an upper bound)."""
        if self.closed is not None:
            return self.closed.size_in_bytes
        return self.builder.estimated_size if self.builder is not None else self.reserved_bytes

    def __repr__(self) -> str:
        return f"<ProducerBatch {self.topic}-{self.partition} records={self.record_count} seq={self.base_sequence}>"


class _Reserved(Protocol):
    reserved_bytes: int


class _Queue(Sized, Iterable[_Reserved], Protocol):
    """A partition's queue of batches, as `queued_bytes` reads it (a deque of ProducerBatch)."""


# How many of a partition's queued batches the adaptive partitioner's load sums; a longer queue's load is taken as
# their mean size times its length (a queue's batches fill to the same size limit, but for its newest). Summing every
# batch on every pass of the sender cost a sixth of the event loop's time with a full buffer of 16 KiB batches
# (hundreds queued per partition); Java's partitionReady counts the batches, in constant time.
LOAD_SAMPLE_BATCHES = 8
# map() over it: no generator frame per batch, on every partition of every pass of the sender.
_reserved_bytes: Callable[[_Reserved], int] = operator.attrgetter("reserved_bytes")


def queued_bytes(queue: _Queue) -> int:
    """The buffer memory a partition's queue holds, for the adaptive partitioner's load (KIP-794): exact up to
    `LOAD_SAMPLE_BATCHES` batches, estimated from the oldest ones beyond. (Here, beside the batch, for its compiled
    twin to read the batches' fields from C: the accumulator asks it for every partition on every pass.)"""
    if len(queue) <= LOAD_SAMPLE_BATCHES:
        return sum(map(_reserved_bytes, queue))
    sample = sum(map(_reserved_bytes, itertools.islice(queue, LOAD_SAMPLE_BATCHES)))
    return sample * len(queue) // LOAD_SAMPLE_BATCHES


# The compiled twin, when built (see aioproducer.accelerated): the same fields, read and written from C by the
# compiled appender; the same load.
PureProducerBatch = ProducerBatch
pure_queued_bytes = queued_bytes
_twin = compiled_twin("aioproducer.buffer._batch")
if not TYPE_CHECKING and _twin is not None:
    ProducerBatch = _twin.ProducerBatch
    queued_bytes = _twin.queued_bytes
