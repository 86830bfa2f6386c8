"""`aioproducer.spark`: DataFrames published through a real local Spark (local[2,2]) to the test broker, read back
by the independent consumer; option and schema checks on the driver; the executor code and the report on their own.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from pyspark.sql import SparkSession

from aioproducer.columnar.arrow import Int64Array
from aioproducer.errors import ConfigError, InvalidRecordError, UnknownPartitionError
from aioproducer.models import RowFailures, TableReport
from aioproducer.spark import PublishError, PublishReport, publish, register
from aioproducer.spark.options import DEFAULT_CHUNK_ROWS, parse_options, resolve_placeholders
from aioproducer.spark.report import PartitionOffsets, TaskReport, TaskTally
from aioproducer.spark.schema import HEADERS_TYPE, check_columns
from aioproducer.spark.task import TaskPlan, columns_of, run_task
from aioproducer.testing import ConsumedRecord

# pyspark 4.3 warns that it does not fully support pandas 3; nothing here goes through pandas.
pytestmark = [
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    # The first test also starts Spark and its Python workers: minutes on a loaded 2-core machine.
    pytest.mark.timeout(300),
]

ReadBack = Callable[..., list[ConsumedRecord]]
SINK_SCHEMA = f"key string, value binary, topic string, partition int, headers {HEADERS_TYPE}"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark for the file: 2 cores, and `local[2,2]` lets a failed task run a second time."""
    with pytest.MonkeyPatch.context() as patch:
        # Executors must run this interpreter: it is the one with aioproducer installed.
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


def options(bootstrap: str, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": bootstrap, **{"kafka." + k.replace("_", "."): v for k, v in extra.items()}}


def rows_of(records: list[ConsumedRecord]) -> Counter[tuple[Any, ...]]:
    return Counter((r.topic, r.partition, r.key, r.value, r.headers) for r in records)


# ---- end to end through Spark ---------------------------------------------------------------------------------


def test_rows_are_read_back_exactly_with_keys_values_headers_and_partitions(
    spark: SparkSession, bootstrap: str, topic_factory: Callable[..., str], read_back_records: ReadBack
) -> None:
    topic = topic_factory(3)
    rows = [
        (
            f"k{i}" if i % 5 else None,
            None if i == 7 else f"value-{i}".encode(),
            topic,
            i % 3,
            [("n", str(i).encode()), ("empty", None)] if i % 2 else [],
        )
        for i in range(60)
    ]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), SINK_SCHEMA)

    report = publish(df, options=options(bootstrap))

    records = read_back_records(topic)
    expected = Counter(
        (topic, p, k.encode() if k else None, v, tuple(h))
        for k, v, _, p, h in rows  # headers as the consumer sees
    )
    assert rows_of(records) == expected
    assert (report.delivered, report.failed, report.ok) == (60, 0, True)
    assert sorted(t.spark_partition for t in report.tasks) == [0, 1]
    assert report.retried_partitions == () and not report.may_have_duplicates
    written = {
        p: [r.offset for r in records if r.partition == p] for p in range(3)
    }  # the broker's offsets, per partition
    assert [(o.topic, o.partition, o.first_offset, o.last_offset, o.records) for o in report.partitions] == [
        (topic, p, min(written[p]), max(written[p]), len(written[p])) for p in range(3)
    ]


def test_string_columns_are_sent_as_utf8_and_the_topic_option_overrides_the_column(
    spark: SparkSession, bootstrap: str, topic_factory: Callable[..., str], read_back_records: ReadBack
) -> None:
    topic = topic_factory(1)
    df = spark.createDataFrame(
        [("ключ", "значение", "not-this-topic"), ("k", "ü", "nor-this")], "key string, value string, topic string"
    )

    report = publish(df, topic, options(bootstrap))

    assert report.ok and report.delivered == 2
    assert sorted((r.key, r.value) for r in read_back_records(topic)) == sorted(
        [("ключ".encode(), "значение".encode()), (b"k", "ü".encode())]
    )


