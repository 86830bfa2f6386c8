"""`KafkaCluster`: real Apache Kafka in KRaft mode (1 or 3 combined broker+controller nodes) on loopback.

Owns the cluster's scratch directory, settings, credentials and node control; the jars come from `kafka_jars`, the
files from `kafka_config` and `kafka_certs`, each node's start from `kafka_node`, the processes from `kafka_process`.
Admin work goes through `kafka_admin` (confluent-kafka, an independent client).
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from aioproducer.errors import ConfigError, KafkaTimeoutError
from aioproducer.testing import kafka_admin
from aioproducer.testing.kafka_admin import PartitionState
from aioproducer.testing.kafka_certs import ClusterCertificates, write_certificates
from aioproducer.testing.kafka_config import (
    CLIENT_LISTENERS,
    SASL_MECHANISMS,
    SASL_PLAINTEXT_MECHANISMS,
    NodeLayout,
    log4j2_properties,
    render_properties,
    scram_format_arguments,
    security_properties,
)
from aioproducer.testing.kafka_jars import DEFAULT_KAFKA_VERSION, KafkaSetupError, kafka_libs
from aioproducer.testing.kafka_node import (
    ClusterNode,
    PortTakenError,
    address,
    format_storage,
    free_ports,
    port_is_free,
    random_cluster_id,
    wait_for_brokers,
    without_controller,
)
from aioproducer.testing.kafka_process import JvmProcess, Watchdog, jvm_command

__all__ = ["KafkaCluster", "SaslCredentials"]

_POLL_S = 0.05
_PORT_ATTEMPTS = 3


@dataclass(frozen=True)
class SaslCredentials:
    """The cluster's SASL user: valid for PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 on both SASL listeners."""

    username: str
    password: str = field(repr=False)
    mechanisms: tuple[str, ...] = SASL_MECHANISMS


