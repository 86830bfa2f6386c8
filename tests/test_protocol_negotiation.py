"""The producer against scripted brokers that speak Kafka 4.1's versions: what it negotiates and sends, the clear error
when a broker shares no version with it, and the re-bootstrap a Metadata v13 REBOOTSTRAP_REQUIRED asks for (KIP-1102).
Kafka 4.1.1 never sends that code itself yet, hence a scripted broker."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from fault_helpers import close_writer, frame, read_frame

from aioproducer import Producer
from aioproducer.config import ProducerConfig
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import UnsupportedVersionError
from aioproducer.kafka_errors import NotLeaderOrFollowerError
from aioproducer.network.cluster import Cluster
from aioproducer.network.connection import BrokerConnection
from aioproducer.network.metadata import ClusterMetadata
from aioproducer.protocol import ApiKey, decode_request, encode_response

# What a default Kafka 4.1.1 broker advertises (kafka-clients' ApiKeys, Produce's advertised floor per KAFKA-18659).
KAFKA_4_1 = {
    ApiKey.PRODUCE: (0, 13),
    ApiKey.METADATA: (0, 13),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.END_TXN: (0, 5),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
}
TOPIC = "scripted"
REBOOTSTRAP_REQUIRED = ErrorCode.REBOOTSTRAP_REQUIRED
SETTINGS = {
    "linger_ms": 0,
    "request_timeout_ms": 2000,
    "delivery_timeout_ms": 8000,
    "max_block_ms": 8000,
    "retry_backoff_ms": 20,
    "retry_backoff_max_ms": 50,
    "reconnect_backoff_ms": 20,
    "reconnect_backoff_max_ms": 50,
}

Handler = Callable[[int, dict[str, Any]], dict[str, Any]]  # (version, request body) -> response body


class ScriptedBroker:
    """One listener answering ApiVersions with `offered` and every other API through `handlers`; it records what it
    was asked, by API and version."""

    def __init__(
        self,
        offered: Mapping[ApiKey, tuple[int, int]],
        handlers: dict[ApiKey, Handler],
        features: tuple[int, dict[str, int]] = (-1, {}),
    ) -> None:
        self.offered = offered
        self.handlers = handlers
        self.features = features
        self.requests: Counter[tuple[ApiKey, int]] = Counter()
        # Each ApiVersions request as (version, body); the error code to answer it with (0: the versions).
        self.api_versions_asked: list[tuple[int, dict[str, Any]]] = []
        self.api_versions_error: Callable[[int, dict[str, Any]], int] = lambda version, body: 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> ScriptedBroker:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def count(self, api: ApiKey) -> int:
        return sum(n for (key, _), n in self.requests.items() if key == api)

    def versions(self, api: ApiKey) -> set[int]:
        return {version for (key, version) in self.requests if key == api}

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            await close_writer(writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while (request := await read_frame(reader)) is not None:
                header, body = decode_request(request)
                api = ApiKey(header.api_key)
                self.requests[api, header.api_version] += 1
                if api == ApiKey.API_VERSIONS:
                    self.api_versions_asked.append((header.api_version, body))
                    epoch, levels = self.features
                    answer: dict[str, Any] | None = {
                        "error_code": self.api_versions_error(header.api_version, body),
                        "api_keys": [
                            {"api_key": int(key), "min_version": low, "max_version": high}
                            for key, (low, high) in self.offered.items()
                        ],
                        "finalized_features_epoch": epoch,
                        "finalized_features": [
                            {"name": name, "max_version_level": level, "min_version_level": 0}
                            for name, level in levels.items()
                        ],
                    }
                else:
                    answer = self.handlers[api](header.api_version, body)
                if api == ApiKey.PRODUCE and body["acks"] == 0:
                    continue
                writer.write(frame(encode_response(api, header.api_version, header.correlation_id, answer)[4:]))
                await writer.drain()
        finally:
            self._writers.discard(writer)
            await close_writer(writer)


def metadata(brokers: list[ScriptedBroker], leader: tuple[int, int], *, error_code: int = 0) -> dict[str, Any]:
    """A Metadata response naming `brokers` (node ids 1, 2, ... in order) with TOPIC's one partition led by
    `leader` = (node id, leader epoch)."""
    node, epoch = leader
    partition = {
        "error_code": 0,
        "partition_index": 0,
        "leader_id": node,
        "leader_epoch": epoch,
        "replica_nodes": [node],
        "isr_nodes": [node],
    }
    return {
        "brokers": [{"node_id": i, "host": "127.0.0.1", "port": b.port} for i, b in enumerate(brokers, 1)],
        "cluster_id": "scripted-cluster",
        "controller_id": 1,
        "topics": [{"error_code": 0, "name": TOPIC, "topic_id": uuid.uuid4(), "partitions": [partition]}],
        "error_code": error_code,
    }


def init_producer_id(version: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"error_code": 0, "producer_id": 1000, "producer_epoch": 0}


def produce(error_code: int = 0) -> Handler:
    offsets = iter(range(1 << 30))

    def handle(version: int, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "responses": [
                {
                    "name": topic["name"],
                    "partition_responses": [
                        {
                            "index": p["index"],
                            "error_code": error_code,
                            "base_offset": -1 if error_code else next(offsets),
                        }
                        for p in topic["partition_data"]
                    ],
                }
                for topic in body["topic_data"]
            ]
        }

    return handle


async def test_the_producer_speaks_produce_v12_and_metadata_v13_to_a_kafka_4_1_broker() -> None:
    broker = await ScriptedBroker(KAFKA_4_1, {}).start()
    broker.handlers = {
        ApiKey.METADATA: lambda v, b: metadata([broker], (1, 0)),
        ApiKey.INIT_PRODUCER_ID: init_producer_id,
        ApiKey.PRODUCE: produce(),
    }
    producer = Producer(broker.address, **SETTINGS)
    try:
        await producer.start()
        sent = await asyncio.wait_for(producer.send(TOPIC, b"hello"), 10)
    finally:
        await asyncio.wait_for(producer.close(), 10)
        await broker.close()
    assert (sent.partition, sent.offset) == (0, 0)
    assert broker.versions(ApiKey.PRODUCE) == {12}  # never v13 (topic ids) nor the advertised floor v0
    assert broker.versions(ApiKey.METADATA) == {13}
    assert broker.versions(ApiKey.INIT_PRODUCER_ID) == {5}


@pytest.mark.parametrize("produce_max", [0, 2])
async def test_a_broker_without_produce_v3_fails_the_send_at_once_with_a_clear_error(produce_max: int) -> None:
    """A pre-0.11 broker (Produce v0-2 only): no hang until the delivery timeout, an error naming both ranges."""
    broker = await ScriptedBroker({**KAFKA_4_1, ApiKey.PRODUCE: (0, produce_max)}, {}).start()
    producer = Producer(broker.address, **SETTINGS)
    try:
        await producer.start()
        with pytest.raises(UnsupportedVersionError, match=rf"PRODUCE .*v3-v12.*offers v0-v{produce_max}.*older"):
            await asyncio.wait_for(producer.send(TOPIC, b"x"), 5)
    finally:
        await asyncio.wait_for(producer.close(), 10)
        await broker.close()
    assert broker.count(ApiKey.PRODUCE) == 0


async def test_rebootstrap_required_sends_the_producer_back_to_the_bootstrap_servers() -> None:
    """The bootstrap server first names `stale` as the partition's leader; `stale` then refuses the record (not the
    leader) and, asked for metadata, answers REBOOTSTRAP_REQUIRED. The producer must ask the bootstrap server
    again, which now names `fresh`: without the re-bootstrap it keeps asking `stale` and the record times out."""
    stale = await ScriptedBroker(KAFKA_4_1, {}).start()
    fresh = await ScriptedBroker(KAFKA_4_1, {}).start()
    bootstrap = await ScriptedBroker(KAFKA_4_1, {}).start()
    moved = False

    def bootstrap_metadata(version: int, body: dict[str, Any]) -> dict[str, Any]:
        # Node 1 is `stale` until it has asked for a re-bootstrap; then the cluster is `fresh` alone (node 2).
        return metadata([bootstrap, fresh] if moved else [stale], (2, 1) if moved else (1, 0))

    def stale_metadata(version: int, body: dict[str, Any]) -> dict[str, Any]:
        nonlocal moved
        moved = True
        return {"brokers": [], "topics": [], "error_code": REBOOTSTRAP_REQUIRED}

    bootstrap.handlers = {ApiKey.METADATA: bootstrap_metadata, ApiKey.INIT_PRODUCER_ID: init_producer_id}
    stale.handlers = {
        ApiKey.METADATA: stale_metadata,
        ApiKey.INIT_PRODUCER_ID: init_producer_id,
        ApiKey.PRODUCE: produce(NotLeaderOrFollowerError.code),
    }
    fresh.handlers = {
        ApiKey.METADATA: lambda v, b: metadata([bootstrap, fresh], (2, 1)),
        ApiKey.INIT_PRODUCER_ID: init_producer_id,
        ApiKey.PRODUCE: produce(),
    }
    producer = Producer(bootstrap.address, **SETTINGS)
    try:
        await producer.start()
        sent = await asyncio.wait_for(producer.send(TOPIC, b"survives the move"), 10)
    finally:
        await asyncio.wait_for(producer.close(), 10)
        for broker in (stale, fresh, bootstrap):
            await broker.close()
    assert (sent.partition, sent.offset) == (0, 0)
    assert fresh.count(ApiKey.PRODUCE) == 1
    assert stale.count(ApiKey.METADATA) >= 1 and moved
    assert bootstrap.count(ApiKey.METADATA) >= 2, "the producer never went back to the bootstrap server"
    assert stale.count(ApiKey.METADATA) == 1, "the producer kept asking the broker that told it to re-bootstrap"


async def test_a_broker_of_another_cluster_behind_a_known_address_sends_the_producer_back_to_bootstrap() -> None:
    """KIP-1242 (ApiVersions v5, Kafka 4.4): connecting to node 1, the producer names the cluster and node it means;
    the broker now at that address belongs to another cluster and answers REBOOTSTRAP_REQUIRED. The producer must
    not use that connection, and must ask the bootstrap server again, which now names `fresh`."""
    kafka_4_4 = {**KAFKA_4_1, ApiKey.API_VERSIONS: (0, 5), ApiKey.TXN_OFFSET_COMMIT: (0, 6)}
    stranger = await ScriptedBroker(kafka_4_4, {}).start()
    fresh = await ScriptedBroker(kafka_4_4, {}).start()
    bootstrap = await ScriptedBroker(kafka_4_4, {}).start()
    moved = False

    def refuse_other_clusters(version: int, body: dict[str, Any]) -> int:
        nonlocal moved
        if body.get("cluster_id") is None:
            return 0
        moved = True
        return REBOOTSTRAP_REQUIRED

    stranger.api_versions_error = refuse_other_clusters
    bootstrap.handlers = {
        ApiKey.METADATA: lambda v, b: metadata(
            [bootstrap, fresh] if moved else [stranger], (2, 1) if moved else (1, 0)
        ),
        ApiKey.INIT_PRODUCER_ID: init_producer_id,
    }
    stranger.handlers = {ApiKey.PRODUCE: produce()}
    fresh.handlers = {ApiKey.METADATA: lambda v, b: metadata([bootstrap, fresh], (2, 1)), ApiKey.PRODUCE: produce()}
    producer = Producer(bootstrap.address, **SETTINGS)
    try:
        await producer.start()
        sent = await asyncio.wait_for(producer.send(TOPIC, b"not for the stranger"), 10)
    finally:
        await asyncio.wait_for(producer.close(), 10)
        for broker in (stranger, fresh, bootstrap):
            await broker.close()
    assert (sent.partition, sent.offset) == (0, 0) and fresh.count(ApiKey.PRODUCE) == 1
    assert stranger.count(ApiKey.PRODUCE) == 0 and moved
    asked = [(version, body["cluster_id"], body["node_id"]) for version, body in stranger.api_versions_asked]
    assert (5, "scripted-cluster", 1) in asked
    # A bootstrap connection knows no node: it names nothing, whatever it has learnt of the cluster.
    assert {(body["cluster_id"], body["node_id"]) for _, body in bootstrap.api_versions_asked} == {(None, -1)}
    assert bootstrap.count(ApiKey.METADATA) >= 2, "the producer never went back to the bootstrap server"


async def test_a_broker_that_never_answered_api_versions_v5_is_never_told_the_cluster() -> None:
    """Tansu answers a v5 ApiVersions request but drops the connection when it names a cluster: until a broker of the
    cluster has answered v5, the producer names none (what a broker offering v4 at most sees)."""
    broker = await ScriptedBroker(KAFKA_4_1, {}).start()
    broker.handlers = {
        ApiKey.METADATA: lambda v, b: metadata([broker], (1, 0)),
        ApiKey.INIT_PRODUCER_ID: init_producer_id,
        ApiKey.PRODUCE: produce(),
    }
    try:
        async with Producer(broker.address, **SETTINGS) as producer:
            await asyncio.wait_for(producer.send(TOPIC, b"v"), 10)
    finally:
        await broker.close()
    assert len(broker.api_versions_asked) >= 2  # the bootstrap connection, then node 1's
    assert {(body["cluster_id"], body["node_id"]) for _, body in broker.api_versions_asked} == {(None, -1)}


async def test_the_cluster_keeps_the_newest_finalized_features_any_broker_reported() -> None:
    """A broker that has not yet heard of a feature upgrade (lower epoch) must not hide it: the highest epoch wins,
    whichever broker answered first, as in Java's ApiVersions."""
    lagging = await ScriptedBroker(KAFKA_4_1, {}, features=(5, {"transaction.version": 1})).start()
    upgraded = await ScriptedBroker(KAFKA_4_1, {}, features=(7, {"transaction.version": 2})).start()
    cluster_view = {ApiKey.METADATA: lambda v, b: metadata([lagging, upgraded], (1, 0))}
    lagging.handlers = upgraded.handlers = cluster_view
    woken = asyncio.Event()
    cluster = Cluster(ProducerConfig.build(bootstrap_servers=upgraded.address, **SETTINGS), woken.set)
    try:
        bootstrap_connection = await cluster.connect_any()
        assert bootstrap_connection.features.transaction_version == 2
        assert cluster.features.transaction_version == 2
        cluster.state.on_response(ClusterMetadata.from_response(metadata([lagging, upgraded], (1, 0))), [], 0)
        to_lagging = await asyncio.wait_for(_connected(cluster, 1, woken), 10)
        assert (to_lagging.features.epoch, to_lagging.features.transaction_version) == (5, 1)
        assert (cluster.features.epoch, cluster.features.transaction_version) == (7, 2)
    finally:
        await cluster.close()
        await lagging.close()
        await upgraded.close()


async def _connected(cluster: Cluster, node_id: int, woken: asyncio.Event) -> BrokerConnection:
    """The connection to `node_id` once the cluster opened it (it wakes its owner when an attempt ends)."""
    while (conn := cluster.connection(node_id)) is None:
        woken.clear()
        await woken.wait()
    return conn
