"""The benchmark's own machinery, without running a benchmark: which rows pit which idioms against each other, the
peers' settings and command lines, the timed window the orchestrator reads the broker around (real tiny runs on
Tansu), the judging of what the broker holds, and the report built from recorded runs."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from aioproducer.testing import TansuBroker, create_topic
from aioproducer.testing.kafka_process import jvm_command
from tests.benchmarks.asyncio_floor import IDIOMS as FLOOR_IDIOMS
from tests.benchmarks.asyncio_floor import main as asyncio_floor
from tests.benchmarks.batch_cost import main as batch_cost
from tests.benchmarks.bench_async_clients import AioproducerClient
from tests.benchmarks.bench_sync_clients import confluent_config
from tests.benchmarks.broker_count import count_records
from tests.benchmarks.driver import drive
from tests.benchmarks.java_peer import JavaPeer, perf_test_result
from tests.benchmarks.report import write_report
from tests.benchmarks.rows import IDIOMS, ROWS, rows_named, runs_of
from tests.benchmarks.run import ROOT, sample_faults, schedule
from tests.benchmarks.spark_bench import common_version
from tests.benchmarks.workloads import RunSpec, key_pool, plan, records_for, value_pool

JAVA = shutil.which("javac") is not None


def test_every_row_has_the_fastest_peer_idioms_and_acks_all_everywhere() -> None:
    rows = {row.name: row for row in ROWS}
    for name in ("enqueue_100B", "send_many_100B", "lz4_1KB", "zstd_1KB", "snappy_1KB", "gzip_1KB"):
        peers = rows[name].peers
        assert {"confluent_sync.produce", "java.warm", "java.cold", "java.perf_test"} <= set(peers), name
    assert "confluent_sync.callback" in rows["enqueue_100B"].peers
    # perf-test sends no keys: it cannot do the keyed row's work.
    assert "java.perf_test" not in rows["keyed_100B"].peers and "java.warm" in rows["keyed_100B"].peers
    # The done-callback row is compared with the peers that also learn each record's outcome.
    assert "confluent_sync.produce" not in rows["callback_100B"].peers
    assert "confluent_sync.callback" in rows["callback_100B"].peers
    # Every peer row's idiom and its peers do the same work: the idioms are looked up, none is invented.
    assert all(idiom in IDIOMS for row in ROWS for idiom in row.idioms())
    assert all(w.idempotent for w in plan(broker="kafka")) and plan(broker="kafka")


def test_rows_that_share_work_share_their_peer_runs_and_missing_features_drop_out() -> None:
    works = runs_of(rows_named(("enqueue_100B", "send_many_100B", "callback_100B")))
    assert [work.name for work, _ in works] == ["100B"]
    names = [idiom.name for idiom in works[0][1]]
    assert len(names) == len(set(names))  # each idiom once per work, however many rows share it
    assert {"aioproducer.enqueue", "aioproducer.send_many", "aioproducer.callback", "java.warm"} <= set(names)
    columnar = rows_named(("table_pyarrow_100B",))
    assert runs_of(columnar) == []  # without send_table the row's peers are not run for nothing
    with_it = runs_of(columnar, available=frozenset({"send_table"}))
    assert [i.name for _, ids in with_it for i in ids] == [
        "aioproducer.table_pyarrow",
        "aioproducer.send_many",
        "confluent_sync.produce",
    ]
    assert [i.client for _, ids in runs_of(rows_named(("keyed_100B",)), ("java",)) for i in ids] == ["java", "java"]
    with pytest.raises(ValueError, match="no such row"):
        rows_named(("enqueue_1GB",))


def _spec(**changes: Any) -> RunSpec:
    base: dict[str, Any] = {
        "client": "java",
        "workload": "100B_keyed",
        "mode": "loop",
        "bootstrap": "127.0.0.1:1",
        "topic": "t",
        "count": 300,
        "value_size": 100,
        "keyed": True,
        "compression": "lz4",
        "idempotent": True,
        "rate": 0,
        "buffer_memory": 0,
        "extra": {"style": "warm", "batching": "defaults", "handshake": True},
    }
    return RunSpec(**{**base, **changes})


def test_defaults_leave_batching_alone_and_matched_batching_is_the_same_for_everyone() -> None:
    defaults, matched = _spec(extra={"batching": "defaults"}), _spec(extra={"batching": "matched"})
    assert "linger.ms" not in confluent_config(defaults) and "batch.size" not in confluent_config(defaults)
    assert confluent_config(defaults)["acks"] == "all" and confluent_config(defaults)["enable.idempotence"] is True
    assert (confluent_config(matched)["linger.ms"], confluent_config(matched)["batch.size"]) == (5, 16384)
    ours = AioproducerClient(_spec(client="aioproducer", extra={"batching": "matched"})).producer.config
    assert (ours.linger_ms, ours.batch_size, ours.effective_batch_max_size) == (5, 16384, 16384)
    assert ours.acks == -1 and ours.enable_idempotence is True
    default_ours = AioproducerClient(_spec(client="aioproducer", extra={"batching": "defaults"})).producer.config
    assert default_ours.batch_max_size is None and default_ours.acks == -1


def test_the_java_peer_command_names_the_workload_and_the_perf_test_is_run_as_its_script_runs_it() -> None:
    peer = JavaPeer()
    try:
        peer.libs = Path("/libs")
        command = peer.command(_spec())
        assert command[-11:-8] == ["127.0.0.1:1", "t", "300"]
        values, keys = Path(command[-8]), Path(command[-7])
        assert values.stat().st_size == 1024 * (4 + 100) and keys.stat().st_size == 10_000 * (4 + 9)
        assert command[-6:] == ["lz4", "true", "-", "-", "warm", "true"]
        matched = peer.command(_spec(keyed=False, extra={"style": "cold", "batching": "matched"}))
        assert matched[-7:] == ["-", "lz4", "true", "5", "16384", "cold", "false"]
        assert not any("TieredStopAtLevel" in part for part in command)
        with pytest.raises(ValueError, match="throughput loops only"):
            peer.command(_spec(mode="rate"))
        perf = peer.perf_test_command(_spec(keyed=False, compression="zstd", extra={"batching": "matched"}))
        assert "org.apache.kafka.tools.ProducerPerformance" in perf and "-Xmx512M" in perf
        props = perf[perf.index("--producer-props") + 1 :]
        assert {"acks=all", "enable.idempotence=true", "compression.type=zstd", "linger.ms=5"} <= set(props)
        payloads = Path(perf[perf.index("--payload-file") + 1]).read_bytes().split(b"\n")
        assert payloads == value_pool(100, compressible=True)  # the same bytes the other clients send
        with pytest.raises(ValueError, match="no keys"):
            peer.perf_test_command(_spec())
    finally:
        peer.close()


def test_the_perf_test_total_is_read_from_its_closing_line() -> None:
    out = (
        "119767 records sent, 23953.4 records/sec (2.28 MB/sec), 1.2 ms avg latency, 201.0 ms max latency.\n"
        "500000 records sent, 250000.0 records/sec (23.84 MB/sec), 32.53 ms avg latency, 412.00 ms max latency, "
        "12 ms 50th, 95 ms 95th, 140 ms 99th, 300 ms 99.9th.\n"
    )
    result = perf_test_result(out)
    assert result["records"] == 500_000 and result["elapsed_s"] == pytest.approx(2.0)
    assert "error" in perf_test_result("Exception in thread main")


def test_the_records_are_the_same_bytes_for_everyone_and_perf_test_can_read_them() -> None:
    for compressible in (False, True):
        pool = value_pool(100, compressible)
        assert pool == value_pool(100, compressible)  # fixed seed
        assert len(set(pool)) == 1024 and all(len(v) == 100 and v.isascii() and b"\n" not in v for v in pool)
    # The uncompressed pool is text of high entropy, the compressible one compresses severalfold.
    import zlib

    plain, salad = b"".join(value_pool(1000, False)), b"".join(value_pool(1000, True))
    assert len(zlib.compress(plain)) > 0.7 * len(plain) and len(zlib.compress(salad)) < 0.4 * len(salad)


def test_a_sample_read_back_must_hold_the_runs_own_records() -> None:
    keyed = _spec(keyed=True, compression="none")
    values, keys = records_for(2000, value_pool(100, False)), records_for(2000, key_pool())
    pool = set(value_pool(100, False))
    assert sample_faults(list(zip(keys, values, strict=True)), keyed, pool) == []
    swapped = list(zip(keys[1:], values[:-1], strict=True))  # each key with its neighbour's value
    assert len(sample_faults(swapped, keyed, pool)) == len(swapped)
    keyless = _spec(keyed=False, compression="none")
    assert sample_faults([(None, values[0])], keyless, pool) == []
    assert sample_faults([(b"key-00001", values[0])], keyless, pool)
    assert sample_faults([(None, b"x" * 100)], keyless, pool)


def test_the_worker_is_timed_between_ready_and_result(tmp_path: Path) -> None:
    """The broker readings bracket the timed part exactly: at READY only the warm-up record is on the broker, at the
    result line every timed record is."""
    with TansuBroker() as broker:
        create_topic(broker.bootstrap_servers, "window", 2)
        spec = _spec(
            client="aioproducer",
            bootstrap=broker.bootstrap_servers,
            topic="window",
            count=500,
            keyed=False,
            compression="none",
            extra={"style": "loop", "batching": "defaults", "handshake": True},
        )
        seen: list[int] = []
        command = [sys.executable, "-m", "tests.benchmarks.bench_worker", __import__("json").dumps(spec.to_json())]

        def reading() -> None:
            seen.append(count_records(broker.bootstrap_servers, "window"))

        finished = drive(command, cwd=ROOT, timeout_s=120, on_ready=reading, on_result=reading)
    assert "error" not in finished.result, finished.result.get("error")
    assert seen == [1, 501]
    assert finished.result["records"] == 500 and finished.cpu_s >= finished.result["cpu_s"] > 0


@pytest.mark.skipif(not JAVA, reason="compiling the Java peer needs a JDK (javac)")
def test_the_java_peers_produce_and_the_count_agrees() -> None:
    """Tiny runs end to end: the harness compiled against Kafka's kafka-clients jar sends the warm-up record and an
    untimed pass before READY and the timed pass after it; perf-test (from kafka-tools) sends exactly its records,
    the shared pool's bytes."""
    with TansuBroker() as broker, JavaPeer() as peer:
        create_topic(broker.bootstrap_servers, "java-peer", 2)
        create_topic(broker.bootstrap_servers, "perf-test", 2)
        seen: list[int] = []
        spec = _spec(bootstrap=broker.bootstrap_servers, topic="java-peer", count=200)
        finished = drive(
            peer.command(spec),
            cwd=ROOT,
            timeout_s=120,
            on_ready=lambda: seen.append(count_records(broker.bootstrap_servers, "java-peer")),
        )
        result = finished.result
        assert "error" not in result, result.get("error")
        assert (result["records"], result["untimed_records"], result["failed"]) == (200, 200, 0)
        # This check once failed on a fast run: the JVM counts process CPU in clock ticks (10 ms on Linux), so a timed
        # pass of 200 records that took 7.5 ms may read 0 CPU. The untimed pass (the JVM's warm-up) always spans ticks.
        assert result["elapsed_s"] > 0 and result["cpu_s"] >= 0 and result["untimed_elapsed_s"] > 0
        assert result["untimed_cpu_s"] > 0
        assert seen == [1 + 200] and count_records(broker.bootstrap_servers, "java-peer") == 1 + 2 * 200
        perf = _spec(client="perf_test", bootstrap=broker.bootstrap_servers, topic="perf-test", keyed=False, count=300)
        done = drive(peer.perf_test_command(perf), cwd=ROOT, timeout_s=120, expects_result=False)
        assert done.returncode == 0, done.stdout[-2000:]
        assert perf_test_result(done.stdout)["records"] == 300 and done.cpu_s > 0
        assert count_records(broker.bootstrap_servers, "perf-test") == 300


