"""Types of the compiled twin of `aioproducer.partitioner` (see that module for the behaviour)."""

import random
from collections.abc import Sequence

from aioproducer.partitioner import TopicPartitions

def murmur2(data: bytes) -> int: ...

class DefaultPartitioner:
    def __init__(self, batch_size: int = ..., *, ignore_keys: bool = ..., rng: random.Random | None = ...) -> None: ...
    def update_load_stats(
        self, topic: str, queue_sizes: Sequence[int], partition_ids: Sequence[int], queues: int
    ) -> None: ...
    def partition(self, topic: str, key: bytes | None, record_size: int, partitions: TopicPartitions) -> int: ...
