"""Settling records: a batch's outcome, and the `Delivery` handle each buffered record gets.

A batch is settled once, as a whole (`BatchOutcome`): delivering 10 000 records costs one assignment, not 10 000
futures. A record's `Delivery` reads its result from its batch's outcome when asked, and creates an
`asyncio.Future` only when something waits on it (`await`, `add_done_callback`): a fire-and-forget `enqueue`
never pays for one. When a batch is split (MESSAGE_TOO_LARGE), its outcome forwards each record to the half
that now carries it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Generator
from contextvars import Context, copy_context
from types import TracebackType
from typing import TYPE_CHECKING, Any

from aioproducer.accelerated import compiled_twin
from aioproducer.models import RecordMetadata

__all__ = [
    "BatchOutcome",
    "Delivery",
    "PureDelivery",
    "batch_of",
    "callbacks_of",
    "keep_callbacks",
    "new_delivery",
    "resolve",
    "run_callbacks_of",
    "schedule_callbacks",
    "track_again",
]

log = logging.getLogger("aioproducer.deliveries")


class BatchOutcome:
    """How one batch ended: its base offset (delivered) or error (failed), shared by its records' handles."""

    __slots__ = (
        "base_offset",
        "context_snapshot",
        "deliveries",
        "done",
        "error",
        "error_traceback",
        "first",
        "held",
        "log_append_time_ms",
        "loop",
        "partition",
        "second",
        "split_at",
        "topic",
        "waiters",
    )

    def __init__(self, topic: str, partition: int, loop: Any, *, held: bool = False) -> None:
        self.topic = topic
        self.partition = partition
        self.loop = loop  # the producer's event loop; None only for batches built outside a producer
        self.done = False
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: BaseException | None = None
        # The error's traceback when the batch failed: each record raises the shared error with it again, so the
        # error does not collect the frames of every caller that awaited one of its records (asyncio.Future keeps
        # its exception's traceback aside for the same reason).
        self.error_traceback: TracebackType | None = None
        # Set when the batch was split: records below `split_at` moved to `first`, the rest to `second`.
        self.split_at = 0
        self.first: BatchOutcome | None = None
        self.second: BatchOutcome | None = None
        self.waiters: list[Callable[[], None]] = []
        # The records' handles that have done callbacks (a task awaiting, gather, add_done_callback): their
        # callbacks all run in one loop callback once the batch settles, not one loop callback per record.
        self.deliveries: list[Delivery] = []
        # The compiled Delivery's latest snapshot of a callback's context among this batch's records: records
        # added under the same contextvars share it (one object, not one per record for the collector to walk),
        # and each callback still runs in a copy of it (see _delivery.pyx). The pure twin copies per callback.
        self.context_snapshot: Any = None
        # Whether a running sender holds this outcome until it settles it: only then may the compiled handles
        # waiting on it leave the cyclic collector's sight (see _delivery.pyx). Cleared when the sender exits.
        self.held = held

    def succeed(self, base_offset: int, log_append_time_ms: int) -> None:
        """Delivered. `base_offset` -1 means unknown (acks=0, a duplicate); `log_append_time_ms` -1 means
        the topic keeps CreateTime."""
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self._settle()

    def fail(self, error: BaseException) -> None:
        """Failed: every record of the batch fails with `error`."""
        self.error = error
        self.error_traceback = error.__traceback__
        self._settle()

    def forward(self, split_at: int, first: BatchOutcome, second: BatchOutcome) -> None:
        """The batch was split in two: its waiters move on to the halves."""
        self.split_at, self.first, self.second = split_at, first, second
        self._notify()

    def add_waiter(self, callback: Callable[[], None]) -> None:
        """Call `callback` once, when this outcome is settled or forwarded (it then re-resolves)."""
        self.waiters.append(callback)

    def remove_waiter(self, callback: Callable[[], None]) -> None:
        """Take back a waiter not called yet (none once this outcome has settled or forwarded: its waiters ran)."""
        with contextlib.suppress(ValueError):
            self.waiters.remove(callback)

    def metadata(self, index: int, timestamp_ms: int, key_size: int, value_size: int) -> RecordMetadata:
        """The `RecordMetadata` of the batch's record at `index` (only once delivered)."""
        base = self.base_offset
        return tuple.__new__(  # a named tuple, built without its generated __new__
            RecordMetadata,
            (
                self.topic,
                self.partition,
                base + index if base >= 0 else -1,
                self.log_append_time_ms if self.log_append_time_ms >= 0 else timestamp_ms,
                key_size,
                value_size,
            ),
        )

    def _settle(self) -> None:
        self.done = True
        self._notify()

    def _notify(self) -> None:
        self.context_snapshot = None  # no record is added to this outcome any more: hold none of its variables
        # Swapped for a new list only when not empty (most batches have no waiter, and no record awaited when the
        # caller does not await them): no two throwaway lists per settled batch.
        waiters = self.waiters
        if waiters:
            self.waiters = []
            for callback in waiters:
                # A waiter that raises is logged and the others still run, as are the records' callbacks below
                # (Java's ProducerBatch.completeFutureAndFireCallbacks logs a failing callback and goes on): its error
                # must not escape into whatever settled the batch (the sender, MockProducer.complete_all()).
                try:
                    callback()
                except Exception:
                    log.exception("a waiter of %r failed", self)
        deliveries = self.deliveries
        if not deliveries:
            return
        self.deliveries = []
        if self.done:
            if not self.loop.is_closed():
                schedule_callbacks(self.loop, deliveries)
            else:  # nothing can run the callbacks (a closed test loop)
                track_again(deliveries)
            return
        for delivery in deliveries:  # forwarded to the halves of a split: each record waits on its own half
            half = resolve(self, delivery._index)[0]
            half.deliveries.append(delivery)
            if not half.held:
                track_again([delivery])

    def __repr__(self) -> str:
        state = "split" if self.first else "failed" if self.error else "delivered" if self.done else "pending"
        return f"<BatchOutcome {self.topic}-{self.partition} {state}>"


