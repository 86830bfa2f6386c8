"""One node of a test cluster — its layout, directory and JVM — and the steps every node goes through: free ports,
storage formatted by Kafka's StorageTool, a launch, and readiness judged from its log, its port and Metadata.

Owns no cluster-wide decision (how many nodes, which settings): `kafka_cluster` makes those.
"""

from __future__ import annotations

import base64
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aioproducer.errors import KafkaTimeoutError
from aioproducer.testing.kafka_config import NodeLayout
from aioproducer.testing.kafka_jars import KafkaSetupError
from aioproducer.testing.kafka_process import JvmProcess, jvm_command

__all__ = [
    "ClusterNode",
    "PortTakenError",
    "address",
    "format_storage",
    "free_ports",
    "port_is_free",
    "random_cluster_id",
    "wait_for_brokers",
    "without_controller",
]

_POLL_S = 0.05
_FORMAT_TIMEOUT_S = 120.0
_STARTED = "Kafka Server started"
_PORT_TAKEN = "Address already in use"


class PortTakenError(KafkaSetupError):
    """A node could not bind a port chosen for it: another process took it first (worth another try)."""


def random_cluster_id() -> str:
    """What `StorageTool random-uuid` prints (org.apache.kafka.common.Uuid): 16 random bytes, URL-safe base64
    without padding, never starting with '-' (it would read as a command-line flag). Saves a JVM start."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def port_is_free(host: str, port: int) -> bool:
    """Whether `port` on `host` can be bound now (a fixed port chosen by the user, checked before a JVM starts)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_ports(host: str, count: int) -> list[int]:
    """`count` distinct free ports. All probes stay bound until every port is chosen, so one cluster never gets a
    port twice; they are released before the JVMs bind them, and another process may take one in between
    (`PortTakenError`)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            probe = stack.enter_context(socket.socket(family, socket.SOCK_STREAM))
            probe.bind((host, 0))
            ports.append(int(probe.getsockname()[1]))
        return ports


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def without_controller(ports: Mapping[str, int]) -> dict[str, int]:
    """A broker-only node's ports: no CONTROLLER listener."""
    return {name: port for name, port in ports.items() if name != "CONTROLLER"}


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _first_error(output: str) -> str:
    # The tail of a failed start is mostly a Java stack trace; the reason is in its first error or exception line.
    for line in output.splitlines():
        if " ERROR " in line or ("Exception" in line and not line.startswith("\t")):
            return line.strip()
    return "(no error line in its log)"


@dataclass
class ClusterNode:
    """A node's layout (id, ports, log dir), its directory (properties, logs) and its JVM."""

    layout: NodeLayout
    directory: Path
    process: JvmProcess
    # Where in the log this start's output begins, so an earlier start's "started" line is not mistaken for it.
    log_offset: int = 0

    @property
    def node_id(self) -> int:
        return self.layout.node_id

    @property
    def properties(self) -> Path:
        return self.directory / "server.properties"

    def launch(self) -> None:
        self.log_offset = self.process.log_path.stat().st_size if self.process.log_path.exists() else 0
        self.process.start()

    def output_since_start(self) -> str:
        try:
            with self.process.log_path.open("rb") as log:
                log.seek(self.log_offset)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_started(self, deadline: float) -> None:
        """Return once the node serves clients; raise (with its log) if it exits or the deadline passes.

        Kafka opens a client listener only once the broker is unfenced (BrokerServer.startup), and logs
        "Kafka Server started" after that: both together mean the node serves clients.
        """
        host, port = self.layout.host, self.layout.ports["PLAINTEXT"]
        marker = f"nodeId={self.node_id}] {_STARTED}"
        while True:
            if not self.process.running:
                output = self.output_since_start()
                error = PortTakenError if _PORT_TAKEN in output else KafkaSetupError
                raise error(
                    f"Kafka node {self.node_id} exited with {self.process.returncode} while starting: "
                    f"{_first_error(output)}\nits log:\n{self.process.log_tail()}"
                )
            if marker in self.output_since_start() and _accepts(host, port):
                return
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"Kafka node {self.node_id} did not start in time; its log:\n{self.process.log_tail()}"
                )
            time.sleep(_POLL_S)


def format_storage(nodes: Sequence[ClusterNode], libs: Path, cluster_id: str, arguments: Sequence[str]) -> None:
    """`StorageTool format` for every node, side by side (each takes ~2 s, mostly JVM start-up)."""
    running = []
    for node in nodes:
        command = jvm_command(
            "kafka.tools.StorageTool",
            libs,
            ["format", "-t", cluster_id, "-c", str(node.properties), *arguments],
            heap_mb=256,
        )
        output = (node.directory / "format.log").open("wb")
        running.append(
            (node, output, subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=output))
        )
    failures = []
    for node, output, process in running:
        try:
            code = process.wait(_FORMAT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        finally:
            output.close()
        if code != 0:
            text = (node.directory / "format.log").read_text(errors="replace")[-3000:]
            failures.append(f"node {node.node_id} (exit {code}):\n{text}")
    if failures:
        raise KafkaSetupError("formatting the KRaft storage failed:\n" + "\n".join(failures))


def _confluent_admin() -> Any:
    try:
        import confluent_kafka.admin
    except ImportError as exc:
        raise ImportError("KafkaCluster needs confluent-kafka: `pip install aioproducer[testing]`") from exc
    return confluent_kafka.admin


def wait_for_brokers(nodes: Sequence[ClusterNode], deadline: float) -> None:
    """Return once each running node's Metadata lists every running broker, or a client bootstrapping from it
    would not see them all."""
    running = [node for node in nodes if node.process.running]
    expected = {node.node_id for node in running}
    admin_module = _confluent_admin()
    for node in running:
        bootstrap = address(node.layout.host, node.layout.ports["PLAINTEXT"])
        admin = admin_module.AdminClient({"bootstrap.servers": bootstrap})
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"Kafka node {node.node_id} did not list brokers {sorted(expected)} in time; "
                    f"its log:\n{node.process.log_tail()}"
                )
            try:
                listed = set(admin.list_topics(timeout=min(remaining, 5.0)).brokers)
            except Exception:
                listed = set()
            if expected <= listed:
                break
            time.sleep(_POLL_S)
