"""The record hooks around the producer's record path: each record shown to the hooks before it is buffered (they
may change it), and acknowledged to them once it is settled or refused (Java's ProducerInterceptor.onSend and
onAcknowledgement).

Owns only that bookkeeping. The producer holds a `RecordHooks` only when some hook wants records, and its record
path asks `is not None` once per record: without record hooks nothing else is spent.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

from aioproducer.deliveries.bulk import BulkDeliveries, Deliveries, when_settled
from aioproducer.deliveries.delivery import BatchOutcome, Delivery, new_delivery, resolve
from aioproducer.hooks import HookChain, with_header_pairs
from aioproducer.models import ProducerRecord, RecordMetadata

__all__ = ["CallWatch", "EnqueueMany", "RecordHooks"]


class EnqueueMany(Protocol):
    """The producer's enqueue_many work: buffers the records, telling `watch` what it buffered as it goes (see
    `Producer._enqueue_many`)."""

    def __call__(self, records: list[ProducerRecord], *, watch: CallWatch) -> Awaitable[Deliveries]: ...


class RecordHooks:
    """The record hooks of one producer (`hooks.wants_records` must hold)."""

    __slots__ = ("_hooks", "_open_calls", "_watched")

    def __init__(self, hooks: HookChain) -> None:
        self._hooks = hooks
        # Buffered records per batch outcome, acknowledged together when the batch settles.
        self._watched: dict[BatchOutcome, list[tuple[ProducerRecord, Delivery]]] = {}
        # One future per send_many or enqueue_many call whose hooks have not ended yet, set once they have.
        self._open_calls: set[asyncio.Future[None]] = set()

    def buffering(
        self, topic: str, value: Any, key: Any, headers: Any, partition: int | None, timestamp_ms: int | None
    ) -> ProducerRecord:
        """The record as the hooks leave it, before it is buffered."""
        return self._hooks.record_buffered(ProducerRecord._make((topic, value, key, headers, partition, timestamp_ms)))

    def refused(self, record: ProducerRecord, error: BaseException) -> None:
        """The record was refused before it was buffered: Java acknowledges those too."""
        self._hooks.record_acknowledged(record, None, error)

    def buffered(self, record: ProducerRecord, delivery: Delivery) -> None:
        """Watch the buffered record through its batch's outcome: one waiter per batch, run as the batch settles and
        before the callers' callbacks (as Java's onAcknowledgement), so a caller cancelling its handle changes
        nothing."""
        outcome = delivery._outcome
        waiting = self._watched.get(outcome)
        if waiting is None:
            waiting = self._watched[outcome] = []
            outcome.add_waiter(partial(self._acknowledge_batch, outcome))
        waiting.append((record, delivery))

    async def around_send_many(
        self, records: Sequence[Any], enqueue_many: EnqueueMany, send_now: Callable[[], None]
    ) -> list[RecordMetadata | BaseException]:
        """`send_many` of the records as the hooks leave them: enqueue_many's path, then the wait. Each record is
        acknowledged as its batch settles, also when the caller stops waiting (cancelled) first."""
        try:
            deliveries = await self.around_enqueue_many(records, enqueue_many)
        except asyncio.CancelledError:
            send_now()  # what the cancelled call buffered goes out as a finished call's would
            raise
        send_now()  # nothing more is coming from this call: its last batches go out now rather than after linger_ms
        # Shielded: a cancelled call stops waiting, and its records are still acknowledged when they settle.
        return await asyncio.shield(deliveries._settled_future())

    async def around_enqueue_many(self, records: Sequence[Any], enqueue_many: EnqueueMany) -> Deliveries:
        """`enqueue_many` of the records as the hooks leave them; each is acknowledged as its batch settles, whether
        or not the caller awaits the results, and the call's hooks end once all are. A call cancelled while
        buffering acknowledges the records it buffered with their outcome, and the others with the cancellation."""
        # The call's hooks start and end in a context of their own: they end in another task than the caller's, and
        # what a hook sets for the call's records (the OpenTelemetry hook's current CLIENT span, a context variable)
        # must be reset where it was set, and must not outlive the call in the caller's context.
        call_context = contextvars.copy_context()
        tokens, batch = call_context.run(self._many_started, records)
        watch = CallWatch(self._hooks, self._open_calls, call_context, tokens, batch)
        try:
            return await enqueue_many(batch, watch=watch)
        except BaseException as exc:
            if not watch.ended:  # refused before it buffered anything (the producer closed, the transaction ended)
                watch.refuse_all(exc)
            raise

    async def all_acknowledged(self) -> None:
        """Once every send_many and enqueue_many call made so far has ended its hooks (the producer closing: its
        records are settled by now, and the hooks close after this)."""
        while self._open_calls:
            await asyncio.wait(set(self._open_calls))  # asyncio.wait cancels none of them if this is cancelled

    def _many_started(self, records: Sequence[Any]) -> tuple[list[Any], list[ProducerRecord]]:
        """The hooks' tokens for a send_many or enqueue_many call, and its records as the hooks leave them."""
        hooks = self._hooks
        given = [r if type(r) is ProducerRecord else _as_record(r) for r in records]
        # As every hook sees them: headers as pairs, also a plain 6-tuple's or a `_make`d record's mapping.
        given = [with_header_pairs(r) if type(r) is ProducerRecord else r for r in given]
        tokens = hooks.send_many_start([r for r in given if type(r) is ProducerRecord])  # the items that are records
        return tokens, [hooks.record_buffered(r) if type(r) is ProducerRecord else r for r in given]

    def _acknowledge_batch(self, outcome: BatchOutcome) -> None:
        """A watched batch settled (or was split): acknowledge each of its records."""
        hooks = self._hooks
        waiting = self._watched.pop(outcome, [])
        if not outcome.done:  # split after MESSAGE_TOO_LARGE (rare): follow each record to its half
            for record, delivery in waiting:
                watcher = new_delivery(
                    delivery._outcome, delivery._index, delivery._timestamp_ms, delivery._key_size, delivery._value_size
                )
                watcher.add_done_callback(partial(_acknowledge, hooks, record))
            return
        error = outcome.error
        for record, delivery in waiting:
            if error is not None:
                hooks.record_acknowledged(record, None, error)
            else:
                metadata = outcome.metadata(
                    delivery._index, delivery._timestamp_ms, delivery._key_size, delivery._value_size
                )
                hooks.record_acknowledged(record, metadata, None)


