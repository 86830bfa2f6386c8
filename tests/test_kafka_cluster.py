"""`KafkaCluster`, the real-Kafka fixture: jar cache, process control, clean-up when its owner dies, node control.

Targets: real Apache Kafka (`kafka_cluster`, `kafka_cluster_3`, and clusters of its own for start-up failures);
the jar cache and the watchdog are tested with stand-in processes, no JVM needed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from aioproducer.errors import ConfigError
from aioproducer.testing import KafkaCluster, KafkaSetupError, kafka_libs
from aioproducer.testing.kafka_config import NodeLayout, render_properties
from aioproducer.testing.kafka_jars import require_tool

# Starting a cluster counts towards the first test's time limit; three JVMs on two busy cores take up to a minute.
pytestmark = pytest.mark.timeout(300)

# -- the jar cache, with a stand-in `mvn` ---------------------------------------------------------------------

FAKE_MVN = """#!/bin/sh
# Writes the jars Maven would, slowly, so that two first runs overlap; fails when FAKE_MVN_FAIL is set.
for arg in "$@"; do case "$arg" in -DoutputDirectory=*) out="${arg#-DoutputDirectory=}";; esac; done
[ -n "$FAKE_MVN_FAIL" ] && { echo "could not resolve dependencies" >&2; exit 1; }
mkdir -p "$out"
for name in a b c d e; do echo "$name" > "$out/$name.jar"; sleep 0.1; done
echo kafka > "$out/kafka_2.13-$FAKE_VERSION.jar"
echo "$$" >> "$FAKE_MVN_CALLS"
"""


@pytest.fixture
def fake_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text(FAKE_MVN)
    mvn.chmod(0o755)
    java = bin_dir / "java"
    java.write_text("#!/bin/sh\nexit 0\n")
    java.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("AIOPRODUCER_KAFKA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_VERSION", "9.9.9")
    monkeypatch.setenv("FAKE_MVN_CALLS", str(tmp_path / "calls"))
    return tmp_path


def test_jars_are_fetched_once_and_concurrent_first_runs_share_one_complete_copy(fake_maven: Path) -> None:
    results: list[Path] = []
    errors: list[BaseException] = []

    def fetch() -> None:
        try:
            results.append(kafka_libs("9.9.9"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=fetch) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(set(results)) == 1
    libs = results[0]
    jars = ["a.jar", "b.jar", "c.jar", "d.jar", "e.jar", "kafka_2.13-9.9.9.jar"]
    assert sorted(p.name for p in libs.iterdir()) == jars
    # Nothing half-written is left beside the cache entry.
    assert [p.name for p in libs.parent.iterdir()] == ["lib"]
    calls = len((fake_maven / "calls").read_text().split())
    # A later run reuses the cache without calling Maven.
    assert kafka_libs("9.9.9") == libs
    assert len((fake_maven / "calls").read_text().split()) == calls


def test_a_failed_fetch_raises_with_mavens_output_and_leaves_no_cache_entry(
    fake_maven: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MVN_FAIL", "1")
    with pytest.raises(KafkaSetupError, match="could not resolve dependencies"):
        kafka_libs("9.9.9")
    assert list((fake_maven / "cache" / "9.9.9").iterdir()) == []


@pytest.mark.parametrize("tool", ["java", "mvn"])
def test_a_missing_tool_is_named_with_what_to_install(
    tool: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(KafkaSetupError, match=f"needs `{tool}` on PATH: install"):
        require_tool(tool)


def test_a_missing_mvn_is_reported_before_any_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("AIOPRODUCER_KAFKA_CACHE", str(tmp_path / "cache"))
    with pytest.raises(KafkaSetupError, match="apt-get install maven"):
        kafka_libs("9.9.9")


@pytest.mark.parametrize("version", ["", "../4.1.1", "a/b"])
def test_a_version_that_is_not_one_is_refused(version: str) -> None:
    with pytest.raises(KafkaSetupError, match="not a Kafka version"):
        kafka_libs(version)


# -- configuration ----------------------------------------------------------------------------------------------


def _properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_a_broker_only_node_has_no_controller_listener() -> None:
    # The failover tests' kafka_cluster_3_one_controller runs this layout for real.
    voters = [NodeLayout(1, {"PLAINTEXT": 9001, "CONTROLLER": 9101}, "/d1")]
    broker = NodeLayout(2, {"PLAINTEXT": 9002}, "/d2")
    rendered = _properties(render_properties(broker, voters, size=3))
    assert rendered["process.roles"] == "broker"
    assert rendered["listeners"] == "PLAINTEXT://127.0.0.1:9002"
    assert rendered["controller.quorum.voters"] == "1@127.0.0.1:9101"
    assert rendered["default.replication.factor"] == "3"


def test_replication_follows_the_cluster_size_and_overrides_win() -> None:
    voters = [NodeLayout(i, {"PLAINTEXT": 9000 + i, "CONTROLLER": 9100 + i}, f"/d{i}") for i in (1, 2, 3)]
    three = _properties(render_properties(voters[1], voters, extra={"num.partitions": "7"}))
    assert three["node.id"] == "2"
    assert three["controller.quorum.voters"] == "1@127.0.0.1:9101,2@127.0.0.1:9102,3@127.0.0.1:9103"
    assert three["listeners"] == "PLAINTEXT://127.0.0.1:9002,CONTROLLER://127.0.0.1:9102"
    assert three["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9002"
    assert (three["default.replication.factor"], three["min.insync.replicas"]) == ("3", "2")
    assert three["num.partitions"] == "7"
    one = _properties(render_properties(voters[0], voters[:1]))
    assert (one["default.replication.factor"], one["min.insync.replicas"]) == ("1", "1")
    assert one["offsets.topic.replication.factor"] == one["transaction.state.log.replication.factor"] == "1"


def test_a_cluster_needs_a_node() -> None:
    with pytest.raises(ConfigError):
        KafkaCluster(nodes=0)


# -- clean-up when the owner dies --------------------------------------------------------------------------------

OWNER = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from aioproducer.testing.kafka_process import JvmProcess, Watchdog
scratch = Path({scratch!r})
watchdog = Watchdog()
watchdog.watch_directory(scratch)
process = JvmProcess(["sleep", "300"], scratch / "out.log", watchdog, cwd=scratch)
process.start()
print(process.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): it is dead for our purposes.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def test_a_killed_owner_takes_its_processes_and_scratch_directory_with_it(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    root = str(Path(__file__).resolve().parent.parent)
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(OWNER.format(root=root, scratch=str(scratch)))],
        stdout=subprocess.PIPE,
        text=True,
    ) as owner:
        assert owner.stdout is not None
        child = int(owner.stdout.readline())
        assert _alive(child)
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 30
    while (_alive(child) or scratch.exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    assert not scratch.exists()


# -- real Kafka ---------------------------------------------------------------------------------------------------


class RecordingCluster(KafkaCluster):
    """Remembers its scratch directory, which `close` forgets."""

    scratch: list[Path]

    def close(self) -> None:
        self.scratch = [*getattr(self, "scratch", []), *([self._workdir] if self._workdir else [])]
        super().close()


def _processes_under(directory: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(directory) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize(
    ("broker_config", "failure"),
    [
        # StorageTool parses the whole configuration: caught while formatting.
        ({"num.network.threads": "not-a-number"}, r"formatting the KRaft storage failed(.|\n)*num\.network\.threads"),
        # Only the running broker opens its keystore: the node exits while starting.
        ({"ssl.keystore.location": "/nonexistent/keystore.pem"}, r"Kafka node 1 exited(.|\n)*nonexistent"),
    ],
)
def test_a_node_that_cannot_start_raises_with_its_log_and_leaves_nothing_behind(
    broker_config: dict[str, str], failure: str
) -> None:
    cluster = RecordingCluster(nodes=1, broker_config=broker_config)
    with pytest.raises(KafkaSetupError, match=failure):
        cluster.start()
    assert cluster.scratch and all(not directory.exists() for directory in cluster.scratch)
    assert [pid for directory in cluster.scratch for pid in _processes_under(directory)] == []


def test_the_single_node_serves_admin_work_and_names_its_leader(kafka_cluster: KafkaCluster) -> None:
    topic = kafka_cluster.create_topic("kc-admin", 2, config={"max.message.bytes": "2048"})
    assert kafka_cluster.leader_of(topic, 0) == 1
    kafka_cluster.add_partitions(topic, 5)
    assert kafka_cluster.partition_state(topic, 4).isr == (1,)
    kafka_cluster.alter_topic_config(topic, {"retention.ms": "60000"})
    with pytest.raises(ConfigError, match="no client listener"):
        kafka_cluster.bootstrap("CONTROLLER")


def test_a_killed_leader_is_replaced_and_comes_back(kafka_cluster_3: KafkaCluster) -> None:
    topic = kafka_cluster_3.create_topic("kc-failover", 1)
    state = kafka_cluster_3.partition_state(topic, 0)
    assert sorted(state.replicas) == [1, 2, 3]
    old = state.leader
    kafka_cluster_3.kill(old)
    assert not kafka_cluster_3.is_running(old)
    new = kafka_cluster_3.wait_for_leader(topic, 0, not_on=[old], timeout_s=60)
    assert new != old
    kafka_cluster_3.start_node(old)
    assert kafka_cluster_3.is_running(old)
    assert "Kafka Server started" in kafka_cluster_3.log_tail(old)


def test_every_listener_of_the_session_node_is_reachable(kafka_cluster: KafkaCluster) -> None:
    for listener in ("PLAINTEXT", "SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL"):
        host, port = kafka_cluster.bootstrap(listener).rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    assert Path(kafka_cluster.ca_file).read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert Path(kafka_cluster.client_key_file).read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert kafka_cluster.credentials.password not in repr(kafka_cluster.credentials)


def test_a_paused_node_answers_nothing_until_resumed(kafka_cluster: KafkaCluster) -> None:
    host, port = kafka_cluster.bootstrap().rsplit(":", 1)
    kafka_cluster.pause(1)
    try:
        with socket.create_connection((host, int(port)), timeout=5) as connection:
            # ApiVersions v0: size, api key 18, version 0, correlation id 7, no client id.
            connection.sendall(bytes.fromhex("0000000a0012000000000007ffff"))
            connection.settimeout(1.0)
            with pytest.raises(TimeoutError):
                connection.recv(4)
            kafka_cluster.resume(1)
            connection.settimeout(10.0)
            assert connection.recv(8)[4:8] == bytes.fromhex("00000007")
    finally:
        kafka_cluster.resume(1)


def test_a_stopped_node_restarts_with_its_data(kafka_cluster: KafkaCluster) -> None:
    topic = kafka_cluster.create_topic("kc-restart", 1)
    pid = kafka_cluster.pid(1)
    kafka_cluster.restart(1)
    assert kafka_cluster.pid(1) != pid
    assert kafka_cluster.partition_state(topic, 0).leader == 1
    kafka_cluster.stop(1)
    assert not kafka_cluster.is_running(1)
    # The session fixture's clean-up (heal) starts it again for the next test.
