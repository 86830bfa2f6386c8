"""The delivery report of a Spark publish: per task and per Kafka partition, first errors, possible duplicates.
Pure data, built from the producer's results on the executor and merged on the driver; imports neither Spark nor
Arrow (the Arrow schema is built from a module handed in).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aioproducer.errors import AioProducerError, InvalidRecordError
from aioproducer.models import TableReport

__all__ = [
    "MAX_ERRORS",
    "REPORT_DDL",
    "PartitionOffsets",
    "PublishError",
    "PublishReport",
    "RecordError",
    "TaskReport",
    "TaskTally",
    "arrow_schema",
    "merge_offsets",
]

MAX_ERRORS = 10
_MAX_MESSAGE_CHARS = 500

# One row per Spark task, the output of `mapInArrow`; `arrow_schema` must describe the same columns.
REPORT_DDL = (
    "spark_partition int, attempt int, stage_id int, delivered long, failed long, elapsed_ms long, "
    "offsets array<struct<topic:string,partition:int,first_offset:long,last_offset:long,records:long>>, "
    "errors array<struct<spark_partition:int,row:long,error:string,message:string>>, new_producer boolean, "
    "connections_opened long"
)


def arrow_schema(pa: Any) -> Any:
    """The pyarrow schema of `REPORT_DDL`, built with the given `pyarrow` module."""
    offsets = pa.struct(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("first_offset", pa.int64()),
            ("last_offset", pa.int64()),
            ("records", pa.int64()),
        ]
    )
    errors = pa.struct(
        [("spark_partition", pa.int32()), ("row", pa.int64()), ("error", pa.string()), ("message", pa.string())]
    )
    return pa.schema(
        [
            ("spark_partition", pa.int32()),
            ("attempt", pa.int32()),
            ("stage_id", pa.int32()),
            ("delivered", pa.int64()),
            ("failed", pa.int64()),
            ("elapsed_ms", pa.int64()),
            ("offsets", pa.list_(offsets)),
            ("errors", pa.list_(errors)),
            ("new_producer", pa.bool_()),
            ("connections_opened", pa.int64()),
        ]
    )


@dataclass(frozen=True)
class PartitionOffsets:
    """Records delivered to one Kafka partition: how many, and the lowest and highest offset among them.

    Other tasks (and other producers) may have written between `first_offset` and `last_offset`. Offsets are -1
    when the broker did not say (acks=0).
    """

    topic: str
    partition: int
    first_offset: int
    last_offset: int
    records: int


@dataclass(frozen=True)
class RecordError:
    """One record that failed: its row within its Spark partition, the exception's class name and message."""

    spark_partition: int
    row: int
    error: str
    message: str


