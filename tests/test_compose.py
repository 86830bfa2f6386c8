"""`compose.yaml` kept true without Docker: it runs the Kafka release the suite judges by default, where the README's
examples point, with server properties a single node can serve producers, consumers and transactions with; they are
the fixture's own (so `aioproducer broker --kafka` runs the same node), and a node started with them works."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from aioproducer import Producer
from aioproducer.testing import DEFAULT_KAFKA_VERSION, KafkaCluster, read_back
from aioproducer.testing.kafka_config import NodeLayout, render_properties

ROOT = Path(__file__).resolve().parents[1]
# What the fixture decides for itself: where a node listens (free ports) and how its quorum finds it.
LAYOUT_PROPERTIES = {"listeners", "advertised.listeners", "listener.security.protocol.map", "controller.quorum.voters"}
# Local ports the documentation gives that are no broker's: HTTP (the FastAPI example, `mkdocs serve`), and one
# nothing listens on (an outage's example).
NOT_BROKERS = ("8000", "1")
# Variables the apache/kafka image reads itself rather than turning into server properties.
_IMAGE_VARIABLES = {"KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_GC_LOG_OPTS"}


def kafka_service() -> dict[str, Any]:
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    kafka = [s for s in services.values() if str(s.get("image", "")).startswith("apache/kafka:")]
    assert len(kafka) == 1, "compose.yaml should run one official apache/kafka container"
    service: dict[str, Any] = kafka[0]
    return service


def server_properties(environment: dict[str, Any]) -> dict[str, str]:
    """The apache/kafka image's rule: KAFKA_FOO_BAR is foo.bar; `__` stands for `_` and `___` for `-`."""
    properties = {}
    for name, value in environment.items():
        if not name.startswith("KAFKA_") or name in _IMAGE_VARIABLES:
            continue
        key = name.removeprefix("KAFKA_").lower().replace("___", "-").replace("__", "\0").replace("_", ".")
        properties[key.replace("\0", "_")] = str(value)
    return properties


def test_the_image_is_the_kafka_release_the_suite_judges_by_default() -> None:
    image = kafka_service()["image"]
    assert image == f"apache/kafka:{DEFAULT_KAFKA_VERSION}"


def test_it_listens_where_the_readme_examples_point() -> None:
    service = kafka_service()
    properties = server_properties(service["environment"])
    assert service["ports"] == ["127.0.0.1:9092:9092"]
    assert properties["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert "PLAINTEXT://:9092" in properties["listeners"].split(",")
    # Every local broker address the documentation and the examples give is this port, by name or by number.
    documents = [ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("examples/*.py")]
    local = {
        f"{path.relative_to(ROOT)}: {address}"
        for path in documents
        for address in re.findall(r"(?:127\.0\.0\.1|localhost):\d+", path.read_text())
        if address.rsplit(":", 1)[1] not in ("9092", *NOT_BROKERS)
    }
    assert not local, f"local broker addresses other than port 9092: {sorted(local)}"
    assert re.search(r'Producer\("(localhost|127\.0\.0\.1):9092"', (ROOT / "README.md").read_text())


def test_one_node_serves_auto_created_topics_groups_and_transactions() -> None:
    properties = server_properties(kafka_service()["environment"])
    assert properties["process.roles"] == "broker,controller" and properties["node.id"] == "1"
    assert properties["auto.create.topics.enable"] == "true"
    for key in (
        "default.replication.factor",
        "min.insync.replicas",
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
    ):
        assert properties[key] == "1", f"{key} must be 1 on a single node"


def test_the_properties_are_the_fixtures_own_for_one_node() -> None:
    """`aioproducer broker --kafka` and the `kafka_cluster` fixture run a node with these settings."""
    layout = NodeLayout(node_id=1, ports={"PLAINTEXT": 9092, "CONTROLLER": 9093}, log_dir="/tmp/unused")
    rendered = dict(line.split("=", 1) for line in render_properties(layout, [layout]).splitlines())
    ours = {key: value for key, value in server_properties(kafka_service()["environment"]).items()}
    differing = {
        key: (value, rendered.get(key))
        for key, value in ours.items()
        if key not in LAYOUT_PROPERTIES and rendered.get(key) != value
    }
    assert not differing, f"compose.yaml and the fixture disagree (compose, fixture): {differing}"


@pytest.mark.kafka
@pytest.mark.timeout(300)
def test_a_node_started_with_the_same_properties_serves_a_producer_and_a_transaction() -> None:
    properties = server_properties(kafka_service()["environment"])
    settable = {key: value for key, value in properties.items() if key not in LAYOUT_PROPERTIES}
    topic, transactional = f"compose-{uuid.uuid4().hex[:8]}", f"compose-txn-{uuid.uuid4().hex[:8]}"

    async def produce(bootstrap: str) -> None:
        async with Producer(bootstrap, acks="all") as producer:
            assert (await producer.send(topic, b"plain", key=b"k")).offset == 0
            assert len(await producer.partitions_for(topic)) == int(properties["num.partitions"])
        async with Producer(bootstrap, transactional_id=transactional) as producer, producer.transaction():
            await producer.send(topic, b"in a transaction", key=b"k")

    with KafkaCluster(nodes=1, broker_config=settable) as cluster:
        asyncio.run(produce(cluster.bootstrap_servers))
        records = read_back(cluster.bootstrap_servers, topic, isolation_level="read_committed")
        assert [r.value for r in records] == [b"plain", b"in a transaction"]
