"""The Spark section of the benchmarks: `aioproducer.spark` on local[2] Spark, alone and against Spark's own JVM
Kafka sink (`spark-sql-kafka-0-10`), on one real Apache Kafka node (full JIT).

    python -m tests.benchmarks.spark_bench version                                       # the Spark to install
    python -m tests.benchmarks.spark_bench publish [--rows N] [--bootstrap host:port]   # publish() alone
    python -m tests.benchmarks.spark_bench versus [--rows N] [--rounds R] [--quick]      # ours vs Spark's sink
    python -m tests.benchmarks.spark_bench floor [--rows N]                              # Spark alone, no Kafka
    python -m tests.benchmarks.spark_bench cache [--seconds S]                           # 1 s trigger, cache on/off

`versus` runs batch `df.write.format("kafka")` against `aioproducer.spark.publish`, and `writeStream.format("kafka")`
against `writeStream.format("aioproducer")` (10 Parquet files, 2 per micro-batch, availableNow), with the same rows
(~100 B, unique keys), the same broker, topics of 6 partitions and the same producer settings (acks=all,
idempotence, linger 5 ms, 16 KiB batches), each sink **warm** (one SparkSession that ran two untimed full passes of
both sinks, batch and streaming, first: what a long-running job has) and **cold** (a fresh SparkSession in a fresh
process whose first write is timed: what a short job has); sinks alternate and their order rotates each round.
Every run's topic is read back whole and must hold exactly the rows, each once. Writes results/spark.md.
CPU is that of the Spark JVM, its Python workers and the driver (the broker's is shown apart): on a shared machine
wall time depends on the neighbours, CPU per row much less. The Spark used is the newest version that both PyPI
(pyspark) and Maven Central (the connector) serve (`version`; `nox -s bench` installs it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aioproducer.testing import KafkaCluster, create_topic

VALUE_BYTES = 100
KEY_WIDTH = 7  # value = the key left-padded with "x" to VALUE_BYTES - KEY_WIDTH bytes
PARTITIONS = 6
STREAM_FILES = 10
FILES_PER_TRIGGER = 2
WARM_PASSES = 2
CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2/org/apache/spark/spark-sql-kafka-0-10_2.13"
# The same producer settings for both sinks: Kafka 4's defaults, written out (Spark's connector brings
# kafka-clients 3.9, whose linger.ms default is still 0).
PRODUCER = {
    "kafka.acks": "all",
    "kafka.enable.idempotence": "true",
    "kafka.linger.ms": "5",
    "kafka.batch.size": "16384",
}
RESULTS = Path(__file__).parent / "results"
_TICKS = os.sysconf("SC_CLK_TCK")
NAN = float("nan")


# ---- measuring ---------------------------------------------------------------------------------------------------


def cpu_of_tree(root: int, exclude: set[int] | frozenset[int] = frozenset()) -> float:
    """CPU seconds used so far by `root`'s live descendants, leaving out the subtrees of `exclude`: each one's own
    (utime + stime, every thread) and that of its children which have exited and been reaped (cutime + cstime: a
    Python worker that ends between two samples still counts)."""
    children: dict[int, list[int]] = {}
    usage: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        usage[int(entry)] = sum(int(tick) for tick in fields[11:15]) / _TICKS
    total, todo = 0.0, [pid for pid in children.get(root, []) if pid not in exclude]
    while todo:
        pid = todo.pop()
        total += usage.get(pid, 0.0)
        todo.extend(child for child in children.get(pid, []) if child not in exclude)
    return total


class Meter:
    """Wall time, client CPU (Spark's JVM and Python workers, this driver) and broker CPU of one run."""

    def __init__(self, broker_pids: set[int]) -> None:
        self.broker_pids = broker_pids

    def sample(self) -> tuple[float, float, float]:
        own = os.times()  # this driver, and its children that exited (a cold run's process, once reaped)
        client = cpu_of_tree(os.getpid(), self.broker_pids) + own.user + own.system
        client += own.children_user + own.children_system
        broker = sum(cpu_of_tree(pid) + _own_cpu(pid) for pid in self.broker_pids)
        return time.perf_counter(), client, broker

    @contextlib.contextmanager
    def run(self, into: dict[str, float]) -> Iterator[None]:
        wall, client, broker = self.sample()
        yield
        wall2, client2, broker2 = self.sample()
        into.update(wall_s=wall2 - wall, client_cpu_s=client2 - client, broker_cpu_s=broker2 - broker)


def _own_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


# ---- the environment: broker, connector, Spark -------------------------------------------------------------------


@contextlib.contextmanager
def real_kafka() -> Iterator[KafkaCluster]:
    """One real Kafka node with the JVM's full JIT (the test fixture's fast-starting C1-only JIT would make the
    broker, shared by both sinks, slower than a real one)."""
    with KafkaCluster(nodes=1, heap_mb=1024, fast_start=False) as cluster:
        yield cluster


def _final(version: str) -> bool:
    return all(part.isdigit() for part in version.split("."))


def common_version(pypi: list[str], maven: list[str]) -> str:
    """The newest final release in both lists: Spark's Python package and its Kafka connector, the same version."""
    both = {v for v in pypi if _final(v)} & {v for v in maven if _final(v)}
    if not both:
        raise RuntimeError(f"no Spark version is served both as pyspark ({pypi}) and as the connector ({maven})")
    return max(both, key=_version_key)


def maven_versions() -> list[str]:
    """The versions of spark-sql-kafka-0-10_2.13 that Maven Central serves."""
    with urllib.request.urlopen(f"{MAVEN_CENTRAL}/maven-metadata.xml", timeout=30) as answer:
        text = answer.read().decode()
    return [v.split("</version>")[0] for v in text.split("<version>")[1:]]


def pypi_versions() -> list[str]:
    """The versions of pyspark that PyPI serves, as pip reports them."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "pyspark"], capture_output=True, text=True, check=True
    )
    for line in done.stdout.splitlines():
        if line.strip().startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",")]
    raise RuntimeError(f"pip listed no pyspark versions:\n{done.stdout}{done.stderr}")


def connector_version(spark_version: str) -> str:
    """The connector of exactly `spark_version` (it must be on Maven Central: see `common_version`), fetched into
    ~/.m2 (where Spark's Ivy looks first)."""
    if spark_version not in maven_versions():
        raise RuntimeError(
            f"Maven Central has no {CONNECTOR}:{spark_version}: install the pyspark that "
            "`python -m tests.benchmarks.spark_bench version` names"
        )
    version = spark_version
    subprocess.run(
        [
            "mvn",
            "-B",
            "-q",
            "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:get",
            f"-Dartifact={CONNECTOR}:{version}",
        ],
        check=True,
    )
    return version


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def spark_session(packages: str | None = None) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
    )
    if packages:
        ivy = Path.home() / ".cache" / "aioproducer" / "ivy"
        builder = builder.config("spark.jars.packages", packages).config("spark.jars.ivy", str(ivy))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from aioproducer.spark import register

    register(spark)
    return spark


def rows_frame(spark: Any, rows: int) -> Any:
    """`rows` keyed records of ~100 bytes (unique keys of up to 7 bytes), cached in 2 partitions."""
    columns = ["cast(id as string) as key", f"lpad(cast(id as string), {VALUE_BYTES - KEY_WIDTH}, 'x') as value"]
    frame = spark.range(rows, numPartitions=2).selectExpr(*columns).cache()
    frame.count()
    return frame


def read_back(bootstrap: str, topic: str, rows: int, timeout_s: float = 300.0) -> int:
    """Read the whole topic (CRCs checked) and check it holds exactly `rows_frame`'s rows, each once: key i for every
    i < rows, with its own value. Returns the records read; raises on any missing, duplicate or foreign record."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-back-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "check.crcs": True,
        }
    )
    seen = bytearray(rows)
    read = 0
    width = VALUE_BYTES - KEY_WIDTH
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        pending, deadline = set(partitions), time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not read to its end in {timeout_s} s")
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                error = message.error()
                if error is not None:
                    if error.code() == -191:  # end of partition
                        pending.discard(message.partition())
                        continue
                    raise RuntimeError(f"{topic}[{message.partition()}]: {error.str()}")
                key, value = message.key() or b"", message.value() or b""
                index = int(key) if key.isdigit() else -1
                if not 0 <= index < rows or value != key.rjust(width, b"x") or seen[index]:
                    raise RuntimeError(f"{topic}: record {key!r}={value[:20]!r}… is foreign or a duplicate")
                seen[index] = 1
                read += 1
    finally:
        consumer.close()
    if read != rows:
        raise RuntimeError(f"{topic}: {read} records read back, expected {rows}")
    return read


# ---- the runs ----------------------------------------------------------------------------------------------------


def batch_run(sink: str, frame: Any, bootstrap: str, topic: str) -> None:
    options = {"kafka.bootstrap.servers": bootstrap, **PRODUCER}
    if sink == "aioproducer":
        from aioproducer.spark import publish

        publish(frame, topic, options)
    else:
        frame.write.format("kafka").options(**options).option("topic", topic).save()


def stream_run(sink: str, spark: Any, inbox: Path, bootstrap: str, topic: str, work: Path) -> dict[str, int]:
    """Run the query over every file (availableNow, FILES_PER_TRIGGER files per micro-batch); return its
    micro-batches' `durationMs`, summed by phase."""
    source = spark.readStream.schema("key string, value string").option("maxFilesPerTrigger", FILES_PER_TRIGGER)
    writer = source.parquet(str(inbox)).writeStream.format(sink)
    writer = writer.options(**{"kafka.bootstrap.servers": bootstrap, **PRODUCER}).option("topic", topic)
    writer = writer.option("checkpointLocation", str(work / f"checkpoint-{topic}"))
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the {sink} streaming query failed: {query.exception()}")
    phases: dict[str, int] = {}
    for progress in query.recentProgress:
        for phase, ms in (progress["durationMs"] or {}).items():
            phases[phase] = phases.get(phase, 0) + int(ms)
    return phases


def prepare(spark: Any, rows: int, scratch: Path) -> tuple[Any, Path]:
    """The cached frame of `rows` rows and the streaming inbox (the same rows in STREAM_FILES Parquet files)."""
    frame = rows_frame(spark, rows)
    inbox = scratch / "inbox"
    if not inbox.exists():
        frame.repartition(STREAM_FILES).write.parquet(str(inbox))
    return frame, inbox


def timed_run(
    spark: Any, frame: Any, inbox: Path, scratch: Path, meter: Meter, mode: str, sink: str, bootstrap: str, topic: str
) -> dict[str, Any]:
    """One write of every row by `sink`, measured; the topic must already exist."""
    run: dict[str, Any] = {"mode": mode, "sink": sink}
    with meter.run(run):
        if mode == "batch":
            batch_run(sink, frame, bootstrap, topic)
        else:
            run["phases_ms"] = stream_run(sink, spark, inbox, bootstrap, topic, scratch)
    return run


def cold(args: argparse.Namespace) -> None:
    """One cold run in this fresh process (started by `versus`): a new SparkSession, the rows prepared untimed, then
    the sink's first write timed; prints one JSON line."""
    with tempfile.TemporaryDirectory(prefix="spark-cold-") as work:
        scratch = Path(work)
        spark = spark_session(f"{CONNECTOR}:{args.connector}")
        frame, inbox = prepare(spark, args.rows, scratch)
        meter = Meter({int(pid) for pid in args.broker_pids.split(",") if pid})
        run = timed_run(spark, frame, inbox, scratch, meter, args.mode, args.sink, args.bootstrap, args.topic)
        spark.stop()
    print(COLD_MARK + json.dumps(run), flush=True)


COLD_MARK = "SPARK-COLD "


def _cold_in_child(
    args: argparse.Namespace, version: str, mode: str, sink: str, bootstrap: str, topic: str, broker_pids: set[int]
) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "tests.benchmarks.spark_bench", "cold", "--rows", str(args.rows), "--mode", mode,
        "--sink", sink, "--bootstrap", bootstrap, "--topic", topic, "--connector", version,
        "--broker-pids", ",".join(map(str, sorted(broker_pids))),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(COLD_MARK):
            result: dict[str, Any] = json.loads(line[len(COLD_MARK) :])
            return result
    raise RuntimeError(f"the cold {mode} {sink} run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")


def versus(args: argparse.Namespace) -> None:
    import pyspark

    version = connector_version(pyspark.__version__)
    results: dict[str, Any] = {
        "pyspark": pyspark.__version__,
        "connector": version,
        "rows": args.rows,
        "rounds": args.rounds,
        # A quick run (a smoke test) warms with one untimed pass and times the cold batch writes only.
        "warm_passes": 1 if args.quick else WARM_PASSES,
        "cold_modes": ["batch"] if args.quick else ["batch", "stream"],
        "load_at_start": os.getloadavg()[0],
        "runs": [],
    }
    with real_kafka() as cluster, tempfile.TemporaryDirectory(prefix="spark-bench-") as work:
        scratch = Path(work)
        bootstrap = cluster.bootstrap_servers
        broker_pids = {pid for pid in (cluster.pid(n) for n in cluster.node_ids) if pid is not None}
        meter = Meter(broker_pids)
        spark = spark_session(f"{CONNECTOR}:{version}")
        frame, inbox = prepare(spark, args.rows, scratch)
        sinks = ("kafka", "aioproducer")
        # Warm: two untimed full passes of both sinks, batch and streaming, in this session (Python workers and
        # their producers started, both sinks' classes loaded and JIT-compiled, the broker warm too), as a
        # long-running job has.
        for warm_pass in range(results["warm_passes"]):
            for mode in ("batch", "stream"):
                for sink in sinks:
                    topic = f"warm-{mode}-{sink}-{warm_pass}-{uuid.uuid4().hex[:6]}"
                    create_topic(bootstrap, topic, PARTITIONS)
                    run = timed_run(spark, frame, inbox, scratch, meter, mode, sink, bootstrap, topic)
                    print(f"untimed pass {warm_pass}: " + _line(run, args.rows), flush=True)
        # Every warm round before any cold one: a cold run (a fresh Spark JVM in a child process) takes long
        # enough that Spark stops the warm session's idle Python workers (PythonWorkerFactory's one-minute idle
        # timeout) and the producer cache closes its idle producers, which made later "warm" runs of ours start
        # fresh workers and producers while Spark's sink stayed warm in its JVM.
        schedule = [("warm", r) for r in range(args.rounds)] + [("cold", r) for r in range(args.rounds)]
        for state, round_number in schedule:
            order = sinks if round_number % 2 == 0 else sinks[::-1]
            for mode in ("batch", "stream") if state == "warm" else results["cold_modes"]:
                for sink in order:
                    topic = f"{state}-{mode}-{sink}-{round_number}-{uuid.uuid4().hex[:6]}"
                    create_topic(bootstrap, topic, PARTITIONS)
                    load = os.getloadavg()[0]
                    if state == "warm":
                        run = timed_run(spark, frame, inbox, scratch, meter, mode, sink, bootstrap, topic)
                    else:
                        run = _cold_in_child(args, version, mode, sink, bootstrap, topic, broker_pids)
                    run.update(state=state, round=round_number, load1=load)
                    run["records"] = read_back(bootstrap, topic, args.rows)
                    print(_line(run, args.rows), flush=True)
                    results["runs"].append(run)
        spark.stop()
    results["load_at_end"] = os.getloadavg()[0]
    report(results, args.rows)


def _line(run: dict[str, Any], rows: int) -> str:
    return (
        f"{run.get('state', ''):4} {run['mode']:6} {run['sink']:11} round {run.get('round', '-')}: "
        f"{rows / run['wall_s']:>9,.0f} rows/s, client {run['client_cpu_s'] / rows * 1e6:5.2f} CPU-us/row, "
        f"broker {run['broker_cpu_s'] / rows * 1e6:5.2f}"
    )


def _median_range(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values) / 1000:,.0f}-{max(values) / 1000:,.0f} k)"


