"""`BufferPool`: the producer's buffer memory as counts (Java's BufferPool without its byte buffers); pure.

Owns how many bytes the buffered records hold against `buffer_memory`, and how many callers are waiting for room.
Records are charged when appended and given back when their batch is done (the accumulator's `release`); the
waiting itself, in arrival order, is `memory.MemoryWaiters`'s. Every change goes through a method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aioproducer.accelerated import compiled_twin

__all__ = ["BufferPool", "PureBufferPool"]


class BufferPool:
    """`total_bytes` of buffer memory: `used_bytes` of it charged to buffered records, `waiters` callers waiting."""

    __slots__ = ("total_bytes", "used_bytes", "waiters")

    def __init__(self, total_bytes: int) -> None:
        self.total_bytes = total_bytes
        self.used_bytes = 0
        self.waiters = 0

    @property
    def available_bytes(self) -> int:
        """Bytes not charged to any record (Java's buffer-available-bytes)."""
        return self.total_bytes - self.used_bytes

    def has_room(self, size: int) -> bool:
        """Whether `size` more bytes fit."""
        return self.used_bytes + size <= self.total_bytes

    def reserve(self, size: int) -> None:
        """Charge `size` bytes (the caller checked the room, or is placing what it already waited for)."""
        self.used_bytes += size

    def release(self, size: int) -> None:
        """Give back `size` bytes charged before."""
        self.used_bytes -= size

    def begin_wait(self) -> None:
        """A caller starts waiting for room: while anyone waits, every batch is sent at once (memory frees sooner)."""
        self.waiters += 1

    def end_wait(self) -> None:
        """A waiting caller got its room, gave up, or was failed."""
        self.waiters -= 1


# The compiled twin, when built (see aioproducer.accelerated): the same counts, read and changed from C by the
# compiled appender.
PureBufferPool = BufferPool
_twin = compiled_twin("aioproducer.buffer._pool")
if not TYPE_CHECKING and _twin is not None:
    BufferPool = _twin.BufferPool
