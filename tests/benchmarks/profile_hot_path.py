"""Where aioproducer's time goes per record in the enqueue loop, send_many and keyed workloads: py-spy samples a
worker process mid-run (µs per record by function, no in-process overhead) and cProfile counts Python calls per record.

Owns only these profiling runs and their reports in results/profile/; it must not change the producer.
    python -m tests.benchmarks.profile_hot_path [--records 1000000] [--seconds 3] [--only enqueue,send_many,keyed]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import pstats
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aioproducer import Producer, ProducerRecord
from aioproducer.testing import TansuBroker, create_topic
from tests.benchmarks.workloads import BULK_CHUNK, LINGER_MS, key_pool, records_for, value_pool

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent / "results" / "profile"
TOP = 25
TRACED_RECORDS = 100_000
Workload = Callable[["Producer", str, list[bytes], list[bytes]], Any]


async def _enqueue(producer: Producer, topic: str, values: list[bytes], keys: list[bytes]) -> None:
    enqueue = producer.enqueue
    for value in values:
        await enqueue(topic, value)
    await producer.flush()


async def _send_many(producer: Producer, topic: str, values: list[bytes], keys: list[bytes]) -> None:
    for first in range(0, len(values), BULK_CHUNK):
        await producer.send_many([ProducerRecord(topic, value) for value in values[first : first + BULK_CHUNK]])


async def _keyed(producer: Producer, topic: str, values: list[bytes], keys: list[bytes]) -> None:
    enqueue = producer.enqueue
    for value, key in zip(values, keys, strict=True):
        await enqueue(topic, value, key=key)
    await producer.flush()


WORKLOADS: dict[str, Workload] = {"enqueue": _enqueue, "send_many": _send_many, "keyed": _keyed, "lz4_1KB": _enqueue}
# name -> (value size, compression); the default is 100 B uncompressed.
PAYLOADS = {"lz4_1KB": (1000, "lz4")}
DEFAULT_ONLY = "enqueue,send_many,keyed"


async def _measure(bootstrap: str, topic: str, name: str, count: int, hooks: tuple[Any, Any]) -> float:
    """Run one workload with `hooks` (start, stop) called around the timed part; returns its seconds."""
    size, compression = PAYLOADS.get(name, (100, "none"))
    values = records_for(count, value_pool(size, compressible=compression != "none"))
    keys = records_for(count, key_pool())
    settings: dict[str, Any] = {"linger_ms": LINGER_MS, "acks": 1, "enable_idempotence": False}
    async with Producer(bootstrap, compression_type=compression, **settings) as producer:
        await producer.send(topic, b"warm-up")
        start, stop = hooks
        started = time.perf_counter()
        start()
        await WORKLOADS[name](producer, topic, values, keys)
        stop()
        return time.perf_counter() - started


class _GcClock:
    """Exact time inside the cyclic garbage collector, from gc.callbacks: a sampler charges a collection to
    whichever allocation tripped it, so its cost never shows under its own name."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self.longest_ms = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        generation = info["generation"]
        self.seconds += pause
        self.collections[generation] += 1
        self.longest_ms[generation] = max(self.longest_ms[generation], round(pause * 1000, 2))


def _child(bootstrap: str, name: str, count: int) -> int:
    """The process py-spy watches: says START when the timed part begins, then `DONE <json>` when it ends."""
    topic = f"profile-{name}-{time.time_ns()}"
    create_topic(bootstrap, topic, 4)
    clock = _GcClock()

    def start() -> None:
        gc.callbacks.append(clock)
        print("START", flush=True)

    seconds = asyncio.run(_measure(bootstrap, topic, name, count, (start, lambda: gc.callbacks.remove(clock))))
    print(
        "DONE "
        + json.dumps(
            {"seconds": seconds, "gc_s": clock.seconds, "gc": clock.collections, "gc_longest_ms": clock.longest_ms}
        ),
        flush=True,
    )
    return 0


Samples = tuple[Counter[str], Counter[str], Counter[str]]


def _short(frame: str) -> str:
    """'function (path:line)' with the path cut to the package or module that matters."""
    function, _, where = frame.partition(" (")
    for marker in ("aioproducer/", "asyncio/", "benchmarks/"):
        if marker in where:
            return f"{function} ({where[where.index(marker) :]}"
    return frame


def _function(frame: str) -> str:
    """The frame without its current line: samples of one function add up."""
    head, _, _ = frame.rpartition(":")
    return f"{head})" if head else frame


def _attribute(folded: Path) -> tuple[Samples, int]:
    """(self time by function, inclusive time by function, self time by line) from py-spy's folded stacks."""
    own, inclusive, lines, total = Counter[str](), Counter[str](), Counter[str](), 0
    for entry in folded.read_text().splitlines():
        stack, _, hits_text = entry.rpartition(" ")
        hits = int(hits_text)
        frames = [_short(f) for f in stack.split(";")]
        total += hits
        own[_function(frames[-1])] += hits
        lines[frames[-1]] += hits
        for function in {_function(f) for f in frames}:
            inclusive[function] += hits
    return (own, inclusive, lines), total


