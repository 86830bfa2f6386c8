"""Types of the compiled twin of `aioproducer.buffer.batch` (see that module for the behaviour)."""

from collections.abc import Callable
from typing import Any

from aioproducer.buffer.batch import _Queue
from aioproducer.records import BatchBuilder, ClosedBatch

class ProducerBatch:
    tp: tuple[str, int]
    topic: str
    partition: int
    builder: BatchBuilder | None
    closed: ClosedBatch | None
    outcome: Any
    created_ms: int
    attempts: int
    retry_at_ms: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_error: BaseException | None
    leader_id: int
    leader_epoch: int
    reserved_bytes: int
    full: bool
    expedited: bool
    sealed: bool
    compressing: bool
    in_flight: bool
    maybe_written: bool
    done_callbacks: list[Callable[[], None]]
    def __init__(self, tp: tuple[str, int], builder: BatchBuilder, created_ms: int, outcome: Any) -> None: ...
    @property
    def record_count(self) -> int: ...
    def seal(self) -> None: ...
    def close(self) -> ClosedBatch: ...
    @property
    def size_in_bytes(self) -> int: ...

def queued_bytes(queue: _Queue) -> int: ...
