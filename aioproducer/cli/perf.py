"""`aioproducer perf-test`: Kafka's producer perf tool for aioproducer — throughput, MB/s, latency percentiles.

Owns the send loop (an `enqueue` per record, throttled to `--throughput` as Java's ThroughputThrottler), its live
display and its report (`--json`, `--plot`). The numbers are the producer's: each run is one process and one
producer, and a record's latency runs from before its `enqueue` to its acknowledgement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
from typing import Any

from aioproducer.cli.display import Display
from aioproducer.cli.options import add_connection_options, key_value_pairs, producer_settings
from aioproducer.cli.stats import RunSummary, latency_summary, per_second
from aioproducer.cli.tracker import Tracker
from aioproducer.producer import Producer

__all__ = ["add_parser", "run"]

# A latency sample costs a done-callback (about 1.7 CPU-µs, more than an enqueue): every record of a small run is
# sampled, a large run's every n-th record up to every 32nd (at least 20 000 samples per run below 640 000 records),
# which keeps the sampling out of the measured throughput (~5%).
_FULL_SAMPLES = 20_000
_MAX_SAMPLE_EVERY = 32
_TICK_S = 0.25


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "perf-test",
        help="measure throughput and latency (as kafka-producer-perf-test)",
        description="Produce --num-records records of --record-size bytes as fast as allowed and report records/s, "
        "MB/s and latency percentiles (p50/p95/p99/p99.9).",
    )
    parser.add_argument("--topic", required=True)
    parser.add_argument("--num-records", type=_positive, required=True)
    parser.add_argument("--record-size", type=_positive, default=100, help="value bytes per record (default 100)")
    parser.add_argument(
        "--throughput", type=float, default=-1, help="target records/s; -1 (default): as fast as possible"
    )
    parser.add_argument("--keys", type=int, default=0, help="cycle over this many distinct keys (default 0: keyless)")
    parser.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--acks", choices=["all", "-1", "0", "1"])
    parser.add_argument("--transactional-id", help="produce every record in one transaction with this id")
    parser.add_argument(
        "--producer-props",
        "--command-property",
        dest="producer_props",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="producer settings in Java's spelling, as Java's kafka-producer-perf-test takes them "
        "(bootstrap.servers=host:9092 acks=all ...); they win over --producer.config and -X",
    )
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    parser.add_argument("--plot", metavar="PNG", help="write throughput and latency over time to this PNG file")
    add_connection_options(parser)
    parser.set_defaults(run=run, command_parser=parser)


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


async def run(args: argparse.Namespace, display: Display) -> int:
    extra = key_value_pairs("--producer-props", args.producer_props)
    flags = {"compression.type": args.compression, "acks": args.acks, "transactional.id": args.transactional_id}
    extra.update({key: value for key, value in flags.items() if value is not None})
    settings = producer_settings(args, **extra)
    producer = Producer(config=settings)
    total = args.num_records
    payload = bytes(random.choice(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(args.record_size))
    keys = [b"key-%d" % k for k in range(args.keys)] if args.keys > 0 else None
    sample_every = min(_MAX_SAMPLE_EVERY, max(1, total // _FULL_SAMPLES))
    async with producer:
        if args.transactional_id:
            await producer.begin_transaction()  # one transaction for the run, committed after the flush
        tracker = Tracker()
        with display.progress(f"producing to {args.topic}", total) as progress:
            ticker = asyncio.get_running_loop().create_task(_tick(tracker, progress, args.record_size))
            try:
                await _produce(producer, tracker, args.topic, payload, keys, total, sample_every, args.throughput)
                await producer.flush()
                if args.transactional_id:
                    await producer.commit_transaction()
                await tracker.finish()
            finally:
                ticker.cancel()
            progress.update(tracker.delivered + tracker.failed, _rate_text(tracker, args.record_size))
        elapsed = tracker.clock() - tracker.started
    summary = RunSummary(
        records=total,
        delivered=tracker.delivered,
        failed=tracker.failed,
        errors=tracker.errors,
        record_size=args.record_size,
        seconds=round(elapsed, 6),  # a fast run takes milliseconds: records_per_s must follow from it
        records_per_s=round(tracker.delivered / elapsed, 1),
        mb_per_s=round(tracker.delivered * args.record_size / elapsed / 2**20, 2),
        latency_ms={k: round(v, 2) for k, v in latency_summary(tracker.latencies_ms).items()},
        latency_samples=len(tracker.latencies_ms),
        settings=_settings_shown(producer, args.keys),
    )
    series = per_second(tracker.completed_at, tracker.latencies_ms, sample_every)
    if args.plot:
        from aioproducer.cli.plot import write_plot

        write_plot(args.plot, series, summary)
    if args.json:
        data = summary.to_json()
        data["per_second"] = {
            "seconds": series.seconds,
            "records_per_s": series.records_per_s,
            "p50_ms": series.p50_ms,
            "p99_ms": series.p99_ms,
        }
        display.out(json.dumps(data))
    else:
        display.perf_report(summary)
    return 0 if tracker.failed == 0 else 1


async def _produce(
    producer: Producer,
    tracker: Tracker,
    topic: str,
    payload: bytes,
    keys: list[bytes] | None,
    total: int,
    sample_every: int,
    throughput: float,
) -> None:
    clock = tracker.clock
    started = clock()
    key_count = len(keys) if keys else 0
    enqueue = producer.enqueue
    add = tracker.fast_adder()  # the per-record bookkeeping is one append: this loop is what is measured
    n = 0
    while n < total:
        # One sampled record, then up to sample_every - 1 records with no more bookkeeping than an append.
        end = min(n + sample_every, total)
        for m in range(n, end):
            if throughput > 0:
                # Java's ThroughputThrottler: sleep while ahead of the target schedule.
                ahead = started + m / throughput - clock()
                if ahead > 0:
                    await asyncio.sleep(ahead)
            key = keys[m % key_count] if keys else None
            if m == n:
                sent_at = clock()
                tracker.add_sampled(await enqueue(topic, payload, key=key), sent_at)
            else:
                add(await enqueue(topic, payload, key=key))
        tracker.count_sent(end - n - 1)
        n = end


async def _tick(tracker: Tracker, progress: Any, record_size: int) -> None:
    while True:
        await asyncio.sleep(_TICK_S)
        tracker.reap()
        progress.update(tracker.delivered + tracker.failed, _rate_text(tracker, record_size))


def _rate_text(tracker: Tracker, record_size: int) -> str:
    elapsed = max(tracker.clock() - tracker.started, 1e-9)
    rate = tracker.delivered / elapsed
    recent = tracker.latencies_ms[-2000:]
    p99 = sorted(recent)[int(0.99 * len(recent))] if recent else math.nan
    return f"{rate:,.0f} rec/s  {rate * record_size / 2**20:.2f} MB/s  p99 {p99:.1f} ms"


def _settings_shown(producer: Producer, keys: int) -> dict[str, Any]:
    cfg = producer.config
    return {
        "acks": "all" if cfg.acks == -1 else cfg.acks,
        "idempotence": cfg.idempotence,
        "compression_type": cfg.compression_type,
        "linger_ms": cfg.linger_ms,
        "batch_size": cfg.batch_size,
        "keys": keys,
    }