def report(results: dict[str, Any], rows: int) -> None:
    runs = results["runs"]
    lines = [
        f"# Spark: aioproducer vs Spark's Kafka sink ({rows:,} rows of ~100 B, unique keys, local[2], 1 real Kafka "
        f"node, {PARTITIONS} partitions)",
        "",
        f"pyspark {results['pyspark']} with spark-sql-kafka-0-10 {results['connector']}; medians of "
        f"{results['rounds']} round(s), sinks alternating; acks=all, idempotence, linger 5 ms, 16 KiB batches for "
        f"both sinks. Warm: one SparkSession that ran {results['warm_passes']} untimed full pass(es) of both sinks "
        "(batch and streaming) first; cold: a fresh SparkSession in a fresh process, its first write timed "
        f"({' and '.join(results['cold_modes'])}). Streaming: "
        f"{STREAM_FILES} Parquet files, {FILES_PER_TRIGGER} per micro-batch, availableNow. Every run's topic was "
        "read back whole and held exactly the rows, each once. Client CPU: Spark's JVM, its Python workers and the "
        "driver; broker CPU: the Kafka JVM. Load average "
        f"{results.get('load_at_start', NAN):.1f} at the start, {results.get('load_at_end', NAN):.1f} at the end.",
        "",
        "| state | mode | sink | rows/s (min-max) | client CPU-us/row | broker CPU-us/row | ours ÷ Spark's sink |",
        "|---|---|---|---|---|---|---|",
    ]
    for state in ("warm", "cold"):
        for mode, label in (("batch", "df.write"), ("stream", "writeStream")):
            rates: dict[str, float] = {}
            for sink, name in (("kafka", 'Spark\'s format("kafka")'), ("aioproducer", "aioproducer")):
                chosen = [r for r in runs if r.get("state") == state and r["mode"] == mode and r["sink"] == sink]
                if not chosen:
                    continue
                speeds = [rows / r["wall_s"] for r in chosen]
                rates[sink] = statistics.median(speeds)
                client = statistics.median(r["client_cpu_s"] / rows * 1e6 for r in chosen)
                broker = statistics.median(r["broker_cpu_s"] / rows * 1e6 for r in chosen)
                ratio = f"{rates['aioproducer'] / rates['kafka']:.2f}x" if len(rates) == 2 else ""
                lines.append(
                    f"| {state} | {label} | {name} | {_median_range(speeds)} | {client:.2f} | {broker:.2f} | {ratio} |"
                )
    lines += _phases_table([r for r in runs if r.get("state") == "warm"])
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "spark.md").write_text(text)
    (RESULTS / "spark.json").write_text(json.dumps(results, indent=1))


