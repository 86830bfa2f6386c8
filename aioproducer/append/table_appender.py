"""Appending the rows of Arrow column batches as records: the per-row path of `send_table`.

Owns the row rules: a row takes its topic (the call's, or its topic column's: null or not valid UTF-8 fails the
row), key and value (null means null), headers, explicit partition (null: the partitioner chooses) and timestamp
(null: the call's time); a row the producer would refuse as a record (too large, an invalid topic name, a bad header
key, a negative partition or timestamp) fails alone, the others go on. A row that must wait — for its topic's
metadata, a partition beyond the known ones, or buffer memory — stops the append; the producer waits and appends
again from that row. The bytes of a row's record are those of the same record given to `enqueue` (the producer's
serializers, made for Python values, do not apply: columns hold bytes, strings as their UTF-8).

This twin reads the rows through the columnar views' Python accessors; the compiled twin (`_table_appender.pyx`)
reads the Arrow buffers in C, partitions and encodes into the open batches without a Python object per row, and
asks the shared error helpers below only for rows that fail.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from aioproducer.accelerated import compiled_twin
from aioproducer.append.appender import RECORD_MEMORY_OVERHEAD, unknown_partition
from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.buffer.pool import BufferPool
from aioproducer.columnar.reader import ColumnBatch
from aioproducer.deliveries.table import TableDeliveries
from aioproducer.errors import AioProducerError, InvalidRecordError, RecordTooLargeError
from aioproducer.network.metadata import MetadataState, TopicInfo
from aioproducer.partitioner import Partitioner, choose_partition
from aioproducer.validation import check_partition, check_timestamp, check_topic, record_size

__all__ = ["PureTableAppender", "TableAppender", "TableWait", "null_topic", "row_error"]


class TableWait(NamedTuple):
    """Why an append stopped before row `row`: its topic's metadata (`partition` is set when the row names one the
    topic does not have yet), or `memory` bytes of buffer memory."""

    row: int
    topic: str
    partition: int | None
    memory: int  # 0 when it waits for metadata


def null_topic(row: int) -> InvalidRecordError:
    """What a row whose topic column holds null fails with."""
    return InvalidRecordError("the row's topic is null")


def row_error(columns: ColumnBatch, row: int) -> AioProducerError:
    """The error a row the compiled twin found invalid in its columns fails with: the column views' own (the same
    words on both twins)."""
    try:
        if columns.topic is not None:
            columns.topic.text_at(row)
        if columns.headers is not None:
            columns.headers.headers_at(row)
        if columns.timestamp is not None:
            columns.timestamp.int_at(row)
    except AioProducerError as exc:
        return exc
    return InvalidRecordError(f"row {row} cannot be read")  # not reached: the compiled twin asks for invalid rows only


class TableAppender:
    """Buffers the rows of column batches for one producer. `unyielded_bytes` counts bytes buffered since the caller
    last yielded (shared with the producer's per-record appender through the producer)."""

    __slots__ = (
        "_acc",
        "_checked_topics",
        "_clock_ms",
        "_cluster_state",
        "_max_record_bytes",
        "_partitioner",
        "_pool",
        "_size_limit_message",
        "_wake_sender",
        "unyielded_bytes",
    )

    def __init__(
        self,
        *,
        accumulator: RecordAccumulator,
        pool: BufferPool,
        cluster_state: MetadataState,
        partitioner: Partitioner,
        max_record_bytes: int,
        size_limit_message: str,
        clock_ms: Callable[[], int],
        wake_sender: Callable[[], None],
    ) -> None:
        self._acc = accumulator
        self._pool = pool
        self._cluster_state = cluster_state
        self._partitioner = partitioner
        self._max_record_bytes = max_record_bytes
        self._size_limit_message = size_limit_message
        self._clock_ms = clock_ms
        self._wake_sender = wake_sender
        self._checked_topics: dict[str, AioProducerError | None] = {}
        self.unyielded_bytes = 0

    def append_rows(
        self,
        columns: ColumnBatch,
        start: int,
        first_row: int,
        topic: str | None,
        now_ms: int,
        deliveries: TableDeliveries,
        yield_after_bytes: int,
        waited: bool,
    ) -> TableWait | None:
        """Append rows `start`.. of `columns` (row n of the table is `first_row + n`) to `deliveries`, each one
        buffered or refused, until one must wait (returned, not appended) or `unyielded_bytes` reached
        `yield_after_bytes` (then a TableWait with no topic says where to go on: `TableWait(row, "", None, 0)`).
        `waited`: the producer already waited for row `start`'s metadata and memory (it is appended now, or fails)."""
        for row in range(start, columns.num_rows):
            table_row = first_row + row
            row_topic = topic
            try:
                if row_topic is None:
                    row_topic = columns.topic.text_at(row)  # type: ignore[union-attr]  # set when topic is None
                    if row_topic is None:
                        raise null_topic(row)
                    self._check_topic(row_topic)
                key = columns.key.bytes_at(row) if columns.key is not None else None
                value = columns.value.bytes_at(row) if columns.value is not None else None
                headers = tuple(columns.headers.headers_at(row)) if columns.headers is not None else ()
                partition = columns.partition.int_at(row) if columns.partition is not None else None
                if partition is not None:
                    check_partition(partition)
                timestamp = columns.timestamp.int_at(row) if columns.timestamp is not None else None
                timestamp_ms = now_ms if timestamp is None else check_timestamp(timestamp)
                size = record_size(key, value, headers)
                if size > self._max_record_bytes:
                    raise RecordTooLargeError(f"the record is {size} bytes when serialized, {self._size_limit_message}")
                info = self._cluster_state.cluster.topics.get(row_topic)
                waits = not (waited and row == start)
                if info is None or (partition is not None and partition >= info.num_partitions):
                    if waits:
                        return TableWait(row, row_topic, partition, 0)
                    if info is None:
                        raise AioProducerError(f"topic {row_topic!r} has no metadata")  # the wait raised already
                    raise unknown_partition(row_topic, partition, info)
                memory = size + RECORD_MEMORY_OVERHEAD
                if waits and (self._pool.waiters or not self._pool.has_room(memory)):
                    return TableWait(row, row_topic, partition, memory)
                outcome, index = self._buffer(row_topic, key, value, headers, partition, timestamp_ms, size, info)
            except AioProducerError as exc:
                deliveries.refuse(table_row, exc)
                continue
            deliveries.add(table_row, outcome, index)
            if self.unyielded_bytes >= yield_after_bytes and row + 1 < columns.num_rows:
                return TableWait(row + 1, "", None, 0)
        return None

    def _check_topic(self, topic: str) -> None:
        if topic not in self._checked_topics:
            try:
                check_topic(topic)
                self._checked_topics[topic] = None
            except AioProducerError as exc:
                self._checked_topics[topic] = exc
        error = self._checked_topics[topic]
        if error is not None:
            raise error

    def _buffer(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes | None], ...],
        partition: int | None,
        timestamp_ms: int,
        size: int,
        info: TopicInfo,
    ) -> tuple[Any, int]:
        if partition is None:
            partition = choose_partition(self._partitioner, topic, key, size, info)
        self.unyielded_bytes += size
        batch, index, wake = self._acc.append(
            (topic, partition), timestamp_ms, key, value, headers, size + RECORD_MEMORY_OVERHEAD, self._clock_ms
        )
        if index == 0:
            self._cluster_state.touch(topic, self._clock_ms())  # a new batch: the topic is in use (see appender)
        if wake:
            self._wake_sender()
        return batch.outcome, index


# The compiled twin, when built (see aioproducer.accelerated): the same rows, errors, partitions and batches.
PureTableAppender = TableAppender
_twin = compiled_twin("aioproducer.append._table_appender")
if not TYPE_CHECKING and _twin is not None:
    TableAppender = _twin.TableAppender
