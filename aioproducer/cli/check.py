"""`aioproducer check`: connect with the given settings, one layer at a time, and say what works and what does not.

Steps, each on its own connection so a failure names its layer: TCP, TLS (version, cipher, certificate), Kafka
(ApiVersions: negotiated versions and finalized features such as transaction.version), SASL, Metadata (cluster,
brokers, each advertised broker reachable), then with `--topic` the topic's layout and a test record produced with
these settings (and read back when confluent-kafka is installed). A failed step prints a diagnosis and stops the
steps that need it. Exit status 0 when every step passed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from aioproducer.cli.diagnose import Context, diagnose
from aioproducer.cli.display import Display
from aioproducer.cli.options import add_connection_options, producer_settings
from aioproducer.config import ProducerConfig
from aioproducer.config_values import split_address
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import AioProducerError, ConnectionFailedError
from aioproducer.kafka_errors import kafka_error
from aioproducer.network.connection import BrokerConnection
from aioproducer.network.metadata import ClusterMetadata
from aioproducer.producer import Producer
from aioproducer.protocol import ApiKey
from aioproducer.security.tls import client_context, tls_failure

__all__ = ["Step", "add_parser", "run"]

# Metadata answers these while a topic is being created (auto-creation): wait for it a little.
_TOPIC_SETTLING = frozenset({ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER})
_TOPIC_WAIT_S = 5.0
_APIS_SHOWN = (ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.INIT_PRODUCER_ID)


@dataclass
class Step:
    name: str
    ok: bool
    detail: str
    hint: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "check",
        help="diagnose a connection: reachability, TLS, SASL, API versions, features, brokers, a test record",
        description="Connect with the given settings and report each layer; a failure comes with what it most "
        "likely means. With --topic, also produce one test record there.",
    )
    parser.add_argument("--topic", help="also check this topic and produce a test record to it")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds allowed per step (default 10)")
    parser.add_argument("--json", action="store_true", help="print the steps as one JSON object on stdout")
    add_connection_options(parser)
    parser.set_defaults(run=run, command_parser=parser)


class _Checker:
    def __init__(self, cfg: ProducerConfig, settings: dict[str, Any], args: argparse.Namespace, display: Display):
        self.cfg, self.settings, self.args, self.display = cfg, settings, args, display
        self.timeout_ms = int(args.timeout * 1000)
        self.steps: list[Step] = []

    def context(self, address: str) -> Context:
        return Context(
            address=address,
            security_protocol=self.cfg.security_protocol,
            sasl_mechanism=self.cfg.sasl_mechanism,
            topic=self.args.topic,
            allow_auto_create_topics=self.cfg.allow_auto_create_topics,
        )

    def passed(self, name: str, detail: str, **data: Any) -> None:
        self._show(Step(name, True, detail, data=data))

    def failed(self, name: str, step: str, address: str, error: BaseException) -> None:
        hint = diagnose(step, error, self.context(address))
        self._show(Step(name, False, f"{type(error).__name__}: {error}", hint))

    def _show(self, step: Step) -> None:
        self.steps.append(step)
        if not self.args.json:
            self.display.check_step(step.name, step.ok, step.detail, step.hint)

    async def connect(self, host: str, port: int, *, sasl: bool) -> BrokerConnection:
        return await BrokerConnection.open(
            host,
            port,
            client_id=self.cfg.client_id,
            request_timeout_ms=self.timeout_ms,
            connect_timeout_ms=self.timeout_ms,
            ssl_context=client_context(self.cfg),
            sasl=self.cfg.sasl_credentials if sasl else None,
        )

    # -- the bootstrap server, layer by layer -------------------------------------------------------------------
    async def bootstrap(self, address: str) -> BrokerConnection | None:
        """TCP, TLS, Kafka, SASL against one bootstrap address; the working connection, or None."""
        host, port = split_address(address)
        started = time.perf_counter()
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), self.args.timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            reason = str(exc) or "timed out"
            error = ConnectionFailedError(f"cannot connect to {address}: {reason}")
            error.__cause__ = exc
            self.failed(f"tcp {address}", "tcp", address, error)
            return None
        writer.close()
        self.passed(f"tcp {address}", f"connected in {(time.perf_counter() - started) * 1000:.1f} ms")
        context = client_context(self.cfg)
        if context is not None and not await self.tls(address, host, port, context):
            return None
        sasl = self.cfg.sasl_mechanism is not None and self.cfg.security_protocol.startswith("SASL")
        try:
            conn = await self.connect(host, port, sasl=False)
        except AioProducerError as exc:
            self.failed(f"kafka {address}", "kafka", address, exc)
            return None
        self.api_versions(conn, address)
        if not sasl:
            return conn
        conn.close()
        try:
            conn = await self.connect(host, port, sasl=True)
        except AioProducerError as exc:
            self.failed(f"sasl {address}", "sasl", address, exc)
            return None
        self.passed(f"sasl {address}", f"{self.cfg.sasl_mechanism} as {self.cfg.sasl_plain_username!r}: authenticated")
        return conn

    async def tls(self, address: str, host: str, port: int, context: ssl.SSLContext) -> bool:
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=context, server_hostname=host), self.args.timeout
            )
        except ssl.SSLError as exc:
            self.failed(f"tls {address}", "tls", address, tls_failure(exc, address))
            return False
        except (OSError, asyncio.TimeoutError) as exc:
            error = ConnectionFailedError(f"TLS connection to {address} ended during the handshake: {exc!r}")
            self.failed(f"tls {address}", "tls", address, error)
            return False
        tls_object = writer.get_extra_info("ssl_object")
        writer.close()
        cert = tls_object.getpeercert() if tls_object is not None else None
        subject = _name(cert, "subject") if cert else "not verified"
        detail = f"{tls_object.version()}, {tls_object.cipher()[0]}, certificate {subject}"
        if cert:
            detail += f" issued by {_name(cert, 'issuer')}, valid until {cert.get('notAfter')}"
        self.passed(f"tls {address}", detail)
        return True

    def api_versions(self, conn: BrokerConnection, address: str) -> None:
        # What the connection learnt from its own ApiVersions exchange: a SASL listener takes only one before
        # authentication, so asking again would end the connection.
        versions = ", ".join(f"{api.name.lower()} v{conn.versions[api]}" for api in _APIS_SHOWN if api in conn.versions)
        features = dict(conn.features.levels)
        shown = ", ".join(f"{name}={level}" for name, level in sorted(features.items())) or "none reported"
        self.passed(
            f"kafka {address}",
            f"using {versions}; finalized features: {shown}",
            features=features,
            versions={api.name.lower(): version for api, version in conn.versions.items()},
        )

    # -- the cluster --------------------------------------------------------------------------------------------
    async def metadata(self, conn: BrokerConnection, address: str) -> ClusterMetadata | None:
        try:
            response = await conn.request(ApiKey.METADATA, _metadata_body([]))
        except AioProducerError as exc:
            self.failed("metadata", "metadata", address, exc)
            return None
        cluster = ClusterMetadata.from_response(response)
        brokers = ", ".join(f"{b.node_id}@{b.host}:{b.port}" for b in sorted(cluster.brokers.values(), key=_id))
        self.passed(
            "metadata",
            f"cluster {cluster.cluster_id}, controller {cluster.controller_id}, brokers {brokers}",
            brokers=[f"{b.host}:{b.port}" for b in cluster.brokers.values()],
        )
        return cluster

    async def brokers(self, cluster: ClusterMetadata) -> bool:
        ok = True
        sasl = self.cfg.sasl_mechanism is not None and self.cfg.security_protocol.startswith("SASL")
        for broker in sorted(cluster.brokers.values(), key=_id):
            address = f"{broker.host}:{broker.port}"
            try:
                conn = await self.connect(broker.host, broker.port, sasl=sasl)
            except AioProducerError as exc:
                self.failed(f"broker {broker.node_id}", "broker", address, exc)
                ok = False
                continue
            conn.close()
            self.passed(f"broker {broker.node_id}", f"{address} reachable")
        return ok

    async def topic(self, conn: BrokerConnection, address: str, topic: str) -> bool:
        deadline = time.monotonic() + _TOPIC_WAIT_S
        while True:
            try:
                response = await conn.request(
                    ApiKey.METADATA, _metadata_body([topic], self.cfg.allow_auto_create_topics)
                )
            except AioProducerError as exc:
                self.failed(f"topic {topic}", "topic", address, exc)
                return False
            cluster = ClusterMetadata.from_response(response)
            info = cluster.topics.get(topic)
            code = cluster.topic_errors.get(topic, ErrorCode.NONE)
            if info is not None and info.num_partitions and code == ErrorCode.NONE:
                leaders = ", ".join(f"{p.partition}→{p.leader}" for p in info.partitions)
                self.passed(f"topic {topic}", f"{info.num_partitions} partitions (leaders {leaders})")
                return True
            if code not in _TOPIC_SETTLING and (code != ErrorCode.NONE or time.monotonic() >= deadline):
                self.failed(
                    f"topic {topic}",
                    "topic",
                    address,
                    kafka_error(code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r}: error {code}"),
                )
                return False
            if time.monotonic() >= deadline:
                self.failed(f"topic {topic}", "topic", address, kafka_error(code, f"topic {topic!r} has no leader"))
                return False
            await asyncio.sleep(0.2)

    async def produce(self, topic: str, address: str) -> bool:
        marker = f"aioproducer-check-{uuid.uuid4().hex}".encode()
        limits = {"max.block.ms": self.timeout_ms, "delivery.timeout.ms": max(self.timeout_ms, 2 * 30000 + 5)}
        settings = {**self.settings, **{k: v for k, v in limits.items() if k not in self.settings}}
        started = time.perf_counter()
        try:
            async with Producer(config=settings) as producer:
                md = await producer.send(topic, marker, key=b"aioproducer-check")
        except AioProducerError as exc:
            self.failed("test record", "produce", address, exc)
            return False
        idempotent = "idempotent, " if self.cfg.idempotence else ""
        self.passed(
            "test record",
            f"{idempotent}acks={'all' if self.cfg.acks == -1 else self.cfg.acks}: partition {md.partition} offset "
            f"{md.offset} in {(time.perf_counter() - started) * 1000:.1f} ms",
            partition=md.partition,
            offset=md.offset,
        )
        from aioproducer.cli.read_back import read_record

        try:
            outcome = await asyncio.to_thread(read_record, self.cfg, topic, md.partition, md.offset, self.args.timeout)
        except AioProducerError as exc:
            self.failed("read back", "read", address, exc)
            return False
        if outcome is None:
            self.passed("read back", "skipped: install confluent-kafka to read the test record back")
            return True
        if outcome == marker:
            self.passed("read back", f"the record at offset {md.offset} reads back intact")
            return True
        found = f"holds {outcome!r}, not the test record" if outcome else f"gave nothing within {self.args.timeout} s"
        self._show(Step("read back", False, f"offset {md.offset} {found}", "see the consumer's view of the topic"))
        return False


async def run(args: argparse.Namespace, display: Display) -> int:
    settings = producer_settings(args)
    cfg = ProducerConfig.build(settings)
    checker = _Checker(cfg, settings, args, display)
    conn: BrokerConnection | None = None
    address = cfg.bootstrap_servers[0]
    for address in cfg.bootstrap_servers:
        conn = await checker.bootstrap(address)
        if conn is not None:
            break
    try:
        if conn is not None:
            cluster = await checker.metadata(conn, address)
            reachable = cluster is not None and await checker.brokers(cluster)
            if reachable and args.topic and await checker.topic(conn, address, args.topic):
                await checker.produce(args.topic, address)
    finally:
        if conn is not None:
            conn.close()
    ok = all(step.ok for step in checker.steps) and conn is not None
    if args.json:
        display.out(json.dumps({"ok": ok, "steps": [asdict(step) for step in checker.steps]}))
    else:
        display.check_verdict(ok, sum(not step.ok for step in checker.steps))
    return 0 if ok else 1


def _metadata_body(topics: list[str], allow_auto_create: bool = False) -> dict[str, Any]:
    return {
        "topics": [{"name": topic} for topic in topics],
        "allow_auto_topic_creation": allow_auto_create,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


def _name(cert: dict[str, Any], key: str) -> str:
    parts = [f"{k}={v}" for rdn in cert.get(key, ()) for k, v in rdn]
    return ", ".join(parts) or "?"


def _id(broker: Any) -> int:
    return int(broker.node_id)
