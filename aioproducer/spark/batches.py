"""The streaming sink's report of each micro-batch: `BatchReport`, kept as one JSON file per micro-batch under the
`reportPath` option (written by the sink's commit or abort on the driver), read back with `read_batch_reports`, or
handed to a callback as queries progress with `watch_batch_reports`. Imports Spark only in `watch_batch_reports`.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aioproducer.errors import ConfigError
from aioproducer.spark._deps import require
from aioproducer.spark.report import PublishReport, TaskReport
from aioproducer.spark.transactional import AT_LEAST_ONCE

__all__ = [
    "ABORTED",
    "COMMITTED",
    "FAILED",
    "BatchReport",
    "local_directory",
    "read_batch_reports",
    "record_batch",
    "watch_batch_reports",
]

COMMITTED, FAILED, ABORTED = "committed", "failed", "aborted"
_PREFIX, _SUFFIX = "batch-", ".json"


@dataclass(frozen=True)
class BatchReport:
    """What one micro-batch published. `outcome`: "committed"; "failed" (records were not delivered and
    failOnError stopped the query); or "aborted" (a task failed; what finished tasks delivered stays in Kafka).

    `earlier_runs` counts the reports this micro-batch had before: Spark runs a micro-batch again after a failure
    and a restart from its checkpoint, and each run publishes all of its rows.
    """

    batch_id: int
    outcome: str
    report: PublishReport
    earlier_runs: int = 0
    written_ms: int = 0

    @property
    def may_have_duplicates(self) -> bool:
        return self.earlier_runs > 0 or self.report.may_have_duplicates

    def summary(self) -> str:
        runs = f", run {self.earlier_runs + 1} (rows published again: possible duplicates)" if self.earlier_runs else ""
        return f"micro-batch {self.batch_id} {self.outcome}{runs}: {self.report.summary()}"

    def as_json(self) -> str:
        return json.dumps(
            {
                "batch_id": self.batch_id,
                "outcome": self.outcome,
                "earlier_runs": self.earlier_runs,
                "written_ms": self.written_ms,
                "delivery": self.report.delivery,
                "tasks": [t.as_dict() for t in self.report.tasks],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> BatchReport:
        document = json.loads(text)
        tasks = tuple(TaskReport.from_dict(t) for t in document["tasks"])
        return cls(
            document["batch_id"],
            document["outcome"],
            PublishReport(tasks, delivery=document.get("delivery", AT_LEAST_ONCE)),
            document["earlier_runs"],
            document["written_ms"],
        )


def local_directory(option: str) -> Path:
    """The directory of a `reportPath` option: a local path (or file: URI) on the driver's machine."""
    parts = urllib.parse.urlsplit(option)
    if parts.scheme == "file":
        return Path(parts.path)
    if (len(parts.scheme) > 1 and "://" in option) or not option.strip():
        raise ConfigError(f"option 'reportPath' must be a local directory on the driver, got {option!r}")
    return Path(option)


def record_batch(directory: Path, batch_id: int, outcome: str, report: PublishReport) -> BatchReport:
    """Write the report of a micro-batch (replacing an earlier run's, whose count it carries on) and return it.

    A failed commit is followed by Spark's abort of the same micro-batch: that abort changes nothing."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{_PREFIX}{batch_id:012d}{_SUFFIX}"
    earlier = 0
    if target.exists():
        previous = BatchReport.from_json(target.read_text())
        if previous.outcome == FAILED and outcome == ABORTED and previous.report.tasks == report.tasks:
            return previous  # Spark aborts the micro-batch whose commit failed: the same run, already reported
        earlier = previous.earlier_runs + 1
    batch = BatchReport(batch_id, outcome, report, earlier, int(time.time() * 1000))
    # Whole or not at all, for a reader polling the directory: a temporary file renamed over the old one.
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".batch-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as file:
            file.write(batch.as_json())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return batch


def read_batch_reports(directory: str | os.PathLike[str]) -> list[BatchReport]:
    """Every micro-batch report under `directory`, by batch id (the latest run of each)."""
    path = Path(directory)
    if not path.is_dir():
        return []
    files = sorted(p for p in path.iterdir() if p.name.startswith(_PREFIX) and p.name.endswith(_SUFFIX))
    return [BatchReport.from_json(p.read_text()) for p in files]


def watch_batch_reports(spark: Any, directory: str | os.PathLike[str], on_report: Callable[[BatchReport], None]) -> Any:
    """Call `on_report` with each new micro-batch report under `directory`, in batch order, as Spark reports the
    progress (or the end) of streaming queries; returns the StreamingQueryListener, for `spark.streams.removeListener`.

    The callback runs on Spark's listener thread: keep it short. A report that a re-run replaces is delivered again.
    """
    listener_type = require("pyspark.sql.streaming").StreamingQueryListener
    seen: dict[int, tuple[str, int]] = {}

    def deliver() -> None:
        for batch in read_batch_reports(directory):
            if seen.get(batch.batch_id) != (batch.outcome, batch.written_ms):
                seen[batch.batch_id] = (batch.outcome, batch.written_ms)
                on_report(batch)

    class BatchReportListener(listener_type):  # type: ignore[misc, valid-type]
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            deliver()

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            deliver()

    listener = BatchReportListener()
    spark.streams.addListener(listener)
    return listener