def _phases_table(runs: list[dict[str, Any]]) -> list[str]:
    """Where the streaming runs' time went: Spark's `durationMs` phases, summed over the 10 micro-batches (medians
    of the rounds). `addBatch` is the write job (tasks and the sink's commit); `triggerExecution` the micro-batch."""
    streamed = [r for r in runs if r["mode"] == "stream" and "phases_ms" in r]
    if not streamed:
        return []
    phases = ["triggerExecution", "addBatch", "queryPlanning", "latestOffset", "getBatch", "walCommit", "commitOffsets"]
    lines = [
        "",
        "Streaming, Spark's `durationMs` summed over the micro-batches of a run (medians), and the run's wall time:",
        "",
        "| sink | wall ms | " + " | ".join(phases) + " |",
        "|---|---" + "|---" * len(phases) + "|",
    ]
    for sink, name in (("kafka", 'Spark\'s format("kafka")'), ("aioproducer", "aioproducer")):
        chosen = [r for r in streamed if r["sink"] == sink]
        wall = statistics.median(r["wall_s"] * 1000 for r in chosen)
        cells = [f"{statistics.median(r['phases_ms'].get(p, 0) for r in chosen):,.0f}" for p in phases]
        lines.append(f"| {name} | {wall:,.0f} | " + " | ".join(cells) + " |")
    return lines


