"""What one more batch costs the event loop, with no broker process competing for the CPU.

The same `enqueue` loop of 100 B keyless records runs alternately under two batchings: fixed batches
(`batch_max_size` = `batch_size` = 16 KiB, about 150 records a batch) and the defaults (batches grow while they wait,
about 1,100 records a batch). The records and their bytes are the same in both; what differs is the number of
batches, so the event loop's CPU difference divided by the batch difference is the cost of one batch: appending it
(a new batch, the partitioner's switch), draining, closing and framing it, and handling its answer. Requests carry
about six batches each in both batchings, so their number follows the batches' and their cost (socket calls, the
request's frame, the answer's decoding) counts in the figure. The broker is
librdkafka's mock cluster (its threads are in this process but not on the event loop's thread, whose CPU time alone
is read: `time.thread_time`). The issue's goal is 10 µs per batch.

    python -m tests.benchmarks.batch_cost [--records N] [--rounds N] [--quick]

Writes results/batch_cost.md; part of `nox -s bench`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from aioproducer import Producer
from aioproducer.accelerated import COMPILED
from aioproducer.testing.mock_cluster import MockCluster

RESULTS = Path(__file__).resolve().parent / "results"
BATCH_SIZE = 16 * 1024
BATCHINGS: dict[str, dict[str, Any]] = {
    "fixed": {"batch_size": BATCH_SIZE, "batch_max_size": BATCH_SIZE},
    "defaults": {"batch_size": BATCH_SIZE},
}
_WARM_RECORDS = 20_000


async def timed_run(bootstrap: str, topic: str, settings: dict[str, Any], records: int) -> tuple[float, int]:
    """The event loop thread's CPU seconds for `records` 100 B records enqueued then flushed, and the batches sent
    meanwhile (from the producer's metrics: bytes sent over the average batch size, both over the timed part)."""
    values = [os.urandom(100) for _ in range(1000)]
    async with Producer(bootstrap_servers=bootstrap, **settings) as producer:
        enqueue = producer.enqueue
        # Metadata, the connection and the producer id, before the clock starts.
        for index in range(min(_WARM_RECORDS, records)):
            await enqueue(topic, values[index % 1000])
        await producer.flush()
        before = producer.metrics().producer
        gc.collect()
        started = time.thread_time()
        for _ in range(records // 1000):
            for value in values:
                await enqueue(topic, value)
        await producer.flush()
        cpu = time.thread_time() - started
        after = producer.metrics().producer
    return cpu, _batches_between(before, after)


def _batches_between(before: dict[str, float], after: dict[str, float]) -> int:
    """Batches sent between two snapshots: the bytes sent over the average batch size, each side's total being the
    bytes of all its batches (`byte-total` and `batch-size-avg` count the same wire bytes)."""
    sent_after = after["byte-total"] / after["batch-size-avg"]
    sent_before = before["byte-total"] / before["batch-size-avg"] if before["batch-size-avg"] else 0.0
    return round(sent_after - sent_before)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 rounds of 100 k records")
    parser.add_argument("--out", type=Path, default=RESULTS, help="output folder (default: results/)")
    args = parser.parse_args(argv)
    rounds, records = (3, 100_000) if args.quick else (args.rounds, args.records)
    runs: dict[str, list[tuple[float, int]]] = {name: [] for name in BATCHINGS}
    with MockCluster(1) as cluster:
        for round_no in range(rounds):
            order = list(BATCHINGS) if round_no % 2 == 0 else list(reversed(BATCHINGS))
            for name in order:
                topic = f"batch-cost-{round_no}-{name}"
                cluster.create_topic(topic, 6)
                runs[name].append(asyncio.run(timed_run(cluster.bootstrap_servers, topic, BATCHINGS[name], records)))
    per_batch = [
        (fixed_cpu - default_cpu) / (fixed_batches - default_batches)
        for (fixed_cpu, fixed_batches), (default_cpu, default_batches) in zip(
            runs["fixed"], runs["defaults"], strict=True
        )
        if fixed_batches > default_batches
    ]
    lines = [
        "# What one more batch costs the event loop",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}, Python {platform.python_version()}, hot path "
        f"{'compiled' if COMPILED else 'pure Python'}, {records:,} records of 100 B per run on librdkafka's mock "
        f"cluster (one broker, 6 partitions), {rounds} alternating rounds, the event loop thread's CPU time. The "
        "goal is 10 µs per batch.",
        "",
        "| batching | loop CPU-µs per record (median) | batches per run (median) |",
        "|---|---|---|",
    ]
    for name, measured in runs.items():
        cpu = statistics.median(seconds for seconds, _ in measured)
        batches = statistics.median(count for _, count in measured)
        lines.append(f"| {name} | {cpu / records * 1e6:.3f} | {batches:,.0f} |")
    if per_batch:
        spread = f"{min(per_batch) * 1e6:.1f}-{max(per_batch) * 1e6:.1f}"
        lines += ["", f"Each extra batch: **{statistics.median(per_batch) * 1e6:.1f} µs** (rounds: {spread} µs)."]
    else:
        lines += ["", "Each extra batch: not measured (fixed batching sent no more batches than the defaults)."]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "batch_cost.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
