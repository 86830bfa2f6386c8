"""`df.writeStream.format("aioproducer")` on local[2,2] against real Kafka: micro-batches from files (one file per
micro-batch, `availableNow`, so every run is deterministic), read back by the independent consumer; a task that fails
and runs again; a micro-batch that fails, then a query restarted from its checkpoint; and the per-batch reports."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from test_spark import spark  # noqa: F401  (the session's one local Spark)

from aioproducer.errors import ConfigError
from aioproducer.spark import BatchReport, read_batch_reports, register, watch_batch_reports
from aioproducer.spark.batches import local_directory, record_batch
from aioproducer.spark.datasource import _rows_as_arrow
from aioproducer.spark.options import parse_options
from aioproducer.spark.report import PublishReport, TaskReport
from aioproducer.testing import ConsumedRecord, KafkaCluster, read_back

pytestmark = [
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.timeout(600),  # a few streaming queries, each starting and stopping on a loaded 2-core machine
]

ReadBack = Callable[..., list[ConsumedRecord]]
SCHEMA = "key string, value string, partition int"


def write_file(directory: Path, name: str, rows: list[tuple[str, str, int | None]]) -> None:
    """One JSON-lines file: one micro-batch of the file source (maxFilesPerTrigger=1, oldest file first)."""
    lines = [json.dumps({"key": k, "value": v, "partition": p}) for k, v, p in rows]
    path = directory / name
    path.write_text("\n".join(lines) + "\n")
    order = len(list(directory.iterdir()))
    os.utime(path, (1_000_000 + order, 1_000_000 + order))  # distinct modification times: a fixed batch order


def rows(prefix: str, count: int) -> list[tuple[str, str, int | None]]:
    return [(f"{prefix}-k{i}", f"{prefix}-v{i}", None) for i in range(count)]


def source(session: SparkSession, directory: Path) -> DataFrame:
    stream = session.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(directory))
    return stream.repartition(2)  # two write tasks per micro-batch


def run_to_end(frame: DataFrame, bootstrap: str, topic: str, work: Path, **options: str) -> Any:
    """Run the query over every file there is (availableNow), then return it, stopped."""
    writer = (
        frame.writeStream.format("aioproducer")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("reportPath", str(work / "reports"))
        .option("checkpointLocation", str(work / "checkpoint"))
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.trigger(availableNow=True).start()
    with contextlib.suppress(StreamingQueryException):  # the test reads query.exception()
        query.awaitTermination(300)
    assert not query.isActive, "the query did not finish in 300 s"
    return query


def values_of(records: list[ConsumedRecord]) -> Counter[str]:
    return Counter((r.value or b"").decode() for r in records)


def test_each_micro_batch_is_published_and_reported_and_a_failed_task_runs_again(
    spark: SparkSession,  # noqa: F811
    bootstrap: str,
    topic_factory: Callable[..., str],
    read_back_records: ReadBack,
    tmp_path: Path,
) -> None:
    def fail_attempt_0_of_partition_0_in_batch_1(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Upstream of the sink, in the same task: in micro-batch 1, attempt 0 of partition 0 hands the sink its
        # first three rows, then fails; Spark runs the task again (local[2,2] allows one retry). Defined here so
        # that Spark pickles it by value: the workers cannot import this test module.
        from pyspark import TaskContext

        context = TaskContext.get()
        failing = (
            context is not None
            and context.getLocalProperty("streaming.sql.batchId") == "1"
            and context.partitionId() == 0
            and context.attemptNumber() == 0
        )
        for batch in batches:
            if failing:
                yield batch.slice(0, 3)
                raise RuntimeError("attempt 0 of partition 0 fails")
            yield batch

    register(spark)
    topic = topic_factory(2)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    batches = {name: rows(name, 20) for name in ("a", "b", "c")}
    for name, content in batches.items():
        write_file(inbox, f"{name}.json", content)
    seen: list[BatchReport] = []
    listener = watch_batch_reports(spark, tmp_path / "reports", seen.append)
    try:
        frame = source(spark, inbox).mapInArrow(fail_attempt_0_of_partition_0_in_batch_1, SCHEMA)
        query = run_to_end(frame, bootstrap, topic, tmp_path, **{"kafka.linger.ms": "1"})
        deadline = time.monotonic() + 60  # listener events arrive after the query ends, on their own thread
        while len(seen) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        spark.streams.removeListener(listener)

    assert query.exception() is None
    counts = values_of(read_back_records(topic))
    # Batches 0 and 2 exactly once. Batch 1 at least once: the failed attempt may have delivered up to three of its
    # rows before failing, which the retry publishes again (at-least-once, as Spark's own sink).
    assert {v: n for v, n in counts.items() if not v.startswith("b-")} == {
        v: 1 for _k, v, _p in batches["a"] + batches["c"]
    }
    twice = {v for v, n in counts.items() if v.startswith("b-") and n == 2}
    assert {v for v in counts if v.startswith("b-")} == {v for _k, v, _p in batches["b"]}
    assert len(twice) <= 3 and max(counts.values()) <= 2

    reports = read_batch_reports(tmp_path / "reports")
    assert [(r.batch_id, r.outcome, r.earlier_runs, r.report.delivered) for r in reports] == [
        (0, "committed", 0, 20),
        (1, "committed", 0, 20),
        (2, "committed", 0, 20),
    ]
    assert reports[1].report.retried_partitions == (0,) and reports[1].may_have_duplicates
    assert not reports[0].may_have_duplicates and not reports[2].may_have_duplicates
    # The reports count what the successful attempts delivered: all but the failed attempt's early rows.
    assert sum(counts.values()) == sum(p.records for r in reports for p in r.report.partitions) + len(twice)
    # The listener saw each micro-batch once, in order.
    assert [r.batch_id for r in seen] == [0, 1, 2]
    # Tasks borrow their worker's producer. Not every one: a failed task ends its Python worker, and the upstream
    # function has workers of its own, which may serve the sink later.
    tasks = [t for r in reports for t in r.report.tasks]
    assert len(tasks) == 6 and sum(t.new_producer for t in tasks) < 6


def test_a_failed_micro_batch_is_published_again_whole_when_the_query_restarts(
    spark: SparkSession,  # noqa: F811
    kafka_cluster: KafkaCluster,
    tmp_path: Path,
) -> None:
    register(spark)
    topic = kafka_cluster.create_topic(f"restart-{tmp_path.name[-20:]}", 1)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    first, second, third = rows("a", 6), rows("b", 6), rows("c", 6)
    second[3] = ("b-k3", "b-v3", 1)  # partition 1 does not exist yet: this micro-batch fails at commit
    write_file(inbox, "1.json", first)
    write_file(inbox, "2.json", second)
    fast = {"kafka.max.block.ms": "2000", "kafka.linger.ms": "1", "producerCacheTimeoutMs": "600000"}

    stopped = run_to_end(source(spark, inbox), kafka_cluster.bootstrap_servers, topic, tmp_path, **fast)

    assert "1 of 6 records failed to publish; first: UnknownPartitionError" in str(stopped.exception())
    reports = read_batch_reports(tmp_path / "reports")
    assert [(r.batch_id, r.outcome, r.earlier_runs, r.report.delivered, r.report.failed) for r in reports] == [
        (0, "committed", 0, 6, 0),
        (1, "failed", 0, 5, 1),
    ]
    failed_run = reports[1]

    # The partition appears, more data arrives, and the query restarts from its checkpoint: micro-batch 0 stays
    # done, micro-batch 1 runs again whole (its five delivered rows are published a second time), then 2.
    kafka_cluster.add_partitions(topic, 2)
    write_file(inbox, "3.json", third)
    restarted = run_to_end(source(spark, inbox), kafka_cluster.bootstrap_servers, topic, tmp_path, **fast)

    assert restarted.exception() is None
    counts = values_of(read_back(kafka_cluster.bootstrap_servers, topic))
    expected = Counter({v: 1 for _k, v, _p in first + third}) + Counter({v: 2 for _k, v, _p in second})
    expected["b-v3"] = 1  # failed the first time, delivered the second
    assert counts == expected
    reports = read_batch_reports(tmp_path / "reports")
    assert [(r.batch_id, r.outcome, r.earlier_runs, r.report.delivered) for r in reports] == [
        (0, "committed", 0, 6),
        (1, "committed", 1, 6),
        (2, "committed", 0, 6),
    ]
    assert reports[1].may_have_duplicates and "run 2 (rows published again" in reports[1].summary()
    # Eight write tasks in all (two queries), on the same two Python workers: at most one producer each, unless
    # Spark replaced a worker that sat idle for a minute between the queries.
    tasks = [t for r in reports for t in r.report.tasks] + [t for t in failed_run.report.tasks]
    assert len(tasks) == 8 and sum(t.new_producer for t in tasks) <= 4


def test_streaming_options_are_checked_before_anything_is_published(
    spark: SparkSession,  # noqa: F811
    bootstrap: str,
    tmp_path: Path,
) -> None:
    register(spark)
    frame = spark.readStream.format("rate").load().selectExpr("cast(value as string) as value")
    for number, (options, message) in enumerate(
        [
            ({"topic": "t", "delivery": "transactional"}, "needs transactional_id_prefix"),
            ({"topic": "t", "kafka.linger.mss": "1"}, "did you mean 'linger.ms'"),
            ({}, "topic option required when no 'topic' attribute is present"),
        ]
    ):
        writer = (
            frame.writeStream.format("aioproducer")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("checkpointLocation", str(tmp_path / f"checkpoint-{number}"))
        )
        for key, value in options.items():
            writer = writer.option(key, value)
        assert message in failure_of(writer)


def test_a_query_started_on_a_thread_of_its_own_finds_the_format(
    spark: SparkSession,  # noqa: F811
    bootstrap: str,
    tmp_path: Path,
) -> None:
    """A streaming query started on a thread where the session was not active failed with DATA_SOURCE_NOT_FOUND
    though register() had run: Spark looks a Python data source up in the active session of the starting thread."""
    frame = spark.readStream.format("rate").load().selectExpr("cast(value as string) as value")

    def register_and_start_here() -> str:
        spark._jvm.org.apache.spark.sql.SparkSession.clearActiveSession()
        register(spark)
        writer = (
            frame.writeStream.format("aioproducer")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
        )
        return failure_of(writer)

    with ThreadPoolExecutor(max_workers=1) as elsewhere:
        message = elsewhere.submit(register_and_start_here).result(timeout=300)
    # The sink's own option check answered: the format was found and the query got as far as its options.
    assert "topic option required when no 'topic' attribute is present" in message


def failure_of(writer: Any) -> str:
    """The error a streaming query stops with, whether `start()` raises it or the first micro-batch."""
    try:
        query = writer.start()
    except Exception as exc:
        return str(exc)
    try:
        query.awaitTermination(120)
    except StreamingQueryException as exc:
        return str(exc)
    finally:
        query.stop()
    return ""


# ---- the parts on their own ------------------------------------------------------------------------------------


def test_streaming_options() -> None:
    base = {"kafka.bootstrap.servers": "b:9092", "topic": "t"}
    parsed = parse_options(
        {**base, "reportPath": "/r", "checkpointLocation": "/c", "producerCache": "false"}, streaming=True
    )
    assert (parsed.report_path, parsed.producer_cache, parsed.delivery) == ("/r", False, "at_least_once")
    assert parse_options({**base, "producerCacheTimeoutMs": "500"}).producer_cache_timeout_ms == 500
    with pytest.raises(ConfigError, match="'reportPath' is for writeStream"):
        parse_options({**base, "reportPath": "/r"})
    transactional = parse_options({**base, "delivery": "Transactional", "transactionalIdPrefix": "orders"})
    assert (transactional.delivery, transactional.transactional_id_prefix) == ("transactional", "orders")
    for options, message in [
        ({"delivery": "transactional"}, "'delivery' and 'transactionalIdPrefix': delivery='transactional' needs"),
        ({"delivery": "transactional", "transactionalIdPrefix": "a b"}, "needs transactional_id_prefix"),
        ({"transactionalIdPrefix": "orders"}, "transactional_id_prefix is only for delivery='transactional'"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_options({**base, **options}, streaming=True)
    with pytest.raises(ConfigError, match=r"Kafka option 'kafka\.transactional\.id' is not accepted"):
        parse_options({**base, "kafka.transactional.id": "tx"}, streaming=True)
    with pytest.raises(ConfigError, match="option 'delivery' must be 'atLeastOnce' or 'transactional'"):
        parse_options({**base, "delivery": "exactly"})
    with pytest.raises(ConfigError, match="'producerCache' must be 'true' or 'false'"):
        parse_options({**base, "producerCache": "yes"})
    with pytest.raises(ConfigError, match="'producerCacheTimeoutMs' must be an integer"):
        parse_options({**base, "producerCacheTimeoutMs": "-1"})


def test_report_files_count_the_runs_of_a_micro_batch(tmp_path: Path) -> None:
    task = TaskReport(0, 0, 3, 5, 0, 12, new_producer=True)
    first = record_batch(tmp_path, 7, "aborted", PublishReport((task,)))
    again = record_batch(tmp_path, 7, "committed", PublishReport((task,)))
    record_batch(tmp_path, 2, "committed", PublishReport(()))
    assert (first.earlier_runs, again.earlier_runs) == (0, 1)
    assert [(r.batch_id, r.outcome, r.earlier_runs) for r in read_batch_reports(tmp_path)] == [
        (2, "committed", 0),
        (7, "committed", 1),
    ]
    assert read_batch_reports(tmp_path)[1].report.tasks == (task,)
    # Spark aborts a micro-batch whose commit failed: one run, reported as failed.
    record_batch(tmp_path, 9, "failed", PublishReport((task,)))
    assert record_batch(tmp_path, 9, "aborted", PublishReport((task,))).outcome == "failed"
    assert [(r.outcome, r.earlier_runs) for r in read_batch_reports(tmp_path) if r.batch_id == 9] == [("failed", 0)]
    assert not list(tmp_path.glob(".batch-*"))  # no temporary file left behind
    assert read_batch_reports(tmp_path / "missing") == []
    assert local_directory("file:///tmp/x") == Path("/tmp/x") and local_directory("rel/dir") == Path("rel/dir")
    with pytest.raises(ConfigError, match="must be a local directory on the driver"):
        local_directory("hdfs://nn/reports")


def test_rows_become_arrow_batches_for_spark_4_0_stream_writers() -> None:
    from pyspark.sql import Row

    schema = pa.schema([("value", pa.binary()), ("key", pa.string()), ("partition", pa.int32())])
    given = [Row(value=bytearray(b"v%d" % i), key=f"k{i}", partition=i % 2) for i in range(5)]
    batches = list(_rows_as_arrow(iter(given), schema, chunk_rows=2))
    assert [b.num_rows for b in batches] == [2, 2, 1]
    assert pa.Table.from_batches(batches).to_pylist()[4] == {"value": b"v4", "key": "k4", "partition": 0}