def test_the_data_source_form_publishes_the_same_way(
    spark: SparkSession, bootstrap: str, topic_factory: Callable[..., str], read_back_records: ReadBack
) -> None:
    topic = topic_factory(2)
    register(spark)
    df = spark.createDataFrame(
        [(f"k{i}", f"v{i}", i % 2) for i in range(20)], "key string, value string, partition int"
    )

    writer = df.write.format("aioproducer").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
    writer.option("kafka.linger.ms", "1").mode("append").save()

    assert sorted((r.partition, r.key, r.value) for r in read_back_records(topic)) == sorted(
        (i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(20)
    )
    # Undelivered records fail the job at commit, with the report's first line as the message.
    bad = spark.createDataFrame([("x", 9)], "value string, partition int").write.format("aioproducer")
    with pytest.raises(Exception, match="1 of 1 records failed to publish; first: UnknownPartitionError"):
        # A partition beyond the topic waits max.block.ms for metadata to show it (as Java does): keep that short.
        bad.option("kafka.bootstrap.servers", bootstrap).option("kafka.max.block.ms", "500").option(
            "topic", topic
        ).mode("append").save()


def test_the_data_source_form_reports_schema_errors_before_writing(spark: SparkSession, bootstrap: str) -> None:
    register(spark)
    df = spark.createDataFrame([(1,)], "value int")
    with pytest.raises(
        Exception, match=r"value attribute unsupported type int\. value must be a\(n\) string or binary"
    ):
        df.write.format("aioproducer").option("kafka.bootstrap.servers", bootstrap).option("topic", "t").mode(
            "append"
        ).save()


@pytest.mark.parametrize(
    ("schema", "topic", "message"),
    [
        ("key string", "t", "Required attribute 'value' not found"),
        ("value bigint", "t", r"value attribute unsupported type bigint\. value must be a\(n\) string or binary"),
        ("value string", None, "topic option required when no 'topic' attribute is present"),
        ("value string, partition bigint", "t", r"partition attribute unsupported type bigint\. partition must be"),
        ("value string, headers map<string,binary>", "t", "headers attribute unsupported type map<string,binary>"),
    ],
)
def test_schema_problems_are_reported_on_the_driver_before_any_job_runs(
    spark: SparkSession, bootstrap: str, schema: str, topic: str | None, message: str
) -> None:
    df = spark.createDataFrame([], schema)
    context = spark.sparkContext
    context.setJobGroup("schema-check", "must stay empty")
    try:
        with pytest.raises(InvalidRecordError, match=message):
            publish(df, topic, options(bootstrap))
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert context.statusTracker().getJobIdsForGroup("schema-check") == []


def test_undelivered_records_fail_on_the_driver_with_the_report_attached(
    spark: SparkSession, bootstrap: str, topic_factory: Callable[..., str], read_back_records: ReadBack
) -> None:
    topic = topic_factory(2)
    # Partition 5 does not exist: those rows fail alone, the others are delivered.
    df = spark.createDataFrame([(f"v{i}", 5 if i in (3, 4) else 0) for i in range(10)], "value string, partition int")

    # A partition beyond the topic waits max.block.ms for metadata to show it (as Java does): keep that short.
    with pytest.raises(PublishError, match="2 of 10 records failed to publish; first: UnknownPartitionError") as caught:
        publish(df.coalesce(1), topic, options(bootstrap, max_block_ms="3000"))
    report = caught.value.report
    assert (report.delivered, report.failed) == (8, 2)
    assert [(e.spark_partition, e.row, e.error) for e in report.errors] == [
        (0, 3, "UnknownPartitionError"),
        (0, 4, "UnknownPartitionError"),
    ]
    assert sorted(r.value or b"" for r in read_back_records(topic)) == sorted(
        f"v{i}".encode() for i in range(10) if i not in (3, 4)
    )

    kept = publish(df.coalesce(1), topic, options(bootstrap, max_block_ms="3000"), fail_on_error=False)
    assert (kept.delivered, kept.failed, kept.ok) == (8, 2, False)


def test_a_retried_task_is_flagged_and_the_report_counts_its_last_attempt(
    spark: SparkSession, bootstrap: str, topic_factory: Callable[..., str], read_back_records: ReadBack
) -> None:
    topic = topic_factory(2)

    def fail_first_attempt_of_partition_0(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Upstream of the publisher, in the same Spark task: attempt 0 of partition 0 fails, Spark runs it again.
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is not None and context.partitionId() == 0 and context.attemptNumber() == 0:
            raise RuntimeError("attempt 0 of partition 0 fails")
        yield from batches

    rows = [(f"p{p}-{i}",) for p in range(2) for i in range(10)]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), "value string")
    failing = df.mapInArrow(fail_first_attempt_of_partition_0, "value string")

    report = publish(failing, topic, options(bootstrap))

    assert report.retried_partitions == (0,) and report.may_have_duplicates
    assert [(t.spark_partition, t.attempt, t.delivered) for t in report.tasks] == [(0, 1, 10), (1, 0, 10)]
    assert "Spark partitions run more than once (possible duplicates): [0]" in report.summary()
    # This attempt 0 failed before publishing, so here every row is in Kafka once.
    assert sorted(r.value or b"" for r in read_back_records(topic)) == sorted(v.encode() for (v,) in rows)


