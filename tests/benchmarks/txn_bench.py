"""Transactional throughput side by side: transactions of 1 k and 10 k records of 100 B, committed one after the other,
by aioproducer (enqueue loop and send_many), confluent-kafka's Producer and the Java producer, against one real Kafka
node of the default release (transactions need a real coordinator). Each run is its own process; clients alternate;
medians of rounds.

    python -m tests.benchmarks.txn_bench [--quick] [--rounds N] [--clients aioproducer,java,...]

Writes results/transactions.md. The Java client is compiled from java/TxnBench.java with `javac` against the jars
`aioproducer.testing.kafka_libs()` fetches; without `javac` its rows are left out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aioproducer.testing.kafka_jars import DEFAULT_KAFKA_VERSION
from tests.benchmarks.java_peer import JavaUnavailableError, compile_java

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "TxnBench.java"
CLIENTS = ("aioproducer", "aioproducer_send_many", "confluent", "java")
LABELS = {
    "aioproducer": "aioproducer (enqueue loop)",
    "aioproducer_send_many": "aioproducer (send_many)",
    "confluent": "confluent-kafka Producer",
    "java": f"Java KafkaProducer {DEFAULT_KAFKA_VERSION}",
}
SIZES = (1_000, 10_000)
VALUE_SIZE = 100
# Every client first runs an untimed pass of the same transactions in the same process (warm peers: the JVM's JIT,
# librdkafka's and our connections and coordinator lookups), then the timed one.


def _values() -> list[bytes]:
    rng = random.Random(7)
    return [rng.randbytes(VALUE_SIZE) for _ in range(1024)]


# -- workers (one process per run) ---------------------------------------------------------------------------------
async def _aioproducer(spec: dict[str, Any], bulk: bool) -> float:
    from aioproducer import Producer, ProducerRecord

    values, topic, per = _values(), spec["topic"], spec["per_transaction"]

    async def one(start: int) -> None:
        await producer.begin_transaction()
        if bulk:
            records = [ProducerRecord(topic, values[(start + i) % 1024]) for i in range(per)]
            await producer.send_many(records)
        else:
            for i in range(per):
                await producer.enqueue(topic, values[(start + i) % 1024])
        await producer.commit_transaction()

    async with Producer(spec["bootstrap"], transactional_id=spec["transactional_id"], linger_ms=5) as producer:
        for t in range(spec["transactions"]):
            await one(t * per)
        started = time.perf_counter()
        for t in range(spec["transactions"]):
            await one(t * per)
        return time.perf_counter() - started


def _confluent(spec: dict[str, Any]) -> float:
    import confluent_kafka

    values, topic, per = _values(), spec["topic"], spec["per_transaction"]
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": spec["bootstrap"], "transactional.id": spec["transactional_id"], "linger.ms": 5}
    )
    producer.init_transactions(60)

    def one(start: int) -> None:
        producer.begin_transaction()
        for i in range(per):
            while True:
                try:
                    producer.produce(topic, values[(start + i) % 1024])
                    break
                except BufferError:
                    producer.poll(0.005)
            if i % 1000 == 0:
                producer.poll(0)
        producer.commit_transaction(60)  # flushes first

    for t in range(spec["transactions"]):
        one(t * per)
    started = time.perf_counter()
    for t in range(spec["transactions"]):
        one(t * per)
    return time.perf_counter() - started


def worker(spec: dict[str, Any]) -> None:
    client = spec["client"]
    if client == "confluent":
        seconds = _confluent(spec)
    else:
        seconds = asyncio.run(_aioproducer(spec, bulk=client == "aioproducer_send_many"))
    print(json.dumps({"seconds": seconds, "records": spec["transactions"] * spec["per_transaction"]}))


# -- orchestration -------------------------------------------------------------------------------------------------
def _compile_java(libs: Path, into: Path) -> bool:
    """Whether the Java harness compiled; if not, its rows are left out (the reason printed)."""
    try:
        compile_java(JAVA_SOURCE, libs, into)
    except JavaUnavailableError as exc:
        print(f"{exc}; the Java rows are left out", file=sys.stderr)
        return False
    return True


def _run(command: list[str]) -> tuple[dict[str, Any], float]:
    """One worker process: its JSON result and the CPU seconds it used (all threads, start-up included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT, timeout=1200)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed: {done.stderr[-2000:]}")
    line = [line for line in done.stdout.splitlines() if line.startswith("{")][-1]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(line), cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    args = parser.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return

    from aioproducer.testing import KafkaCluster, kafka_libs, read_back

    records = 20_000 if args.quick else 100_000
    clients = [c for c in args.clients.split(",") if c in CLIENTS]
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    with KafkaCluster(nodes=1, fast_start=False) as cluster, tempfile.TemporaryDirectory() as classes:
        libs = kafka_libs(cluster.version)
        if "java" in clients and not _compile_java(libs, Path(classes)):
            clients.remove("java")
        # Round 0 is untimed: the broker's JIT warms on every client's traffic before any round counts (its first
        # transactions ran at about half the pace of the third round's).
        for round_number in range(-1, args.rounds):
            order = clients if round_number % 2 == 0 else list(reversed(clients))
            for per in SIZES:
                for client in order:
                    topic = cluster.create_topic(f"txn-bench-{uuid.uuid4().hex[:8]}", 4)
                    spec = {
                        "client": client,
                        "bootstrap": cluster.bootstrap_servers,
                        "topic": topic,
                        "transactional_id": f"bench-{client}-{uuid.uuid4().hex[:8]}",
                        "per_transaction": per,
                        "transactions": records // per,
                    }
                    if client == "java":
                        command = [
                            "java", "-Xmx512m", "-cp", f"{classes}:{libs}/*", "TxnBench", spec["bootstrap"], topic,
                            spec["transactional_id"], str(per), str(spec["transactions"]), str(VALUE_SIZE),
                            str(spec["transactions"]),
                        ]  # fmt: skip
                    else:
                        command = [sys.executable, "-m", "tests.benchmarks.txn_bench", "--worker", json.dumps(spec)]
                    result, cpu = _run(command)
                    # Counted on the broker by a read_committed consumer: the warm-up and the timed transactions.
                    committed = len(read_back(cluster.bootstrap_servers, topic, isolation_level="read_committed"))
                    if committed != 2 * result["records"]:
                        raise RuntimeError(f"{client}: {committed} records committed, {2 * result['records']} sent")
                    rate = result["records"] / result["seconds"]
                    if round_number >= 0:
                        results.setdefault((client, per), []).append((rate, cpu))
                    label = f"round {round_number + 1}" if round_number >= 0 else "warm-up"
                    print(f"{label} {client:24} {per:>6}/txn: {rate:>9.0f} records/s, {cpu:.1f} CPU-s")
    _write(results, clients, records, args.rounds)