def track_again(deliveries: list[Delivery]) -> None:
    """Nothing will run these waiting records' callbacks (the event loop closed, or ended the sender): the compiled
    handle, which the cyclic collector does not track while it waits for its batch, is tracked again, so that the
    batch, its handles and their callbacks are collected once unreachable. The pure handle is always tracked."""


def schedule_callbacks(loop: Any, deliveries: list[Delivery]) -> None:
    """Run `deliveries`' callbacks in one loop callback soon (`run_callbacks_of`). The compiled twin's call also
    tracks the handles again should the loop drop it unrun (closed first): see `track_again`."""
    loop.call_soon(run_callbacks_of, deliveries)


def run_callbacks_of(deliveries: list[Delivery]) -> None:
    """One loop callback for a settled batch: run each waiting record's done callbacks, in order, each in its own
    context, as asyncio would with one loop callback per record. A callback that raises is reported to the loop's
    exception handler and the others still run (asyncio's Handle does the same); should one raise SystemExit or
    KeyboardInterrupt, the callbacks not yet run are scheduled again before it propagates."""
    loop: Any = None
    position = 0
    try:
        while position < len(deliveries):
            delivery = deliveries[position]
            position += 1
            delivery._watching = False
            fn = delivery._callback
            if delivery._cancelled or fn is None:  # cancel() already ran its callbacks
                continue
            context, later = delivery._callback_context, delivery._callbacks
            delivery._callback = delivery._callback_context = delivery._callbacks = None
            while True:
                try:
                    context.run(fn, delivery)
                except (SystemExit, KeyboardInterrupt):
                    if later:
                        keep_callbacks(delivery, later)
                        position -= 1
                    raise
                except BaseException as exc:
                    if loop is None:
                        loop = delivery.get_loop()
                    loop.call_exception_handler(
                        {"message": f"Exception in callback {fn!r}({delivery!r})", "exception": exc, "future": delivery}
                    )
                if not later:
                    break
                fn, context = later.pop(0)
    finally:
        if position < len(deliveries):
            schedule_callbacks(deliveries[0].get_loop(), deliveries[position:])


