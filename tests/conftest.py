"""Shared fixtures: the session's Kafka endpoint (Tansu, or `AIOPRODUCER_BOOTSTRAP`), fresh topics, a mock cluster
per test and the read-back judge. Holds no test logic."""

from __future__ import annotations

import functools
import os
import re
import uuid
from collections.abc import Callable, Iterator

import pytest

from aioproducer.testing import ConsumedRecord, MockCluster, TansuBroker, create_topic, read_back

BOOTSTRAP_ENV = "AIOPRODUCER_BOOTSTRAP"


@pytest.fixture(scope="session")
def bootstrap() -> Iterator[str]:
    """The bootstrap servers of `AIOPRODUCER_BOOTSTRAP`'s cluster when set, else of a Tansu broker for the session."""
    external = os.environ.get(BOOTSTRAP_ENV)
    if external:
        yield external
        return
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