def test_the_other_workloads_run_on_kafka_by_default_and_alternate_brokers_when_asked() -> None:
    pairs = [(w.name, broker) for w, broker in schedule((), (), ["tansu", "kafka"])]
    assert pairs[:2] == [("latency_20k", "tansu"), ("latency_20k", "kafka")]
    assert [b for _, b in schedule(("idle_send",), (), ["kafka"])] == ["kafka"]
    assert "aiokafka" in next(w.clients for w in plan(("idle_send",)))


def test_the_benchmark_broker_gets_the_full_jit(tmp_path: Path) -> None:
    assert "-XX:TieredStopAtLevel=1" in jvm_command("kafka.Kafka", tmp_path, [])
    assert not any("TieredStopAtLevel" in flag for flag in jvm_command("kafka.Kafka", tmp_path, [], fast_start=False))


def _run(work: str, idiom: str, rate: float, batching: str = "defaults", **extra: Any) -> dict[str, Any]:
    records = 1000
    run = {
        "part": "rows",
        "broker": "kafka",
        "workload": work,
        "idiom": idiom,
        "client": IDIOMS[idiom].client,
        "batching": batching,
        "round": 0,
        "load1": 1.0,
        "records": records,
        "elapsed_s": records / rate,
        "cpu_s": 0.5,
        "cpu_window_s": records / rate,
        "broker_cpu_s": 0.25,
        "verified": True,
        "on_broker": records,
    }
    return {**run, **extra}