def keep_callbacks(delivery: Delivery, pairs: list[tuple[Any, Any]]) -> None:
    """Store (callback, context) `pairs` as `delivery`'s waiting callbacks: the first in its slots, the rest listed."""
    if not pairs:
        delivery._callback = delivery._callback_context = delivery._callbacks = None
        return
    delivery._callback, delivery._callback_context = pairs[0]
    delivery._callbacks = pairs[1:] or None


def callbacks_of(delivery: Delivery) -> list[tuple[Any, Any]]:
    """`delivery`'s waiting (callback, context) pairs, in the order they were added."""
    if delivery._callback is None:
        return []
    return [(delivery._callback, delivery._callback_context), *(delivery._callbacks or ())]


def resolve(outcome: BatchOutcome, index: int) -> tuple[BatchOutcome, int]:
    """Follow splits to the outcome that carries a record now, and its index there."""
    while True:
        first, second = outcome.first, outcome.second
        if first is None or second is None:
            return outcome, index
        if index < outcome.split_at:
            outcome = first
        else:
            index -= outcome.split_at
            outcome = second


class Delivery:
    """One buffered record's delivery: awaitable, and usable wherever asyncio takes a future.

    `await delivery` gives its `RecordMetadata` or raises why it failed. `done()`, `result()`, `exception()`,
    `cancelled()`, `cancel()`, `add_done_callback()` behave as `asyncio.Future`'s, and the handle speaks asyncio's
    future protocol itself (`asyncio.isfuture` holds), so tasks, `asyncio.wait`, `gather`, `wait_for`, `shield` and
    `as_completed` take it as they take a future. It allocates nothing until something waits on it, and nothing for
    its first waiter either (a list only from the second). Cancelling a delivery stops only the waiting: the record
    is still sent.
    """

    __slots__ = (
        "_asyncio_future_blocking",
        "_callback",
        "_callback_context",
        "_callbacks",
        "_cancel_message",
        "_cancelled",
        "_index",
        "_key_size",
        "_outcome",
        "_timestamp_ms",
        "_value_size",
        "_watching",
    )

    _outcome: BatchOutcome  # its batch's outcome (forwarded to a half after a split: see `resolve`)
    _index: int  # its offset delta in that batch
    _timestamp_ms: int  # what its RecordMetadata needs besides the outcome
    _key_size: int
    _value_size: int
    # The first waiter's callback and its context sit in two slots of their own: most records have one waiter (a
    # task, gather, a done-callback), and a list of (callback, context) tuples per waiting record was two more
    # objects for the cyclic collector to walk while the batch is in flight.
    _callback: Any  # the first done callback, or None
    _callback_context: Any  # the context it runs in
    _callbacks: list[Any] | None  # (callback, context) pairs of the later callbacks, only while _callback is set
    _cancelled: bool
    _cancel_message: Any
    _watching: bool  # registered with the batch outcome, to run the callbacks when it settles
    _asyncio_future_blocking: bool  # asyncio's future protocol: set while a task awaits the handle

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._outcome.loop  # type: ignore[no-any-return]

    def done(self) -> bool:
        outcome = self._outcome
        if outcome.first is not None:
            outcome = resolve(outcome, self._index)[0]
        return self._cancelled or bool(outcome.done)

    def cancelled(self) -> bool:
        return bool(self._cancelled)

    def result(self) -> RecordMetadata:
        """The record's metadata; raises its error, CancelledError, or InvalidStateError while pending."""
        if self._cancelled:
            raise self._make_cancelled_error()
        outcome: BatchOutcome = self._outcome
        index: int = self._index
        if outcome.first is not None:
            outcome, index = resolve(outcome, index)
        if not outcome.done:
            raise asyncio.InvalidStateError("the record is not delivered yet")
        if outcome.error is not None:
            raise outcome.error.with_traceback(outcome.error_traceback)
        return outcome.metadata(index, self._timestamp_ms, self._key_size, self._value_size)

    def exception(self) -> BaseException | None:
        if self._cancelled:
            raise self._make_cancelled_error()
        outcome: BatchOutcome = self._outcome
        if outcome.first is not None:
            outcome = resolve(outcome, self._index)[0]
        if not outcome.done:
            raise asyncio.InvalidStateError("the record is not delivered yet")
        return outcome.error

    def add_done_callback(self, fn: Callable[[Any], object], *, context: Context | None = None) -> None:
        """Call `fn(delivery)` on the loop once the record is settled (or the delivery cancelled)."""
        if not callable(fn):  # refused here: an empty slot is None, and asyncio would fail only when settling
            raise TypeError(f"a callable object was expected by add_done_callback(), got {fn!r}")
        if context is None:
            context = copy_context()
        if self.done():
            self.get_loop().call_soon(fn, self, context=context)
            return
        if self._callback is None:
            self._callback, self._callback_context = fn, context
        elif self._callbacks is None:
            self._callbacks = [(fn, context)]
        else:
            self._callbacks.append((fn, context))
        if not self._watching:
            self._watching = True
            outcome = self._outcome
            if outcome.first is not None:
                outcome = resolve(outcome, self._index)[0]
            outcome.deliveries.append(self)

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        """Forget `fn` while the record is pending; returns how many were removed. Once it is settled its callbacks
        are already due to run, as an asyncio.Future's are: nothing is removed."""
        if self.done():
            return 0
        callbacks = callbacks_of(self)
        kept = [(callback, context) for callback, context in callbacks if callback != fn]
        keep_callbacks(self, kept)
        return len(callbacks) - len(kept)

    def cancel(self, msg: Any | None = None) -> bool:
        """Stop waiting (the record is still delivered). False when the record was already settled."""
        if self.done():
            return False
        self._cancelled = True
        self._cancel_message = msg
        self._run_callbacks()
        return True

    def _make_cancelled_error(self) -> asyncio.CancelledError:
        message = self._cancel_message
        return asyncio.CancelledError("" if message is None else message)

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        if not self.done():
            self._asyncio_future_blocking = True  # asyncio's protocol: the task then waits on this handle
            yield self
            if not self.done():
                raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__

    def _run_callbacks(self) -> None:
        callbacks = callbacks_of(self)
        keep_callbacks(self, [])
        if callbacks:
            loop = self.get_loop()
            for fn, context in callbacks:
                loop.call_soon(fn, self, context=context)

    def __repr__(self) -> str:
        outcome, index = resolve(self._outcome, self._index)
        return f"<Delivery {outcome.topic}-{outcome.partition} #{index} of {outcome!r}>"


