"""Shared fixtures: the session's Kafka endpoints (real Apache Kafka by default, `AIOPRODUCER_BOOTSTRAP` when set, and
Tansu on request), fresh topics, a mock cluster per test and the read-back judge. Holds no test logic.

Targets, by fixture name:
- `bootstrap`: the suite's default broker. Real Kafka (the session's single node, `kafka_cluster`) unless
  `AIOPRODUCER_BOOTSTRAP` points at an external cluster.
- `kafka_cluster` / `kafka_cluster_3`: real Apache Kafka with node control, 1 node (session) or 3 combined nodes
  (session, started only when a test asks for it). Never replaced by `AIOPRODUCER_BOOTSTRAP`.
  `kafka_cluster_3_one_controller`: 3 brokers, node 1 the only controller, no auto-creation (per module).
  `AIOPRODUCER_KAFKA_VERSION` picks another Kafka release for all of them.
- `tansu_bootstrap`: an embedded Tansu, for tests about Tansu or that need its instant start.
- `mock_cluster`: librdkafka's mock cluster, for injected error codes.
"""

from __future__ import annotations

import functools
import os
import re
import uuid
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

from aioproducer.testing import ConsumedRecord, KafkaCluster, MockCluster, TansuBroker, create_topic, read_back

BOOTSTRAP_ENV = "AIOPRODUCER_BOOTSTRAP"
# Runs every real-Kafka fixture on another Kafka release, e.g. 3.9.2 (`nox -s tests` does so for the core suites).
KAFKA_VERSION_ENV = "AIOPRODUCER_KAFKA_VERSION"

# Clusters started in this session, for the start-up summary and for log tails of failing tests.
_CLUSTERS: list[tuple[str, KafkaCluster]] = []


def _start_cluster(label: str, nodes: int, **options: Any) -> KafkaCluster:
    version = os.environ.get(KAFKA_VERSION_ENV)
    cluster = KafkaCluster(nodes=nodes, **({"version": version} if version else {}), **options)
    cluster.start()
    _CLUSTERS.append((label, cluster))
    return cluster


@pytest.fixture(scope="session")
def kafka_session_cluster() -> Iterator[KafkaCluster]:
    cluster = _start_cluster("kafka_cluster (1 node)", 1)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def kafka_session_cluster_3() -> Iterator[KafkaCluster]:
    cluster = _start_cluster("kafka_cluster_3 (3 nodes)", 3)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def kafka_cluster_3_one_controller() -> Iterator[KafkaCluster]:
    """Three brokers of which only node 1 is a controller, and no topic auto-creation: nodes 2 and 3 can both be
    down while the quorum lives on. Started per module that asks; tests heal it themselves."""
    cluster = _start_cluster(
        "kafka_cluster_3_one_controller (3 nodes)",
        3,
        controllers=1,
        broker_config={"auto.create.topics.enable": "false"},
    )
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def kafka_cluster(kafka_session_cluster: KafkaCluster) -> Iterator[KafkaCluster]:
    """The session's single real Kafka node (broker + controller); topics auto-create on Metadata. A test may
    stop, kill or pause it: it runs again (same data) before the next test."""
    yield kafka_session_cluster
    kafka_session_cluster.heal()


@pytest.fixture
def kafka_cluster_3(kafka_session_cluster_3: KafkaCluster) -> Iterator[KafkaCluster]:
    """Three real Kafka nodes for the session (replication 3, min.insync.replicas=2), started by the first test
    that asks. A test may stop, kill or pause nodes: all three run again before the next test."""
    yield kafka_session_cluster_3
    kafka_session_cluster_3.heal()


@pytest.fixture(scope="session")
def bootstrap(request: pytest.FixtureRequest) -> str:
    """The bootstrap servers of `AIOPRODUCER_BOOTSTRAP`'s cluster when set, else of the session's real Kafka node."""
    external = os.environ.get(BOOTSTRAP_ENV)
    if external:
        return external
    cluster: KafkaCluster = request.getfixturevalue("kafka_session_cluster")
    return cluster.bootstrap_servers


@pytest.fixture(scope="session")
def tansu_bootstrap() -> Iterator[str]:
    """An embedded Tansu broker for the session (one broker, instant start, auto-creates topics)."""
    with TansuBroker() as broker:
        yield broker.bootstrap_servers


@pytest.fixture
def topic_factory(bootstrap: str, request: pytest.FixtureRequest) -> Callable[..., str]:
    """`topic_factory(partitions=4)` creates a new topic named after the test and returns its name."""
    prefix = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:60]

    def make(partitions: int = 4) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        create_topic(bootstrap, name, partitions)
        return name

    return make


@pytest.fixture
def mock_cluster() -> Iterator[MockCluster]:
    """A fresh 3-broker librdkafka mock cluster, closed after the test."""
    with MockCluster(3) as cluster:
        yield cluster


@pytest.fixture
def read_back_records(bootstrap: str) -> Callable[..., list[ConsumedRecord]]:
    """`read_back` bound to the session's bootstrap servers."""
    return functools.partial(read_back, bootstrap)


# Fixtures that start (or stand for) a real Kafka JVM. A test using one, directly or through another fixture, is
# marked `kafka`, and so is every test of a module that starts KafkaCluster, Spark or the Java peer itself (or
# through a fixture of its own); elsewhere a test that does carries `@pytest.mark.kafka` by hand.
_KAFKA_FIXTURES = frozenset(
    {
        "bootstrap",
        "kafka_cluster",
        "kafka_cluster_3",
        "kafka_session_cluster",
        "kafka_session_cluster_3",
        "kafka_cluster_3_one_controller",
        "topic_factory",
        "read_back_records",
    }
)

_KAFKA_MODULES = frozenset(
    {
        "test_benchmarks.py",
        "test_docs_spark.py",
        "test_examples.py",
        "test_fresh_project.py",
        "test_kafka_cluster.py",
        "test_protocol_kafka.py",
        "test_spark.py",
        "test_spark_cache.py",
        "test_spark_stream.py",
        "test_spark_transactional.py",
    }
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kafka: needs real Apache Kafka (a JVM): set from the fixtures a test uses, or by hand; `-m 'not kafka'` "
        "keeps the broker-free, Tansu and librdkafka-mock tests",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that reaches real Kafka: through a fixture, through a parameter named `kafka` (the suites that
    run once per broker kind choose the broker from their parameter), or in a module that starts a JVM itself."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        by_parameter = callspec is not None and "kafka" in callspec.params.values()
        if fixtures & _KAFKA_FIXTURES or by_parameter or item.path.name in _KAFKA_MODULES:
            item.add_marker(pytest.mark.kafka)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    """A failing test that ran on real Kafka gets the end of each node's log in its report."""
    report = yield
    if isinstance(report, pytest.TestReport) and report.failed and _CLUSTERS:
        used = set(getattr(item, "fixturenames", ()))
        for label, cluster in _CLUSTERS:
            uses_it = label.split(" ")[0] in used or ("bootstrap" in used and label.startswith("kafka_cluster "))
            if not uses_it or cluster.startup_s is None:
                continue
            for node_id in cluster.node_ids:
                try:
                    tail = cluster.log_tail(node_id, 3000)
                except Exception:
                    continue
                report.sections.append((f"{label}: node {node_id} log (tail)", tail))
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print how long each real Kafka cluster of the session took to start."""
    for label, cluster in _CLUSTERS:
        if cluster.startup_s is not None:
            terminalreporter.write_line(
                f"real Apache Kafka {cluster.version}, {label}: started in {cluster.startup_s:.1f} s"
            )
