"""aioproducer's pytest plugin (entry point `pytest11`): the fixtures `mock_producer`, `tansu_broker`, `kafka_cluster`.

pytest loads it wherever aioproducer is installed, so it imports nothing beyond pytest at load time: each fixture
imports what it needs when a test asks for it, and says which extra is missing if that fails.

- `mock_producer`: a started `MockProducer`, closed after the test. Configure it with
  `@pytest.mark.mock_producer(topics={"orders": 3}, value_serializer="json", auto_complete=False, ...)`.
- `tansu_broker`: an embedded Tansu broker for the session (`.bootstrap_servers`).
- `kafka_cluster`: a real single-node Apache Kafka for the session (`aioproducer.testing.KafkaCluster`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from aioproducer.testing import KafkaCluster, MockProducer, TansuBroker

__all__ = ["kafka_cluster", "mock_producer", "tansu_broker"]

_MARKER = "mock_producer"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{_MARKER}(**settings): settings for the `mock_producer` fixture (MockProducer's arguments)"
    )


@pytest.fixture
def mock_producer(request: pytest.FixtureRequest) -> Iterator[MockProducer]:
    """A started `aioproducer.testing.MockProducer`; records complete at once unless the marker says otherwise.

    The fixture is synchronous, so it serves sync tests (FastAPI's TestClient) and async ones alike; the records
    bind to whichever event loop sends them.
    """
    from aioproducer.testing import MockProducer

    settings: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers(_MARKER))):  # closest marker wins
        if marker.args:
            raise pytest.UsageError(f"@pytest.mark.{_MARKER} takes keyword arguments only, got {marker.args!r}")
        settings.update(marker.kwargs)
    producer = MockProducer(**settings)
    producer._open()
    try:
        yield producer
    finally:
        producer._close_now()


@pytest.fixture(scope="session")
def tansu_broker() -> Iterator[TansuBroker]:
    """An embedded Tansu broker (from `aioproducer[testing]`) for the whole session, on a free loopback port."""
    from aioproducer.testing import TansuBroker

    with TansuBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[KafkaCluster]:
    """A real single-node Apache Kafka (KRaft) for the whole session; needs Java 17+ (and Maven Central reachable
    the first time, to fetch Kafka's jars into the user cache)."""
    from aioproducer.testing import KafkaCluster

    with KafkaCluster(nodes=1) as cluster:
        yield cluster
