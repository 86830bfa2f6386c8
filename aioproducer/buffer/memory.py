"""Waiting for buffer memory: senders queue in arrival order and only the first is woken when memory frees up.

Owns the FIFO of waiting callers (no thundering herd, no barging past those already waiting); the byte counts
are the accumulator's `BufferPool`'s.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from aioproducer.buffer.pool import BufferPool
from aioproducer.errors import BufferExhaustedError

__all__ = ["MemoryWaiters"]


class MemoryWaiters:
    """The callers waiting for `buffer_memory`, served first come, first served."""

    def __init__(self, pool: BufferPool, wake_sender: Callable[[], None], max_block_ms: int) -> None:
        self._pool = pool
        self._wake_sender = wake_sender
        self._max_block_ms = max_block_ms
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed: BaseException | None = None

    def __bool__(self) -> bool:
        return bool(self._waiters)

    async def wait(self, size: int, deadline: float) -> None:
        """Until `size` bytes are free and every earlier waiter was served; BufferExhaustedError at `deadline`
        (event-loop time), or the error of `fail_all` (the producer is closing). Cancelling it leaves the queue as
        if this caller had never come."""
        if self._closed is not None:
            raise self._closed
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        self._pool.begin_wait()  # makes lingering batches ready, so memory frees up sooner
        self._wake_sender()
        try:
            while not (self._waiters[0] is waiter and self._pool.has_room(size)):
                try:
                    await asyncio.wait_for(asyncio.shield(waiter), max(deadline - loop.time(), 0))
                except asyncio.TimeoutError:
                    raise BufferExhaustedError(
                        f"buffer_memory={self._pool.total_bytes} exhausted for max_block_ms="
                        f"{self._max_block_ms}: the brokers are not keeping up (or not reachable)"
                    ) from None
                if self._closed is not None:  # woken, then every waiter was failed before this one ran again
                    raise self._closed
                # Woken (memory was freed, or an earlier waiter left) but maybe not enough yet: wait again in place.
                fresh: asyncio.Future[None] = loop.create_future()
                self._waiters[self._waiters.index(waiter)] = waiter = fresh
        finally:
            self._pool.end_wait()
            if waiter in self._waiters:  # fail_all empties the queue
                self._waiters.remove(waiter)
            self.notify()

    def notify(self) -> None:
        """Memory was released: wake the first waiter only."""
        if self._waiters and not self._waiters[0].done():
            self._waiters[0].set_result(None)

    def fail_all(self, error: BaseException) -> None:
        """Fail every waiter, and every later call to `wait`, with `error` (Java's BufferPool.close)."""
        self._closed = error
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(error)
                waiter.exception()  # seen: the waiting caller re-raises it
        self._waiters.clear()