def test_the_report_names_the_fastest_peer_idiom_and_claims_nothing_unverified(tmp_path: Path) -> None:
    meta = {
        "started": "now",
        "mode": "full",
        "rounds": 2,
        "machine": "test",
        "python": "3",
        "versions": {},
        "available": [],
        "rows": ["enqueue_100B", "keyed_100B", "table_pyarrow_100B"],
    }
    runs = [
        _run("100B", "aioproducer.enqueue", 800_000.0),
        _run("100B", "aioproducer.enqueue", 1_000_000.0),
        _run("100B", "confluent_sync.produce", 900_000.0),
        _run("100B", "confluent_sync.produce", 1_100_000.0),
        _run("100B", "confluent_sync.callback", 700_000.0),
        # Faster, but the broker did not hold its records: it must not become the fastest peer.
        _run("100B", "java.perf_test", 5_000_000.0, verified=False, on_broker=7),
        _run("100B", "java.warm", 600_000.0),
        _run("100B", "java.cold", 400_000.0),
        _run("100B", "aioproducer.enqueue", 2_000_000.0, batching="matched"),
        _run("100B", "confluent_sync.produce", 1_000_000.0, batching="matched"),
        _run("100B_keyed", "aioproducer.enqueue", 500_000.0),
        {**_run("100B_keyed", "java.warm", 1.0), "error": "boom\nthe JVM fell over"},
    ]
    write_report(meta, runs, tmp_path)
    text = (tmp_path / "results.md").read_text()
    defaults, matched = text.split("### Every idiom")[0].split("### Matched batching")
    assert (
        "| 100 B keyless, `enqueue` loop | 900,000 (800-1,000 k) | confluent-kafka `produce` loop, no callback "
        "| 1,000,000 (900-1,100 k) | 0.90x below | 600,000 | 1.50x **≥ 1** |" in defaults
    )
    assert "| 100 B keyed, `enqueue` loop | 500,000 (500-500 k) | no verified peer run |" in defaults
    assert "| 2.00x **≥ 1** |" in matched
    assert "| 100 B keyless | kafka-producer-perf-test (cold JVM) | - | - | - | - | - | 0 of 1 |" in text
    # CPU per million records and cores: 0.5 CPU-s over 1000 records at 1 M records/s.
    assert (
        "| 100 B keyless | aioproducer `enqueue` loop | 900,000 | 800-1,000 k | 500.00 | 450.00 | 250.00 | 2 of 2 |"
        in text
    )
    assert "grew by 7 records, the client reported 1000" in text and "the JVM fell over" in text
    assert "this build of aioproducer has no `Producer.send_table`" in text
    assert "keyless 100 B, `send_many`" not in text  # a row that was not run is not reported
    assert (tmp_path / "peers.png").is_file()