class KafkaCluster:
    """Apache Kafka `version` (`DEFAULT_KAFKA_VERSION`, the newest release, unless given; jars from Maven Central)
    with `nodes` KRaft nodes.

    Nodes 1..`controllers` (all by default) are combined broker+controller nodes forming the controller quorum;
    the others are brokers only. Each node listens on free loopback ports chosen at start, so several clusters
    can run side by side. Client listeners (`bootstrap(listener)`): PLAINTEXT; SSL (server certificate signed by
    `ca_file`, for 127.0.0.1 and localhost); MTLS (SSL that requires a client certificate: `client_cert_file`,
    `client_key_file`); SASL_PLAINTEXT and SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 for `credentials`;
    SASL_PLAINTEXT also OAUTHBEARER with unsigned tokens, see `unsecured_oauth_token`). Brokers talk to each
    other over PLAINTEXT.

    Use `with KafkaCluster(nodes=3) as kc:` (or `start`/`close`); `close` kills every node and removes the
    scratch directory. If this process dies without closing, a watchdog process kills the nodes.

    Settings (see `kafka_config`): one node replicates once; three nodes replicate three times with
    `min.insync.replicas=2`. Failover is tuned to seconds (`kafka_config.FAILOVER_TUNING`). Topics are
    auto-created on Metadata (4 partitions) unless `broker_config={"auto.create.topics.enable": "false"}`;
    `broker_config` overrides any property. The JVMs start fast with a C1-only JIT; `fast_start=False` gives
    the nodes the full JIT, for benchmarks. `port` fixes a single node's PLAINTEXT port (`aioproducer broker
    --kafka` listens on 9092 so); the other listeners still take free ports.
    """

    def __init__(
        self,
        nodes: int = 1,
        *,
        controllers: int | None = None,
        version: str = DEFAULT_KAFKA_VERSION,
        broker_config: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        heap_mb: int = 384,
        startup_timeout_s: float = 120.0,
        fast_start: bool = True,
        port: int | None = None,
    ) -> None:
        if nodes < 1:
            raise ConfigError(f"a cluster needs at least one node, got {nodes}")
        if port is not None and (nodes != 1 or not 0 < port < 65536):
            raise ConfigError(f"a fixed port needs a single node and a port in 1..65535, got {port} for {nodes} nodes")
        if controllers is not None and not 1 <= controllers <= nodes:
            raise ConfigError(f"controllers must be in 1..{nodes}, got {controllers}")
        self.node_count = nodes
        self.controller_count = nodes if controllers is None else controllers
        self.version = version
        self.broker_config = dict(broker_config or {})
        self.host = host
        self.heap_mb = heap_mb
        self.startup_timeout_s = startup_timeout_s
        self.fast_start = fast_start
        self.port = port
        self.cluster_id = random_cluster_id()
        self.credentials = SaslCredentials("aioproducer", secrets.token_urlsafe(16))
        self.startup_s: float | None = None
        self._certificates: ClusterCertificates | None = None
        self._nodes: dict[int, ClusterNode] = {}
        self._libs: Path | None = None
        self._workdir: Path | None = None
        self._watchdog: Watchdog | None = None
        self._finalizer: weakref.finalize[Any, KafkaCluster] | None = None

    # -- addresses ---------------------------------------------------------------------------------------------

    @property
    def node_ids(self) -> list[int]:
        return list(range(1, self.node_count + 1))

    def bootstrap(self, listener: str = "PLAINTEXT", nodes: Sequence[int] | None = None) -> str:
        """The `host:port` list of `listener` on `nodes` (all by default), comma-separated."""
        chosen = self.node_ids if nodes is None else list(nodes)
        addresses = []
        for node_id in chosen:
            ports = self._node(node_id).layout.ports
            if listener not in ports or listener == "CONTROLLER":
                raise ConfigError(f"no client listener {listener!r}; listeners: {sorted(set(ports) - {'CONTROLLER'})}")
            addresses.append(address(self.host, ports[listener]))
        return ",".join(addresses)

    @property
    def bootstrap_servers(self) -> str:
        """The PLAINTEXT listener of every node."""
        return self.bootstrap("PLAINTEXT")

    @property
    def certificates(self) -> ClusterCertificates:
        if self._certificates is None:
            raise KafkaSetupError("the cluster is not started")
        return self._certificates

    @property
    def ca_file(self) -> str:
        """The PEM file of the CA that signed the brokers' (and the client's) certificate."""
        return str(self.certificates.ca_file)

    @property
    def client_cert_file(self) -> str:
        """A client certificate the MTLS listener accepts (PEM), with `client_key_file` (PKCS#8 PEM)."""
        return str(self.certificates.client_cert_file)

    @property
    def client_key_file(self) -> str:
        return str(self.certificates.client_key_file)

    def client_config(self, listener: str = "PLAINTEXT", sasl_mechanism: str | None = None) -> dict[str, Any]:
        """`ProducerConfig` keyword arguments to connect to `listener` (a SASL listener needs `sasl_mechanism`)."""
        settings: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap(listener),
            "security_protocol": CLIENT_LISTENERS[listener],
        }
        if "SSL" in CLIENT_LISTENERS[listener]:
            settings["ssl_cafile"] = self.ca_file
        if listener == "MTLS":
            settings["ssl_certfile"] = self.client_cert_file
            settings["ssl_keyfile"] = self.client_key_file
        if listener.startswith("SASL_"):
            if sasl_mechanism not in SASL_PLAINTEXT_MECHANISMS:
                raise ConfigError(f"listener {listener} needs a sasl_mechanism of {SASL_PLAINTEXT_MECHANISMS}")
            settings["sasl_mechanism"] = sasl_mechanism
            # OAUTHBEARER takes a token provider instead: see `unsecured_oauth_token`.
            if sasl_mechanism != "OAUTHBEARER":
                settings["sasl_plain_username"] = self.credentials.username
                settings["sasl_plain_password"] = self.credentials.password
        return settings

    def librdkafka_config(self, listener: str = "PLAINTEXT", sasl_mechanism: str | None = None) -> dict[str, str]:
        """The same connection as `client_config`, in librdkafka's (confluent-kafka's) property names."""
        ours = self.client_config(listener, sasl_mechanism)
        names = {
            "bootstrap_servers": "bootstrap.servers",
            "security_protocol": "security.protocol",
            "ssl_cafile": "ssl.ca.location",
            "ssl_certfile": "ssl.certificate.location",
            "ssl_keyfile": "ssl.key.location",
            "sasl_mechanism": "sasl.mechanism",
            "sasl_plain_username": "sasl.username",
            "sasl_plain_password": "sasl.password",
        }
        return {names[key]: str(value) for key, value in ours.items()}

    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            raise KafkaSetupError("the cluster is not started")
        return self._workdir

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Fetch the jars if needed, format every node, start them and return once all serve clients.

        Raises `KafkaSetupError` (java/mvn missing, a node exited) or `KafkaTimeoutError`, with the nodes' log
        tails; nothing is left running then.
        """
        if self._nodes:
            raise KafkaSetupError("the cluster is already started")
        began = time.monotonic()
        if self.port is not None and not port_is_free(self.host, self.port):
            raise KafkaSetupError(f"cannot listen on {address(self.host, self.port)}: the port is in use")
        self._libs = kafka_libs(self.version)
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            try:
                self._start_once()
            except PortTakenError:
                self.close()
                if attempt == _PORT_ATTEMPTS:
                    raise
            except BaseException:
                self.close()
                raise
            else:
                break
        self.startup_s = time.monotonic() - began

    def _start_once(self) -> None:
        self._watchdog = Watchdog()
        self._workdir = Path(tempfile.mkdtemp(prefix="aioproducer-kafka-"))
        self._watchdog.watch_directory(self._workdir)
        self._finalizer = weakref.finalize(self, _shutdown, self._nodes, self._watchdog, self._workdir)
        log4j = self._workdir / "log4j2.properties"
        log4j.write_text(log4j2_properties())
        self._certificates = write_certificates(self._workdir / "tls", (self.host, "localhost"))
        security = security_properties(
            str(self._certificates.ca_file),
            str(self._certificates.broker_keystore),
            self.credentials.username,
            self.credentials.password,
        )
        layouts = self._layouts()
        for layout in layouts:
            directory = self._workdir / f"node-{layout.node_id}"
            directory.mkdir()
            voters = layouts[: self.controller_count]
            extra = {**security, **self.broker_config}
            properties = render_properties(layout, voters, size=self.node_count, extra=extra)
            (directory / "server.properties").write_text(properties)
            command = jvm_command(
                "kafka.Kafka",
                self._require_libs(),
                [str(directory / "server.properties")],
                heap_mb=self.heap_mb,
                system_properties=[f"-Dlog4j2.configurationFile={log4j}"],
                fast_start=self.fast_start,
            )
            process = JvmProcess(command, directory / "kafka.log", self._watchdog, cwd=directory)
            self._nodes[layout.node_id] = ClusterNode(layout, directory, process)
        scram = scram_format_arguments(self.credentials.username, self.credentials.password)
        format_storage(list(self._nodes.values()), self._require_libs(), self.cluster_id, scram)
        for node in self._nodes.values():
            node.launch()
        deadline = time.monotonic() + self.startup_timeout_s
        for node in self._nodes.values():
            node.wait_started(deadline)
        self._wait_cluster_metadata(deadline)

    def _layouts(self) -> list[NodeLayout]:
        listeners = [*CLIENT_LISTENERS, "CONTROLLER"]
        ports = iter(free_ports(self.host, len(listeners) * self.node_count))
        fixed = {"PLAINTEXT": self.port} if self.port is not None else {}
        workdir = self.workdir
        layouts = [
            NodeLayout(
                node_id=node_id,
                ports={name: fixed.get(name) or next(ports) for name in listeners},
                log_dir=str(workdir / f"node-{node_id}" / "data"),
                host=self.host,
                protocols=CLIENT_LISTENERS,
            )
            for node_id in self.node_ids
        ]
        # A broker-only node has no CONTROLLER listener (its port stays unused).
        return [
            layout
            if layout.node_id <= self.controller_count
            else replace(layout, ports=without_controller(layout.ports))
            for layout in layouts
        ]

    def _require_libs(self) -> Path:
        if self._libs is None:
            raise KafkaSetupError("the cluster is not started")
        return self._libs

    def _wait_cluster_metadata(self, deadline: float) -> None:
        wait_for_brokers(list(self._nodes.values()), deadline)

    def close(self) -> None:
        """Kill every node (SIGKILL: the data is thrown away) and remove the scratch directory; idempotent."""
        finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer()
        self._nodes = {}
        self._watchdog = None
        self._workdir = None
        self._certificates = None

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- nodes -------------------------------------------------------------------------------------------------

    def _node(self, node_id: int) -> ClusterNode:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise ConfigError(f"no node {node_id}; the cluster has nodes {self.node_ids}") from None

    def log_tail(self, node_id: int, max_bytes: int = 4000) -> str:
        """The end of node `node_id`'s log (its console output, all of its starts)."""
        return self._node(node_id).process.log_tail(max_bytes)

    def is_running(self, node_id: int) -> bool:
        return self._node(node_id).process.running

    def pid(self, node_id: int) -> int | None:
        return self._node(node_id).process.pid

    def kill(self, node_id: int) -> None:
        """SIGKILL node `node_id`: a crash. Its partitions get new leaders once its broker session times out."""
        self._node(node_id).process.kill()

    def stop(self, node_id: int) -> None:
        """Controlled shutdown of node `node_id` (SIGTERM: leaders move away first), SIGKILL after 15 s."""
        self._node(node_id).process.stop()

    def pause(self, node_id: int) -> None:
        """Freeze node `node_id` (SIGSTOP): connections stay open but nothing answers, like a stalled host."""
        self._node(node_id).process.pause()

    def resume(self, node_id: int) -> None:
        """Unfreeze a paused node (SIGCONT)."""
        self._node(node_id).process.resume()

    def start_node(self, node_id: int, timeout_s: float | None = None) -> None:
        """Start a stopped or killed node again on its old ports and data, and wait until the cluster lists it."""
        node = self._node(node_id)
        node.launch()
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.startup_timeout_s)
        node.wait_started(deadline)
        self._wait_cluster_metadata(deadline)

    def heal(self) -> None:
        """Resume paused nodes and start stopped ones: what a shared cluster needs after a fault test."""
        for node in self._nodes.values():
            node.process.resume()
        for node_id, node in self._nodes.items():
            if not node.process.running:
                self.start_node(node_id)

    def restart(self, node_id: int, timeout_s: float | None = None) -> None:
        """`stop` then `start_node`."""
        self.stop(node_id)
        self.start_node(node_id, timeout_s)

    # -- admin -------------------------------------------------------------------------------------------------

    def _live_bootstrap(self) -> str:
        live = [node_id for node_id, node in self._nodes.items() if node.process.running]
        if not live:
            raise KafkaSetupError("no node of the cluster is running")
        return self.bootstrap("PLAINTEXT", live)

    def create_topic(
        self,
        topic: str,
        partitions: int = 4,
        *,
        replication_factor: int = -1,
        config: Mapping[str, str] | None = None,
        replica_assignment: Sequence[Sequence[int]] | None = None,
        timeout_s: float = 30.0,
    ) -> str:
        """Create `topic` (replication -1: the cluster's default) with topic `config`, or with each partition's
        replicas given (preferred leader first); wait until its leaders take writes."""
        kafka_admin.create_topic(
            self._live_bootstrap(),
            topic,
            partitions,
            replication_factor=replication_factor,
            config=config,
            replica_assignment=replica_assignment,
            timeout_s=timeout_s,
        )
        return topic

    def add_partitions(self, topic: str, total: int, *, timeout_s: float = 30.0) -> None:
        """Grow `topic` to `total` partitions (a real CreatePartitions), waiting for the new leaders."""
        kafka_admin.add_partitions(self._live_bootstrap(), topic, total, timeout_s=timeout_s)

    def alter_topic_config(self, topic: str, config: Mapping[str, str], *, timeout_s: float = 30.0) -> None:
        """Set topic configs (e.g. `max.message.bytes`, `min.insync.replicas`) on a live topic."""
        kafka_admin.alter_topic_config(self._live_bootstrap(), topic, config, timeout_s=timeout_s)

    def partition_state(self, topic: str, partition: int) -> PartitionState:
        """Leader, replicas and ISR of a partition as a running node's Metadata shows them now."""
        return kafka_admin.partition_state(self._live_bootstrap(), topic, partition)

    def leader_of(self, topic: str, partition: int) -> int:
        """The node id leading `topic`'s `partition` now (-1 while it has none)."""
        return self.partition_state(topic, partition).leader

    def wait_for_leader(
        self, topic: str, partition: int, *, not_on: Sequence[int] = (), timeout_s: float = 60.0
    ) -> int:
        """Wait until `partition` has a leader outside `not_on` (e.g. after killing the old one); its node id."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                leader = self.leader_of(topic, partition)
            except Exception:
                leader = -1
            if leader >= 0 and leader not in not_on:
                return leader
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"{topic!r} partition {partition} got no leader outside {list(not_on)} in {timeout_s} s"
                )
            time.sleep(_POLL_S * 4)


def _shutdown(nodes: dict[int, ClusterNode], watchdog: Watchdog, workdir: Path) -> None:
    # A finalizer (also run at interpreter exit): must not reference the KafkaCluster itself.
    try:
        for node in nodes.values():
            node.process.kill()
    finally:
        watchdog.forget_directory(workdir)
        watchdog.close()
        shutil.rmtree(workdir, ignore_errors=True)
        nodes.clear()
