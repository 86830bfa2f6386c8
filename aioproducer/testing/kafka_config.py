"""The files a KRaft node starts from: its `server.properties` and the Log4j 2 configuration, rendered as text.

Pure: no processes, no sockets. Every tuned value is here, with the reason it differs from Kafka's default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "CLIENT_LISTENERS",
    "FAILOVER_TUNING",
    "SASL_MECHANISMS",
    "SASL_PLAINTEXT_MECHANISMS",
    "NodeLayout",
    "log4j2_properties",
    "render_properties",
    "scram_format_arguments",
    "security_properties",
]

# Client listener name -> security protocol. MTLS is TLS that requires a client certificate signed by the cluster's CA.
CLIENT_LISTENERS: Mapping[str, str] = {
    "PLAINTEXT": "PLAINTEXT",
    "SSL": "SSL",
    "SASL_PLAINTEXT": "SASL_PLAINTEXT",
    "SASL_SSL": "SASL_SSL",
    "MTLS": "SSL",
}
# What both SASL listeners enable for the cluster's user; SASL_PLAINTEXT adds OAUTHBEARER (unsecured tokens).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_PLAINTEXT_MECHANISMS = (*SASL_MECHANISMS, "OAUTHBEARER")
_SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")

# Faster failover than Kafka's defaults, so fault tests take seconds (KIP-631's broker heartbeats):
# - a broker that stops heartbeating is fenced after 4 s (default 9 s), and its partitions get new leaders;
# - a follower that stops fetching leaves the ISR after 10 s (default 30 s), so acks=all resumes;
# - no automatic leader rebalancing: a restarted node does not take leadership back in the middle of a test.
FAILOVER_TUNING: Mapping[str, str] = {
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "1000",
    "replica.lag.time.max.ms": "10000",
    "auto.leader.rebalance.enable": "false",
}

# Sized for a test machine of two shared cores: Kafka's defaults (3 network, 8 I/O threads, a 128 MB dedupe
# buffer for the log cleaner) are for servers. Consumer groups start at once instead of waiting 3 s for members.
_SMALL_MACHINE: Mapping[str, str] = {
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": "33554432",
    "group.initial.rebalance.delay.ms": "0",
}


@dataclass(frozen=True)
class NodeLayout:
    """Where one node lives: its id, its listener ports by listener name (CONTROLLER included), its log dir."""

    node_id: int
    ports: Mapping[str, int]
    log_dir: str
    host: str = "127.0.0.1"
    # listener name -> security protocol, for every client listener (CONTROLLER is always PLAINTEXT).
    protocols: Mapping[str, str] = field(default_factory=lambda: {"PLAINTEXT": "PLAINTEXT"})


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def render_properties(
    node: NodeLayout,
    voters: Sequence[NodeLayout],
    *,
    size: int | None = None,
    extra: Mapping[str, str] = {},
) -> str:
    """`server.properties` for `node` in a static quorum of `voters`: a combined broker + controller node when it is
    one of them, else a broker only. `size` is the number of brokers (every node is one).

    Replication settings follow the cluster size: one broker replicates everything once; three or more replicate
    three times with `min.insync.replicas=2`, Kafka's production advice. `extra` overrides anything rendered here.
    """
    size = len(voters) if size is None else size
    controller = "CONTROLLER" in node.ports
    replication = 1 if size < 3 else 3
    min_isr = 1 if size < 3 else 2
    client = [name for name in node.ports if name != "CONTROLLER"]
    own = [*client, "CONTROLLER"] if controller else client
    listeners = ",".join(f"{name}://{_address(node.host, node.ports[name])}" for name in own)
    advertised = ",".join(f"{name}://{_address(node.host, node.ports[name])}" for name in client)
    protocol_map = ",".join(f"{name}:{node.protocols[name]}" for name in client)
    values: dict[str, str] = {
        "process.roles": "broker,controller" if controller else "broker",
        "node.id": str(node.node_id),
        "controller.quorum.voters": ",".join(f"{v.node_id}@{_address(v.host, v.ports['CONTROLLER'])}" for v in voters),
        "listeners": listeners,
        "advertised.listeners": advertised,
        # Brokers talk to each other in plain text, so they need no credentials of their own.
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{protocol_map}",
        "log.dirs": node.log_dir,
        "auto.create.topics.enable": "true",  # Kafka's default, said here as compose.yaml says it
        "num.partitions": "4",
        "default.replication.factor": str(replication),
        "min.insync.replicas": str(min_isr),
        # These internal topics default to replication 3: a single node must lower them, or transactions and
        # consumer groups never initialise.
        "offsets.topic.replication.factor": str(replication),
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": str(replication),
        "transaction.state.log.min.isr": str(min_isr),
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": str(replication),
        "share.coordinator.state.topic.min.isr": str(min_isr),
        **_SMALL_MACHINE,
        **FAILOVER_TUNING,
        **extra,
    }
    return "".join(f"{key}={value}\n" for key, value in values.items())


def security_properties(ca_file: str, keystore: str, username: str, password: str) -> dict[str, str]:
    """TLS from PEM files for every SSL listener, and SASL for one user on both SASL listeners.

    PLAIN users live in the listener's JAAS line (`user_<name>="<password>"`); SCRAM users live in the cluster
    metadata, created at format time (`scram_format_arguments`). SASL_PLAINTEXT also takes OAUTHBEARER with
    Kafka's unsecured-token validator (any unsigned JWT with `sub` and `exp`, KIP-255); SASL_SSL does not, so a
    client can meet a real broker's UNSUPPORTED_SASL_MECHANISM. The broker's key must be unencrypted PKCS#8.
    """
    values = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": ca_file,
        "listener.name.mtls.ssl.client.auth": "required",
        # Kafka's default is GSSAPI only.
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": ",".join(SASL_PLAINTEXT_MECHANISMS),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="broker";'
        ),
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        values[f"listener.name.{listener}.plain.sasl.jaas.config"] = (
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{username}="{password}";'
        )
        for mechanism in _SCRAM:
            values[f"listener.name.{listener}.{mechanism.lower()}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
    return values


def scram_format_arguments(username: str, password: str) -> list[str]:
    """`StorageTool format` arguments creating `username` for both SCRAM mechanisms (KIP-900)."""
    arguments = []
    for mechanism in _SCRAM:
        arguments += ["--add-scram", f"{mechanism}=[name={username},password={password}]"]
    return arguments


def log4j2_properties() -> str:
    """Log4j 2 configuration: WARN and above to the console (which its launcher sends to the node's log file), plus
    the start-up line at INFO.

    Without a configuration file Log4j 2 logs only errors; `KafkaRaftServer` at INFO prints
    `[KafkaRaftServer nodeId=N] Kafka Server started`, one of the readiness signals.
    """
    return (
        "status = warn\n"
        "appender.console.type = Console\n"
        "appender.console.name = STDOUT\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = [%d] %p %m (%c)%n\n"
        "rootLogger.level = warn\n"
        "rootLogger.appenderRef.stdout.ref = STDOUT\n"
        "logger.raftserver.name = kafka.server.KafkaRaftServer\n"
        "logger.raftserver.level = info\n"
    )
