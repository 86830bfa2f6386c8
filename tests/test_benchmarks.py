"""The benchmark's own machinery, without running a benchmark: which workloads run where, the Java peer's command and
a real (tiny) run of it, and the report built from recorded runs on both brokers."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from aioproducer.testing import TansuBroker, create_topic
from aioproducer.testing.kafka_process import jvm_command
from tests.benchmarks.asyncio_floor import IDIOMS
from tests.benchmarks.asyncio_floor import main as asyncio_floor
from tests.benchmarks.broker_count import count_records
from tests.benchmarks.java_peer import JavaPeer
from tests.benchmarks.report import write_report
from tests.benchmarks.run import schedule
from tests.benchmarks.workloads import RunSpec, plan

JAVA_WORKLOADS = {"enqueue_100B", "keyed_100B", "lz4_1KB", "zstd_1KB", "idempotent_100B", "idiom_callback_100B"}


def test_real_kafka_runs_the_throughput_workloads_and_java_joins_five() -> None:
    on_kafka = plan(broker="kafka")
    assert [w.name for w in on_kafka if w.mode != "idiom" and w.name != "idle_send_kafka"] == [
        "enqueue_100B",
        "send_many_100B",
        "keyed_100B",
        "lz4_1KB",
        "zstd_1KB",
        "gzip_1KB",
        "snappy_1KB",
        "idempotent_100B",
    ]
    assert {w.name for w in plan(broker="tansu") if "java" in w.clients} == JAVA_WORKLOADS
    assert {w.name for w in on_kafka if "java" in w.clients} == JAVA_WORKLOADS
    assert [w.clients for w in plan(("keyed_100B",), ("java",), "kafka")] == [("java",)]


def test_a_round_runs_each_workload_on_both_brokers_back_to_back() -> None:
    pairs = [(w.name, broker) for w, broker in schedule((), (), ["tansu", "kafka"])]
    assert pairs[:4] == [
        ("enqueue_100B", "tansu"),
        ("enqueue_100B", "kafka"),
        ("send_many_100B", "tansu"),
        (
            "send_many_100B",
            "kafka",
        ),
    ]
    assert ("latency_20k", "tansu") in pairs and ("latency_20k", "kafka") not in pairs
    assert [b for _, b in schedule(("keyed_100B",), (), ["kafka"])] == ["kafka"]


def test_the_benchmark_broker_gets_the_full_jit(tmp_path: Path) -> None:
    assert "-XX:TieredStopAtLevel=1" in jvm_command("kafka.Kafka", tmp_path, [])
    assert not any("TieredStopAtLevel" in flag for flag in jvm_command("kafka.Kafka", tmp_path, [], fast_start=False))


def _spec(**changes: Any) -> RunSpec:
    base: dict[str, Any] = {
        "client": "java",
        "workload": "keyed_100B",
        "mode": "loop",
        "bootstrap": "127.0.0.1:1",
        "topic": "t",
        "count": 300,
        "value_size": 100,
        "keyed": True,
        "compression": "lz4",
        "idempotent": False,
        "rate": 0,
        "buffer_memory": 0,
    }
    return RunSpec(**{**base, **changes})


def test_the_java_peer_command_names_the_workload() -> None:
    peer = JavaPeer()
    try:
        peer.libs = Path("/libs")
        command = peer.command(_spec())
        assert command[-8:-5] == ["127.0.0.1:1", "t", "300"]
        values, keys = Path(command[-5]), Path(command[-4])
        assert values.stat().st_size == 1024 * (4 + 100) and keys.stat().st_size == 10_000 * (4 + 9)
        assert command[-3:] == ["lz4", "false", "5"]
        assert peer.command(_spec(keyed=False, idempotent=True))[-4:-1] == ["-", "lz4", "true"]
        assert not any("TieredStopAtLevel" in part for part in command)
        with pytest.raises(ValueError, match="throughput loops only"):
            peer.command(_spec(mode="rate"))
    finally:
        peer.close()


@pytest.mark.skipif(shutil.which("javac") is None, reason="compiling the Java peer needs a JDK (javac)")
def test_the_java_peer_produces_and_the_count_agrees() -> None:
    """A tiny run end to end: the harness compiles against Kafka's kafka-clients jar, sends the warm-up record, an
    untimed pass and a timed one, and the independent count finds exactly those."""
    with TansuBroker() as broker, JavaPeer() as peer:
        create_topic(broker.bootstrap_servers, "java-peer", 2)
        result = peer.run(_spec(bootstrap=broker.bootstrap_servers, topic="java-peer", count=200), timeout_s=120)
        assert "error" not in result, result.get("error")
        assert (result["records"], result["untimed_records"], result["failed"]) == (200, 200, 0)
        assert result["elapsed_s"] > 0 and result["cpu_s"] > 0 and result["cold_elapsed_s"] > 0
        assert count_records(broker.bootstrap_servers, "java-peer") == 1 + 2 * 200


def _run(broker: str, workload: str, client: str, rate: float, **extra: Any) -> dict[str, Any]:
    records = 1000
    run = {
        "broker": broker,
        "workload": workload,
        "client": client,
        "round": 0,
        "load1": 1.0,
        "records": records,
        "elapsed_s": records / rate,
        "cpu_s": 0.5,
        "broker_cpu_s": 0.25,
        "peak_rss_mb": 30.0,
        "rss_before_mb": 20.0,
        "verified": True,
        "on_broker": records + 1,
    }
    return {**run, **extra}


def test_the_report_has_a_table_per_broker_with_the_java_producer(tmp_path: Path) -> None:
    meta = {"started": "now", "mode": "full", "rounds": 1, "machine": "test", "python": "3", "versions": {}}
    java = {"untimed_records": 1000, "cold_elapsed_s": 0.5, "cold_cpu_s": 1.0}
    runs = [
        _run("tansu", "enqueue_100B", "aioproducer", 1000.0),
        _run("tansu", "enqueue_100B", "java", 500.0, **java),
        _run("kafka", "enqueue_100B", "aioproducer", 400.0),
        _run("kafka", "enqueue_100B", "java", 800.0, **java),
        _run("kafka", "keyed_100B", "aioproducer", 100.0, verified=False, on_broker=7),
    ]
    write_report(meta, runs, tmp_path)
    text = (tmp_path / "results.md").read_text()
    assert "## Throughput on Tansu (embedded)" in text and "## Throughput on Apache Kafka 4.1.1 (one node)" in text
    tansu, kafka = text.split("## Throughput on Apache Kafka 4.1.1")[0], text.split("## Throughput on Apache Kafka")[1]
    assert "| keyless 100 B, enqueue loop | 1,000 | 500 (2.00x) |" in tansu
    assert "| keyless 100 B, enqueue loop | 400 | 800 (0.50x) |" in kafka
    assert "Java producer (kafka-clients)" in kafka
    assert "| keyless 100 B, enqueue loop | 2,000 | 800 | 1,000.00 | 500.00 |" in kafka  # first pass vs timed pass
    assert "Apache Kafka 4.1.1 (one node), keyed_100B, aioproducer: the broker holds 7 records, expected 1001" in text
    assert (tmp_path / "benchmark.png").is_file() and (tmp_path / "benchmark_kafka.png").is_file()
    # The per-peer targets: judged per broker, only where both sides ran.
    on_tansu, on_kafka = text.split("## Targets per idiom, codec and peer on Apache Kafka")
    assert "| enqueue_100B ≥ 1x the Java producer | 2.00x | **met** |" in on_tansu.split("## Targets per")[-1]
    assert "| enqueue_100B ≥ 1x the Java producer | 0.50x | **missed** |" in on_kafka.split("## Throughput")[0]
    assert "keyed_100B ≥ 1x" not in text


def test_a_kafka_only_run_reports_kafka_alone(tmp_path: Path) -> None:
    meta = {"started": "now", "mode": "quick", "rounds": 1, "machine": "test", "python": "3", "versions": {}}
    write_report(meta, [_run("kafka", "enqueue_100B", "aioproducer", 400.0)], tmp_path)
    text = (tmp_path / "results.md").read_text()
    assert "Throughput on Apache Kafka" in text and "Tansu (embedded)" not in text and "## Targets" not in text
    assert not (tmp_path / "benchmark.png").exists() and (tmp_path / "benchmark_kafka.png").is_file()


def test_the_asyncio_floor_is_measured_per_idiom(tmp_path: Path) -> None:
    asyncio_floor(["--items", "2000", "--rounds", "1", "--out", str(tmp_path)])
    rows = [line for line in (tmp_path / "asyncio_floor.md").read_text().splitlines() if line.startswith("| ")]
    header, *measured = rows
    assert "CPU-µs per record" in header
    assert [row.split("|")[1].strip() for row in measured] == [label for label, _ in IDIOMS.values()]
    assert all(float(row.split("|")[2]) > 0 for row in measured)
