"""Types of the compiled twin of `aioproducer.partitioner` (see that module for the behaviour)."""

import random

from aioproducer.partitioner import TopicPartitions

def murmur2(data: bytes) -> int: ...

class DefaultPartitioner:
    def __init__(self, batch_size: int = ..., *, ignore_keys: bool = ..., rng: random.Random | None = ...) -> None: ...
    def partition(self, topic: str, key: bytes | None, record_size: int, partitions: TopicPartitions) -> int: ...
