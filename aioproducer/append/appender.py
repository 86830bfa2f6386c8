"""Appending records on the caller's side: validate, serialize, partition, account memory, buffer, hand back a
`Delivery`.

Owns the per-record hot path of `enqueue` and `send_many`; its compiled twin (`_appender.pyx`) has the same
behaviour. A record that cannot be buffered at once (its topic's metadata is unknown, or buffer memory is short) is
handed back as a `PreparedRecord` — validated and serialized, nothing buffered — for the producer to wait with and
then `place`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from aioproducer.accelerated import compiled_twin
from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.buffer.pool import BufferPool
from aioproducer.deliveries.bulk import BulkDeliveries
from aioproducer.deliveries.delivery import Delivery, new_delivery
from aioproducer.errors import (
    AioProducerError,
    RecordTooLargeError,
    UnknownPartitionError,
    WouldBlockError,
)
from aioproducer.models import Headers
from aioproducer.network.metadata import MetadataState, TopicInfo
from aioproducer.partitioner import Partitioner, choose_partition
from aioproducer.validation import (
    check_headers,
    check_partition,
    check_timestamp,
    check_topic,
    not_a_record,
    record_size,
)

__all__ = [
    "LET_THE_LOOP_RUN",
    "RECORD_MEMORY_OVERHEAD",
    "YIELD_AFTER_BYTES",
    "YIELD_AFTER_BYTES_MAX",
    "YIELD_AFTER_S",
    "Appender",
    "PreparedRecord",
    "PureAppender",
    "must_wait_for",
    "not_a_record",
    "unknown_partition",
]

# What a buffered record costs beyond its bytes (its share of the batch's bookkeeping and of a handle kept by the
# caller), charged to buffer_memory so that the memory a backlog takes stays bounded by buffer_memory plus a constant.
RECORD_MEMORY_OVERHEAD = 160

# enqueue, send_many and send_table yield to the event loop after buffering this many bytes without waiting, so a
# tight loop of calls does not starve the sender (which could then send nothing until buffer_memory is full) or
# other tasks.
YIELD_AFTER_BYTES = 64 * 1024
# enqueue and send_many also wait for YIELD_AFTER_S since they last yielded (a clock read per YIELD_AFTER_BYTES, not
# per record), up to YIELD_AFTER_BYTES_MAX whatever the clock says: each yield lets the sender write a request, and
# at 100 B a record the bytes alone made a yield every 0.3 ms, whose passes, writes and wake-ups of the broker's
# threads took about a fifth of the loop's time. Half a millisecond keeps nearly all of the gain (a whole one kept
# the rest, and doubled the lag it adds to other tasks: the loop-lag goal is a p99 of 5 ms). The interval runs from
# the yield, so what other tasks do meanwhile counts towards it: counting only the caller's own buffering made fewer
# yields but no faster loop, and cost the done-callback loops 6 % at 16 KiB batches (docs/performance.md).
YIELD_AFTER_S = 0.0005
YIELD_AFTER_BYTES_MAX = 256 * 1024
LET_THE_LOOP_RUN = "the producer must let the event loop run first: await enqueue(...)"


def must_wait_for(topic: str) -> str:
    """Why `enqueue_nowait` could not buffer a record of `topic` without waiting."""
    return f"topic {topic!r} has no metadata yet, or buffer memory is short: await enqueue(...)"


class PreparedRecord:
    """A validated, serialized record that must wait — for its topic's metadata or for buffer memory — before it is
    buffered. `size` is what `buffer_memory` will be charged for it, less `RECORD_MEMORY_OVERHEAD`."""

    __slots__ = ("headers", "key", "partition", "size", "timestamp_ms", "topic", "value")

    def __init__(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes | None], ...],
        size: int,
        timestamp_ms: int,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.key = key
        self.value = value
        self.headers = headers
        self.size = size
        self.timestamp_ms = timestamp_ms

    @property
    def memory(self) -> int:
        """The buffer memory the record will take."""
        return self.size + RECORD_MEMORY_OVERHEAD

    def __repr__(self) -> str:
        return f"<PreparedRecord {self.topic}-{self.partition} {self.size} bytes>"


class Appender:
    """Buffers records for one producer. `unyielded_bytes` counts bytes buffered since the caller last yielded
    (`yielded`); `yield_due` says when the caller should let the event loop run."""

    __slots__ = (
        "_acc",
        "_checked_topics",
        "_clock_ms",
        "_cluster_state",
        "_key_serializer",
        "_max_record_bytes",
        "_partitioner",
        "_plain_bytes_keys",
        "_plain_bytes_values",
        "_pool",
        "_size_limit_message",
        "_value_serializer",
        "_wake_sender",
        "_yield_check_bytes",
        "_yielded_at",
        "general_enqueue",
        "general_enqueue_async",
        "plain",
        "unyielded_bytes",
    )

    def __init__(
        self,
        *,
        accumulator: RecordAccumulator,
        pool: BufferPool,
        cluster_state: MetadataState,
        partitioner: Partitioner,
        key_serializer: Callable[[Any], bytes | None],
        value_serializer: Callable[[Any], bytes | None],
        plain_bytes_keys: bool,
        plain_bytes_values: bool,
        max_record_bytes: int,
        size_limit_message: str,
        clock_ms: Callable[[], int],
        wake_sender: Callable[[], None],
    ) -> None:
        self._acc = accumulator
        self._pool = pool
        self._cluster_state = cluster_state
        self._partitioner = partitioner
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._plain_bytes_keys = plain_bytes_keys
        self._plain_bytes_values = plain_bytes_values
        self._max_record_bytes = max_record_bytes
        self._size_limit_message = size_limit_message
        self._clock_ms = clock_ms
        self._wake_sender = wake_sender
        self._checked_topics: set[str] = set()
        self.unyielded_bytes = 0
        self._yield_check_bytes = YIELD_AFTER_BYTES  # when yield_due looks at the clock next
        self._yielded_at = time.monotonic()
        # Set by the producer: whether it is plain now (see enqueue_plain), and its enqueue_nowait and enqueue for
        # when it is not.
        self.plain = False
        self.general_enqueue: Callable[..., Delivery] | None = None
        self.general_enqueue_async: Callable[..., Awaitable[Delivery]] | None = None

    def append_now(
        self, topic: str, value: Any, key: Any, headers: Any, partition: int | None, timestamp_ms: int | None
    ) -> Delivery | PreparedRecord:
        """Buffer the record and return its Delivery, or return it as a PreparedRecord when it must wait first."""
        prepared = self._prepare(topic, value, key, headers, partition, timestamp_ms)
        info = self._cluster_state.cluster.topics.get(topic)
        pool = self._pool
        if (
            info is None
            or (partition is not None and partition >= info.num_partitions)
            or pool.waiters
            or not pool.has_room(prepared.size + RECORD_MEMORY_OVERHEAD)
        ):
            return prepared
        return self.place(prepared, info)

    def enqueue_plain(
        self,
        topic: str,
        value: Any = None,
        *,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Delivery:
        """`Producer.enqueue_nowait` as a plain producer (running; no record serializer, record hooks or
        transaction) hands it out, so that a record costs one call: buffer the record and return its Delivery, or
        raise WouldBlockError, the record not buffered, when it would have to wait (see Producer.enqueue_nowait).
        Called once the producer left that state, it takes the producer's general path (which refuses the record
        of a closing or closed producer)."""
        if not self.plain:
            if self.general_enqueue is None:
                raise RuntimeError("enqueue_plain belongs to a producer's appender")
            return self.general_enqueue(
                topic, value, key=key, headers=headers, partition=partition, timestamp_ms=timestamp_ms
            )
        if self.unyielded_bytes >= YIELD_AFTER_BYTES and self.yield_due():
            raise WouldBlockError(LET_THE_LOOP_RUN)
        delivery = self.append_now(topic, value, key, headers, partition, timestamp_ms)
        if type(delivery) is PreparedRecord:
            raise WouldBlockError(must_wait_for(topic))
        return delivery  # type: ignore[return-value]  # not a PreparedRecord: a Delivery

    async def enqueue_plain_async(
        self,
        topic: str,
        value: Any = None,
        *,
        key: Any = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Delivery:
        """`Producer.enqueue` as a plain producer hands it out: buffer the record at once when nothing needs waiting
        for (what the producer's method does then, with none of its checks left to make: no record hooks,
        serializer or transaction, the producer running), else take the producer's method, which waits (for
        metadata, memory, or to let the loop run) or refuses the record."""
        if self.plain and (self.unyielded_bytes < YIELD_AFTER_BYTES or not self.yield_due()):
            delivery = self.append_now(topic, value, key, headers, partition, timestamp_ms)
            if type(delivery) is not PreparedRecord:
                return delivery  # type: ignore[return-value]  # not a PreparedRecord: a Delivery
        if self.general_enqueue_async is None:
            raise RuntimeError("enqueue_plain_async belongs to a producer's appender")
        return await self.general_enqueue_async(
            topic, value, key=key, headers=headers, partition=partition, timestamp_ms=timestamp_ms
        )

    def yield_due(self) -> bool:
        """Whether the caller should let the event loop run before it buffers more: YIELD_AFTER_BYTES buffered since
        it last did and YIELD_AFTER_S passed, or YIELD_AFTER_BYTES_MAX buffered. The clock is read once per
        YIELD_AFTER_BYTES buffered, not per record."""
        buffered = self.unyielded_bytes
        if buffered < self._yield_check_bytes:
            return False
        if buffered >= YIELD_AFTER_BYTES_MAX or time.monotonic() - self._yielded_at >= YIELD_AFTER_S:
            return True
        # The next look: another YIELD_AFTER_BYTES on, never past the cap (which holds whatever the clock says).
        self._yield_check_bytes = min(buffered + YIELD_AFTER_BYTES, YIELD_AFTER_BYTES_MAX)
        return False

    def yielded(self) -> None:
        """The caller lets the event loop run: counting starts again."""
        self.unyielded_bytes = 0
        self._yield_check_bytes = YIELD_AFTER_BYTES
        self._yielded_at = time.monotonic()

    def append_many(
        self, records: Sequence[Any], start: int, now_wall_ms: int, bulk: BulkDeliveries, yield_after_bytes: int
    ) -> tuple[int, PreparedRecord | None]:
        """Append `records[start:]` to `bulk` (each one's Delivery, or the AioProducerError it raised) until one must
        wait or `unyielded_bytes` reached `yield_after_bytes`. Returns the index to go on from and the record that
        must wait (not in `bulk` yet; it is `records[index - 1]`), if one must. Records without a timestamp take
        `now_wall_ms`."""
        index, count = start, len(records)
        while index < count:
            record = records[index]
            index += 1
            try:
                topic, value, key, headers, partition, timestamp_ms = record
            except (TypeError, ValueError):
                bulk.add(not_a_record(record))
                continue
            try:
                result = self.append_now(
                    topic, value, key, headers, partition, now_wall_ms if timestamp_ms is None else timestamp_ms
                )
            except AioProducerError as exc:
                bulk.add(exc)
                continue
            if type(result) is PreparedRecord:
                return index, result
            bulk.add(result)
            if self.unyielded_bytes >= yield_after_bytes and self.yield_due():
                break
        return index, None

    def place(self, prepared: PreparedRecord, info: TopicInfo) -> Delivery:
        """Buffer a prepared record (memory was checked) and return its Delivery."""
        topic, partition, key = prepared.topic, prepared.partition, prepared.key
        if partition is None:
            partition = choose_partition(self._partitioner, topic, key, prepared.size, info)
        elif partition >= info.num_partitions:  # checked by _prepare: an int, not negative
            raise unknown_partition(topic, partition, info)
        self.unyielded_bytes += prepared.size
        batch, index, wake = self._acc.append(
            (topic, partition),
            prepared.timestamp_ms,
            key,
            prepared.value,
            prepared.headers,
            prepared.size + RECORD_MEMORY_OVERHEAD,
            self._clock_ms,
        )
        if index == 0:
            # A new batch: the topic is in use. Marked per batch, not per record (Java's ProducerMetadata.add runs
            # on every send), so a topic in constant use is never dropped from metadata refreshes as idle.
            self._cluster_state.touch(topic, self._clock_ms())
        if wake:
            self._wake_sender()
        value = prepared.value
        return new_delivery(
            batch.outcome,
            index,
            prepared.timestamp_ms,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
        )

    def _prepare(
        self, topic: str, value: Any, key: Any, headers: Any, partition: int | None, timestamp_ms: int | None
    ) -> PreparedRecord:
        """Validate and serialize: raises a typed error for bad input, before anything is buffered."""
        if topic not in self._checked_topics:
            check_topic(topic)
            self._checked_topics.add(topic)
        if partition is not None:
            check_partition(partition)
        if not (self._plain_bytes_keys and (key is None or type(key) is bytes)):
            key = self._key_serializer(key)
        if not (self._plain_bytes_values and (value is None or type(value) is bytes)):
            value = self._value_serializer(value)
        header_list = check_headers(headers) if headers else ()
        size = record_size(key, value, header_list)
        if size > self._max_record_bytes:
            raise RecordTooLargeError(f"the record is {size} bytes when serialized, {self._size_limit_message}")
        timestamp_ms = int(time.time() * 1000) if timestamp_ms is None else check_timestamp(timestamp_ms)
        return PreparedRecord(topic, partition, key, value, header_list, size, timestamp_ms)


def unknown_partition(topic: str, partition: object, info: TopicInfo) -> UnknownPartitionError:
    """What a record naming a partition the topic does not have fails with."""
    return UnknownPartitionError(
        f"partition {partition!r} does not exist in topic {topic!r}, which has partitions 0..{info.num_partitions - 1}"
    )


# The compiled twin, when built (see aioproducer.accelerated): the same checks, errors, partitions and batches, with
# the usual record's whole path in C. It works with the compiled batches, buffer pool and deliveries only.
PureAppender = Appender
_twin = compiled_twin("aioproducer.append._appender")
if not TYPE_CHECKING and _twin is not None:
    Appender = _twin.Appender
