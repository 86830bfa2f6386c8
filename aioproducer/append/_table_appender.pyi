"""Types of the compiled twin of `aioproducer.append.table_appender` (see that module for the behaviour)."""

from collections.abc import Callable

from aioproducer.append.table_appender import TableWait
from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.buffer.pool import BufferPool
from aioproducer.columnar.reader import ColumnBatch
from aioproducer.deliveries.table import TableDeliveries
from aioproducer.network.metadata import MetadataState
from aioproducer.partitioner import Partitioner

class TableAppender:
    unyielded_bytes: int
    def __init__(
        self,
        *,
        accumulator: RecordAccumulator,
        pool: BufferPool,
        cluster_state: MetadataState,
        partitioner: Partitioner,
        max_record_bytes: int,
        size_limit_message: str,
        clock_ms: Callable[[], int],
        wake_sender: Callable[[], None],
    ) -> None: ...
    def append_rows(
        self,
        columns: ColumnBatch,
        start: int,
        first_row: int,
        topic: str | None,
        now_ms: int,
        deliveries: TableDeliveries,
        yield_after_bytes: int,
        waited: bool,
    ) -> TableWait | None: ...
