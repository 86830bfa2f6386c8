"""`delivery="transactional"` through a real local Spark and real Kafka, in each form (`publish`, `df.write`,
`df.writeStream`): one transaction per task, a stable transactional id per Spark partition, so a retried task's failed
attempt stays invisible to read_committed readers (confluent-kafka's), and a streaming query restarted from its
checkpoint publishes nothing twice; the driver's checks of the delivery options."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from aioproducer.errors import ConfigError
from aioproducer.spark import publish, read_batch_reports, register
from aioproducer.spark.task import TaskPlan, run_task
from aioproducer.spark.transactional import check_delivery, warn_if_speculative
from aioproducer.testing import KafkaCluster, read_back

pytestmark = [
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.timeout(300),
]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A local Spark of 2 cores where a failed task runs a second time (`local[2,2]`: spark.task.maxFailures 2)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYSPARK_PYTHON", sys.executable)
        session = (
            SparkSession.builder.master("local[2,2]")
            .appName("aioproducer-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        yield session
        session.stop()


SCHEMA = pa.schema([("value", pa.string()), ("partition", pa.int32())])


def values(bootstrap: str, topic: str, isolation_level: str) -> list[bytes]:
    return sorted(r.value or b"" for r in read_back(bootstrap, topic, isolation_level=isolation_level))


def test_a_retried_task_commits_its_rows_once_for_read_committed_readers(
    spark: SparkSession, kafka_cluster: KafkaCluster
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = kafka_cluster.create_topic(f"spark-txn-{uuid.uuid4().hex[:8]}", 2, config={"max.message.bytes": "2000"})

    def doom_first_attempt_of_partition_0(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Attempt 0 of partition 0 also carries a row Kafka refuses (too large), bound for Kafka partition 1: its
        # good rows (Kafka partition 0) are written, then the transaction must abort and the task fails. Spark runs
        # attempt 1, without that row.
        from pyspark import TaskContext

        context = TaskContext.get()
        doomed = context is not None and context.partitionId() == 0 and context.attemptNumber() == 0
        yield from batches
        if doomed:
            yield pa.RecordBatch.from_pylist([{"value": "x" * 5000, "partition": 1}], schema=SCHEMA)

    rows = [(f"p{p}-{i}", p) for p in range(2) for i in range(10)]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), "value string, partition int")
    prefix = f"spark-{uuid.uuid4().hex[:8]}"

    report = publish(
        df.mapInArrow(doom_first_attempt_of_partition_0, "value string, partition int"),
        topic,
        {"kafka.bootstrap.servers": bootstrap, "kafka.linger.ms": "0"},
        delivery="transactional",
        transactional_id_prefix=prefix,
    )

    assert report.delivery == "transactional" and "(transactional)" in report.summary()
    assert [(t.spark_partition, t.attempt, t.delivered) for t in report.tasks] == [(0, 1, 10), (1, 0, 10)]
    expected = sorted(v.encode() for v, _ in rows)
    assert values(bootstrap, topic, "read_committed") == expected
    # The failed attempt really wrote its good rows before aborting: only the read_committed view hides them.
    uncommitted = values(bootstrap, topic, "read_uncommitted")
    assert len(uncommitted) > len(expected) and set(uncommitted) == set(expected)


def test_a_task_outside_spark_uses_its_partitions_transactional_id(kafka_cluster: KafkaCluster) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = kafka_cluster.create_topic(f"spark-txn-{uuid.uuid4().hex[:8]}", 1)
    batch = pa.RecordBatch.from_pylist([{"value": b"r%d" % i} for i in range(25)])
    plan = TaskPlan({"bootstrap.servers": bootstrap}, topic, chunk_rows=7, transactional_id_prefix="unit")
    report = run_task([batch], plan)
    assert (report.spark_partition, report.delivered, report.failed) == (0, 25, 0)
    assert report.new_producer and report.connections_opened >= 1  # a transactional task starts its own
    assert values(bootstrap, topic, "read_committed") == sorted(b"r%d" % i for i in range(25))


@pytest.mark.parametrize(
    ("delivery", "prefix", "message"),
    [
        ("exactly_once", None, "delivery must be one of"),
        ("transactional", None, "needs transactional_id_prefix"),
        ("transactional", "", "needs transactional_id_prefix"),
        ("transactional", "bad prefix", "needs transactional_id_prefix"),
        ("transactional", "x" * 201, "needs transactional_id_prefix"),
        ("at_least_once", "p", "only for delivery='transactional'"),
    ],
)
def test_delivery_options_are_checked_on_the_driver(delivery: str, prefix: str | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_delivery(delivery, prefix)


def test_speculation_is_warned_about() -> None:
    with pytest.warns(RuntimeWarning, match="spark.speculation"):
        warn_if_speculative(True)


def oversized_row_in_first_attempt(batch_id: str | None, spark_partition: int) -> Any:
    """An upstream step that, in the first attempt of `spark_partition` (of micro-batch `batch_id`, if streaming),
    appends a row Kafka refuses (larger than the topic's max.message.bytes) for Kafka partition 1: the sink's
    transaction has written that attempt's other rows when it must abort, and the task fails; Spark runs it again."""

    def step(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        doomed = (
            context is not None
            and context.partitionId() == spark_partition
            and context.attemptNumber() == 0
            and (batch_id is None or context.getLocalProperty("streaming.sql.batchId") == batch_id)
        )
        schema = None
        for batch in batches:
            schema = batch.schema
            yield batch
        if doomed and schema is not None:
            big = {name: None for name in schema.names} | {"value": "x" * 5000, "partition": 1}
            yield pa.RecordBatch.from_pylist([big], schema=schema)

    return step


def test_df_write_commits_a_retried_tasks_rows_once(spark: SparkSession, kafka_cluster: KafkaCluster) -> None:
    register(spark)
    bootstrap = kafka_cluster.bootstrap_servers
    topic = kafka_cluster.create_topic(f"write-txn-{uuid.uuid4().hex[:8]}", 2, config={"max.message.bytes": "2000"})
    rows = [(f"w{p}-{i}", None) for p in range(2) for i in range(15)]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), "value string, partition int")

    (
        df.mapInArrow(oversized_row_in_first_attempt(None, 1), "value string, partition int")
        .write.format("aioproducer")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("delivery", "transactional")
        .option("transactionalIdPrefix", f"write-{uuid.uuid4().hex[:8]}")
        .mode("append")
        .save()
    )

    expected = sorted(v.encode() for v, _ in rows)
    assert values(bootstrap, topic, "read_committed") == expected
    uncommitted = values(bootstrap, topic, "read_uncommitted")
    assert len(uncommitted) > len(expected) and set(uncommitted) == set(expected)