@dataclass(frozen=True)
class TaskReport:
    """What one Spark task published. `attempt` > 0 means earlier attempts of this partition ran (and may have
    published some of its rows: possible duplicates). `new_producer`: the task started a producer, rather than
    borrowing the one an earlier task of its Python worker left in the cache (each start sends one InitProducerId);
    `connections_opened`: broker connections its producer opened for it (all of a new producer's, a borrowed one's
    reconnections during the task)."""

    spark_partition: int
    attempt: int
    stage_id: int
    delivered: int
    failed: int
    elapsed_ms: int
    offsets: tuple[PartitionOffsets, ...] = ()
    errors: tuple[RecordError, ...] = ()
    new_producer: bool = False
    connections_opened: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The row `REPORT_DDL` describes."""
        row = {name: getattr(self, name) for name in self.__dataclass_fields__}
        row["offsets"] = [vars(o) for o in self.offsets]
        row["errors"] = [vars(e) for e in self.errors]
        return row

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> TaskReport:
        """From a report row (`Row.asDict(recursive=True)` on the driver)."""
        fields = {
            name: row[name] for name in cls.__dataclass_fields__ if name not in ("offsets", "errors") and name in row
        }
        fields["new_producer"] = bool(fields["new_producer"])
        return cls(
            **fields,
            offsets=tuple(PartitionOffsets(**o) for o in row["offsets"] or ()),
            errors=tuple(RecordError(**e) for e in row["errors"] or ()),
        )


@dataclass(frozen=True)
class PublishReport:
    """The outcome of one publish, returned on the driver: one `TaskReport` per Spark partition.

    `stage_retried` (Spark re-ran the publishing stage) and `speculation` (speculative copies of tasks may have
    published before being killed) mean any partition may have been published more than once. `delivery` says which
    mode ran: "at_least_once", or "transactional" (a retried task's earlier attempts are invisible to read_committed
    readers unless an attempt died after its commit).
    """

    tasks: tuple[TaskReport, ...]
    stage_retried: bool = False
    speculation: bool = False
    delivery: str = "at_least_once"
    partitions: tuple[PartitionOffsets, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(sorted(self.tasks, key=lambda t: t.spark_partition)))
        object.__setattr__(self, "partitions", merge_offsets(o for t in self.tasks for o in t.offsets))

    @property
    def delivered(self) -> int:
        return sum(t.delivered for t in self.tasks)

    @property
    def failed(self) -> int:
        return sum(t.failed for t in self.tasks)

    @property
    def ok(self) -> bool:
        """Every record was delivered."""
        return self.failed == 0

    @property
    def errors(self) -> tuple[RecordError, ...]:
        """The first errors, by Spark partition then row (at most `MAX_ERRORS` from each task)."""
        return tuple(e for t in self.tasks for e in t.errors)[:MAX_ERRORS]

    @property
    def retried_partitions(self) -> tuple[int, ...]:
        """Spark partitions whose successful task was not the first attempt: their rows may be in Kafka twice."""
        return tuple(t.spark_partition for t in self.tasks if t.attempt > 0)

    @property
    def may_have_duplicates(self) -> bool:
        return bool(self.retried_partitions) or self.stage_retried or self.speculation

    def summary(self) -> str:
        """A few lines for a log or an exception message."""
        started = sum(t.new_producer for t in self.tasks)
        lines = [
            f"{self.delivered} records delivered, {self.failed} failed, by {_count(len(self.tasks), 'Spark task')} "
            f"({started} started a producer) to {_count(len(self.partitions), 'Kafka partition')} "
            f"({self.delivery.replace('_', '-')})"
        ]
        lines += [
            f"  {p.topic}[{p.partition}]: {p.records} records, offsets {p.first_offset}..{p.last_offset}"
            for p in self.partitions
        ]
        lines += [
            f"  error in Spark partition {e.spark_partition} row {e.row}: {e.error}: {e.message}" for e in self.errors
        ]
        if self.retried_partitions:
            lines.append(
                f"  Spark partitions run more than once (possible duplicates): {list(self.retried_partitions)}"
            )
        if self.stage_retried:
            lines.append("  the publishing stage was retried: any partition may have been published more than once")
        if self.speculation:
            lines.append("  spark.speculation is on: a killed speculative task may have published rows too")
        return "\n".join(lines)


class PublishError(AioProducerError):
    """Some records of a publish were not delivered; `report` says which, where, and why."""

    def __init__(self, report: PublishReport) -> None:
        first = report.errors[0] if report.errors else None
        reason = f"; first: {first.error}: {first.message}" if first else ""
        super().__init__(f"{report.failed} of {report.delivered + report.failed} records failed to publish{reason}")
        self.report = report

    def __reduce__(self) -> tuple[type[PublishError], tuple[PublishReport]]:
        return (type(self), (self.report,))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def merge_offsets(offsets: Iterable[PartitionOffsets]) -> tuple[PartitionOffsets, ...]:
    """One entry per (topic, partition): records summed, the lowest first and highest last offset (-1: unknown)."""
    merged: dict[tuple[str, int], PartitionOffsets] = {}
    for o in offsets:
        seen = merged.get((o.topic, o.partition))
        if seen is not None:
            firsts = [x for x in (seen.first_offset, o.first_offset) if x >= 0]
            o = PartitionOffsets(
                o.topic,
                o.partition,
                min(firsts, default=-1),
                max(seen.last_offset, o.last_offset),
                seen.records + o.records,
            )
        merged[(o.topic, o.partition)] = o
    return tuple(merged[tp] for tp in sorted(merged))


class TaskTally:
    """Counts one task's results as its `send_table` calls return: per Kafka partition, failures, first errors."""

    def __init__(self, spark_partition: int, max_errors: int = MAX_ERRORS) -> None:
        self.spark_partition = spark_partition
        self.max_errors = max_errors
        self.delivered = 0
        self.failed = 0
        self.errors: list[RecordError] = []
        self.producer_suspect = False
        self._offsets: dict[tuple[str, int], list[int]] = {}  # → [first, last, records]

    def add_table(self, first_row: int, report: TableReport) -> None:
        """The report of rows `first_row`, `first_row + 1`, ... of this task's Spark partition (one send_table call):
        counted per partition and per error, never row by row (only the first failed rows are looked at)."""
        self.delivered += report.delivered
        for tp, records in report.per_partition.items():
            low, high = report.offset_ranges.get(tp, (-1, -1))
            self._fold_range(tp, low, high, records)
        failed_rows: list[tuple[int, BaseException]] = []
        for failure in report.failures:
            self.failed += len(failure.rows)
            self.producer_suspect |= not isinstance(failure.error, InvalidRecordError)
            room = self.max_errors - len(self.errors)
            if room > 0:
                failed_rows += [(row, failure.error) for row in failure.row_numbers()[:room]]
        for row, error in sorted(failed_rows, key=lambda pair: pair[0])[: max(self.max_errors - len(self.errors), 0)]:
            message = str(error)[:_MAX_MESSAGE_CHARS]
            self.errors.append(RecordError(self.spark_partition, first_row + row, type(error).__name__, message))

    def _fold_range(self, tp: tuple[str, int], low: int, high: int, records: int) -> None:
        stats = self._offsets.get(tp)
        if stats is None:
            self._offsets[tp] = [low, high, records]
            return
        if low >= 0 and (stats[0] < 0 or low < stats[0]):
            stats[0] = low
        stats[1] = max(stats[1], high)
        stats[2] += records

    def report(
        self, attempt: int, stage_id: int, elapsed_ms: int, *, new_producer: bool = False, connections_opened: int = 0
    ) -> TaskReport:
        offsets = tuple(
            PartitionOffsets(topic, partition, *stats) for (topic, partition), stats in sorted(self._offsets.items())
        )
        return TaskReport(
            self.spark_partition,
            attempt,
            stage_id,
            self.delivered,
            self.failed,
            elapsed_ms,
            offsets,
            tuple(self.errors),
            new_producer,
            connections_opened,
        )
