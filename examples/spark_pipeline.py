"""A small Spark pipeline that publishes its result to Kafka with `aioproducer.spark.publish`.

It writes a CSV of orders, reads it with Spark, keeps the paid orders, totals them per customer and day, and
publishes one JSON record per (customer, day), keyed by customer, with a header naming the source file. Then it
prints the delivery report. With no --bootstrap it starts an embedded broker (Tansu, `aioproducer[testing]`).

    python examples/spark_pipeline.py --orders 20000
    python examples/spark_pipeline.py --bootstrap 127.0.0.1:9092 --topic customer-daily-totals
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from aioproducer.spark import PublishReport, publish
from aioproducer.testing import broker_or_embedded, create_topic

STATUSES = ("paid", "paid", "paid", "refunded", "cancelled")


def write_orders(path: Path, orders: int, customers: int, seed: int = 7) -> None:
    """A CSV of `orders` random orders: order_id, customer, day (2024-05-01..07), amount_cents, status."""
    rng = random.Random(seed)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["order_id", "customer", "day", "amount_cents", "status"])
        for order_id in range(orders):
            writer.writerow(
                [
                    order_id,
                    f"customer-{rng.randrange(customers):04d}",
                    f"2024-05-0{rng.randrange(1, 8)}",
                    rng.randrange(100, 50_000),
                    rng.choice(STATUSES),
                ]
            )


def daily_totals(spark: Any, csv_path: Path) -> Any:
    """Paid orders per customer and day, shaped for the Kafka sink: key, value (JSON), headers."""
    from pyspark.sql import functions as F

    orders = spark.read.csv(
        str(csv_path), header=True, schema="order_id long, customer string, day date, amount_cents long, status string"
    )
    totals = (
        orders.where(F.col("status") == "paid")
        .groupBy("customer", "day")
        .agg(F.count("*").alias("orders"), F.sum("amount_cents").alias("total_cents"))
    )
    return totals.select(
        F.col("customer").alias("key"),
        F.to_json(F.struct("customer", F.col("day").cast("string").alias("day"), "orders", "total_cents")).alias(
            "value"
        ),
        F.array(F.struct(F.lit("source").alias("key"), F.lit(csv_path.name).cast("binary").alias("value"))).alias(
            "headers"
        ),
    )


def run_pipeline(spark: Any, bootstrap: str, topic: str, workdir: Path, orders: int = 5000) -> PublishReport:
    """Generate the orders, compute the daily totals and publish them to `topic`; returns the delivery report."""
    csv_path = workdir / "orders.csv"
    write_orders(csv_path, orders, customers=max(1, orders // 50))
    return publish(
        daily_totals(spark, csv_path),
        topic,
        {"kafka.bootstrap.servers": bootstrap, "kafka.compression.type": "zstd", "kafka.linger.ms": "20"},
    )


def local_spark(master: str) -> Any:
    # Executors run this same interpreter, where aioproducer is installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName("aioproducer-spark-pipeline")
    spark = (
        builder.config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: an embedded Tansu broker)")
    parser.add_argument("--topic", default="customer-daily-totals")
    parser.add_argument("--orders", type=int, default=20_000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    with broker_or_embedded(args.bootstrap) as bootstrap, tempfile.TemporaryDirectory() as workdir:
        if not args.bootstrap:
            create_topic(bootstrap, args.topic, 4)
        # Spark stops before the broker does: its Python workers keep their producers between tasks, and those would
        # otherwise log that no broker answers once the embedded one is gone.
        spark = local_spark(args.master)
        try:
            report = run_pipeline(spark, bootstrap, args.topic, Path(workdir), args.orders)
        finally:
            spark.stop()
    print(report.summary())
    if report.may_have_duplicates:
        print("some Spark partitions ran more than once: their records may be in Kafka twice (at-least-once)")


if __name__ == "__main__":
    main()
