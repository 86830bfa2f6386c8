"""`Producer.send_table`: every row of an Arrow table buffered in place, batch by batch, and one report of what
became of them; mixed into `Producer`.

Owns the table path's waits (a row's topic metadata and buffer memory, together bounded by `max_block_ms`; topics
that already timed out in the call fail their later rows at once) and the turn calls take. What a row must be and
which batch it joins are `append.table_appender`'s; how its outcome is kept and reported is `deliveries.table`'s.
What it needs of the producer it is mixed into is `TableHost`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from aioproducer.append.appender import YIELD_AFTER_BYTES, Appender
from aioproducer.append.table_appender import TableAppender
from aioproducer.append.table_records import send_table_as_records
from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.buffer.memory import MemoryWaiters
from aioproducer.columnar.reader import ArrowReader
from aioproducer.config import ProducerConfig
from aioproducer.deliveries.bulk import Deliveries
from aioproducer.deliveries.table import TableDeliveries
from aioproducer.errors import AioProducerError, InvalidTableError, MetadataTimeoutError, UnknownPartitionError
from aioproducer.models import ProducerRecord, RecordMetadata, TableReport
from aioproducer.network.cluster import Cluster
from aioproducer.network.metadata import TopicInfo
from aioproducer.observability.observer import Observer
from aioproducer.observability.record_hooks import CallWatch, RecordHooks
from aioproducer.validation import check_topic

if TYPE_CHECKING:
    from aioproducer.transactions.manager import TransactionManager

__all__ = ["TableHost", "TableMethods"]


class TableHost(Protocol):
    """What `send_table` needs of the producer it is mixed into: `Producer`'s parts, set up by `start()`, and its
    checks, waits and `send_many` path."""

    @property
    def config(self) -> ProducerConfig: ...

    @property
    def _txn(self) -> TransactionManager | None: ...

    @property
    def _record_hooks(self) -> RecordHooks | None: ...

    @property
    def _table_turn(self) -> asyncio.Lock: ...

    @property
    def _table_appender(self) -> TableAppender: ...

    @property
    def _row_appender(self) -> Appender: ...

    @property
    def _loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def _cluster(self) -> Cluster: ...

    @property
    def _memory_waiters(self) -> MemoryWaiters: ...

    @property
    def _accumulator(self) -> RecordAccumulator: ...

    @property
    def _observer(self) -> Observer: ...

    def _raise_unless_running(self) -> None: ...

    def _refusal(self, transaction: int | None = None) -> AioProducerError | None: ...

    async def _enqueue_many(
        self,
        records: Iterable[ProducerRecord],
        appender: Appender | None = None,
        watch: CallWatch | None = None,
        transaction: int | None = None,
    ) -> Deliveries: ...

    def _send_buffered_now(self) -> None: ...

    async def _wait_for_topic(self, topic: str, partition: int | None) -> TopicInfo: ...


class TableMethods:
    """Publishing Arrow tables (`send_table`) on a `TableHost`."""

    async def send_table(
        self: TableHost,
        data: Any,
        *,
        topic: str | None = None,
        topic_column: str | None = None,
        key: str | None = None,
        value: str | None = None,
        headers: str | None = None,
        partition: str | None = None,
        timestamp: str | None = None,
        offsets: bool = False,
    ) -> TableReport:
        """Send every row of a table as a record, and wait until each is delivered or failed; one `TableReport`.

        `data` is anything that speaks the Arrow PyCapsule interface (a pyarrow Table, RecordBatch or
        RecordBatchReader, a polars or pandas DataFrame, a DuckDB result, ...): its buffers are read in place,
        batch by batch, and no Python object is made per row. Name the columns by role: `key` and `value` (binary
        or string, null meaning null), `headers` (a list of struct<key: string, value: binary>, or a map),
        `partition` (integers; null lets the partitioner choose), `timestamp` (epoch milliseconds, or an Arrow
        timestamp; null: now); one `topic` for every row, or a `topic_column`. Columns hold the records' bytes
        (strings as their UTF-8): the producer's serializers, made for Python values, do not apply.

        A column that cannot be used (missing, of the wrong type, shorter than the table) raises InvalidTableError
        naming it, before anything is sent. A row that cannot be sent (too large, a null or invalid topic, a bad
        header key, a negative partition or timestamp, a partition the topic lacks) fails alone: the report lists
        failed rows by error. With `offsets=True` the report holds each row's offset, as an Arrow array.

        As `send_many`: idempotence, per-partition order and transactions hold; `buffer_memory` bounds what is
        buffered (a larger table streams through it); the last batches go out at once rather than after linger_ms.
        Cancelling stops reading the table (rows already buffered are still delivered); once the producer starts
        closing, rows not yet buffered fail with ProducerClosedError and the table is read no further. With record
        hooks (or OpenTelemetry's) every row is shown to them, as a ProducerRecord: that path is send_many's.

        Calls made without awaiting each other buffer their rows in turn, in the order they were made (a partition
        receives them in that order). Once a wait for a topic's metadata (or a partition it lacks) failed after
        `max_block_ms`, the call's later rows needing the same fail at once.
        """
        self._raise_unless_running()
        if (topic is None) == (topic_column is None):
            raise InvalidTableError(
                "send_table takes one topic for every row (topic=) or a topic column (topic_column=)"
            )
        if topic is not None:
            check_topic(topic)
        transaction = None  # the transaction every row goes to, when transactional (none spans two)
        if self._txn is not None:
            self._txn.check_send()
            transaction = self._txn.state.transactions_begun
        reader = ArrowReader(
            data, key=key, value=value, topic=topic_column, partition=partition, timestamp=timestamp, headers=headers
        )
        hooks = self._record_hooks
        if hooks is not None:
            # Each row is shown to the hooks as a record: send_many's path, the serializers left out (the columns
            # hold the records' bytes). The whole call takes its turn: send_many waits for each chunk's records.
            async def send_rows(records: list[ProducerRecord]) -> list[RecordMetadata | BaseException]:
                return await hooks.around_send_many(
                    records,
                    partial(self._enqueue_many, appender=self._row_appender, transaction=transaction),
                    self._send_buffered_now,
                )

            async with self._table_turn:
                return await send_table_as_records(reader, topic, send_rows, offsets)
        deliveries = TableDeliveries(offsets)
        async with self._table_turn:  # the rows are buffered in turn; their delivery is waited for together
            rows = await _buffer_table(self, reader, topic, deliveries, transaction)
        return await _table_report(self, deliveries, rows)


async def _buffer_table(
    producer: TableHost, reader: ArrowReader, topic: str | None, deliveries: TableDeliveries, transaction: int | None
) -> int:
    """Buffer (or refuse) every row of the table into `deliveries`; the number of rows read."""
    appender = producer._table_appender
    # Topics whose metadata did not come within max_block_ms in this call: topic -> (the lowest partition it
    # lacked, or -1 when the topic itself is missing, and the error). Their later rows fail at once: waiting
    # max_block_ms again for each would hold a table of such rows for hours.
    missing: dict[str, tuple[int, AioProducerError]] = {}
    rows = 0
    with reader:
        for columns in reader:
            start, waited = 0, False
            while start < columns.num_rows:
                stop = producer._refusal(transaction)
                if stop is not None:  # closing, or the transaction ended: this batch's rest fails, no more is read
                    for row in range(start, columns.num_rows):
                        deliveries.refuse(rows + row, stop)
                    return rows + columns.num_rows
                wait = appender.append_rows(
                    columns, start, rows, topic, int(time.time() * 1000), deliveries, YIELD_AFTER_BYTES, waited
                )
                if wait is None:
                    break
                start, waited = wait.row, False
                if not wait.topic:  # buffered enough without yielding: let the sender and other tasks run
                    appender.unyielded_bytes = 0
                    await asyncio.sleep(0)
                    continue
                known = missing.get(wait.topic) if not wait.memory else None
                if known is not None:
                    error = _still_missing(wait.topic, wait.partition, *known)
                    if error is not None:
                        deliveries.refuse(rows + start, error)
                        start += 1
                        continue
                try:
                    await _wait_to_append(producer, wait.topic, wait.partition, wait.memory)
                    waited = True
                except AioProducerError as exc:  # metadata or memory did not come within max_block_ms
                    deliveries.refuse(rows + start, exc)
                    start += 1
                    if not wait.memory and isinstance(exc, (MetadataTimeoutError, UnknownPartitionError)):
                        lacked = -1 if wait.partition is None or type(exc) is MetadataTimeoutError else wait.partition
                        if known is None or 0 <= lacked < known[0]:
                            missing[wait.topic] = (lacked, exc)
            rows += columns.num_rows
    return rows


async def _table_report(producer: TableHost, deliveries: TableDeliveries, rows: int) -> TableReport:
    # Nothing more is coming from this call: its last batches go out now rather than after linger_ms.
    producer._send_buffered_now()
    await deliveries.settled()
    return deliveries.report(rows)


async def _wait_to_append(producer: TableHost, topic: str, partition: int | None, memory: int) -> None:
    """Wait for what a row needs before it is buffered: its topic's metadata (a partition beyond the known ones
    included), or `memory` bytes of buffer memory; together bounded by `max_block_ms`."""
    deadline = producer._loop.time() + producer.config.max_block_ms / 1000
    info = producer._cluster.metadata.topics.get(topic)
    if info is None or not info.num_partitions or (partition is not None and partition >= info.num_partitions):
        info = await producer._wait_for_topic(topic, partition)
    if memory and (producer._memory_waiters or not producer._accumulator.has_room(memory)):
        await producer._observer.timed_memory_wait(producer._memory_waiters.wait(memory, deadline))


def _still_missing(topic: str, partition: int | None, lacked: int, error: AioProducerError) -> AioProducerError | None:
    """What a row waiting for `topic`'s metadata fails with at once, when this call already waited max_block_ms in vain
    for the topic (`lacked` -1) or for its partition `lacked` (the row names that one or a higher one); else None."""
    if lacked < 0 or partition == lacked:
        return error
    if partition is not None and partition > lacked:
        return UnknownPartitionError(
            f"partition {partition} of topic {topic!r} is not in its metadata: partition {lacked} was not there "
            "after max_block_ms earlier in this send_table call"
        )
    return None
