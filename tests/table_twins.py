"""Running a table through one twin's row path (columnar views, row appender, deliveries) without a broker, for
the differential tests: what each row became, the batches' bytes and the memory charged."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from aioproducer import partitioner
from aioproducer.append import table_appender
from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.columnar.reader import ArrowReader
from aioproducer.deliveries import table as table_deliveries
from aioproducer.deliveries.delivery import BatchOutcome
from aioproducer.network.metadata import BrokerInfo, ClusterMetadata, MetadataState, PartitionInfo, TopicInfo
from aioproducer.records.compression import CompressionType
from tests.twins import use_twin

NOW_MS = 1_700_000_000_500


def layout(topic: str, count: int) -> TopicInfo:
    return TopicInfo(topic, tuple(PartitionInfo(p, 1) for p in range(count)), tuple(range(count)))


def run_table(kind: str, table: Any, batch_size: int = 600) -> tuple[Any, ...]:
    """The report's content, every batch's bytes and the memory left charged after `table` went through `kind`."""
    import random

    with pytest.MonkeyPatch.context() as monkeypatch:
        use_twin(monkeypatch, kind)
        acc = RecordAccumulator(
            batch_size=batch_size,
            linger_ms=5,
            buffer_memory=1 << 26,
            compression=CompressionType.NONE,
            compression_level=None,
            new_outcome=lambda tp: BatchOutcome(tp[0], tp[1], None),
        )
        state = MetadataState(max_age_ms=300_000, max_idle_ms=300_000, retry_backoff_ms=100)
        state.cluster = ClusterMetadata({1: BrokerInfo(1, "h", 1)}, {"t": layout("t", 4), "u": layout("u", 2)})
        appender = table_appender.TableAppender(
            accumulator=acc,
            pool=acc.pool,
            cluster_state=state,
            partitioner=partitioner.DefaultPartitioner(batch_size, rng=random.Random(5)),
            max_record_bytes=250,
            size_limit_message="too large",
            clock_ms=lambda: 0,
            wake_sender=lambda: None,
        )
        deliveries = table_deliveries.TableDeliveries(True)
        compiled = kind == "compiled"
        assert type(appender).__module__ == (
            "aioproducer.append._table_appender" if compiled else "aioproducer.append.table_appender"
        )
        assert type(deliveries).__module__.endswith("deliveries._table" if compiled else "deliveries.table")
        columns = ["topic", "key", "value", "partition", "timestamp", "headers"]
        names = set(table.column_names)
        roles = {role: role for role in columns if role in names}
        first = 0
        with ArrowReader(table, **roles) as reader:
            for batch in reader:
                start, waited = 0, False
                while True:
                    wait = appender.append_rows(batch, start, first, None, NOW_MS, deliveries, 1 << 40, waited)
                    if wait is None:
                        break
                    start, waited = wait.row, True  # a partition beyond the topic: waited for, then refused
                first += batch.num_rows
        encoded = {tp: [b.close().encode() for b in queue] for tp, queue in acc.queues.items()}
        used = acc.used_bytes
        for queue in acc.queues.values():
            for batch_ in queue:
                batch_.outcome.succeed(100, -1)
        report = deliveries.report(first)
        failures = sorted((type(f.error).__name__, str(f.error), pa.array(f.rows).to_pylist()) for f in report.failures)
        offsets = pa.array(report.offsets).to_pylist()
        ranges = dict(report.offset_ranges)
        return report.rows, report.delivered, failures, dict(report.per_partition), ranges, offsets, encoded, used
