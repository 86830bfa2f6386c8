"""Settling records: turning a batch's outcome into each record's `RecordMetadata` or exception.

A record's "sink" is either an `asyncio.Future` (from `enqueue`/`send`) or a `BulkResults` slot (from
`send_many`, which avoids one future per record). A sink the caller cancelled is left alone: cancelling a wait
never unsends a record.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .accumulator import ENTRY_WIDTH, ProducerBatch
from .models import RecordMetadata

__all__ = ["BulkResults", "complete_batch", "fail_batch"]


class BulkResults:
    """One result slot per record of a `send_many` call, and one future that resolves when all are filled."""

    __slots__ = ("future", "remaining", "results")

    def __init__(self, count: int, loop: asyncio.AbstractEventLoop) -> None:
        self.results: list[Any] = [None] * count
        self.remaining = count
        self.future: asyncio.Future[None] = loop.create_future()
        if count == 0:
            self.future.set_result(None)

    def set(self, slot: int, result: Any) -> None:
        self.results[slot] = result
        self.remaining -= 1
        if self.remaining == 0 and not self.future.done():
            self.future.set_result(None)


def complete_batch(batch: ProducerBatch, base_offset: int, log_append_time_ms: int) -> None:
    """Resolve every record of a delivered batch. `base_offset` -1 means unknown (acks=0, duplicate)."""
    topic, partition = batch.tp
    new = tuple.__new__  # RecordMetadata is a named tuple: skip its generated __new__ on this per-record path
    fields = iter(batch.entries)
    for index, (sink, slot, timestamp, key_size, value_size) in enumerate(zip(*[fields] * ENTRY_WIDTH, strict=True)):
        metadata = new(
            RecordMetadata,
            (
                topic,
                partition,
                base_offset + index if base_offset >= 0 else -1,
                log_append_time_ms if log_append_time_ms >= 0 else timestamp,
                key_size,
                value_size,
            ),
        )
        if slot < 0:
            if not sink.done():
                sink.set_result(metadata)
        else:
            sink.set(slot, metadata)
    batch.entries = []


def fail_batch(batch: ProducerBatch, error: BaseException) -> None:
    """Fail every record of a batch with the same reason."""
    entries = batch.entries
    for position in range(0, len(entries), ENTRY_WIDTH):
        sink, slot = entries[position], entries[position + 1]
        if slot < 0:
            if not sink.done():
                sink.set_exception(error)
        else:
            sink.set(slot, error)
    batch.entries = []