def test_the_example_pipeline_publishes_its_daily_totals(
    spark: SparkSession, bootstrap: str, topic_factory: Callable[..., str], read_back_records: ReadBack, tmp_path: Path
) -> None:
    spec = importlib.util.spec_from_file_location("example_spark_pipeline", EXAMPLES / "spark_pipeline.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    topic = topic_factory(2)

    report = example.run_pipeline(spark, bootstrap, topic, tmp_path, orders=400)

    totals = spark.read.csv(str(tmp_path / "orders.csv"), header=True, inferSchema=True).where("status = 'paid'")
    expected = {(r["customer"], str(r["day"])): r["count"] for r in totals.groupBy("customer", "day").count().collect()}
    records = read_back_records(topic)
    assert report.ok and report.delivered == len(records) == len(expected)
    values = [(r.key or b"", json.loads(r.value or b"")) for r in records]
    published = {(key.decode(), value["day"]): value["orders"] for key, value in values}
    assert published == expected
    assert {r.headers for r in records} == {(("source", b"orders.csv"),)}


# ---- options, on the driver -----------------------------------------------------------------------------------


def test_options_follow_the_kafka_sink() -> None:
    parsed = parse_options(
        {"kafka.bootstrap.servers": "b:9092", "kafka.linger.ms": 7, "TOPIC": "t", "failOnError": False}
    )
    assert parsed.producer_config == {"bootstrap.servers": "b:9092", "linger.ms": "7"}
    assert (parsed.topic, parsed.fail_on_error, parsed.chunk_rows) == ("t", False, DEFAULT_CHUNK_ROWS)
    assert parse_options({"kafka.bootstrap.servers": "b:9092", "chunkrows": "10"}).chunk_rows == 10


@pytest.mark.parametrize(
    ("given", "error", "message"),
    [
        ({}, ConfigError, "Option 'kafka.bootstrap.servers' must be specified"),
        ({"kafka.transactional.id": "tx"}, ConfigError, "delivery='transactional'"),
        ({"kafka.key.serializer": "x"}, ConfigError, "keys are serialized with ByteArraySerializer"),
        ({"kafka.linger.mss": "5"}, ConfigError, "did you mean 'linger.ms'"),
        ({"kafka.acks": "3"}, ConfigError, "acks"),
        ({"linger.ms": "5"}, ConfigError, r"unknown option\(s\) \['linger.ms'\]: producer settings take the prefix"),
        ({"failOnError": "maybe"}, ConfigError, "'failOnError' must be 'true' or 'false'"),
        ({"chunkRows": "0"}, ConfigError, "'chunkRows' must be an integer"),
    ],
)
def test_bad_options_raise_typed_errors(given: dict[str, str], error: type[Exception], message: str) -> None:
    base = {} if not given or "kafka.bootstrap.servers" in given else {"kafka.bootstrap.servers": "b:9092"}
    with pytest.raises(error, match=message):
        parse_options(given if not given else {**base, **given})


def test_keyword_and_option_forms_must_agree() -> None:
    with pytest.raises(ConfigError, match="disagree"):
        parse_options({"kafka.bootstrap.servers": "b:9092", "topic": "a"}, "b")
    with pytest.raises(ConfigError, match="disagree"):
        parse_options({"kafka.bootstrap.servers": "b:9092", "failOnError": "true"}, fail_on_error=False)
    assert parse_options({"kafka.bootstrap.servers": "b:9092", "topic": "a"}, "a").topic == "a"


def test_placeholders_resolve_where_the_producer_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret_file = tmp_path / "client-id"
    secret_file.write_text("from-a-file\n")
    monkeypatch.setenv("AIOPRODUCER_TEST_CLIENT", "from-the-env")
    config = {"client.id": "${env:AIOPRODUCER_TEST_CLIENT}", "bootstrap.servers": f"${{file:{secret_file}}}"}
    assert resolve_placeholders(config, strict=True) == {
        "client.id": "from-the-env",
        "bootstrap.servers": "from-a-file",
    }

    missing = {"client.id": "${env:AIOPRODUCER_TEST_UNSET}", "linger.ms": "5"}
    assert resolve_placeholders(missing, strict=False) == {"linger.ms": "5"}
    with pytest.raises(ConfigError, match="environment variable 'AIOPRODUCER_TEST_UNSET' is not available"):
        resolve_placeholders(missing, strict=True)
    # The driver skips what it cannot resolve; it still checks the rest.
    parse_options({"kafka.bootstrap.servers": "b:9092", "kafka.client.id": "${env:AIOPRODUCER_TEST_UNSET}"})


@pytest.mark.parametrize(
    ("types", "topic", "present"),
    [
        ({"value": "binary"}, "t", {"value": "binary"}),
        (
            {
                "value": "string",
                "key": "binary",
                "topic": "string",
                "partition": "int",
                "headers": HEADERS_TYPE,
                "x": "int",
            },
            None,
            {"value": "string", "key": "binary", "topic": "string", "partition": "int", "headers": HEADERS_TYPE},
        ),
        ({"value": "string", "topic": "bigint"}, "t", {"value": "string"}),  # the option makes the column unused
    ],
)
def test_accepted_columns(types: dict[str, str], topic: str | None, present: dict[str, str]) -> None:
    assert check_columns(types, topic, duplicates=frozenset()).present() == present


def test_duplicate_sink_columns_are_rejected() -> None:
    with pytest.raises(InvalidRecordError, match=r"\['value'\] appear more than once"):
        check_columns({"value": "string"}, "t", duplicates=frozenset({"value"}))
    check_columns({"value": "string"}, "t", duplicates=frozenset({"other"}))


def test_importing_needs_no_spark_and_publishing_names_the_extra() -> None:
    script = textwrap.dedent(
        """
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("pyspark", "pyarrow", "pandas"):
                    raise ImportError(f"No module named {name!r}")
        sys.meta_path.insert(0, Block())
        import aioproducer, aioproducer.spark
        try:
            aioproducer.spark.publish(object(), "t", {"kafka.bootstrap.servers": "b:9092"})
        except ImportError as exc:
            print(exc)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    assert "pip install 'aioproducer[spark]'" in done.stdout


# ---- the executor side and the report, without Spark -----------------------------------------------------------


def test_the_sink_columns_map_to_send_table_roles_and_the_topic_option_overrides_the_column() -> None:
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"v"]), pa.array([b"k"]), pa.array(["t"]), pa.array([0], pa.int32()), pa.array([9])],
        names=["value", "key", "topic", "partition", "ignored"],
    )
    assert columns_of(batch, None) == {
        "key": "key",
        "value": "value",
        "partition": "partition",
        "topic_column": "topic",
    }
    assert columns_of(batch.select(["value"]), "fixed") == {"value": "value", "topic": "fixed"}


def test_a_task_publishes_spark_columns_as_they_are(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: ReadBack
) -> None:
    """Strings go as their UTF-8 bytes, nulls as nulls, headers as headers: Spark's Arrow batch is the producer's."""
    topic = topic_factory(3)
    headers_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(["a", None, "ç"], pa.string()),
            pa.array([b"1", b"2", None], pa.binary()),
            pa.array([topic, topic, None], pa.string()),
            pa.array([0, None, 2], pa.int32()),
            pa.array([[{"key": "h", "value": b"v"}, {"key": "n", "value": None}], [], None], headers_type),
        ],
        names=["value", "key", "topic", "partition", "headers"],
    )
    report = run_task([batch], TaskPlan({"bootstrap.servers": bootstrap}, None, chunk_rows=2))
    assert (report.delivered, report.failed) == (2, 1)
    assert [(e.row, e.error) for e in report.errors] == [(2, "InvalidRecordError")]  # a null topic fails its row
    records = {r.value: r for r in read_back_records(topic)}
    assert records[b"a"].key == b"1" and records[b"a"].partition == 0
    assert list(records[b"a"].headers) == [("h", b"v"), ("n", None)]
    assert records[None].key == b"2" and list(records[None].headers) == []


def test_a_task_outside_spark_publishes_its_batches_and_counts_them(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: ReadBack
) -> None:
    topic = topic_factory(2)
    values = [f"v{i}".encode() for i in range(25)]
    partitions = [i % 2 for i in range(25)]
    partitions[20] = 7  # no such partition
    batch = pa.RecordBatch.from_arrays([pa.array(values), pa.array(partitions, pa.int32())], ["value", "partition"])
    plan = TaskPlan({"bootstrap.servers": bootstrap, "max.block.ms": "500"}, topic, chunk_rows=4)

    report = run_task([batch.slice(0, 10), batch.slice(10)], plan)

    assert (report.spark_partition, report.attempt, report.delivered, report.failed) == (0, 0, 24, 1)
    assert [(e.row, e.error) for e in report.errors] == [(20, UnknownPartitionError.__name__)]
    records = read_back_records(topic)
    assert sorted(r.value or b"" for r in records) == sorted(v for i, v in enumerate(values) if i != 20)
    assert [(o.partition, o.records, o.first_offset, o.last_offset) for o in report.offsets] == [
        (p, n, 0, n - 1) for p, n in sorted(Counter(r.partition for r in records).items())
    ]
    assert run_task([], plan).delivered == 0  # an empty partition opens no producer


@pytest.mark.parametrize("delivery", ["at_least_once", "transactional"])
def test_a_task_keeps_its_rows_in_order_within_each_kafka_partition(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: ReadBack, delivery: str
) -> None:
    """Bug: a task sends its chunks with several send_table calls in flight, and their rows interleaved every 64 KiB:
    a Kafka partition got a later chunk's rows before an earlier chunk's (a key's newer value before its older one),
    where Spark's own Kafka sink keeps a task's rows in order."""
    topic = topic_factory(2)
    values = [b"%06d" % i + b"x" * 100 for i in range(20_000)]
    batch = pa.RecordBatch.from_arrays(
        [pa.array(values), pa.array([i % 2 for i in range(len(values))], pa.int32())], ["value", "partition"]
    )
    prefix = f"order-{topic}" if delivery == "transactional" else None
    plan = TaskPlan({"bootstrap.servers": bootstrap}, topic, chunk_rows=2_000, transactional_id_prefix=prefix)
    report = run_task([batch], plan)
    assert (report.delivered, report.failed) == (len(values), 0)
    records = read_back_records(topic)
    for partition in (0, 1):
        stored = [r.value for r in sorted(records, key=lambda r: r.offset) if r.partition == partition]
        assert stored == values[partition::2]


def test_the_tally_and_the_merged_report() -> None:
    tally = TaskTally(spark_partition=3, max_errors=1)
    bad = RowFailures(ValueError("bad"), Int64Array([1], name="row"))
    tally.add_table(0, TableReport(3, 2, 1, (bad,), {("t", 0): 2}, {("t", 0): (5, 9)}))
    missing = RowFailures(KeyError("x"), Int64Array([2], name="row"))
    tally.add_table(
        3, TableReport(3, 2, 1, (missing,), {("t", 0): 1, ("t", 1): 1}, {("t", 0): (7, 7), ("t", 1): (-1, -1)})
    )
    task = tally.report(attempt=1, stage_id=4, elapsed_ms=10)
    assert (task.delivered, task.failed, [(e.row, e.error) for e in task.errors]) == (4, 2, [(1, "ValueError")])
    assert task.offsets == (PartitionOffsets("t", 0, 5, 9, 3), PartitionOffsets("t", 1, -1, -1, 1))
    assert TaskReport.from_dict(task.as_dict()) == task

    other = TaskReport(0, 0, 4, 2, 0, 5, (PartitionOffsets("t", 0, 2, 3, 2),))
    report = PublishReport((task, other))
    assert [t.spark_partition for t in report.tasks] == [0, 3]
    assert report.partitions == (PartitionOffsets("t", 0, 2, 9, 5), PartitionOffsets("t", 1, -1, -1, 1))
    assert (report.delivered, report.failed, report.ok, report.retried_partitions) == (6, 2, False, (3,))
    error = PublishError(report)
    assert str(error) == "2 of 8 records failed to publish; first: ValueError: bad" and error.report is report
