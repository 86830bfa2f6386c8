"""`df.write.format("aioproducer")` and `df.writeStream.format("aioproducer")`: the Data Source classes of Spark 4's
Python Data Source API, over the same checks and executor code as `publish`. Imports pyspark on import, so only
`register` imports this module.

A streaming write publishes each micro-batch as a batch write does, one task per Spark partition, each with a
producer from its worker's cache; the micro-batch's commit (on the driver) merges the task reports, writes them under
`reportPath`, and fails the query on undelivered records (failOnError). Delivery is at-least-once: Spark runs a task
again after a failure, and a whole micro-batch again when the query restarts before the batch was committed. With
`delivery=transactional`, each task writes its rows in a transaction of its own whose id is
`<transactionalIdPrefix>-<partition>` (`transactional.py`, as `publish`), committed when the task's data ends.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from aioproducer.errors import ConfigError
from aioproducer.spark._deps import require
from aioproducer.spark.batches import ABORTED, COMMITTED, FAILED, BatchReport, local_directory, record_batch
from aioproducer.spark.cache import freeze_in_a_reused_worker
from aioproducer.spark.options import PublishOptions, parse_options
from aioproducer.spark.report import PublishError, PublishReport, TaskReport
from aioproducer.spark.schema import check_schema
from aioproducer.spark.task import TaskPlan, run_task
from aioproducer.spark.transactional import TRANSACTIONAL

__all__ = ["FORMAT", "KafkaDataSource", "KafkaStreamWriter", "KafkaWriter", "register"]

FORMAT = "aioproducer"
log = logging.getLogger("aioproducer.spark")

_api = require("pyspark.sql.datasource")
# pyspark is `Any` at this boundary: the package type-checks the same with or without the extra.
_WriterCommitMessage: Any = _api.WriterCommitMessage
_DataSourceArrowWriter: Any = _api.DataSourceArrowWriter
_DataSource: Any = _api.DataSource
# Arrow batches for streaming writes came in Spark 4.1; Spark 4.0's stream writer gets Rows, turned into Arrow here.
_StreamWriter: Any = getattr(_api, "DataSourceStreamArrowWriter", None) or _api.DataSourceStreamWriter
_STREAM_ROWS = not hasattr(_api, "DataSourceStreamArrowWriter")


class TaskCommit(_WriterCommitMessage):  # type: ignore[misc]
    """A task's report, carried to `commit` on the driver."""

    def __init__(self, report: TaskReport) -> None:
        self.report = report


def _merged(messages: Sequence[TaskCommit | None], delivery: str) -> PublishReport:
    return PublishReport(tuple(m.report for m in messages if m is not None), delivery=delivery)


def _kept(delivery: str) -> str:
    # What Kafka keeps of a failed job or micro-batch: there is no rollback of what finished tasks wrote.
    if delivery == TRANSACTIONAL:
        return "the transactions its finished tasks committed stay visible, failed tasks' are aborted"
    return "what its finished tasks delivered stays in Kafka"


class KafkaWriter(_DataSourceArrowWriter):  # type: ignore[misc]
    """Publishes each task's Arrow batches; `commit` merges the reports and fails the job on undelivered records."""

    def __init__(self, plan: TaskPlan, settings: PublishOptions) -> None:
        self.plan = plan
        self.fail_on_error = settings.fail_on_error
        self.delivery = settings.delivery

    def write(self, iterator: Iterator[Any]) -> TaskCommit:
        return TaskCommit(run_task(iterator, self.plan))

    def commit(self, messages: Sequence[TaskCommit | None]) -> None:
        report = _merged(messages, self.delivery)
        if not report.ok and self.fail_on_error:
            raise PublishError(report)
        log.log(logging.WARNING if report.may_have_duplicates or not report.ok else logging.INFO, report.summary())

    def abort(self, messages: Sequence[TaskCommit | None]) -> None:
        report = _merged(messages, self.delivery)
        log.warning("the Spark job failed; %s:\n%s", _kept(self.delivery), report.summary())