def test_the_newest_spark_both_registries_serve_is_chosen() -> None:
    assert common_version(["3.5.1", "4.0.0", "4.2.0", "4.3.0", "4.3.0rc1"], ["4.0.0", "4.2.0", "4.2.1"]) == "4.2.0"
    assert common_version(["4.2.0"], ["4.2.0", "4.3.0"]) == "4.2.0"
    with pytest.raises(RuntimeError, match="no Spark version"):
        common_version(["3.5.0"], ["4.0.0"])


def test_the_asyncio_floor_is_measured_per_idiom(tmp_path: Path) -> None:
    asyncio_floor(["--items", "2000", "--rounds", "1", "--out", str(tmp_path)])
    rows = [line for line in (tmp_path / "asyncio_floor.md").read_text().splitlines() if line.startswith("| ")]
    header, *measured = rows
    assert "CPU-µs per record" in header
    assert [row.split("|")[1].strip() for row in measured] == [label for label, _ in FLOOR_IDIOMS.values()]
    assert all(float(row.split("|")[2]) > 0 for row in measured)


def test_the_cost_of_a_batch_is_measured_from_two_batchings(tmp_path: Path) -> None:
    batch_cost(["--records", "5000", "--rounds", "1", "--out", str(tmp_path)])
    lines = (tmp_path / "batch_cost.md").read_text().splitlines()
    table = [row.split("|") for row in lines if row.startswith("| ") and "---" not in row]
    rows = {cells[1].strip(): cells[2:4] for cells in table}
    assert set(rows) == {"batching", "fixed", "defaults"}
    batches = {name: int(rows[name][1].strip().replace(",", "")) for name in ("fixed", "defaults")}
    # 5,000 records of 100 B fill about 34 fixed 16 KiB batches; grown batches are fewer.
    assert 30 <= batches["fixed"] <= 40 and batches["defaults"] < batches["fixed"], batches
    assert any(line.startswith("Each extra batch: **") for line in lines)
