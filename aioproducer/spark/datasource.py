"""`df.write.format("aioproducer")`: the Data Source classes of Spark 4's Python Data Source API, over the same
checks and executor code as `publish`. Imports pyspark on import, so only `register` imports this module.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from aioproducer.errors import ConfigError
from aioproducer.spark._deps import require
from aioproducer.spark.options import parse_options
from aioproducer.spark.report import PublishError, PublishReport, TaskReport
from aioproducer.spark.schema import check_schema
from aioproducer.spark.task import TaskPlan, run_task

__all__ = ["FORMAT", "KafkaDataSource", "register"]

FORMAT = "aioproducer"
log = logging.getLogger("aioproducer.spark")

_api = require("pyspark.sql.datasource")
# pyspark is `Any` at this boundary: the package type-checks the same with or without the extra.
_WriterCommitMessage: Any = _api.WriterCommitMessage
_DataSourceArrowWriter: Any = _api.DataSourceArrowWriter
_DataSource: Any = _api.DataSource


class TaskCommit(_WriterCommitMessage):  # type: ignore[misc]
    """A task's report, carried to `commit` on the driver."""

    def __init__(self, report: TaskReport) -> None:
        self.report = report


class KafkaWriter(_DataSourceArrowWriter):  # type: ignore[misc]
    """Publishes each task's Arrow batches; `commit` merges the reports and fails the job on undelivered records."""

    def __init__(self, plan: TaskPlan, fail_on_error: bool) -> None:
        self.plan = plan
        self.fail_on_error = fail_on_error

    def write(self, iterator: Iterator[Any]) -> TaskCommit:
        return TaskCommit(run_task(iterator, self.plan))

    def commit(self, messages: Sequence[TaskCommit | None]) -> None:
        report = PublishReport(tuple(m.report for m in messages if m is not None))
        if not report.ok and self.fail_on_error:
            raise PublishError(report)
        log.log(logging.WARNING if report.may_have_duplicates or not report.ok else logging.INFO, report.summary())

    def abort(self, messages: Sequence[TaskCommit | None]) -> None:
        # Kafka has no rollback: what the finished tasks delivered stays written.
        report = PublishReport(tuple(m.report for m in messages if m is not None))
        log.warning("the Spark job failed; what its finished tasks delivered stays in Kafka:\n%s", report.summary())


class KafkaDataSource(_DataSource):  # type: ignore[misc]
    """`df.write.format("aioproducer").option("kafka.bootstrap.servers", ...).option("topic", ...).save()`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def writer(self, schema: Any, overwrite: bool) -> KafkaWriter:
        if overwrite:
            # Spark's KafkaSourceProvider: Kafka is append-only.
            raise ConfigError(
                "Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and ErrorIfExists (default)."
            )
        settings = parse_options(dict(self.options))
        check_schema(schema, settings.topic)
        return KafkaWriter(TaskPlan.from_options(settings), settings.fail_on_error)


def register(spark: Any) -> None:
    """Register `KafkaDataSource` with `spark` under the format name "aioproducer"."""
    spark.dataSource.register(KafkaDataSource)
