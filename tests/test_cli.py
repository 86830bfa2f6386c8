"""The `aioproducer` command line, run as a user runs it (a subprocess: real output, real exit status) against the
embedded broker (Tansu) and real Apache Kafka, each result judged by reading the topic back independently."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from security_proxies import KafkaProxy, SaslServer

from aioproducer.testing import KafkaCluster, create_topic, read_back

CONSOLE_SCRIPT = Path(sys.executable).with_name("aioproducer")


@dataclass(frozen=True)
class Target:
    name: str
    bootstrap: str

    def topic(self, partitions: int = 3) -> str:
        name = f"cli-{uuid.uuid4().hex[:12]}"
        create_topic(self.bootstrap, name, partitions)
        return name


@pytest.fixture(params=["tansu", "kafka"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    """Each test runs against the embedded broker and against real Kafka."""
    if request.param == "tansu":
        yield Target("tansu", request.getfixturevalue("tansu_bootstrap"))
    else:
        cluster: KafkaCluster = request.getfixturevalue("kafka_cluster")
        yield Target("kafka", cluster.bootstrap_servers)


def cli(*args: str, stdin: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS", "AIOPRODUCER_SASL_PASSWORD")}
    env["COLUMNS"] = "200"  # rich wraps at the terminal width; keep each line whole for the assertions
    done = subprocess.run(
        [sys.executable, "-m", "aioproducer", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


# -- produce --------------------------------------------------------------------------------------------------------


def test_produce_lines_with_keys_headers_and_offsets(target: Target) -> None:
    topic = target.topic()
    lines = b"k1:v1\nk2:v2\nno key here\nk1:v3\n"
    done = cli("produce", topic, "-b", target.bootstrap, "-K", ":", "-H", "source=cli", "--print-offsets", stdin=lines)
    assert done.returncode == 0, done.stderr
    assert "4 records delivered" in done.stderr and "0 failed" in done.stderr
    records = read_back(target.bootstrap, topic)
    assert {r.value: (r.key, r.headers) for r in records} == {
        b"v1": (b"k1", (("source", b"cli"),)),
        b"v2": (b"k2", (("source", b"cli"),)),
        b"no key here": (None, (("source", b"cli"),)),
        b"v3": (b"k1", (("source", b"cli"),)),
    }
    printed = {tuple(map(int, line.split())) for line in done.stdout.splitlines()}
    by_value = {r.value: (r.partition, r.offset) for r in records}
    expected = {(n, *by_value[v]) for n, v in enumerate([b"v1", b"v2", b"no key here", b"v3"], 1)}
    assert printed == expected
    k1 = [r for r in records if r.key == b"k1"]
    assert len({r.partition for r in k1}) == 1 and [r.value for r in sorted(k1, key=lambda r: r.offset)] == [
        b"v1",
        b"v3",
    ]


def test_produce_json_lines_and_report_each_bad_line(target: Target) -> None:
    topic = target.topic(2)
    lines = [
        {"key": "a", "value": {"n": 1}, "headers": {"h": "x"}, "timestamp": 1_700_000_000_000},
        "this is not json",
        {"value": {"base64": base64.b64encode(b"\x00\xffbinary").decode()}, "partition": 1},
        {"value": "to a partition that does not exist", "partition": 7},
        {"key": None, "value": None},
    ]
    stdin = b"\n".join(line.encode() if isinstance(line, str) else json.dumps(line).encode() for line in lines)
    done = cli("produce", topic, "-b", target.bootstrap, "--json", stdin=stdin)
    assert done.returncode == 1
    assert "line 2: not delivered: InvalidRecordError: not JSON" in done.stderr
    assert f"line 4: not delivered: UnknownPartitionError: partition 7 is beyond topic '{topic}'" in done.stderr
    assert "3 records delivered" in done.stderr and "2 failed" in done.stderr
    records = {r.value: r for r in read_back(target.bootstrap, topic)}
    assert set(records) == {b'{"n":1}', b"\x00\xffbinary", None}
    first = records[b'{"n":1}']
    assert first.key == b"a" and first.headers == (("h", b"x"),) and first.timestamp_ms == 1_700_000_000_000
    assert records[b"\x00\xffbinary"].partition == 1


def test_produce_json_fails_fast_on_a_partition_beyond_the_topic_and_prints_what_was_delivered(
    tansu_bootstrap: str,
) -> None:
    """Bug: `produce --json` with one line naming partition 99 stalled the whole run for max.block.ms (60 s by
    default) while the producer waited for the partition to appear, and the offsets already delivered were not
    printed meanwhile."""
    topic = Target("tansu", tansu_bootstrap).topic(2)
    stdin = b'{"value": "a", "partition": 0}\n{"value": "b", "partition": 99}\n{"value": "c", "partition": 1}\n'
    started = time.monotonic()
    done = cli("produce", topic, "-b", tansu_bootstrap, "--json", "--print-offsets", stdin=stdin)
    took = time.monotonic() - started
    assert done.returncode == 1
    assert f"line 2: not delivered: UnknownPartitionError: partition 99 is beyond topic '{topic}'" in done.stderr
    assert "partitions 0..1" in done.stderr
    assert took < 30  # far below max.block.ms (60 s): the line failed at once
    printed = sorted(tuple(map(int, line.split())) for line in done.stdout.splitlines())
    assert [(line, partition) for line, partition, _offset in printed] == [(1, 0), (3, 1)]


def test_produce_says_it_waits_for_brokers_when_none_answers() -> None:
    """Bug: `echo x | aioproducer produce t -b 127.0.0.1:1` printed nothing for 60 s, then MetadataTimeoutError."""
    done = cli("produce", "t", "-b", "127.0.0.1:1", "-X", "max.block.ms=1500", stdin=b"x\n")
    assert done.returncode == 1
    assert "waiting for brokers at 127.0.0.1:1" in done.stderr and "no broker has answered" in done.stderr
    assert "MetadataTimeoutError" in done.stderr and "Connect call failed" in done.stderr


def test_produce_empty_values_as_tombstones_with_a_custom_delimiter(target: Target) -> None:
    topic = target.topic(1)
    done = cli("produce", topic, "-b", target.bootstrap, "-D", ";", "-Z", "-K", "=", stdin=b"a=1;b=;c=3")
    assert done.returncode == 0, done.stderr
    assert [(r.key, r.value) for r in read_back(target.bootstrap, topic)] == [(b"a", b"1"), (b"b", None), (b"c", b"3")]


def test_produce_refuses_bad_settings_before_sending() -> None:
    done = cli("produce", "t", "-b", "127.0.0.1:9", "-X", "linger.ms=-1", stdin=b"x\n")
    assert done.returncode == 2 and "linger" in done.stderr
    done = cli("produce", "t", "-b", "127.0.0.1:9", "-X", "lingerms=5", stdin=b"x\n")
    assert done.returncode == 2 and "lingerms" in done.stderr
    done = cli("produce", "t", stdin=b"x\n")
    assert done.returncode == 2 and "no brokers given" in done.stderr


def test_produce_reads_java_properties_and_the_console_script_works(target: Target, tmp_path: Path) -> None:
    topic = target.topic(1)
    properties = tmp_path / "producer.properties"
    properties.write_text(f"# a Java client's file\nbootstrap.servers={target.bootstrap}\ncompression.type: zstd\n")
    records = tmp_path / "records.txt"
    records.write_bytes(b"one\ntwo\n")
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), "produce", topic, "--producer.config", str(properties), "-f", str(records)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [r.value for r in read_back(target.bootstrap, topic)] == [b"one", b"two"]


# -- perf-test ------------------------------------------------------------------------------------------------------


def test_perf_test_reports_json_that_matches_what_the_broker_got(target: Target, tmp_path: Path) -> None:
    topic = target.topic(2)
    plot = tmp_path / "perf.png"
    done = cli(
        "perf-test",
        "--topic",
        topic,
        "--num-records",
        "5000",
        "--record-size",
        "64",
        "--keys",
        "10",
        "--compression",
        "lz4",
        "-b",
        target.bootstrap,
        "--json",
        "--plot",
        str(plot),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["delivered"] == 5000 and result["failed"] == 0
    assert result["settings"]["compression_type"] == "lz4" and result["settings"]["keys"] == 10
    latency = result["latency_ms"]
    assert 0 < latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["p99.9"] <= latency["max"]
    assert result["latency_samples"] == 5000
    assert result["records_per_s"] == pytest.approx(5000 / result["seconds"], rel=0.01)
    ends = result["per_second"]["seconds"]
    starts = [0.0, *ends[:-1]]
    rates = result["per_second"]["records_per_s"]
    counted = sum(rate * (end - start) for rate, start, end in zip(rates, starts, ends, strict=True))
    assert counted == pytest.approx(5000, rel=0.01)  # every sampled record falls in one window
    records = read_back(target.bootstrap, topic)
    assert len(records) == 5000 and {len(r.value or b"") for r in records} == {64}
    assert len({r.key for r in records}) == 10
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


JAVA_CLOSING_LINE = re.compile(
    r"\d+ records sent, \d+\.\d{6} records/sec \(\d+\.\d{2} MB/sec\), \d+\.\d{2} ms avg latency, "
    r"\d+\.\d{2} ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\."
)


def test_perf_test_takes_javas_flags_and_prints_javas_closing_line(tansu_bootstrap: str) -> None:
    """Bug: `perf-test --producer-props bootstrap.servers=... acks=all` (Java's flags) was refused with the top-level
    usage, and the closing line printed percentiles with decimals where Java's prints whole milliseconds."""
    topic = Target("tansu", tansu_bootstrap).topic(1)
    done = cli(
        "perf-test",
        "--topic",
        topic,
        "--num-records",
        "300",
        "--record-size",
        "20",
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={tansu_bootstrap}",
        "acks=all",
        "linger.ms=1",
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert JAVA_CLOSING_LINE.fullmatch(last), last
    assert last.startswith("300 records sent, ")
    assert len(read_back(tansu_bootstrap, topic)) == 300


def test_perf_test_refuses_an_unknown_flag_with_its_own_usage() -> None:
    done = cli("perf-test", "--topic", "t", "--num-records", "1", "-b", "127.0.0.1:9", "--payload-monotonic-x")
    assert done.returncode == 2
    assert "usage: aioproducer perf-test" in done.stderr
    assert "unrecognized arguments: --payload-monotonic-x" in done.stderr


def test_perf_test_holds_the_target_throughput(target: Target) -> None:
    topic = target.topic(1)
    done = cli(
        "perf-test", "--topic", topic, "--num-records", "600", "--throughput", "400", "-b", target.bootstrap, "--json"
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    # 600 records at 400/s cannot finish before 1.5 s (Java's ThroughputThrottler keeps the same schedule).
    assert result["seconds"] >= 1.45 and result["records_per_s"] <= 410


def test_perf_test_shows_live_progress_on_a_terminal(tansu_bootstrap: str) -> None:
    """The live display is drawn only on a terminal: run it under a pseudo-terminal and watch it move."""
    import pty

    topic = f"cli-{uuid.uuid4().hex[:12]}"
    controller, terminal = pty.openpty()
    args = ["perf-test", "--topic", topic, "--num-records", "3000", "--throughput", "1500", "-b", tansu_bootstrap]
    env = {**os.environ, "COLUMNS": "160", "TERM": "xterm"}
    process = subprocess.Popen(
        [sys.executable, "-m", "aioproducer", *args], stdout=subprocess.PIPE, stderr=terminal, env=env
    )
    os.close(terminal)
    screen = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        screen += chunk
    stdout, _ = process.communicate(timeout=60)
    os.close(controller)
    assert process.returncode == 0
    counts = {int(part.split(b"/")[0].replace(b",", b"")) for part in _progress_counts(screen)}
    assert len(counts) >= 3 and max(counts) == 3000, screen[-500:]
    assert b"rec/s" in screen and b"\x1b[" in screen  # redrawn in place with terminal escapes
    assert b"3000 records sent" in stdout


def _progress_counts(screen: bytes) -> list[bytes]:
    import re

    return re.findall(rb"(\d[\d,]*/3,?000)", screen)


def test_perf_test_without_a_terminal_prints_no_escape_codes(tansu_bootstrap: str) -> None:
    done = cli("perf-test", "--topic", "plain", "--num-records", "200", "-b", tansu_bootstrap)
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stderr + done.stdout
    assert "200 records sent" in done.stdout and "99.9th" in done.stdout


def test_perf_test_runs_its_records_in_one_committed_transaction(bootstrap: str) -> None:
    topic = f"perf-txn-{uuid.uuid4().hex[:8]}"
    done = cli(
        "perf-test", "--topic", topic, "--num-records", "50", "--transactional-id", f"tx-{topic}", "-b", bootstrap
    )
    assert done.returncode == 0, done.stderr
    assert "50 records sent" in done.stdout
    committed = read_back(bootstrap, topic, isolation_level="read_committed")
    assert len(committed) == 50 and all(r.value is not None and len(r.value) == 100 for r in committed)


# -- check ----------------------------------------------------------------------------------------------------------


def test_check_passes_and_round_trips_a_record(target: Target) -> None:
    topic = target.topic(2)
    done = cli("check", "-b", target.bootstrap, "--topic", topic)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for step in ("tcp", "kafka", "metadata", "broker", f"topic {topic}", "test record", "read back"):
        assert f"✓ {step}" in out, out
    assert "reads back intact" in out and "OK: every check passed" in out
    (record,) = [r for r in read_back(target.bootstrap, topic) if r.key == b"aioproducer-check"]
    assert f"partition {record.partition} offset {record.offset}" in out
    if target.name == "kafka":
        assert "transaction.version=" in out and "metadata.version=" in out  # Kafka 4 finalizes these


def test_check_as_json(target: Target) -> None:
    done = cli("check", "-b", target.bootstrap, "--json")
    assert done.returncode == 0
    result = json.loads(done.stdout)
    assert result["ok"] is True
    assert [step["name"].split()[0] for step in result["steps"]][:3] == ["tcp", "kafka", "metadata"]


def test_check_wrong_port(target: Target) -> None:
    done = cli("check", "-b", "127.0.0.1:1")
    assert done.returncode == 1
    assert "✗ tcp 127.0.0.1:1" in done.stdout and "nothing listens on 127.0.0.1:1" in done.stdout


def test_check_tls_to_a_plaintext_listener(target: Target) -> None:
    done = cli("check", "-b", target.bootstrap, "--security-protocol", "SSL", "--timeout", "5")
    assert done.returncode == 1
    assert "✓ tcp" in done.stdout and "✗ tls" in done.stdout
    assert "does not speak TLS (a PLAINTEXT or SASL_PLAINTEXT listener?)" in done.stdout


# -- check's diagnoses of the common mistakes, on brokers set up to show them ---------------------------------------


@pytest.fixture(scope="module")
def strict_kafka() -> Iterator[KafkaCluster]:
    """Real Kafka that creates no topic on demand and enables only SCRAM-SHA-512 on its SASL_SSL listener."""
    config = {
        "auto.create.topics.enable": "false",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    with KafkaCluster(nodes=1, broker_config=config) as cluster:
        yield cluster


def sasl_args(cluster: KafkaCluster, listener: str, mechanism: str) -> list[str]:
    settings = cluster.client_config(listener, mechanism)
    args = ["-b", settings["bootstrap_servers"], "--security-protocol", settings["security_protocol"]]
    args += ["--sasl-mechanism", mechanism, "--sasl-username", settings["sasl_plain_username"]]
    if "ssl_cafile" in settings:
        args += ["--ssl-cafile", settings["ssl_cafile"]]
    return args


def cli_with_password(password: str, *args: str) -> subprocess.CompletedProcess[str]:
    os.environ["AIOPRODUCER_SASL_PASSWORD"] = password
    try:
        env_cli = subprocess.run(
            [sys.executable, "-m", "aioproducer", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "200"},
            check=False,
        )
    finally:
        del os.environ["AIOPRODUCER_SASL_PASSWORD"]
    return env_cli


def test_check_unknown_topic_where_the_broker_creates_none(strict_kafka: KafkaCluster) -> None:
    done = cli("check", "-b", strict_kafka.bootstrap_servers, "--topic", "no-such-topic")
    assert done.returncode == 1
    assert "✗ topic no-such-topic" in done.stdout
    assert "does not exist and the broker does not create topics on demand (auto.create.topics.enable=false)" in (
        done.stdout
    )
    strict_kafka.create_topic("now-it-exists", 2)
    assert cli("check", "-b", strict_kafka.bootstrap_servers, "--topic", "now-it-exists").returncode == 0


def test_check_sasl_ssl_passes_with_tls_details_and_reads_back(strict_kafka: KafkaCluster) -> None:
    strict_kafka.create_topic("secure", 1)
    args = sasl_args(strict_kafka, "SASL_SSL", "SCRAM-SHA-512")
    done = cli_with_password(strict_kafka.credentials.password, "check", *args, "--topic", "secure")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✓ tls" in done.stdout and "TLSv1.3" in done.stdout and "valid until" in done.stdout
    assert "✓ sasl" in done.stdout and "SCRAM-SHA-512 as 'aioproducer': authenticated" in done.stdout
    assert "reads back intact" in done.stdout
    assert strict_kafka.credentials.password not in done.stdout + done.stderr


def test_check_wrong_sasl_mechanism(strict_kafka: KafkaCluster) -> None:
    args = sasl_args(strict_kafka, "SASL_SSL", "SCRAM-SHA-512")
    args[args.index("SCRAM-SHA-512")] = "PLAIN"
    done = cli_with_password(strict_kafka.credentials.password, "check", *args)
    assert done.returncode == 1
    assert "does not enable SASL mechanism PLAIN; it offers: SCRAM-SHA-512" in done.stdout
    assert "set sasl.mechanism (--sasl-mechanism) to one of the mechanisms the broker offers" in done.stdout


def test_check_wrong_sasl_password(strict_kafka: KafkaCluster) -> None:
    done = cli_with_password("not-the-password", "check", *sasl_args(strict_kafka, "SASL_PLAINTEXT", "SCRAM-SHA-256"))
    assert done.returncode == 1
    assert "✗ sasl" in done.stdout and "wrong username or password" in done.stdout
    assert "not-the-password" not in done.stdout + done.stderr


def test_check_sasl_against_a_plaintext_listener(strict_kafka: KafkaCluster) -> None:
    args = sasl_args(strict_kafka, "SASL_PLAINTEXT", "SCRAM-SHA-256")
    args[1] = strict_kafka.bootstrap("PLAINTEXT")
    done = cli_with_password("x", "check", *args)
    assert done.returncode == 1
    assert "is not a SASL listener: set security.protocol=PLAINTEXT" in done.stdout


def test_check_plaintext_against_a_sasl_listener(strict_kafka: KafkaCluster) -> None:
    done = cli("check", "-b", strict_kafka.bootstrap("SASL_PLAINTEXT"))
    assert done.returncode == 1
    assert "probably requires SASL; set security.protocol=SASL_PLAINTEXT" in done.stdout


def test_check_plaintext_against_a_tls_listener(strict_kafka: KafkaCluster) -> None:
    done = cli("check", "-b", strict_kafka.bootstrap("SSL"), "--timeout", "5")
    assert done.returncode == 1
    assert "did not answer a Kafka request in plain text: if it is a TLS listener, set security.protocol=SSL" in (
        done.stdout
    )


async def cli_async(*args: str, password: str | None = None) -> tuple[int, str]:
    """The command line while this test's event loop serves a proxy: run without blocking the loop."""
    env = {**os.environ, "COLUMNS": "200"}
    if password is not None:
        env["AIOPRODUCER_SASL_PASSWORD"] = password
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aioproducer", *args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_check_sasl_diagnoses_on_the_embedded_broker(tansu_bootstrap: str) -> None:
    """Tansu has no SASL of its own: a SASL-terminating proxy in front of it offers SCRAM-SHA-256 for alice."""
    sasl = SaslServer(mechanisms=("SCRAM-SHA-256",), users={"alice": "alice-secret"})
    proxy = await KafkaProxy(tansu_bootstrap, sasl=sasl).start()
    try:
        base = ["check", "-b", proxy.bootstrap, "--security-protocol", "SASL_PLAINTEXT", "--sasl-username", "alice"]
        status, out = await cli_async(*base, "--sasl-mechanism", "SCRAM-SHA-256", password="alice-secret")
        assert status == 0 and "SCRAM-SHA-256 as 'alice': authenticated" in out, out
        status, out = await cli_async(*base, "--sasl-mechanism", "SCRAM-SHA-256", password="wrong")
        assert status == 1 and "wrong username or password" in out, out
        status, out = await cli_async(*base, "--sasl-mechanism", "PLAIN", password="alice-secret")
        assert status == 1 and "does not enable SASL mechanism PLAIN; it offers: SCRAM-SHA-256" in out, out
    finally:
        await proxy.close()


def test_check_unknown_topic_when_the_client_asks_not_to_create_it(tansu_bootstrap: str) -> None:
    done = cli(
        "check",
        "-b",
        tansu_bootstrap,
        "--topic",
        f"absent-{uuid.uuid4().hex[:8]}",
        "-X",
        "allow.auto.create.topics=false",
    )
    assert done.returncode == 1
    assert "does not exist, and this client asks not to create it" in done.stdout


def test_without_the_cli_extra_the_command_says_what_to_install() -> None:
    code = "import sys; sys.modules['rich'] = None; from aioproducer.cli import main; sys.exit(main(['--version']))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "pip install 'aioproducer[cli]'" in done.stderr


def test_help_lists_the_commands() -> None:
    done = cli("--help")
    assert done.returncode == 0 and all(name in done.stdout for name in ("produce", "perf-test", "check"))
    assert cli("perf-test", "--topic", "t").returncode == 2  # --num-records is required: argparse's usage error
