"""Throughput of `aioproducer.spark.publish`: N rows of ~100 bytes from a local[2] Spark session to Kafka.

Run: `python tests/benchmarks/spark_bench.py [--rows 1000000] [--bootstrap host:port]`; without --bootstrap it
starts an embedded Tansu broker. Prints rows/s end to end (Spark plan, Arrow transfer, produce, report).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

from aioproducer.spark import publish
from aioproducer.testing import TansuBroker, create_topic

VALUE_BYTES = 100
_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds used so far by every live descendant of `root` (the JVM, Spark's Python workers, the broker).

    On a shared machine the wall time depends on the neighbours; CPU per row does not.
    """
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
        usage[int(entry)] = (int(fields[11]) + int(fields[12])) / _TICKS
    total, todo = 0.0, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        total += usage.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total


@contextlib.contextmanager
def kafka(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    with TansuBroker() as broker:
        yield broker.bootstrap_servers


def spark_session(cores: int, conf: dict[str, Any]) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config(map=conf)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: an embedded Tansu broker)")
    parser.add_argument("--option", action="append", default=[], help="extra publish option key=value")
    parser.add_argument("--conf", action="append", default=[], help="extra Spark setting key=value")
    parser.add_argument("--no-keys", action="store_true", help="publish without keys (sticky partitioning)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
    spark = spark_session(args.cores, {key: value for key, _, value in (c.partition("=") for c in args.conf)})
    # Unique keys of up to 7 bytes and values padded to fill ~100 B of payload per record.
    columns = [f"lpad(cast(id as string), {VALUE_BYTES - 7}, 'x') as value"]
    if not args.no_keys:
        columns.append("cast(id as string) as key")
    df = spark.range(args.rows, numPartitions=args.cores).selectExpr(*columns)
    df = df.cache()
    df.count()  # materialize the input first: the benchmark measures publishing, not generating
    with kafka(args.bootstrap) as bootstrap:
        topic = f"spark-bench-{int(time.time())}"
        create_topic(bootstrap, topic, 4)
        options = {"kafka.bootstrap.servers": bootstrap, **dict(o.split("=", 1) for o in args.option)}
        # A warm-up publish starts the Python workers, as a long-lived job would already have.
        publish(df.limit(1000), topic, options)
        cpu_before = tree_cpu_seconds(os.getpid()) + time.process_time()
        started = time.perf_counter()
        report = publish(df, topic, options)
        elapsed = time.perf_counter() - started
        cpu = tree_cpu_seconds(os.getpid()) + time.process_time() - cpu_before
    print(report.summary())
    keys = "without keys" if args.no_keys else "with unique keys"
    print(f"{args.rows:,} rows {keys} in {elapsed:.2f} s: {args.rows / elapsed:,.0f} rows/s on local[{args.cores}]")
    print(
        f"CPU: {cpu:.2f} s in all processes ({cpu / args.rows * 1e6:.2f} us/row): at most "
        f"{args.rows * args.cores / cpu:,.0f} rows/s on {args.cores} otherwise idle cores"
    )
    print(f"load average during the run: {os.getloadavg()[0]:.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
