"""Adaptive partitioning (KIP-794) under a slow or stopped broker, side by side: aioproducer and the Java producer
send keyless records as fast as they can to three real Kafka 4.1.1 nodes, through the fault proxy
(tests/fault_proxy.py), and one node is slowed (every request held 50 ms) or stops taking requests (the proxy stops
reading) halfway through. Records acknowledged per second before and during the fault; adaptive partitioning on
(the default; with partitioner.availability.timeout.ms=300 for the stopped broker) and off, as a control.

    python -m tests.benchmarks.adaptive_bench [--quick] [--rounds N] [--clients aioproducer,java]

The topic has six partitions of one replica, two per node, so only the producer's path to the faulty node is hurt
(no follower holds acks=all back). Each run is its own process, after an untimed warm-up pass of the same load;
clients alternate, order rotated each round; medians with min-max. Writes results/adaptive.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from tests.benchmarks.java_peer import JavaUnavailableError, compile_java

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: fault_proxy and its helpers

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "AdaptiveBench.java"
CLIENTS = ("aioproducer", "java")
FAULTS = ("slow", "stopped")
VALUE_SIZE = 1000
PARTITIONS = 6
SLOW_S = 0.05  # what the proxy holds each request to the slow node
AVAILABILITY_TIMEOUT_MS = 300  # for the stopped node: Java's default is 0 (off)
T = TypeVar("T")


def _settings(fault: str, adaptive: bool) -> dict[str, str]:
    """The producer settings of a run, Java's names."""
    if not adaptive:
        return {"partitioner.adaptive.partitioning.enable": "false"}
    if fault == "stopped":
        return {"partitioner.availability.timeout.ms": str(AVAILABILITY_TIMEOUT_MS)}
    return {}


# -- aioproducer's worker (one process per run) ----------------------------------------------------------------------
async def _aioproducer(spec: dict[str, Any]) -> dict[str, float]:
    from aioproducer import Producer

    values = [os.urandom(VALUE_SIZE) for _ in range(64)]
    loop = asyncio.get_running_loop()
    windows = [0, 0]
    failed = 0
    bounds: list[float] = []

    def settled(delivery: Any) -> None:
        nonlocal failed
        if delivery.exception() is not None:
            failed += 1
            return
        now = loop.time()
        if bounds[0] + 1 <= now < bounds[1]:
            windows[0] += 1
        elif bounds[1] + 1 <= now < bounds[2]:
            windows[1] += 1

    async with Producer(spec["bootstrap"], config={"linger.ms": "5", **spec["settings"]}) as producer:
        n = 0
        end = loop.time() + spec["warmup_s"]
        while loop.time() < end:
            await producer.enqueue(spec["topic"], values[n % 64])
            n += 1
            if n % 100 == 0:
                await asyncio.sleep(0)
        await producer.flush()
        print("START", flush=True)
        started = loop.time()
        bounds[:] = [started, started + spec["before_s"], started + spec["before_s"] + spec["during_s"]]
        while loop.time() < bounds[2]:
            delivery = await producer.enqueue(spec["topic"], values[n % 64])
            delivery.add_done_callback(settled)
            n += 1
            if n % 100 == 0:
                await asyncio.sleep(0)
        await producer.flush()
    return {
        "before": windows[0] / (spec["before_s"] - 1),
        "during": windows[1] / (spec["during_s"] - 1),
        "failed": failed,
    }


