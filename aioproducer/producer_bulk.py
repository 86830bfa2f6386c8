"""`Producer.send_many` and `Producer.enqueue_many`: many records buffered in order by one call, one result per
record; mixed into `Producer`.

Owns the call's path: reading the records (an iterator a chunk at a time, anything else whole), the serializers
over the whole list, buffering record after record (waiting for metadata and memory where one must, yielding to the
loop during a long call), and handing the record hooks the call's `Deliveries`. How each record is appended is
`append.appender`'s; how the results are kept and built is `deliveries.bulk`'s. What it needs of the producer it is
mixed into is `BulkHost`.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from aioproducer.append.appender import YIELD_AFTER_BYTES, YIELD_AFTER_S, Appender, PreparedRecord
from aioproducer.deliveries.bulk import BulkDeliveries, Deliveries
from aioproducer.deliveries.delivery import Delivery
from aioproducer.errors import AioProducerError, RecordSourceError
from aioproducer.models import ProducerRecord, RecordMetadata
from aioproducer.observability.record_hooks import CallWatch, RecordHooks
from aioproducer.serializers import RecordSerializer
from aioproducer.validation import read_records

# How many records `_buffer_stream` reads from an iterator at a time, at most: a chunk stays well under the tracked
# allocations that set off the cyclic collector's young generation (700; 2000 from Python 3.13), so a generator's
# records do not make it run (a call given a list of 10 k tuples sets it off 12-13 times on Python 3.11). The first
# chunk is smaller: how long it took to read sets the size of the next ones.
STREAM_CHUNK = 256
STREAM_FIRST_CHUNK = 16


def records_whole(records: Iterable[Any]) -> Sequence[Any]:
    """`records` read whole (`read_records`: a sequence as it is); InvalidRecordError for one that is not iterable,
    RecordSourceError when reading it raised (then nothing of it is buffered)."""
    whole, error = read_records(records)
    if error is not None:
        raise reading_failed(error, BulkDeliveries()) from error
    return whole


def reading_failed(error: Exception, bulk: BulkDeliveries) -> RecordSourceError:
    """The error of a call whose records raised `error` as it read them; `bulk` holds the results of those it read
    before (buffered or refused)."""
    done = f"the {len(bulk)} read before it were buffered or refused (their results: its deliveries)"
    return RecordSourceError(
        f"reading the records raised {error!r}; {done if len(bulk) else 'none was sent'}", Deliveries(bulk, None)
    )


if TYPE_CHECKING:
    from aioproducer.transactions.manager import TransactionManager

__all__ = ["BulkHost", "BulkMethods"]


class BulkHost(Protocol):
    """What `send_many` and `enqueue_many` need of the producer they are mixed into: `Producer`'s parts, set up by
    `start()`, and its checks and waits."""

    @property
    def _txn(self) -> TransactionManager | None: ...

    @property
    def _record_hooks(self) -> RecordHooks | None: ...

    @property
    def _record_serializer(self) -> RecordSerializer | None: ...

    @property
    def _appender(self) -> Appender: ...

    def _raise_unless_running(self) -> None: ...

    def _refusal(self, transaction: int | None = None) -> AioProducerError | None: ...

    async def _append_after_waiting(
        self, prepared: PreparedRecord, appender: Appender | None = None, transaction: int | None = None
    ) -> Delivery: ...

    def _send_buffered_now(self) -> None: ...

    async def _send_many(self, records: Iterable[ProducerRecord]) -> list[RecordMetadata | BaseException]: ...

    async def _enqueue_many(
        self,
        records: Iterable[ProducerRecord],
        appender: Appender | None = None,
        watch: CallWatch | None = None,
        transaction: int | None = None,
    ) -> Deliveries: ...

    async def _buffer_stream(
        self, records: Iterator[Any], appender: Appender, bulk: BulkDeliveries, transaction: int | None
    ) -> None: ...

    async def _buffer_many(
        self,
        batch: Sequence[Any],
        appender: Appender,
        bulk: BulkDeliveries,
        watch: CallWatch | None,
        transaction: int | None,
    ) -> None: ...


class BulkMethods:
    """Many records in one call (`send_many`, `enqueue_many`) on a `BulkHost`."""

    async def send_many(self: BulkHost, records: Iterable[ProducerRecord]) -> list[RecordMetadata | BaseException]:
        """Send many records; one result per record, in order: its RecordMetadata or the exception it failed with.

        A bad record fails only itself. Records without a timestamp share the call's. Cancelling `send_many` stops
        buffering further records; those already buffered are still delivered, sent at once as a finished call's
        last records are. When the producer starts closing while the call is buffering, the records not yet buffered
        fail with ProducerClosedError.

        `records` is any finite iterable. A sequence (a list) is read in place: it must not change until the call
        returns. Another collection (a set, a dict's values) is copied first, as it could change while the call
        waits. An iterator (a generator, say) is read as the call goes, up to STREAM_CHUNK records at a time, so
        that its records never all exist at once; unless the producer has record hooks or a context-aware or async
        serializer, which take the call's records whole first. The results then cover the records read: once
        buffering is refused (closing began, or the call's transaction ended), the call reads no further. Should
        reading `records` raise an `Exception`, the call raises RecordSourceError (that error as its cause), whose
        `deliveries` hold the result of each record read before it: those records were buffered or refused, as any
        call's (none is buffered when the call reads its records whole first). A call cancelled while it reads an
        iterator, or interrupted by an exception that is not an `Exception`, may leave up to STREAM_CHUNK - 1
        records it had read neither buffered nor failed.
        """
        if self._record_hooks is not None:
            return await self._record_hooks.around_send_many(
                records_whole(records), self._enqueue_many, self._send_buffered_now
            )
        return await self._send_many(records)

    async def enqueue_many(self: BulkHost, records: Iterable[ProducerRecord]) -> Deliveries:
        """Buffer many records, in order, and return as soon as each is buffered (or refused): await the returned
        `Deliveries` for one result per record, its RecordMetadata or the exception it failed with.

        `send_many` without the wait, as `enqueue` is `send` without it: calls made one after another keep their
        records' order, and the wait for one call's results can overlap the next calls, so the broker is never
        idle while the caller prepares its next list. Waits (up to `max_block_ms`) only for metadata and buffer
        memory, as `enqueue` does; sending is not hurried (`linger_ms` applies; `flush` sends at once). A bad
        record fails only itself. Cancelling `enqueue_many` stops buffering further records; those already buffered
        are still delivered. `records` is read as `send_many` reads it (an iterator as the call goes).
        """
        if self._record_hooks is not None:
            return await self._record_hooks.around_enqueue_many(records_whole(records), self._enqueue_many)
        return await self._enqueue_many(records)

    async def _send_many(self: BulkHost, records: Iterable[ProducerRecord]) -> list[RecordMetadata | BaseException]:
        """send_many's work, without record hooks."""
        try:
            deliveries = await self._enqueue_many(records)
        except BaseException:
            # Cancelled, or reading the records raised: what the call buffered goes out as a finished call's would.
            self._send_buffered_now()
            raise
        # Nothing more is coming from this call: its last batches go out now rather than after linger_ms.
        self._send_buffered_now()
        return await deliveries._settled_future()  # bare, not shielded: nobody else holds this call's Deliveries

    async def _enqueue_many(
        self: BulkHost,
        records: Iterable[ProducerRecord],
        appender: Appender | None = None,
        watch: CallWatch | None = None,
        transaction: int | None = None,
    ) -> Deliveries:
        """enqueue_many's work (and send_many's buffering); with `appender` (the bytes-only one of send_table's rows
        shown to record hooks) the serializers do not apply. `watch` (the record hooks') is told of the records as
        they are buffered, and given the call's Deliveries at its end, also when it is cancelled meanwhile: then
        the records not buffered yet hold the CancelledError, and those buffered their own outcome when it comes."""
        self._raise_unless_running()
        if self._txn is not None:
            # The call's records all go to the transaction open now (or to one `transaction` given by a send_table
            # call, which makes one call per chunk of rows): once it ends, the rest are refused.
            self._txn.check_send(transaction)
            if transaction is None:
                transaction = self._txn.state.transactions_begun
        bulk = BulkDeliveries()
        if appender is None and watch is None and self._record_serializer is None and isinstance(records, Iterator):
            # Read as the call goes, never whole: nothing here needs the call's records whole.
            await self._buffer_stream(records, self._appender, bulk, transaction)
            return Deliveries(bulk, None)
        batch: Sequence[Any] = records_whole(records)
        refused = None
        try:
            if appender is None:
                appender = self._appender
                if self._record_serializer is not None:
                    batch, refused = await self._record_serializer.apply_many(batch)
                    if watch is not None:
                        watch.serialized(refused)
            await self._buffer_many(batch, appender, bulk, watch, transaction)
        except BaseException as exc:
            if watch is not None:
                for _ in range(len(bulk), len(batch)):
                    bulk.add(exc)
                watch.buffered(bulk)
                watch.end(Deliveries(bulk, refused))
            raise
        deliveries = Deliveries(bulk, refused)
        if watch is not None:
            watch.end(deliveries)
        return deliveries

    async def _buffer_stream(
        self: BulkHost, records: Iterator[Any], appender: Appender, bulk: BulkDeliveries, transaction: int | None
    ) -> None:
        """Buffer the records an iterator yields, a chunk at a time, so that they never all exist at once. A chunk
        is STREAM_CHUNK records at most, and no more than the iterator yields in YIELD_AFTER_S: the time it takes
        counts towards the call's next yield to the loop (`_buffer_many`), as a slow caller's time between
        `enqueue` calls does, so a slow iterator's records are buffered a few at a time and the yields stay on time.
        Should it raise, what it yielded before is buffered, then RecordSourceError holds their deliveries. Once
        buffering is refused (closing began, or the call's transaction ended), the iterator is read no further: the
        rest of the chunk read holds the refusal (an endless iterator would otherwise be read, and refused, forever).
        """
        size = STREAM_FIRST_CHUNK
        while True:
            chunk: list[Any] = []
            started = time.monotonic()
            try:
                chunk.extend(itertools.islice(records, size))  # extend keeps what it read should it raise
            except Exception as exc:
                await self._buffer_many(chunk, appender, bulk, None, transaction)
                raise reading_failed(exc, bulk) from exc
            reading_s = time.monotonic() - started
            if chunk:
                await self._buffer_many(chunk, appender, bulk, None, transaction)
            if len(chunk) < size or self._refusal(transaction) is not None:
                return  # the iterator ended (it is not asked again), or nothing more may be buffered
            size = min(STREAM_CHUNK, max(1, int(size * YIELD_AFTER_S / reading_s))) if reading_s > 0 else STREAM_CHUNK

    async def _buffer_many(
        self: BulkHost,
        batch: Sequence[Any],
        appender: Appender,
        bulk: BulkDeliveries,
        watch: CallWatch | None,
        transaction: int | None,
    ) -> None:
        """Buffer each record of `batch` in order, its Delivery (or the error that refused it) added to `bulk`;
        `watch` is told after each stretch of records (at most YIELD_AFTER_BYTES_MAX bytes of them, appended without
        a wait), so the hooks hear of them as their batches settle."""
        index = 0
        while index < len(batch):
            # Closing began, or the transaction this call began in ended, while it yielded or waited.
            refusal = self._refusal(transaction)
            if refusal is not None:  # nothing more may be buffered (no sender would be left to settle it)
                for _ in range(index, len(batch)):
                    bulk.add(refusal)
                break
            index, prepared = appender.append_many(batch, index, int(time.time() * 1000), bulk, YIELD_AFTER_BYTES)
            if watch is not None:  # before any wait: the records just buffered may settle meanwhile
                watch.buffered(bulk)
            if prepared is not None:
                try:
                    bulk.add(await self._append_after_waiting(prepared, appender, transaction))
                except AioProducerError as exc:
                    bulk.add(exc)
            elif appender.unyielded_bytes >= YIELD_AFTER_BYTES and appender.yield_due():
                # Let the sender and other tasks run during a long call (keeps event-loop lag low).
                appender.yielded()
                await asyncio.sleep(0)
        if watch is not None:
            watch.buffered(bulk)