def _sample(bootstrap: str, name: str, count: int, seconds: int, stacks: Path) -> tuple[dict[str, Any], Samples, int]:
    """py-spy on a child from the start of its timed part: the child's report, the attributed samples, their count.

    Non-blocking and Python-only on purpose: pausing the process for each sample (py-spy's default) and unwinding
    native frames both slowed the run and inflated time inside syscalls several times over.
    """
    folded = stacks / f"{name}.folded"
    command = [sys.executable, "-m", "tests.benchmarks.profile_hot_path", "--child", name]
    command += ["--bootstrap", bootstrap, "--records", str(count)]
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if child.stdout is None or child.stdout.readline().strip() != "START":
        raise RuntimeError(f"the {name} worker did not start")
    spy = [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(child.pid), "--duration"]
    spy += [str(seconds), "--rate", "1000", "--nonblocking", "--format", "raw", "--output", str(folded)]
    subprocess.run(spy, check=True, capture_output=True)
    done = child.stdout.readline()
    child.wait()
    if not done.startswith("DONE "):
        raise RuntimeError(f"the {name} worker ended without a result")
    samples, total = _attribute(folded)
    return json.loads(done[5:]), samples, total


def _table(title: str, samples: Counter[str], total: int, us_per_record: float, top: int = TOP) -> list[str]:
    lines = [title, f"{'µs/record':>10} {'share':>6}  function"]
    for frame, hits in samples.most_common(top):
        lines.append(f"{hits / total * us_per_record:>10.3f} {hits / total:>6.1%}  {frame}")
    return lines


def _sampled(bootstrap: str, name: str, count: int, seconds: int, stacks: Path) -> list[str]:
    report, (own, inclusive, lines_hit), total = _sample(bootstrap, name, count, seconds, stacks)
    us_per_record = report["seconds"] / count * 1e6
    gc_us = report["gc_s"] / count * 1e6
    lines = [
        f"{name}: {count:,} records at {us_per_record:.2f} µs/record ({1e6 / us_per_record:,.0f} records/s); "
        f"py-spy sampled {total:,} stacks over the first {seconds} s of the timed part (1 kHz, non-blocking). "
        "µs/record = share of samples x the run's µs/record.",
        f"Cyclic GC (measured exactly with gc.callbacks over the whole run): {gc_us:.2f} µs/record "
        f"= {gc_us / us_per_record:.1%} of the time; collections per generation {report['gc']}, longest pause per "
        f"generation {report['gc_longest_ms']} ms. The sampler charges this to whichever line allocated when a "
        "collection started.",
        "",
    ]
    lines += _table("Self time by function (C calls charged to their Python caller):", own, total, us_per_record)
    lines += ["", *_table("Inclusive time (callees included):", inclusive, total, us_per_record)]
    lines += ["", *_table("Hottest lines (self time):", lines_hit, total, us_per_record, top=15)]
    return lines


def _traced(bootstrap: str, name: str, count: int) -> list[str]:
    profile = cProfile.Profile()
    topic = f"profile-{name}-{time.time_ns()}"
    create_topic(bootstrap, topic, 4)
    wall = asyncio.run(_measure(bootstrap, topic, name, count, (profile.enable, profile.disable)))
    entries: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]  # untyped in typeshed
    calls = sum(entry[1] for entry in entries.values())
    lines = [
        f"{name} under cProfile: {count:,} records in {wall:.3f} s (tracing inflates time; read the call counts)",
        f"Function calls per record (Python and builtins): {calls / count:.1f}",
        f"{'calls/record':>12} {'tottime µs/rec':>15}  function",
    ]
    for (path, line, function), (_, ncalls, tottime, _, _) in sorted(entries.items(), key=lambda e: -e[1][2])[:TOP]:
        short = path[path.index("aioproducer/") :] if "aioproducer/" in path else Path(path).name
        lines.append(f"{ncalls / count:>12.2f} {tottime / count * 1e6:>15.3f}  {function} ({short}:{line})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="records per sampled run (≥ --seconds long)")
    parser.add_argument("--seconds", type=int, default=3, help="how long py-spy samples, from the timed part's start")
    parser.add_argument("--only", default=DEFAULT_ONLY, help=f"comma-separated, of {','.join(WORKLOADS)}")
    parser.add_argument("--keep-stacks", action="store_true", help="keep py-spy's folded stacks (for flame graphs)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.bootstrap, args.child, args.records)
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="aioproducer-profile-") as scratch:
        stacks = OUT if args.keep_stacks else Path(scratch)
        for name in args.only.split(","):
            with TansuBroker() as broker:
                lines = _sampled(broker.bootstrap_servers, name, args.records, args.seconds, stacks)
                lines += ["", *_traced(broker.bootstrap_servers, name, TRACED_RECORDS)]
            (OUT / f"{name}.txt").write_text("\n".join(lines) + "\n")
            print("\n".join(lines), "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