def cache(args: argparse.Namespace) -> None:
    """A rate source at `--rate` rows/s, 1-second trigger, for `--seconds`, with and without the producer cache,
    then with delivery=transactional (one producer and one transaction per task)."""
    from aioproducer.spark import read_batch_reports

    lines = [
        "",
        "| producerCache (delivery) | micro-batches | task ms p50 | task ms p90 | addBatch ms p50 | producers started "
        "(= InitProducerId calls) | broker connections opened |",
        "|---|---|---|---|---|---|---|",
    ]
    with real_kafka() as cluster, tempfile.TemporaryDirectory(prefix="spark-cache-") as scratch:
        spark = spark_session()
        modes = [*("true", "false", "true", "false")[: 2 * args.rounds], "transactional"]
        for round_number, cached in enumerate(modes):
            delivery = (
                {"delivery": "transactional", "transactionalIdPrefix": f"cache-bench-{round_number}"}
                if cached == "transactional"
                else {"producerCache": cached}
            )
            topic = f"cache-{cached}-{round_number}"
            create_topic(cluster.bootstrap_servers, topic, PARTITIONS)
            reports = Path(scratch) / f"reports-{round_number}"
            source = (
                spark.readStream.format("rate").option("rowsPerSecond", args.rate).option("numPartitions", 2).load()
            )
            frame = source.selectExpr("cast(value as string) as key", "cast(timestamp as string) as value")
            query = (
                frame.writeStream.format("aioproducer")
                .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
                .options(**PRODUCER)
                .option("topic", topic)
                .options(**delivery)
                .option("reportPath", str(reports))
                .option("checkpointLocation", str(Path(scratch) / f"checkpoint-{round_number}"))
                .trigger(processingTime="1 second")
                .start()
            )
            # Measure once the query runs steadily: the rate source's backlog from start-up makes the first
            # micro-batches large, and the first tasks start the Python workers.
            settled = time.monotonic() + 300
            while _batch_id(query) < 3 and time.monotonic() < settled:
                time.sleep(0.5)
            first = _batch_id(query)
            time.sleep(args.seconds)
            progress = [p for p in query.recentProgress if p["batchId"] > first]
            query.stop()
            batches = [b for b in read_batch_reports(reports) if b.outcome == "committed" and b.batch_id > first]
            tasks = [t for b in batches for t in b.report.tasks if t.delivered]
            if not tasks or not progress:
                lines.append(f"| {cached} | 0 | - | - | - | no micro-batch completed in {args.seconds} s | - |")
                print(lines[-1], flush=True)
                continue
            elapsed = sorted(t.elapsed_ms for t in tasks)
            add_batch = [p["durationMs"].get("addBatch", 0) for p in progress]
            p50, p90 = statistics.median(elapsed), elapsed[int(len(elapsed) * 0.9)]
            lines.append(
                f"| {cached} | {len(batches)} | {p50:.0f} | {p90:.0f} | {statistics.median(add_batch):.0f} "
                f"| {sum(t.new_producer for t in tasks)} of {len(tasks)} tasks "
                f"| {sum(t.connections_opened for t in tasks)} |"
            )
            print(lines[-1], flush=True)
        spark.stop()
    text = (
        f"\n## Producer cache: {args.rate} rows/s, trigger 1 s, {args.seconds} s per run (local[2])\n"
        + "\n".join(lines)
        + "\n"
    )
    print(text)
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "spark.md", "a") as file:
        file.write(text)


