"""The public API of `aioproducer[spark]`: `publish(df, ...)`, `register(spark)` for `df.write.format("aioproducer")`
and `df.writeStream.format("aioproducer")`, the report types, and the streaming sink's per-micro-batch reports.
Imports neither pyspark nor pyarrow: they load when first used.
"""

from __future__ import annotations

from aioproducer.spark.batches import BatchReport, read_batch_reports, watch_batch_reports
from aioproducer.spark.publish import publish
from aioproducer.spark.report import PartitionOffsets, PublishError, PublishReport, RecordError, TaskReport

__all__ = [
    "BatchReport",
    "PartitionOffsets",
    "PublishError",
    "PublishReport",
    "RecordError",
    "TaskReport",
    "publish",
    "read_batch_reports",
    "register",
    "watch_batch_reports",
]


def register(spark: object) -> None:
    """Make `df.write.format("aioproducer")` and `df.writeStream.format("aioproducer")` available in this
    SparkSession (Spark 4's Python Data Source API). `spark` becomes the active session of the calling thread, the
    one Spark looks the format up in: call it on the thread that starts the query."""
    from aioproducer.spark.datasource import register as register_data_source

    register_data_source(spark)
