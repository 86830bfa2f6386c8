"""What observing costs: aioproducer's CPU time per record with the observer off (a benchmark-only baseline), with
metrics only (the default producer: no hooks, no exporter) and with the OpenTelemetry hook at full sampling.

A 2-core machine shared with other work swings by more than the few percent to be measured, so the three are
measured the way a small difference can be seen: one process and one Tansu broker, three producers started side by
side, and many short rounds in which the baseline and the metrics-only producer run the same workload back to back
as A B B A (then B A A B), and OpenTelemetry after them.
Each round gives CPU time per record (`time.process_time`, this process only: the broker's CPU is not in it), and
the cost of a mode is the median over rounds of its ratio to the baseline *of the same round*, so drifts of the
machine's speed cancel out. The cyclic garbage collector runs before each timed run and is off during it.

    python -m tests.benchmarks.observe_bench [--rounds N] [--records N] [--otel-records N] [--quick]

Writes results/observability.md (and observability.json); part of `nox -s bench`. "Observer off" silences the
observer's per-batch work on that one producer object; the producer itself has no such switch.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from aioproducer import Producer, ProducerRecord
from aioproducer.accelerated import COMPILED
from aioproducer.testing import TansuBroker, create_topic

RESULTS = Path(__file__).resolve().parent / "results"
MODES = ("off", "metrics", "otel")
LABELS = {
    "off": "observer off (baseline)",
    "metrics": "metrics only (the default)",
    "otel": "OpenTelemetry hook, full sampling, no exporter",
}
WORKLOADS = ("enqueue", "send_many")
TOPIC = "observe-bench"
PARTITIONS = 4
VALUE_SIZE = 100
CHUNK = 10_000  # send_many chunk, as the side-by-side bench


def _producer(bootstrap: str, mode: str) -> Producer:
    hooks: list[Any] = []
    if mode == "otel":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider

        from aioproducer.contrib.opentelemetry import OpenTelemetryHook

        hooks.append(OpenTelemetryHook(tracer_provider=TracerProvider(), meter_provider=MeterProvider()))
    producer = Producer(bootstrap, hooks=hooks, linger_ms=5, acks=1, enable_idempotence=False)
    if mode == "off":
        observer = producer._observer
        for name in ("produce_sent", "batch_failed", "batch_retried"):
            setattr(observer, name, _nothing)
    return producer


def _nothing(*args: Any) -> None:
    return None


class ObserverClock:
    """Times the observer's per-request work on one producer (its `produce_sent`, the `_produce_done` callback it
    adds per request, and `fold`, which turns what those gathered into metrics): the metrics' cost measured
    directly, free of the machine's noise between runs. The clock is this thread's CPU time (a preemption inside a
    call is not counted); a fold run from inside `produce_sent` is counted once."""

    def __init__(self, producer: Producer) -> None:
        self.ns = 0
        self.calls = 0
        self._depth = 0
        observer = producer._observer
        for name in ("produce_sent", "_produce_done", "fold"):
            setattr(observer, name, self._timed(getattr(observer, name)))

    def _timed(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any) -> Any:
            if self._depth:
                return method(*args)
            self._depth += 1
            started = time.thread_time_ns()
            try:
                return method(*args)
            finally:
                self.ns += time.thread_time_ns() - started
                self.calls += 1
                self._depth -= 1

        return timed


async def _enqueue(producer: Producer, values: list[bytes]) -> None:
    enqueue = producer.enqueue
    for value in values:
        await enqueue(TOPIC, value)
    await producer.flush()


async def _send_many(producer: Producer, values: list[bytes]) -> None:
    for first in range(0, len(values), CHUNK):
        results = await producer.send_many([ProducerRecord(TOPIC, value) for value in values[first : first + CHUNK]])
        if any(isinstance(result, BaseException) for result in results):
            raise RuntimeError(f"send_many failed: {next(r for r in results if isinstance(r, BaseException))!r}")


RUNNERS: dict[str, Callable[[Producer, list[bytes]], Coroutine[Any, Any, None]]] = {
    "enqueue": _enqueue,
    "send_many": _send_many,
}


async def _timed(producer: Producer, workload: str, values: list[bytes]) -> tuple[float, float]:
    """(CPU µs per record, wall µs per record) of one run. The cyclic collector runs before the run, not during it:
    a full collection falling inside a 40 ms run or not swings it by ±20 % whatever the mode (the modes allocate
    alike: the metrics allocate two lists per request, the record path several objects per record)."""
    gc.collect()
    gc.disable()
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        await RUNNERS[workload](producer, values)
        return (time.process_time() - cpu) / len(values) * 1e6, (time.perf_counter() - wall) / len(values) * 1e6
    finally:
        gc.enable()


async def measure(bootstrap: str, rounds: int, records: int, otel_records: int) -> dict[str, Any]:
    pool = [bytes([i % 251]) * VALUE_SIZE for i in range(1024)]
    values = [pool[i % 1024] for i in range(records)]
    otel_values = values[:otel_records]
    producers = {mode: _producer(bootstrap, mode) for mode in MODES}
    samples: dict[str, dict[str, list[tuple[float, float]]]] = {w: {m: [] for m in MODES} for w in WORKLOADS}
    direct: dict[str, dict[str, float]] = {}
    try:
        for producer in producers.values():
            await producer.start()
            await _send_many(producer, values[:2000])  # connections, metadata, warm code paths
        for round_no in range(rounds):
            # Off and metrics back to back as A B B A (B A A B every other round): each pair is as close in time as
            # it can be, and neither always runs first. OpenTelemetry, 40 times slower, runs after them.
            pair = ("off", "metrics") if round_no % 2 else ("metrics", "off")
            for workload in WORKLOADS:
                runs: dict[str, list[tuple[float, float]]] = {"off": [], "metrics": []}
                for mode in (*pair, *reversed(pair)):
                    runs[mode].append(await _timed(producers[mode], workload, values))
                for mode, (first, second) in runs.items():
                    samples[workload][mode].append(((first[0] + second[0]) / 2, (first[1] + second[1]) / 2))
                samples[workload]["otel"].append(await _timed(producers["otel"], workload, otel_values))
        # The direct measure: a producer with metrics, its observer's per-request work timed, and one with the
        # observer off timed at the same call (its no-op): the clock's cost where the call happens, subtracted.
        timed, idle = _producer(bootstrap, "metrics"), _producer(bootstrap, "off")
        producers.update(timed=timed, idle=idle)
        clock, idle_clock = ObserverClock(timed), ObserverClock(idle)
        for producer in (timed, idle):
            await producer.start()
            await _send_many(producer, values[:2000])
        for workload in WORKLOADS:
            clock.ns = clock.calls = idle_clock.ns = idle_clock.calls = 0
            batches_before = timed.metrics().histograms["batch-size-bytes"].count
            cpu = 0.0
            runs_done = max(rounds // 4, 1)
            for _ in range(runs_done):
                cpu += (await _timed(timed, workload, values))[0]
                await _timed(idle, workload, values)
            batches = timed.metrics().histograms["batch-size-bytes"].count - batches_before
            clock_ns = idle_clock.ns / max(idle_clock.calls, 1)  # two clock reads around a no-op, in place
            net = max(clock.ns - clock.calls * clock_ns, 0.0)
            direct[workload] = {
                "observer_ns_per_record": net / (runs_done * records),
                "observer_ns_per_call": net / max(clock.calls, 1),
                "clock_ns": clock_ns,
                "records_per_batch": runs_done * records / max(batches, 1),
                "cpu_us": cpu / runs_done,
            }
    finally:
        for producer in producers.values():
            await producer.close()
    return {"samples": samples, "direct": direct, "records": records, "otel_records": otel_records, "rounds": rounds}


def summarise(data: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """Per workload and mode: median CPU and wall µs per record, and the median of the per-round CPU ratios to the
    baseline with their quartiles."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for workload, modes in data["samples"].items():
        base = [cpu for cpu, _ in modes["off"]]
        out[workload] = {}
        for mode, runs in modes.items():
            cpu = [c for c, _ in runs]
            ratios = [c / b - 1 for c, b in zip(cpu, base, strict=True)]
            quartiles = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
            out[workload][mode] = {
                "cpu_us": statistics.median(cpu),
                "wall_us": statistics.median(w for _, w in runs),
                "cost": statistics.median(ratios),
                "cost_q1": quartiles[0],
                "cost_q3": quartiles[2],
                "cost_us": statistics.median(c - b for c, b in zip(cpu, base, strict=True)),
            }
    return out


