"""`publish(df, ...)`, the driver side: checks options and columns before any task runs, projects the sink columns,
runs `task.publish_partition` through `mapInArrow` and merges the task reports. Owns no executor logic and never
collects the DataFrame's own rows."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

from aioproducer.errors import ConfigError
from aioproducer.spark._deps import require
from aioproducer.spark.options import PublishOptions, parse_options
from aioproducer.spark.report import REPORT_DDL, PublishError, PublishReport, TaskReport
from aioproducer.spark.schema import check_schema
from aioproducer.spark.task import TaskPlan, publish_partition
from aioproducer.spark.transactional import AT_LEAST_ONCE, TRANSACTIONAL, check_delivery, warn_if_speculative

__all__ = ["publish"]


def publish(
    df: Any,
    topic: str | None = None,
    options: Mapping[str, object] | None = None,
    *,
    fail_on_error: bool | None = None,
    delivery: str = AT_LEAST_ONCE,
    transactional_id_prefix: str | None = None,
) -> PublishReport:
    """Publish every row of `df` to Kafka, one task per Spark partition; return the delivery report.

    Columns and options follow Spark's Kafka sink: `value` (string or binary) is required; `key`, `topic`,
    `partition` (int) and `headers` (array<struct<key:string,value:binary>>) are optional; options are
    `kafka.bootstrap.servers` (required), any `kafka.<producer setting>` in Java spelling, `topic` (overrides the
    column), `failOnError`, `chunkRows`, `producerCache` and `producerCacheTimeoutMs` (each Python worker keeps its
    producer for the next task). A bad option or column raises ConfigError / InvalidRecordError here, before any
    task runs. With `fail_on_error` (the default) undelivered records raise PublishError, whose `report` is the same
    report. Producers are idempotent; a task Spark retries publishes its rows again (at-least-once), which the
    report flags in `retried_partitions`.

    `delivery="transactional"` with `transactional_id_prefix` publishes each task's rows in one Kafka transaction
    (transactional id `<prefix>-<partition>`): a retried task fences the attempt before it, so read_committed readers
    see each row of a retried task once; a record not delivered fails its task (nothing of it is committed). The
    options `delivery` and `transactionalIdPrefix` say the same; keywords and options must then agree.
    """
    require("pyarrow")
    require("pyspark.sql")
    settings = _with_delivery(
        parse_options(options or {}, topic, fail_on_error=fail_on_error), delivery, transactional_id_prefix
    )
    columns = check_schema(df.schema, settings.topic)
    projected = df.select(*_projection(df, columns.present()))
    plan = TaskPlan.from_options(settings)
    delivery = settings.delivery
    if delivery == TRANSACTIONAL:
        warn_if_speculative(_speculation_on(df))
    task = functools.partial(publish_partition, plan=plan)
    rows = projected.mapInArrow(task, REPORT_DDL).collect()
    tasks = tuple(TaskReport.from_dict(row.asDict(recursive=True)) for row in rows)
    stage_retried, speculation = _rerun_signals(df, tasks)
    report = PublishReport(tasks, stage_retried=stage_retried, speculation=speculation, delivery=delivery)
    if settings.fail_on_error and not report.ok:
        raise PublishError(report)
    return report


def _with_delivery(settings: PublishOptions, delivery: str, prefix: str | None) -> PublishOptions:
    """The delivery mode of the keywords, or else of the options (`delivery`, `transactionalIdPrefix`)."""
    if delivery == AT_LEAST_ONCE and prefix is None:
        return settings
    check_delivery(delivery, prefix)
    chosen = (delivery, prefix)
    if settings.delivery != AT_LEAST_ONCE and (settings.delivery, settings.transactional_id_prefix) != chosen:
        raise ConfigError(
            f"delivery={delivery!r}, transactional_id_prefix={prefix!r} and the options 'delivery', "
            "'transactionalIdPrefix' disagree: give one of them"
        )
    return dataclasses.replace(settings, delivery=delivery, transactional_id_prefix=prefix)


def _projection(df: Any, present: dict[str, str]) -> list[Any]:
    """The sink columns only; a string key or value becomes its UTF-8 bytes in the JVM, as Spark's sink sends it."""
    return [
        df[name].cast("binary").alias(name) if name in ("key", "value") and kind == "string" else df[name]
        for name, kind in present.items()
    ]


def _speculation_on(df: Any) -> bool:
    errors = require("pyspark.errors")
    try:
        conf = df.sparkSession.sparkContext.getConf()
    except (errors.PySparkNotImplementedError, errors.PySparkAttributeError):
        return False
    return bool(conf.get("spark.speculation", "false").strip().lower() == "true")


def _rerun_signals(df: Any, tasks: tuple[TaskReport, ...]) -> tuple[bool, bool]:
    """(was the publishing stage retried, is speculation on): both mean a partition may have run twice unseen.

    A stage retry restarts attempt numbers at 0, and a killed speculative copy reports nothing, so the tasks' own
    attempt numbers cannot show either. Spark Connect has no SparkContext to ask: both are then reported False.
    """
    errors = require("pyspark.errors")
    try:
        context = df.sparkSession.sparkContext
    except (errors.PySparkNotImplementedError, errors.PySparkAttributeError):
        return False, False
    tracker = context.statusTracker()
    stage_retried = False
    for stage_id in {t.stage_id for t in tasks}:
        info = tracker.getStageInfo(stage_id)
        stage_retried |= info is not None and info.currentAttemptId > 0
    speculation = context.getConf().get("spark.speculation", "false").strip().lower() == "true"
    return stage_retried, speculation
