"""The aioproducer demo: produce records to Kafka, read them back with an independent consumer, report.

With no --bootstrap it starts a broker of its own on free loopback ports, from `aioproducer[testing]`: Tansu, an
embedded Kafka-compatible broker that starts at once (the default), or with --broker kafka real Apache Kafka
(a single KRaft node from Maven Central's jars; needs `java` and `mvn`, the first run downloads ~45 MB).

    python examples/demo.py --records 200000 --compression zstd
    python examples/demo.py --broker kafka
    python examples/demo.py --bootstrap 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import Iterator

from rich.progress import MofNCompleteColumn, Progress, TextColumn

from aioproducer import Producer, ProducerRecord
from aioproducer.testing import KafkaCluster, broker_or_embedded, create_topic, read_back


@contextlib.contextmanager
def broker(bootstrap: str | None, kind: str) -> Iterator[str]:
    """The bootstrap servers to use: `bootstrap` when given, else a broker of `kind` running for the block."""
    if bootstrap or kind == "tansu":
        with broker_or_embedded(bootstrap) as servers:
            yield servers
        return
    print("starting real Apache Kafka (one KRaft node) ...")
    with KafkaCluster(nodes=1) as cluster:
        print(f"started Apache Kafka {cluster.version} at {cluster.bootstrap_servers} in {cluster.startup_s:.1f} s")
        yield cluster.bootstrap_servers


async def produce(bootstrap: str, topic: str, count: int, value_size: int, compression: str) -> tuple[int, int, float]:
    """Produce `count` keyed records with `send_many` in chunks; returns (delivered, failed, seconds)."""
    delivered = failed = 0
    chunk = 10_000
    payload = b"x" * value_size
    started = time.perf_counter()
    columns = (*Progress.get_default_columns(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"))
    async with Producer(bootstrap, compression_type=compression, linger_ms=5) as producer:
        with Progress(*columns) as progress:
            task = progress.add_task("producing", total=count, rate="")
            for first in range(0, count, chunk):
                records = (  # a generator: send_many reads it as it goes, never building the whole chunk
                    ProducerRecord(topic, payload, key=b"key-%d" % (i % 1000), headers=[("n", str(i).encode())])
                    for i in range(first, min(first + chunk, count))
                )
                for result in await producer.send_many(records):
                    if isinstance(result, BaseException):
                        failed += 1
                    else:
                        delivered += 1
                rate = (delivered + failed) / (time.perf_counter() - started)
                progress.update(task, completed=delivered + failed, rate=f"{rate:,.0f} records/s")
    return delivered, failed, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: start a broker, see --broker)")
    parser.add_argument(
        "--broker",
        choices=["tansu", "kafka"],
        help="the broker to start without --bootstrap: embedded Tansu (instant, the default) or real Apache Kafka",
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--compression", default="lz4", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--topic", default=f"aioproducer-demo-{int(time.time())}")
    args = parser.parse_args(argv)

    if args.bootstrap and args.broker:
        parser.error("--broker starts a broker of its own: leave it out with --bootstrap")
    with broker(args.bootstrap, args.broker or "tansu") as bootstrap:
        create_topic(bootstrap, args.topic, args.partitions)
        print(f"producing {args.records:,} records of {args.value_size} B to {args.topic!r} ({args.compression})")
        delivered, failed, seconds = asyncio.run(
            produce(bootstrap, args.topic, args.records, args.value_size, args.compression)
        )
        print("reading everything back with an independent consumer (confluent-kafka, check.crcs=true) ...")
        records = read_back(bootstrap, args.topic, timeout_s=120)
    per_partition: dict[int, int] = {}
    for record in records:
        per_partition[record.partition] = per_partition.get(record.partition, 0) + 1
    print(
        f"delivered {delivered:,} records, failed {failed:,}, in {seconds:.2f} s "
        f"({delivered / max(seconds, 1e-9):,.0f} records/s)"
    )
    print(f"read back {len(records):,} records; per partition: {dict(sorted(per_partition.items()))}")
    ok = failed == 0 and len(records) == delivered == args.records
    print("OK: every record delivered and read back exactly once" if ok else "MISMATCH: see the counts above")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
