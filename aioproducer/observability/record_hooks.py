"""The record hooks around the producer's record path: each record shown to the hooks before it is buffered (they
may change it), and acknowledged to them once it is settled or refused (Java's ProducerInterceptor.onSend and
onAcknowledgement).

Owns only that bookkeeping. The producer holds a `RecordHooks` only when some hook wants records, and its record
path asks `is not None` once per record: without record hooks nothing else is spent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from aioproducer.deliveries.delivery import BatchOutcome, Delivery, new_delivery
from aioproducer.hooks import HookChain
from aioproducer.models import ProducerRecord, RecordMetadata, record_of

__all__ = ["RecordHooks"]


class RecordHooks:
    """The record hooks of one producer (`hooks.wants_records` must hold)."""

    __slots__ = ("_hooks", "_watched")

    def __init__(self, hooks: HookChain) -> None:
        self._hooks = hooks
        # Buffered records per batch outcome, acknowledged together when the batch settles.
        self._watched: dict[BatchOutcome, list[tuple[ProducerRecord, Delivery]]] = {}

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
        self,
        records: Sequence[Any],
        send_many: Callable[[list[ProducerRecord]], Awaitable[list[RecordMetadata | BaseException]]],
    ) -> list[RecordMetadata | BaseException]:
        """`send_many` of the records as the hooks leave them; each is acknowledged when the call returns."""
        hooks = self._hooks
        given = [r if type(r) is ProducerRecord else record_of(r) for r in records]
        tokens = hooks.send_many_start(given)
        batch = [hooks.record_buffered(record) for record in given]
        try:
            results = await send_many(batch)
        except BaseException as exc:
            for record in batch:
                hooks.record_acknowledged(record, None, exc)
            hooks.send_many_end(tokens, [exc] * len(batch))
            raise
        for record, result in zip(batch, results, strict=True):
            if isinstance(result, BaseException):
                hooks.record_acknowledged(record, None, result)
            else:
                hooks.record_acknowledged(record, result, None)
        hooks.send_many_end(tokens, results)
        return results

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