# -- orchestration -------------------------------------------------------------------------------------------------
class ProxyThread:
    """The fault proxy on an event loop of its own, so that the orchestrator can block on its clients."""

    def __init__(self) -> None:
        from fault_proxy import FaultProxy

        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.proxy = FaultProxy(receive_buffer=None)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def do(self, fn: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def close(self) -> None:
        self.call(self.proxy.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


def _compile_java(libs: Path, into: Path) -> bool:
    """Whether the Java harness compiled; if not, its rows are left out (the reason printed)."""
    try:
        compile_java(JAVA_SOURCE, libs, into)
    except JavaUnavailableError as exc:
        print(f"{exc}; the Java rows are left out", file=sys.stderr)
        return False
    return True


def _run(command: list[str], proxy: ProxyThread, slow_node: str, fault: str, before_s: float, during_s: float) -> Any:
    """One client process: the fault goes on `before_s` after its START line, and off `during_s` later."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert process.stdout is not None
    try:
        for line in process.stdout:
            if line.strip() == "START":
                break
        time.sleep(before_s)
        if fault == "slow":
            proxy.do(proxy.proxy.delay, slow_node, SLOW_S)
        else:
            proxy.do(proxy.proxy.stop_reading, slow_node)
        time.sleep(during_s)
        proxy.do(proxy.proxy.delay, slow_node, 0.0)
        proxy.do(proxy.proxy.resume_reading, slow_node)
        out, err = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
    if process.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed: {err[-2000:]}")
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def _one_run(
    cluster: Any,
    proxy: ProxyThread,
    bootstrap: str,
    client: str,
    fault: str,
    adaptive: bool,
    classes: str,
    libs: Path,
    timing: tuple[float, float, float],
) -> Any:
    warmup_s, before_s, during_s = timing
    replicas = [[p % 3 + 1] for p in range(PARTITIONS)]
    topic = cluster.create_topic(f"adaptive-bench-{uuid.uuid4().hex[:8]}", PARTITIONS, replica_assignment=replicas)
    settings = _settings(fault, adaptive)
    if client == "java":
        command = [
            "java", "-Xmx512m", "-cp", f"{classes}:{libs}/*", "AdaptiveBench", bootstrap, topic, str(VALUE_SIZE),
            str(int(warmup_s * 1000)), str(int(before_s * 1000)), str(int(during_s * 1000)),
            *(f"{k}={v}" for k, v in settings.items()),
        ]  # fmt: skip
    else:
        spec = {
            "bootstrap": bootstrap,
            "topic": topic,
            "settings": settings,
            "warmup_s": warmup_s,
            "before_s": before_s,
            "during_s": during_s,
        }
        command = [sys.executable, "-m", "tests.benchmarks.adaptive_bench", "--worker", json.dumps(spec)]
    return _run(command, proxy, cluster.bootstrap(nodes=[3]), fault, before_s, during_s)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(_aioproducer(json.loads(args.worker)))))
        return

    from aioproducer.testing import KafkaCluster, kafka_libs

    warmup_s, before_s, during_s = (2.0, 3.0, 4.0) if args.quick else (3.0, 4.0, 6.0)
    rounds = 1 if args.quick else args.rounds
    clients = [c for c in args.clients.split(",") if c in CLIENTS]
    results: dict[tuple[str, str, bool], list[dict[str, float]]] = {}
    with KafkaCluster(nodes=3, fast_start=False) as cluster, tempfile.TemporaryDirectory() as classes:
        libs = kafka_libs(cluster.version)
        if "java" in clients and not _compile_java(libs, Path(classes)):
            clients.remove("java")
        proxy = ProxyThread()
        try:
            bootstrap = ",".join(proxy.call(proxy.proxy.front(cluster.bootstrap(nodes=[n]))) for n in cluster.node_ids)
            timing = (warmup_s, before_s, during_s)
            for round_number in range(rounds):
                order = clients if round_number % 2 == 0 else list(reversed(clients))
                for fault in FAULTS:
                    for adaptive in (True, False):
                        for client in order:
                            result = _one_run(cluster, proxy, bootstrap, client, fault, adaptive, classes, libs, timing)
                            results.setdefault((client, fault, adaptive), []).append(result)
                            print(
                                f"round {round_number + 1} {client:12} {fault:8} adaptive={adaptive!s:5}: "
                                f"{result['before']:>9.0f} before, {result['during']:>9.0f} during (records/s), "
                                f"{result['failed']} failed",
                                flush=True,
                            )
        finally:
            proxy.close()
    _write(results, clients, rounds, before_s, during_s)


def _write(
    results: dict[tuple[str, str, bool], list[dict[str, float]]],
    clients: list[str],
    rounds: int,
    before_s: float,
    during_s: float,
) -> None:
    def cell(runs: list[dict[str, float]], key: str) -> str:
        values = [r[key] for r in runs]
        return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"

    labels = {"aioproducer": "aioproducer (enqueue loop)", "java": "Java KafkaProducer 4.1.1"}
    faults = {
        "slow": f"node 3 slowed ({SLOW_S * 1000:.0f} ms per request)",
        "stopped": f"node 3 stops taking requests (availability timeout {AVAILABILITY_TIMEOUT_MS} ms)",
    }
    lines = [
        "# Adaptive partitioning under a slow or stopped broker",
        "",
        f"`python -m tests.benchmarks.adaptive_bench`: keyless records of {VALUE_SIZE} B, acks=all + idempotence, "
        f"linger 5 ms, sent as fast as buffer memory lets to three real Kafka 4.1.1 nodes through the fault proxy; "
        f"a topic of {PARTITIONS} partitions of one replica, two per node. Records acknowledged per second in the "
        f"{before_s - 1:.0f} s before the fault and the {during_s - 1:.0f} s during it (the first second of each "
        f"left out); median (min-max) of {rounds} round(s), clients alternating. Adaptive partitioning off is "
        "the control (`partitioner.adaptive.partitioning.enable=false`).",
        "",
        "| client | fault | adaptive | before (rec/s) | during (rec/s) | during / before |",
        "|---|---|---|---|---|---|",
    ]
    for fault in FAULTS:
        for adaptive in (True, False):
            for client in clients:
                runs = results.get((client, fault, adaptive), [])
                if not runs:
                    continue
                ratio = statistics.median(r["during"] / r["before"] if r["before"] else 0.0 for r in runs)
                lines.append(
                    f"| {labels[client]} | {faults[fault]} | {'on' if adaptive else 'off'} | {cell(runs, 'before')} | "
                    f"{cell(runs, 'during')} | {ratio:.2f} |"
                )
    lines.append("")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "adaptive.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
