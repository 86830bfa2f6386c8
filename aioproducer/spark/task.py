"""Executor side of a publish: Arrow batches in, one `TaskReport` out. Spark's Arrow batches go straight to the
producer's columnar path (`send_table`: no Python object per row) on the loop thread of the process's producer cache
(`cache.py`), in chunks of at most `chunk_rows`, with at most `MAX_PENDING_CHUNKS` calls un-awaited. Sees no Spark
Row and no driver state.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from aioproducer.models import TableReport
from aioproducer.spark._deps import require
from aioproducer.spark.cache import REUSE_WORKER, Lease, freeze_long_lived_objects, shared_cache
from aioproducer.spark.options import DEFAULT_CACHE_TIMEOUT_MS, PublishOptions, resolve_placeholders
from aioproducer.spark.report import MAX_ERRORS, TaskReport, TaskTally, arrow_schema
from aioproducer.spark.transactional import publish_in_transaction

__all__ = ["MAX_PENDING_CHUNKS", "TaskPlan", "columns_of", "publish_partition", "run_task"]

# Enough chunks in flight to keep the connection busy while the next chunk is converted, few enough that a task
# holds at most MAX_PENDING_CHUNKS * chunk_rows records (buffer_memory bounds it further).
MAX_PENDING_CHUNKS = 4
_Pending = deque[tuple[int, "concurrent.futures.Future[TableReport]"]]
# The sink's columns (Spark's KafkaWriter): value, and optionally key, topic, partition and headers.
_ROLES = ("key", "value", "partition", "headers")


@dataclass(frozen=True)
class TaskPlan:
    """What every task needs, pickled once into the Spark job: settings travel as strings (placeholders intact)."""

    producer_config: Mapping[str, str]
    topic: str | None
    chunk_rows: int
    max_errors: int = MAX_ERRORS
    transactional_id_prefix: str | None = None  # delivery="transactional": one transaction per task
    producer_cache: bool = True
    producer_cache_timeout_ms: int = DEFAULT_CACHE_TIMEOUT_MS

    @classmethod
    def from_options(cls, options: PublishOptions) -> TaskPlan:
        return cls(
            dict(options.producer_config),
            options.topic,
            options.chunk_rows,
            producer_cache=options.producer_cache,
            producer_cache_timeout_ms=options.producer_cache_timeout_ms,
            transactional_id_prefix=options.transactional_id_prefix,
        )


def publish_partition(batches: Iterator[Any], plan: TaskPlan) -> Iterator[Any]:
    """The `mapInArrow` function: publish the partition's batches, yield one Arrow batch of `REPORT_DDL`."""
    pa = require("pyarrow")
    report = run_task(batches, plan)
    yield pa.RecordBatch.from_pylist([report.as_dict()], schema=arrow_schema(pa))


def run_task(batches: Iterable[Any], plan: TaskPlan) -> TaskReport:
    """Publish one Spark partition (an iterable of Arrow record batches); waits until every record is settled."""
    context = require("pyspark").TaskContext.get()
    # Outside a Spark task (a unit test calling this directly) the partition is 0 and the attempt the first.
    partition, attempt, stage = (
        (context.partitionId(), context.attemptNumber(), context.stageId()) if context is not None else (0, 0, 0)
    )
    tally = TaskTally(partition, plan.max_errors)
    started = time.monotonic()
    if plan.transactional_id_prefix is not None:
        # One producer per task: its transactional id is the Spark partition's, never shared through the cache.
        config = resolve_placeholders(plan.producer_config, strict=True)
        chunks = _chunks(batches, plan)
        connections = asyncio.run(
            publish_in_transaction(
                chunks,
                lambda chunk: columns_of(chunk, plan.topic),
                config,
                plan.transactional_id_prefix,
                partition,
                tally,
            )
        )
        new_producer = connections > 0
    else:
        new_producer, connections = _publish(_chunks(batches, plan), plan, tally)
    elapsed_ms = round((time.monotonic() - started) * 1000)
    return tally.report(attempt, stage, elapsed_ms, new_producer=new_producer, connections_opened=connections)


def _chunks(batches: Iterable[Any], plan: TaskPlan) -> Iterator[Any]:
    """The task's Arrow batches, sliced to at most `chunk_rows` rows (slices share the batch's buffers)."""
    for batch in batches:
        for start in range(0, batch.num_rows, plan.chunk_rows):
            yield batch.slice(start, plan.chunk_rows)


def columns_of(batch: Any, topic: str | None) -> dict[str, Any]:
    """`send_table`'s column arguments for a batch of sink columns; `topic`, when given, overrides the topic column
    (as Spark's Kafka sink's topic option does)."""
    names = set(batch.schema.names)
    columns: dict[str, Any] = {role: role for role in _ROLES if role in names}
    if topic is not None:
        columns["topic"] = topic
    else:
        columns["topic_column"] = "topic"
    return columns


def _publish(chunks: Iterator[Any], plan: TaskPlan, tally: TaskTally) -> tuple[bool, int]:
    """Send every chunk through a borrowed producer; whether the task had to start that producer, and how many
    connections the producer opened for the task."""
    first = next(chunks, None)
    if first is None:
        return False, 0  # an empty partition borrows no producer
    config = resolve_placeholders(plan.producer_config, strict=True)
    # Without Spark's reuse mark (or outside Spark) the process ends after this task, or never runs another: a
    # producer kept for a next task would only be dropped unclosed.
    keep = plan.producer_cache and bool(os.environ.get(REUSE_WORKER))
    columns = columns_of(first, plan.topic)
    with shared_cache().lease(config, keep=keep, idle_timeout_s=plan.producer_cache_timeout_ms / 1000) as lease:
        opened_before = 0 if lease.created else lease.connections_opened()
        pending: _Pending = deque()
        try:
            row = 0
            for chunk in _prepend(first, chunks):
                pending.append((row, lease.send_table(chunk, **columns)))
                row += chunk.num_rows
                if len(pending) > MAX_PENDING_CHUNKS:
                    _settle(pending.popleft(), tally, lease)
            while pending:
                _settle(pending.popleft(), tally, lease)
        finally:
            # Only on an error (reading the input failed, the task is being killed): stop sending. What is buffered
            # is still delivered by the producer; this attempt fails anyway, so Spark reruns the partition.
            for _, future in pending:
                future.cancel()
            concurrent.futures.wait([future for _, future in pending])
        lease.suspect |= tally.producer_suspect
        created, opened, suspect = lease.created, lease.connections_opened() - opened_before, lease.suspect
    del lease  # a suspect producer was closed on release: this frame must not keep it alive into the freeze
    if keep and not suspect:
        # The worker and its producer outlive this task: keep them out of the collection pyspark runs after each task.
        freeze_long_lived_objects()
    return created, opened


def _settle(entry: tuple[int, concurrent.futures.Future[TableReport]], tally: TaskTally, lease: Lease) -> None:
    first_row, future = entry
    try:
        report = future.result()
    except BaseException:
        lease.suspect = True  # send_table itself failed (the producer closed under the task): never lend it again
        raise
    tally.add_table(first_row, report)


def _prepend(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest
