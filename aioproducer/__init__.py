"""aioproducer: an asyncio-native Kafka producer. This module holds the public API only."""

from __future__ import annotations

__version__ = "0.1.0"

from . import errors
from .config import ProducerConfig
from .delivery import Delivery
from .models import ProducerRecord, RecordMetadata
from .partitioner import DefaultPartitioner, Partitioner, RoundRobinPartitioner, TopicPartitions, murmur2
from .producer import Producer
from .settings import ProducerSettings

__all__ = [
    "DefaultPartitioner",
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