class KafkaStreamWriter(_StreamWriter):  # type: ignore[misc]
    """Publishes each micro-batch; `commit` / `abort` run once per micro-batch on the driver with its task reports."""

    def __init__(self, plan: TaskPlan, settings: PublishOptions, arrow_schema: Any) -> None:
        self.plan = plan
        self.fail_on_error = settings.fail_on_error
        self.delivery = settings.delivery
        self.report_path = settings.report_path
        self.arrow_schema = arrow_schema  # only for Spark 4.0's Rows

    def write(self, iterator: Iterator[Any]) -> TaskCommit:
        batches = _rows_as_arrow(iterator, self.arrow_schema, self.plan.chunk_rows) if _STREAM_ROWS else iterator
        return TaskCommit(run_task(batches, self.plan))

    def commit(self, messages: Sequence[TaskCommit | None], batchId: int) -> None:
        report = _merged(messages, self.delivery)
        failed = not report.ok and self.fail_on_error
        batch = self._record(batchId, FAILED if failed else COMMITTED, report)
        if failed:
            # The micro-batch is not committed: the query stops, and a restart publishes all of its rows again.
            raise PublishError(report)
        log.log(logging.WARNING if batch.may_have_duplicates or not report.ok else logging.INFO, batch.summary())
        freeze_in_a_reused_worker()  # the commit's worker, too, is reused for every micro-batch

    def abort(self, messages: Sequence[TaskCommit | None], batchId: int) -> None:
        batch = self._record(batchId, ABORTED, _merged(messages, self.delivery))
        log.warning("a task failed; %s: %s", _kept(self.delivery), batch.summary())

    def _record(self, batch_id: int, outcome: str, report: PublishReport) -> BatchReport:
        if self.report_path is None:
            return BatchReport(batch_id, outcome, report)
        return record_batch(local_directory(self.report_path), batch_id, outcome, report)


def _rows_as_arrow(rows: Iterator[Any], schema: Any, chunk_rows: int) -> Iterator[Any]:
    pa = require("pyarrow")
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row.asDict(recursive=True))
        if len(chunk) == chunk_rows:
            yield pa.RecordBatch.from_pylist(chunk, schema=schema)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=schema)


class KafkaDataSource(_DataSource):  # type: ignore[misc]
    """`df.write.format("aioproducer").option("kafka.bootstrap.servers", ...).option("topic", ...).save()`, and
    the same options on `df.writeStream.format("aioproducer")`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def writer(self, schema: Any, overwrite: bool) -> KafkaWriter:
        _refuse_overwrite(overwrite)
        settings = parse_options(dict(self.options))
        check_schema(schema, settings.topic)
        return KafkaWriter(TaskPlan.from_options(settings), settings)

    def streamWriter(self, schema: Any, overwrite: bool) -> KafkaStreamWriter:
        _refuse_overwrite(overwrite)
        settings = parse_options(dict(self.options), streaming=True)
        check_schema(schema, settings.topic)
        if settings.report_path is not None:
            local_directory(settings.report_path)
        arrow_schema = require("pyspark.sql.pandas.types").to_arrow_schema(schema) if _STREAM_ROWS else None
        writer = KafkaStreamWriter(TaskPlan.from_options(settings), settings, arrow_schema)
        # Spark builds the stream writer again for every micro-batch, in a Python worker it reuses: keep the modules
        # loaded here out of the full collection its daemon runs after each use (see freeze_in_a_reused_worker).
        freeze_in_a_reused_worker()
        return writer


def _refuse_overwrite(overwrite: bool) -> None:
    if overwrite:
        # Spark's KafkaSourceProvider: Kafka is append-only.
        raise ConfigError(
            "Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and ErrorIfExists (default)."
        )


def register(spark: Any) -> None:
    """Register `KafkaDataSource` with `spark` under the format name "aioproducer", and make `spark` the active
    session of the calling thread."""
    spark.dataSource.register(KafkaDataSource)
    # Spark finds a Python data source through the *active* session of the thread that starts the query
    # (DataSource.lookupDataSource asks SparkSession.getActiveSession, a JVM thread-local), not through the
    # session the writer came from: a query started on a thread that never made this session active failed with
    # DATA_SOURCE_NOT_FOUND. PySpark pins each Python thread to a JVM thread, so this covers the caller's thread.
    session_in_jvm = getattr(spark, "_jsparkSession", None)  # absent on Spark Connect, which resolves by session
    if session_in_jvm is not None:
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(session_in_jvm)