def _write(
    results: dict[tuple[str, int], list[tuple[float, float]]], clients: list[str], records: int, rounds: int
) -> None:
    lines = [
        "# Transactional throughput",
        "",
        f"`python -m tests.benchmarks.txn_bench`: {records:,} records of {VALUE_SIZE} B per run, in transactions of "
        f"1 k or 10 k records committed one after the other (linger 5 ms, acks=all, idempotence), against one real "
        f"Kafka {DEFAULT_KAFKA_VERSION} node (transaction version 2) on the same 2-core machine, warmed by one "
        "untimed round of every client; each client first runs the same transactions untimed in the same process "
        f"(warm peers), then the timed ones; median (min-max) of {rounds} rounds, clients alternating, "
        "read_committed counts checked on the broker. CPU-s: the client process's, "
        "warm-up and start-up included (the JVM's start and JIT for Java).",
        "",
        "| client | 1 k records / txn | 10 k records / txn | CPU-s (1 k, 10 k) |",
        "|---|---|---|---|",
    ]
    for client in clients:
        cells, cpus = [], []
        for per in SIZES:
            runs = results.get((client, per), [])
            rate = statistics.median(r for r, _ in runs) if runs else float("nan")
            spread = f"{min(r for r, _ in runs):,.0f}-{max(r for r, _ in runs):,.0f}" if runs else "-"
            cells.append(f"{rate:,.0f} rec/s ({spread}; {rate / per:,.1f} txn/s)")
            cpus.append(f"{statistics.median(c for _, c in runs):.1f}" if runs else "-")
        lines.append(f"| {LABELS[client]} | {cells[0]} | {cells[1]} | {', '.join(cpus)} |")
    lines.append("")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "transactions.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
