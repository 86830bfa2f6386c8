"""Types of the compiled twin of `aioproducer.append.appender` (see that module for the behaviour)."""

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aioproducer.append.appender import PreparedRecord
from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.buffer.pool import BufferPool
from aioproducer.deliveries.bulk import BulkDeliveries
from aioproducer.deliveries.delivery import Delivery
from aioproducer.models import Headers
from aioproducer.network.metadata import MetadataState, TopicInfo
from aioproducer.partitioner import Partitioner

class Appender:
    unyielded_bytes: int
    plain: bool
    general_enqueue: Callable[..., Delivery] | None
    general_enqueue_async: Callable[..., Awaitable[Delivery]] | None
    def __init__(
        self,
        *,
        accumulator: RecordAccumulator,
        pool: BufferPool,
        cluster_state: MetadataState,
        partitioner: Partitioner,
        key_serializer: Callable[[Any], bytes | None],
        value_serializer: Callable[[Any], bytes | None],
        plain_bytes_keys: bool,
        plain_bytes_values: bool,
        max_record_bytes: int,
        size_limit_message: str,
        clock_ms: Callable[[], int],
        wake_sender: Callable[[], None],
    ) -> None: ...
    def append_now(
        self, topic: str, value: Any, key: Any, headers: Any, partition: int | None, timestamp_ms: int | None
    ) -> Delivery | PreparedRecord: ...
    async def enqueue_plain_async(
        self,
        topic: str,
        value: Any = ...,
        *,
        key: Any = ...,
        headers: Headers | None = ...,
        partition: int | None = ...,
        timestamp_ms: int | None = ...,
    ) -> Delivery: ...
    def enqueue_plain(
        self,
        topic: str,
        value: Any = ...,
        *,
        key: Any = ...,
        headers: Headers | None = ...,
        partition: int | None = ...,
        timestamp_ms: int | None = ...,
    ) -> Delivery: ...
    def yield_due(self) -> bool: ...
    def yielded(self) -> None: ...
    def append_many(
        self, records: Sequence[Any], start: int, now_wall_ms: int, bulk: BulkDeliveries, yield_after_bytes: int
    ) -> tuple[int, PreparedRecord | None]: ...
    def place(self, prepared: PreparedRecord, info: TopicInfo) -> Delivery: ...