def floor(args: argparse.Namespace) -> None:
    """What Spark alone costs on the same rows, for reading the versus table: its JVM `noop` sink (rows produced,
    nothing written) and a Python data source that only counts the Arrow batches it is handed (the path every
    Python sink, ours included, pays before producing), batch and streaming, alternating."""
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="spark-floor-") as scratch:
        spark = spark_session()
        spark.dataSource.register(_counting_source())
        frame = rows_frame(spark, args.rows)
        inbox = Path(scratch) / "inbox"
        frame.repartition(STREAM_FILES).write.parquet(str(inbox))
        meter = Meter(set())
        for round_number in range(args.rounds + 1):  # round 0 warms up
            order = ("noop", "counting") if round_number % 2 == 0 else ("counting", "noop")
            for mode in ("batch", "stream"):
                for sink in order:
                    run: dict[str, Any] = {"mode": mode, "sink": sink, "round": round_number}
                    with meter.run(run):
                        if mode == "batch":
                            frame.write.format(sink).mode("append").save()
                        else:
                            source = spark.readStream.schema("key string, value string")
                            source = source.option("maxFilesPerTrigger", 1).parquet(str(inbox))
                            checkpoint = Path(scratch) / f"checkpoint-{sink}-{round_number}"
                            query = source.writeStream.format(sink).option("checkpointLocation", str(checkpoint))
                            query.trigger(availableNow=True).start().awaitTermination()
                    if round_number:
                        runs.append(run)
                        print(_line(run, args.rows), flush=True)
        spark.stop()
    lines = [
        "",
        f"## What Spark alone costs: the same {args.rows:,} rows into sinks that publish nothing "
        f"(medians of {args.rounds} rounds)",
        "",
        "| mode | sink | rows/s | client CPU-us/row |",
        "|---|---|---|---|",
    ]
    for mode, label in (("batch", "df.write"), ("stream", "writeStream, 10 micro-batches")):
        for sink, name in (("noop", 'Spark\'s format("noop") (JVM)'), ("counting", "a Python data source counting")):
            chosen = [r for r in runs if r["mode"] == mode and r["sink"] == sink]
            rate = statistics.median(args.rows / r["wall_s"] for r in chosen)
            client = statistics.median(r["client_cpu_s"] / args.rows * 1e6 for r in chosen)
            lines.append(f"| {label} | {name} | {rate:,.0f} | {client:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(RESULTS / "spark.md", "a") as file:
        file.write(text)


def _counting_source() -> Any:
    """A Python data source named "counting" whose writers read every Arrow batch and keep nothing. Built in a
    function so that Spark pickles the classes by value (its workers cannot import this module)."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceStreamArrowWriter,
        WriterCommitMessage,
    )

    class Counted(WriterCommitMessage):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    def count(batches: Iterator[Any]) -> Counted:
        return Counted(sum(batch.num_rows for batch in batches))

    class CountingWriter(DataSourceArrowWriter):
        def write(self, iterator: Iterator[Any]) -> Counted:
            return count(iterator)

    class CountingStreamWriter(DataSourceStreamArrowWriter):
        def write(self, iterator: Iterator[Any]) -> Counted:
            return count(iterator)

        def commit(self, messages: Any, batchId: int) -> None:
            pass

        def abort(self, messages: Any, batchId: int) -> None:
            pass

    class Counting(DataSource):
        @classmethod
        def name(cls) -> str:
            return "counting"

        def writer(self, schema: Any, overwrite: bool) -> CountingWriter:
            return CountingWriter()

        def streamWriter(self, schema: Any, overwrite: bool) -> CountingStreamWriter:
            return CountingStreamWriter()

    return Counting


def _batch_id(query: Any) -> int:
    progress = query.lastProgress
    return -1 if progress is None else int(progress["batchId"])


def publish_alone(args: argparse.Namespace) -> None:
    """The original measurement: publish() alone to a broker (a real Kafka node unless --bootstrap)."""
    from aioproducer.spark import publish

    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap or stack.enter_context(real_kafka()).bootstrap_servers
        spark = spark_session()
        frame = rows_frame(spark, args.rows)
        topic = f"spark-bench-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, PARTITIONS)
        publish(frame.limit(1000), topic, {"kafka.bootstrap.servers": bootstrap})
        run: dict[str, Any] = {"mode": "batch", "sink": "aioproducer", "round": 0}
        with Meter(set()).run(run):
            result = publish(frame, topic, {"kafka.bootstrap.servers": bootstrap, **PRODUCER})
        print(result.summary())
        print(_line(run, args.rows))
        spark.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "command", choices=("version", "publish", "versus", "cold", "floor", "cache", "all"), nargs="?", default="all"
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=5_000, help="cache: rows per second of the rate source")
    parser.add_argument("--seconds", type=float, default=40.0, help="cache: seconds per run")
    parser.add_argument("--bootstrap", help="publish: Kafka bootstrap servers (default: a real Kafka node)")
    parser.add_argument("--quick", action="store_true", help="100 k rows, one round, `versus` only")
    # `cold`'s arguments, given by `versus`:
    parser.add_argument("--mode", choices=("batch", "stream"))
    parser.add_argument("--sink", choices=("kafka", "aioproducer"))
    parser.add_argument("--topic")
    parser.add_argument("--connector")
    parser.add_argument("--broker-pids", default="")
    args = parser.parse_args(argv)
    if args.command == "version":
        print(common_version(pypi_versions(), maven_versions()))
        return
    if args.quick:
        args.rows, args.rounds, args.seconds = 100_000, 1, 20.0
    commands: dict[str, Callable[[argparse.Namespace], None]] = {
        "publish": publish_alone,
        "versus": versus,
        "cold": cold,
        "floor": floor,
        "cache": cache,
    }
    everything = ("versus",) if args.quick else ("versus", "floor", "cache")
    for name in everything if args.command == "all" else (args.command,):
        commands[name](args)


if __name__ == "__main__":
    main()
