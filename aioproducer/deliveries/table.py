"""The deliveries of one `send_table` call: which batch each row went to, settled batch by batch into one
`TableReport` — never a Python object per row.

Owns the rows in flight (each batch outcome's (row, index) pairs, dropped once the batch settles, so a table larger
than `buffer_memory` streams through in bounded memory), the rows refused at the call, the count delivered per
partition and, when asked, each row's offset. Its compiled twin (`_table_deliveries.pyx`) keeps the pairs in C
arrays; both settle a split batch's rows to the half that carries each.
"""

from __future__ import annotations

import asyncio
from array import array
from functools import partial
from typing import TYPE_CHECKING, Any

from aioproducer.accelerated import compiled_twin
from aioproducer.columnar.arrow import Int64Array
from aioproducer.deliveries.delivery import BatchOutcome, resolve
from aioproducer.models import RowFailures, TableReport

__all__ = ["PureTableDeliveries", "TableDeliveries", "widened"]


class TableDeliveries:
    """Rows of one call, in flight and settled. `add` and `refuse` per row; `settled()` once every row is known."""

    __slots__ = ("_delivered", "_failures", "_offsets", "_per_partition", "_ranges", "_runs", "_waiter")

    def __init__(self, offsets: bool = False) -> None:
        self._runs: dict[BatchOutcome, array[int]] = {}  # pending outcome -> its rows as (row, index) pairs
        self._delivered = 0
        self._per_partition: dict[tuple[str, int], int] = {}
        self._ranges: dict[tuple[str, int], tuple[int, int]] = {}  # lowest and highest offset delivered (-1: unknown)
        # (error class, message) -> the first such error and the rows that failed with it
        self._failures: dict[tuple[type[BaseException], str], tuple[BaseException, array[int]]] = {}
        self._offsets: list[int | None] | None = [] if offsets else None
        self._waiter: asyncio.Future[None] | None = None

    def add(self, row: int, outcome: BatchOutcome, index: int) -> None:
        """Row `row` is the record at `index` of the batch settled through `outcome`."""
        run = self._runs.get(outcome)
        if run is None:
            run = self._runs[outcome] = array("q")
            outcome.add_waiter(partial(self._settled, outcome))
        run.append(row)
        run.append(index)

    def refuse(self, row: int, error: BaseException) -> None:
        """Row `row` failed before it was buffered (at the call) with `error`."""
        self._fail_rows(error, (row,))

    @property
    def pending(self) -> int:
        """Batches whose rows are not settled yet."""
        return len(self._runs)

    async def settled(self) -> None:
        """Until every row added is settled (its batch delivered, failed, or each half of a split settled)."""
        if self._runs:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter

    def report(self, rows: int) -> TableReport:
        """What happened to each of the call's `rows` rows (every one settled)."""
        failures = tuple(
            RowFailures(error, Int64Array(sorted(failed), name="row")) for error, failed in self._failures.values()
        )
        offsets = None
        if self._offsets is not None:
            self._offsets.extend([None] * (rows - len(self._offsets)))
            offsets = Int64Array(self._offsets, name="offset")
        failed = sum(len(rows_) for _, rows_ in self._failures.values())
        return TableReport(
            rows, self._delivered, failed, failures, dict(self._per_partition), dict(self._ranges), offsets
        )

    def _settled(self, outcome: BatchOutcome) -> None:
        run = self._runs.pop(outcome)
        if outcome.first is not None:  # split (MESSAGE_TOO_LARGE): each row waits on the half that carries it
            for position in range(0, len(run), 2):
                half, index = resolve(outcome, run[position + 1])
                self.add(run[position], half, index)
        elif outcome.error is not None:
            self._fail_rows(outcome.error, run[0::2])
        else:
            count = len(run) // 2
            self._delivered += count
            tp = (outcome.topic, outcome.partition)
            self._per_partition[tp] = self._per_partition.get(tp, 0) + count
            base = outcome.base_offset
            self._ranges[tp] = widened(self._ranges.get(tp), base, min(run[1::2]), max(run[1::2]))
            if self._offsets is not None:
                for position in range(0, len(run), 2):
                    self._set_offset(run[position], base + run[position + 1] if base >= 0 else None)
        if not self._runs and self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail_rows(self, error: BaseException, rows: Any) -> None:
        key = (type(error), str(error))
        entry = self._failures.get(key)
        if entry is None:
            entry = self._failures[key] = (error, array("q"))
        entry[1].extend(rows)

    def _set_offset(self, row: int, offset: int | None) -> None:
        offsets = self._offsets
        if offsets is not None:
            if row >= len(offsets):
                offsets.extend([None] * (row + 1 - len(offsets)))
            offsets[row] = offset


def widened(known: tuple[int, int] | None, base: int, low_index: int, high_index: int) -> tuple[int, int]:
    """A partition's offset range with a batch's rows added (`base` -1: Kafka told no offset, acks=0)."""
    if base < 0:
        return known if known is not None else (-1, -1)
    low, high = base + low_index, base + high_index
    if known is None or known[0] < 0:
        return low, high
    return min(known[0], low), max(known[1], high)


# The compiled twin, when built (see aioproducer.accelerated): the pairs in C arrays, settled in C.
PureTableDeliveries = TableDeliveries
_twin = compiled_twin("aioproducer.deliveries._table")
if not TYPE_CHECKING and _twin is not None:
    TableDeliveries = _twin.TableDeliveries