def test_a_streaming_query_publishes_each_row_once_across_a_failed_task_and_a_restart(
    spark: SparkSession, kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """Micro-batch 0: partition 0's first attempt raises after handing the sink three rows. Micro-batch 1: partition
    1's first attempt makes Kafka refuse a record, so its transaction, which holds rows already written, aborts.
    Both run again. The query ends, a file arrives, and the query restarts from its checkpoint."""
    register(spark)
    bootstrap = kafka_cluster.bootstrap_servers
    topic = kafka_cluster.create_topic(f"stream-txn-{uuid.uuid4().hex[:8]}", 2, config={"max.message.bytes": "2000"})
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    files = {name: [f"{name}-{i}" for i in range(20)] for name in ("a", "b", "c")}
    for order, name in enumerate(("a", "b")):
        write_values(inbox, name, files[name], order)
    prefix = f"stream-{uuid.uuid4().hex[:8]}"

    def raise_in_first_attempt_of_batch_0(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        failing = (
            context is not None
            and context.getLocalProperty("streaming.sql.batchId") == "0"
            and context.partitionId() == 0
            and context.attemptNumber() == 0
        )
        for batch in batches:
            if failing:
                yield batch.slice(0, 3)
                raise RuntimeError("the first attempt of partition 0 fails")
            yield batch

    def run() -> Any:
        frame = (
            spark.readStream.schema("value string, partition int")
            .option("maxFilesPerTrigger", 1)
            .json(str(inbox))
            .repartition(2)
            .mapInArrow(raise_in_first_attempt_of_batch_0, "value string, partition int")
            .mapInArrow(oversized_row_in_first_attempt("1", 1), "value string, partition int")
        )
        query = (
            frame.writeStream.format("aioproducer")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("delivery", "transactional")
            .option("transactionalIdPrefix", prefix)
            .option("kafka.linger.ms", "1")
            .option("reportPath", str(tmp_path / "reports"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        with contextlib.suppress(StreamingQueryException):
            query.awaitTermination(300)
        assert not query.isActive, "the query did not finish in 300 s"
        return query

    first = run()
    assert first.exception() is None
    write_values(inbox, "c", files["c"], 2)
    restarted = run()
    assert restarted.exception() is None

    committed = Counter(values(bootstrap, topic, "read_committed"))
    assert committed == Counter(v.encode() for name in ("a", "b", "c") for v in files[name])
    # The aborted attempt of micro-batch 1 had written rows: only read_committed readers are spared them.
    uncommitted = Counter(values(bootstrap, topic, "read_uncommitted"))
    assert sum(uncommitted.values()) > sum(committed.values()) and set(uncommitted) == set(committed)
    reports = read_batch_reports(tmp_path / "reports")
    assert [(r.batch_id, r.outcome, r.earlier_runs, r.report.delivered) for r in reports] == [
        (0, "committed", 0, 20),
        (1, "committed", 0, 20),
        (2, "committed", 0, 20),
    ]
    assert [r.report.retried_partitions for r in reports] == [(0,), (1,), ()]
    assert {r.report.delivery for r in reports} == {"transactional"}


def write_values(directory: Path, name: str, values: list[str], order: int) -> None:
    """One JSON-lines file, one micro-batch of the file source (maxFilesPerTrigger=1, oldest file first)."""
    path = directory / f"{name}.json"
    path.write_text("".join(json.dumps({"value": v, "partition": None}) + "\n" for v in values))
    os.utime(path, (1_000_000 + order, 1_000_000 + order))