class CallWatch:
    """One send_many or enqueue_many call as the record hooks see it. The producer's `_enqueue_many` tells it what
    the call buffered as it goes (`buffered`), and each range of records is acknowledged once the batches it went to
    settle, as enqueue's records are batch by batch: `flush` returns after the hooks heard of every record it waited
    for, also those of a call still buffering. The call's hooks end (`on_send_many_end`) once its results are built.
    """

    __slots__ = ("_batch", "_context", "_covered", "_hooks", "_open_calls", "_positions", "_tokens", "ended")

    def __init__(
        self,
        hooks: HookChain,
        open_calls: set[asyncio.Future[None]],
        context: contextvars.Context,
        tokens: list[Any],
        batch: list[ProducerRecord],
    ) -> None:
        self._hooks = hooks
        self._open_calls = open_calls  # the RecordHooks' calls whose hooks have not ended: this one joins at its end
        self._context = context
        self._tokens = tokens
        self._batch = batch  # the call's records as the hooks left them
        # The call's position of each buffered entry, once the serializers refused some (else the same position).
        self._positions: list[int] | None = None
        self._covered = 0  # the entries of the call's BulkDeliveries watched so far
        self.ended = False

    def serialized(self, refused: Mapping[int, BaseException]) -> None:
        """The serializers refused these records (by position in the call; they are never buffered): acknowledged
        now, as Java acknowledges a record whose send failed."""
        if not refused:
            return
        self._positions = [position for position in range(len(self._batch)) if position not in refused]
        hooks = self._hooks
        for position, error in refused.items():
            record = self._batch[position]
            if type(record) is ProducerRecord:
                hooks.record_acknowledged(record, None, error)

    def buffered(self, bulk: BulkDeliveries) -> None:
        """The call added entries to `bulk` since it last said: they are acknowledged once their batches settle
        (an entry refused at the call, at once)."""
        start, stop = self._covered, len(bulk)
        if start < stop:
            self._covered = stop
            when_settled(bulk.outcomes(start, stop), partial(self._acknowledge, bulk, start, stop))

    def end(self, deliveries: Deliveries) -> None:
        """The call buffered all it will: its hooks end once its results are built, after each record was
        acknowledged. From the results' own settling, not by a task a shutdown handler cancelling every task could
        cancel."""
        self.ended = True
        open_call = asyncio.get_running_loop().create_future()
        self._open_calls.add(open_call)
        deliveries._settled_future().add_done_callback(partial(self._end, open_call))

    def refuse_all(self, error: BaseException) -> None:
        """The call was refused before it buffered anything (the producer closed, the transaction ended)."""
        self.ended = True
        hooks = self._hooks
        for record in self._batch:
            if type(record) is ProducerRecord:
                hooks.record_acknowledged(record, None, error)
        self._context.run(hooks.send_many_end, self._tokens, [error] * len(self._batch))

    def _acknowledge(self, bulk: BulkDeliveries, start: int, stop: int) -> None:
        hooks, batch, positions = self._hooks, self._batch, self._positions
        for entry, result in enumerate(bulk.results(resolve, start, stop), start):
            record = batch[entry if positions is None else positions[entry]]
            if type(record) is not ProducerRecord:  # not a record: refused at the call, never shown to the hooks
                continue
            if isinstance(result, BaseException):
                hooks.record_acknowledged(record, None, result)
            else:
                hooks.record_acknowledged(record, result, None)

    def _end(self, open_call: asyncio.Future[None], settled: asyncio.Future[list[Any]]) -> None:
        self._open_calls.discard(open_call)
        try:
            results: Sequence[Any] = settled.result()
        except BaseException as exc:  # not expected: nothing cancels the results' future of an enqueue_many call
            results = [exc] * len(self._batch)
        try:
            self._context.run(self._hooks.send_many_end, self._tokens, results)
        finally:
            open_call.set_result(None)


def _acknowledge(hooks: HookChain, record: ProducerRecord, delivery: Delivery) -> None:
    error = delivery.exception()
    hooks.record_acknowledged(record, None if error is not None else delivery.result(), error)


def _as_record(item: Any) -> Any:
    """A send_many item as a ProducerRecord when it unpacks to its six fields, as the appender and the serializers
    unpack it without hooks (an iterator is pulled seven values at most, never drained); anything else as it is,
    for the appender to refuse in its place."""
    try:
        topic, value, key, headers, partition, timestamp_ms = item
    except (TypeError, ValueError):
        return item
    return ProducerRecord._make((topic, value, key, headers, partition, timestamp_ms))