def batch_of(delivery: Delivery) -> BatchOutcome:
    """The outcome `delivery` reads, shared by every record of its batch (until a split forwards it): lets a caller
    that tracks many deliveries settle a batch's records together instead of asking each one."""
    return delivery._outcome


def new_delivery(outcome: BatchOutcome, index: int, timestamp_ms: int, key_size: int, value_size: int) -> Delivery:
    """A pending Delivery for the record at `index` of the batch settled through `outcome`."""
    delivery = PureDelivery.__new__(PureDelivery)
    delivery._outcome = outcome
    delivery._index = index
    delivery._timestamp_ms = timestamp_ms
    delivery._key_size = key_size
    delivery._value_size = value_size
    delivery._callback = None
    delivery._callback_context = None
    delivery._callbacks = None
    delivery._cancelled = False
    delivery._cancel_message = None
    delivery._watching = False
    delivery._asyncio_future_blocking = False
    return delivery


# The compiled twin, when built (see aioproducer.accelerated): the same handle in a C struct, with the methods
# asyncio calls several times per awaited record compiled (the test suite runs both twins against asyncio.Future).
PureDelivery = Delivery
pure_new_delivery = new_delivery
pure_run_callbacks_of = run_callbacks_of
pure_track_again = track_again
pure_schedule_callbacks = schedule_callbacks
_twin = compiled_twin("aioproducer.deliveries._delivery")
if not TYPE_CHECKING and _twin is not None:
    Delivery = _twin.Delivery
    new_delivery = _twin.new_delivery
    run_callbacks_of = _twin.run_callbacks_of
    track_again = _twin.track_again
    schedule_callbacks = _twin.schedule_callbacks
