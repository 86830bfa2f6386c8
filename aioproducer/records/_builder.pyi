"""Types of the compiled twin of `aioproducer.records.builder` (see that module for the behaviour)."""

from collections.abc import Sequence

from aioproducer.records.builder import ClosedBatch
from aioproducer.records.compression import CompressionType

class BatchBuilder:
    def __init__(
        self, *, compression: CompressionType = ..., compression_level: int | None = ..., size_limit: int = ...
    ) -> None: ...
    @property
    def record_count(self) -> int: ...
    @property
    def estimated_size(self) -> int: ...
    @staticmethod
    def record_size_upper_bound(
        key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]] = ...
    ) -> int: ...
    def try_append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = ...,
    ) -> int | None: ...
    def close(self) -> ClosedBatch: ...
