"""`aioproducer.spark.publish(..., delivery="transactional")` through a real local Spark and real Kafka: one transaction
per task, a stable transactional id per Spark partition, so a retried task's failed attempt stays invisible to
read_committed readers; the driver's checks of the delivery options."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from pyspark.sql import SparkSession

from aioproducer.errors import ConfigError
from aioproducer.spark import publish
from aioproducer.spark.task import TaskPlan, run_task
from aioproducer.spark.transactional import check_delivery, warn_if_speculative
from aioproducer.testing import KafkaCluster, read_back

pytestmark = [
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.timeout(300),
]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A local Spark of 2 cores where a failed task runs a second time (`local[2,2]`)."""
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
