"""The record hooks around the producer's record path: each record shown to the hooks before it is buffered (they
may change it), and acknowledged to them once it is settled or refused (Java's ProducerInterceptor.onSend and
onAcknowledgement).

Owns only that bookkeeping. The producer holds a `RecordHooks` only when some hook wants records, and its record
path asks `is not None` once per record: without record hooks nothing else is spent.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, Protocol

from aioproducer.deliveries.bulk import Deliveries
from aioproducer.deliveries.delivery import BatchOutcome, Delivery, new_delivery
from aioproducer.hooks import HookChain
from aioproducer.models import ProducerRecord, RecordMetadata

__all__ = ["EnqueueMany", "RecordHooks"]


class EnqueueMany(Protocol):
    """The producer's enqueue_many work: buffers the records, giving `watch` the call's Deliveries (see
    `Producer._enqueue_many`)."""

    def __call__(
        self, records: list[ProducerRecord], *, watch: Callable[[Deliveries], None]
    ) -> Awaitable[Deliveries]: ...


class RecordHooks:
    """The record hooks of one producer (`hooks.wants_records` must hold)."""

    __slots__ = ("_acknowledging", "_hooks", "_watched")

    def __init__(self, hooks: HookChain) -> None:
        self._hooks = hooks
        # Buffered records per batch outcome, acknowledged together when the batch settles.
        self._watched: dict[BatchOutcome, list[tuple[ProducerRecord, Delivery]]] = {}
        # One future per enqueue_many call whose records are not acknowledged yet, set once they are.
        self._acknowledging: set[asyncio.Future[None]] = set()

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
        acknowledged once all are settled, also when the caller stops waiting (cancelled) first."""
        deliveries = await self.around_enqueue_many(records, enqueue_many)
        send_now()  # nothing more is coming from this call: its last batches go out now rather than after linger_ms
        # Shielded: a cancelled call stops waiting, and its records are still acknowledged when they settle.
        return await asyncio.shield(deliveries._settled_future())

    async def around_enqueue_many(self, records: Sequence[Any], enqueue_many: EnqueueMany) -> Deliveries:
        """`enqueue_many` of the records as the hooks leave them; each is acknowledged once all are settled, whether
        or not the caller awaits the results. A call cancelled while buffering acknowledges the records it buffered
        with their outcome, and the others with the cancellation."""
        # The call's hooks start and end in a context of their own: they end in another task than the caller's, and
        # what a hook sets for the call's records (the OpenTelemetry hook's current CLIENT span, a context variable)
        # must be reset where it was set, and must not outlive the call in the caller's context.
        call_context = contextvars.copy_context()
        tokens, batch = call_context.run(self._many_started, records)
        watched: list[Deliveries] = []
        try:
            deliveries = await enqueue_many(batch, watch=watched.append)
        except BaseException as exc:
            if not watched:  # refused before it buffered anything (the producer closed, the transaction ended)
                call_context.run(self._many_ended, tokens, batch, [exc] * len(batch))
                raise
            self._acknowledge_when_settled(call_context, tokens, batch, watched[0])
            raise
        self._acknowledge_when_settled(call_context, tokens, batch, deliveries)
        return deliveries

    def _acknowledge_when_settled(
        self, call_context: contextvars.Context, tokens: list[Any], batch: list[ProducerRecord], deliveries: Deliveries
    ) -> None:
        # From the results' own settling (batch outcomes' waiters and loop callbacks), not by a task a shutdown
        # handler cancelling every task could cancel; registered before the caller can await, so the hooks hear of
        # each record before the caller's await returns (as Java's onAcknowledgement runs before callbacks).
        acknowledged = asyncio.get_running_loop().create_future()
        self._acknowledging.add(acknowledged)
        deliveries._settled_future().add_done_callback(
            partial(self._acknowledge_many, call_context, tokens, batch, acknowledged)
        )

    def acknowledging(self) -> set[asyncio.Future[None]]:
        """The send_many and enqueue_many calls whose records are not all acknowledged yet, each as a future set once
        they are (`flush` waits for those of the records it waited for)."""
        return set(self._acknowledging)

    async def all_acknowledged(self) -> None:
        """Once every enqueue_many record buffered so far is acknowledged (the producer closing: its records are
        settled by now, and the hooks close after this)."""
        while self._acknowledging:
            await asyncio.wait(set(self._acknowledging))  # asyncio.wait cancels none of them if this is cancelled

    def _acknowledge_many(
        self,
        call_context: contextvars.Context,
        tokens: list[Any],
        batch: list[ProducerRecord],
        acknowledged: asyncio.Future[None],
        settled: asyncio.Future[list[Any]],
    ) -> None:
        self._acknowledging.discard(acknowledged)
        try:
            results: Sequence[Any] = settled.result()
        except BaseException as exc:  # not expected: nothing cancels the results' future of an enqueue_many call
            results = [exc] * len(batch)
        try:
            call_context.run(self._many_ended, tokens, batch, results)
        finally:
            acknowledged.set_result(None)

    def _many_started(self, records: Sequence[Any]) -> tuple[list[Any], list[ProducerRecord]]:
        """The hooks' tokens for a send_many or enqueue_many call, and its records as the hooks leave them."""
        hooks = self._hooks
        given = [r if type(r) is ProducerRecord else _as_record(r) for r in records]
        tokens = hooks.send_many_start([r for r in given if type(r) is ProducerRecord])  # the items that are records
        return tokens, [hooks.record_buffered(r) if type(r) is ProducerRecord else r for r in given]

    def _many_ended(self, tokens: list[Any], batch: list[ProducerRecord], results: Sequence[Any]) -> None:
        """Acknowledge each record of a send_many or enqueue_many call with its result, then end the call's hooks."""
        hooks = self._hooks
        for record, result in zip(batch, results, strict=True):
            if type(record) is not ProducerRecord:  # not a record: refused at the call, never shown to the hooks
                continue
            if isinstance(result, BaseException):
                hooks.record_acknowledged(record, None, result)
            else:
                hooks.record_acknowledged(record, result, None)
        hooks.send_many_end(tokens, results)

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
