"""`send_table` for a producer with record hooks: every row becomes a `ProducerRecord` and goes through
`send_many`, so that each hook sees (and may change) each record, as Java's interceptors see every record. Slower
than the columnar path by design; the report is the same `TableReport`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aioproducer.columnar.arrow import Int64Array
from aioproducer.columnar.reader import ArrowReader, ColumnBatch
from aioproducer.deliveries.table import widened
from aioproducer.errors import AioProducerError, InvalidRecordError
from aioproducer.models import ProducerRecord, RecordMetadata, RowFailures, TableReport

__all__ = ["send_table_as_records"]

# Rows per send_many call: enough for its batching, few enough to hold as Python objects at once.
_CHUNK_ROWS = 10_000

SendMany = Callable[[list[ProducerRecord]], Awaitable[list[RecordMetadata | BaseException]]]


async def send_table_as_records(
    reader: ArrowReader, topic: str | None, send_many: SendMany, offsets: bool
) -> TableReport:
    """Send the table's rows as records through `send_many`, chunk by chunk; the same report as the columnar path."""
    results: list[Any] = []  # per row: RecordMetadata or the exception (kept per row: this path makes objects anyway)
    with reader:
        for columns in reader:
            for start in range(0, columns.num_rows, _CHUNK_ROWS):
                stop = min(start + _CHUNK_ROWS, columns.num_rows)
                records: list[ProducerRecord] = []
                refused: dict[int, BaseException] = {}
                for row in range(start, stop):
                    try:
                        records.append(_record(columns, row, topic))
                    except AioProducerError as exc:
                        refused[row - start] = exc
                try:
                    sent = iter(await send_many(records))
                except AioProducerError as exc:
                    # Raised before any record was buffered: the producer is closing, or the transaction ended. As
                    # on the columnar path, this batch's rows not sent fail with it and the table is read no further.
                    results.extend(refused.get(n, exc) for n in range(stop - start))
                    results.extend(exc for _ in range(stop, columns.num_rows))
                    return _report(results, offsets)
                results.extend(refused[n] if n in refused else next(sent) for n in range(stop - start))
    return _report(results, offsets)


def _record(columns: ColumnBatch, row: int, topic: str | None) -> ProducerRecord:
    if topic is None:
        topic = columns.topic.text_at(row)  # type: ignore[union-attr]  # a topic column when no topic is given
        if topic is None:
            raise InvalidRecordError("the row's topic is null")
    timestamp = columns.timestamp.int_at(row) if columns.timestamp is not None else None
    return ProducerRecord._make(
        (
            topic,
            columns.value.bytes_at(row) if columns.value is not None else None,
            columns.key.bytes_at(row) if columns.key is not None else None,
            (columns.headers.headers_at(row) or None) if columns.headers is not None else None,
            columns.partition.int_at(row) if columns.partition is not None else None,
            timestamp,
        )
    )


def _report(results: list[Any], offsets: bool) -> TableReport:
    groups: dict[tuple[type[BaseException], str], tuple[BaseException, list[int]]] = {}
    per_partition: dict[tuple[str, int], int] = {}
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    delivered = 0
    for row, result in enumerate(results):
        if isinstance(result, BaseException):
            groups.setdefault((type(result), str(result)), (result, []))[1].append(row)
        else:
            delivered += 1
            tp = (result.topic, result.partition)
            per_partition[tp] = per_partition.get(tp, 0) + 1
            ranges[tp] = widened(ranges.get(tp), result.offset, 0, 0)
    failures = tuple(RowFailures(error, Int64Array(rows, name="row")) for error, rows in groups.values())
    column = None
    if offsets:
        column = Int64Array(
            [None if isinstance(r, BaseException) or r.offset < 0 else r.offset for r in results], name="offset"
        )
    return TableReport(len(results), delivered, len(results) - delivered, failures, per_partition, ranges, column)
