"""Executor side of a publish: one event loop and one producer per Spark task, created in the task and closed at its
end; Arrow batches in, one `TaskReport` out, at most `MAX_PENDING_CHUNKS` `send_many` calls un-awaited.
Sees no Spark Row and no driver state.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.spark._deps import require
from aioproducer.spark.convert import records_from_arrow
from aioproducer.spark.options import PublishOptions, resolve_placeholders
from aioproducer.spark.report import MAX_ERRORS, TaskReport, TaskTally, arrow_schema
from aioproducer.spark.transactional import publish_in_transaction

__all__ = ["MAX_PENDING_CHUNKS", "TaskPlan", "publish_partition", "run_task"]

# Enough chunks in flight to keep the connection busy while the next chunk is converted, few enough that a task
# holds at most MAX_PENDING_CHUNKS * chunk_rows records (buffer_memory bounds it further).
MAX_PENDING_CHUNKS = 4
_GC_YOUNG_THRESHOLD = 50_000

_Results = list[RecordMetadata | BaseException]


@dataclass(frozen=True)
class TaskPlan:
    """What every task needs, pickled once into the Spark job: settings travel as strings (placeholders intact)."""

    producer_config: Mapping[str, str]
    topic: str | None
    chunk_rows: int
    max_errors: int = MAX_ERRORS
    transactional_id_prefix: str | None = None  # delivery="transactional": one transaction per task

    @classmethod
    def from_options(cls, options: PublishOptions) -> TaskPlan:
        return cls(dict(options.producer_config), options.topic, options.chunk_rows)


def publish_partition(batches: Iterator[Any], plan: TaskPlan) -> Iterator[Any]:
    """The `mapInArrow` function: publish the partition's batches, yield one Arrow batch of `REPORT_DDL`."""
    pa = require("pyarrow")
    report = run_task(batches, plan)
    yield pa.RecordBatch.from_pylist([report.as_dict()], schema=arrow_schema(pa))


def run_task(batches: Iterable[Any], plan: TaskPlan) -> TaskReport:
    """Publish one Spark partition (an iterable of Arrow record batches) in a fresh event loop."""
    context = require("pyspark").TaskContext.get()
    # Outside a Spark task (a unit test calling this directly) the partition is 0 and the attempt the first.
    partition, attempt, stage = (
        (context.partitionId(), context.attemptNumber(), context.stageId()) if context is not None else (0, 0, 0)
    )
    tally = TaskTally(partition, plan.max_errors)
    started = time.monotonic()
    with _young_collections_every(_GC_YOUNG_THRESHOLD):
        if plan.transactional_id_prefix is not None:
            config = resolve_placeholders(plan.producer_config, strict=True)
            chunks = _chunks(batches, plan)
            asyncio.run(publish_in_transaction(chunks, config, plan.transactional_id_prefix, partition, tally))
        else:
            asyncio.run(_publish(_chunks(batches, plan), plan, tally))
    return tally.report(attempt, stage, round((time.monotonic() - started) * 1000))


@contextlib.contextmanager
def _young_collections_every(allocations: int) -> Iterator[None]:
    # The hot path allocates a few short-lived containers per record, all freed by reference counting; at CPython's
    # default threshold (700) the cyclic collector runs every ~100 records and costs ~20% of a task's CPU (measured).
    # The task owns its Python worker while it runs; the previous thresholds come back at its end.
    previous = gc.get_threshold()
    gc.set_threshold(max(previous[0], allocations), *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)


def _chunks(batches: Iterable[Any], plan: TaskPlan) -> Iterator[list[ProducerRecord]]:
    for batch in batches:
        for start in range(0, batch.num_rows, plan.chunk_rows):
            yield records_from_arrow(batch.slice(start, plan.chunk_rows), plan.topic)


async def _publish(chunks: Iterator[list[ProducerRecord]], plan: TaskPlan, tally: TaskTally) -> None:
    first = next(chunks, None)
    if first is None:
        return  # an empty partition opens no connection
    config = resolve_placeholders(plan.producer_config, strict=True)
    async with Producer(config=config) as producer:
        pending: deque[tuple[int, asyncio.Future[_Results]]] = deque()
        try:
            row = 0
            for records in _prepend(first, chunks):
                pending.append((row, asyncio.ensure_future(producer.send_many(records))))
                row += len(records)
                if len(pending) > MAX_PENDING_CHUNKS:
                    await _settle(pending.popleft(), tally)
            while pending:
                await _settle(pending.popleft(), tally)
        finally:
            # Only on an error (reading the input failed, the task is being killed): stop buffering; what is
            # buffered is still flushed by close(), and this attempt fails anyway, so Spark reruns the partition.
            for _, future in pending:
                future.cancel()
            await asyncio.gather(*(future for _, future in pending), return_exceptions=True)


async def _settle(entry: tuple[int, asyncio.Future[_Results]], tally: TaskTally) -> None:
    first_row, future = entry
    tally.add(first_row, await future)


def _prepend(first: list[ProducerRecord], rest: Iterator[list[ProducerRecord]]) -> Iterator[list[ProducerRecord]]:
    yield first
    yield from rest
