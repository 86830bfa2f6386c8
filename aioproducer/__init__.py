"""aioproducer: an asyncio-native Kafka producer. This module holds the public API only."""

from __future__ import annotations

from aioproducer import errors
from aioproducer.config import ProducerConfig
from aioproducer.deliveries.bulk import Deliveries
from aioproducer.deliveries.delivery import Delivery
from aioproducer.models import ProducerRecord, RecordMetadata
from aioproducer.partitioner import DefaultPartitioner, Partitioner, RoundRobinPartitioner, TopicPartitions, murmur2
from aioproducer.producer import Producer
from aioproducer.settings import ProducerSettings
from aioproducer.version import __version__

__all__ = [
    "DefaultPartitioner",
    "Deliveries",
    "Delivery",
    "Partitioner",
    "Producer",
    "ProducerConfig",
    "ProducerRecord",
    "ProducerSettings",
    "RecordMetadata",
    "RoundRobinPartitioner",
    "TopicPartitions",
    "__version__",
    "errors",
    "murmur2",
]