def report(data: dict[str, Any], summary: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = [
        "# The cost of observing (aioproducer, Tansu, keyless 100 B records)",
        "",
        f"Written by `python -m tests.benchmarks.observe_bench` on {data['started']}: Python {data['python']}, "
        f"{data['machine']}, {'compiled' if data['compiled'] else 'pure-Python'} hot path. {data['rounds']} rounds; "
        f"each round runs off and metrics as A B B A (B A A B the next) on {data['records']:,} records "
        f"({data['otel_records']:,} for OpenTelemetry), linger_ms=5, acks=1, no idempotence. Load average "
        f"{data['load_before']:.1f} before, {data['load_after']:.1f} after.",
        "",
        "CPU µs per record is this process's CPU time (the broker's is not in it), median over rounds. The cost is "
        "the median over rounds of each round's CPU per record against the same round's baseline, with the "
        "quartiles of those ratios: the target is ≤ 3 % for metrics only.",
        "",
        "| workload | mode | CPU µs/record | wall µs/record | cost vs off (median) | quartiles | µs/record |",
        "|---|---|---|---|---|---|---|",
    ]
    for workload, modes in summary.items():
        for mode in MODES:
            row = modes[mode]
            if mode == "off":
                cost = quart = extra = "-"
            else:
                cost = f"{row['cost'] * 100:+.1f} %"
                quart = f"{row['cost_q1'] * 100:+.1f} … {row['cost_q3'] * 100:+.1f} %"
                extra = f"{row['cost_us']:+.2f}"
            lines.append(
                f"| {workload} | {LABELS[mode]} | {row['cpu_us']:.2f} | {row['wall_us']:.2f} | {cost} | {quart} | "
                f"{extra} |"
            )
    lines += [
        "",
        "Measured directly (a separate producer, metrics on, the observer's per-request work timed in this thread's "
        "CPU time, `time.thread_time_ns`, around `produce_sent`, the per-request `_produce_done` callback and `fold`, "
        "which turns their raw facts into metrics every 256 requests and at each snapshot, less the clock's own cost "
        "measured at the same call on a producer with the observer off): the share is of the same runs' CPU per "
        "record. It counts only the time inside those calls: the cache misses the observer's code and data cause the "
        "record path afterwards are in the paired cost above (and in its noise), not here.",
        "",
        "| workload | observer ns/record | ns per observer call | clock ns per call (subtracted) | records per batch "
        "| share of CPU/record |",
        "|---|---|---|---|---|---|",
    ]
    for workload, row in data["direct"].items():
        share = row["observer_ns_per_record"] / (row["cpu_us"] * 1000) * 100
        lines.append(
            f"| {workload} | {row['observer_ns_per_record']:.1f} | {row['observer_ns_per_call']:.0f} | "
            f"{row['clock_ns']:.0f} | {row['records_per_batch']:.0f} | {share:.2f} % |"
        )
    lines += [
        "",
        "'Observer off' replaces the observer's per-batch methods (`produce_sent`, `batch_failed`, `batch_retried`) "
        "with no-ops on that one producer: what is left is the record path, which the metrics never touch (they are "
        "gathered per request and folded later). OpenTelemetry wraps `enqueue`/`send_many` with the record hooks and "
        "starts and ends one span per record in the SDK (no exporter, no processor).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--records", type=int, default=10_000, help="records per run (metrics and off)")
    parser.add_argument("--otel-records", type=int, default=1_000, help="records per OpenTelemetry run")
    parser.add_argument("--quick", action="store_true", help="6 rounds of 5 000 records: a smoke test")
    parser.add_argument("--report-only", action="store_true", help="rewrite observability.md from observability.json")
    parser.add_argument("--out", type=Path, help="output folder (default: results/, or results/quick/ with --quick)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.records, args.otel_records = 6, 5_000, 500
    args.out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    if args.report_only:
        recorded = json.loads((args.out / "observability.json").read_text())
        (args.out / "observability.md").write_text(report(recorded, recorded["summary"]))
        return 0
    load_before = _load()
    with TansuBroker() as broker:
        create_topic(broker.bootstrap_servers, TOPIC, PARTITIONS)
        data = asyncio.run(measure(broker.bootstrap_servers, args.rounds, args.records, args.otel_records))
    data.update(
        started=time.strftime("%Y-%m-%d %H:%M"),
        python=platform.python_version(),
        machine=f"{platform.machine()}, {_cpus()} CPUs",
        compiled=COMPILED,
        load_before=load_before,
        load_after=_load(),
    )
    summary = summarise(data)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "observability.json").write_text(json.dumps({**data, "summary": summary}, indent=1) + "\n")
    text = report(data, summary)
    (args.out / "observability.md").write_text(text)
    print(text)
    return 0


def _load() -> float:
    return os.getloadavg()[0]


def _cpus() -> int:
    return os.cpu_count() or 0


if __name__ == "__main__":
    raise SystemExit(main())
