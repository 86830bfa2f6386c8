"""Release accounting: every release callback of the exporter's structures runs exactly once, at the right time, on
every path (the end of the stream, an early close, a garbage-collected reader, an error in the caller's loop, a
refused schema, a refused batch); and pyarrow's memory pool returns to where it started. A stream is pulled one
batch at a time, so a table larger than memory streams through."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pyarrow as pa
import pytest

from aioproducer.columnar import ArrowReader, arrow
from aioproducer.errors import InvalidTableError
from tests.columnar.handmade import HandArray, HandStream, Node, i32, table
from tests.columnar.tables import read_all


def column(*values: bytes) -> Node:
    offsets, data = [0], b""
    for value in values:
        data += value
        offsets.append(len(data))
    return Node("z", len(values), [None, i32(*offsets), data])


def stream_of(batches: int, **options: object) -> HandStream:
    schema = table({"k": column()}, 0)
    return HandStream(schema, [table({"k": column(b"b%d" % i, b"x")}, 2) for i in range(batches)], **options)  # type: ignore[arg-type]


def test_each_batch_is_released_when_its_last_view_goes(twin: arrow.Implementation) -> None:
    stream = stream_of(3)
    reader = ArrowReader(stream, key="k", implementation=twin)
    first = next(reader)
    key = first.key
    del first  # the view alone keeps the batch
    second = next(reader)
    assert stream.ledger.unreleased() == ["stream", "batch0", "batch1"]
    assert key is not None and key.bytes_at(0) == b"b0"
    del key
    assert stream.ledger.unreleased() == ["stream", "batch1"]
    assert [batch.num_rows for batch in reader] == [2]  # the end of the stream closes the reader
    assert stream.ledger.unreleased() == ["batch1"]
    assert second.key is not None and second.key.bytes_at(0) == b"b1"  # a batch outlives its stream
    del second
    stream.ledger.assert_clean()


def test_an_early_close_releases_the_stream_and_reads_no_more(twin: arrow.Implementation) -> None:
    stream = stream_of(5)
    with ArrowReader(stream, key="k", implementation=twin) as reader:
        batch = next(reader)
    assert stream.next_calls == 1 and stream.ledger.unreleased() == ["batch0"]
    assert list(reader) == []
    reader.close()  # idempotent
    del batch
    stream.ledger.assert_clean()


def test_a_reader_dropped_without_closing_releases_everything(twin: arrow.Implementation) -> None:
    stream = stream_of(2)
    reader = ArrowReader(stream, key="k", implementation=twin)
    next(reader)
    del reader
    gc.collect()
    stream.ledger.assert_clean()


def test_an_error_in_the_callers_loop_releases_everything(twin: arrow.Implementation) -> None:
    stream = stream_of(4)
    with pytest.raises(KeyError), ArrowReader(stream, key="k", implementation=twin) as reader:
        for batch in reader:
            assert batch.key is not None
            raise KeyError(batch.key.bytes_at(0))
    assert stream.ledger.unreleased() == ["batch0"]  # `batch` still names it
    del batch
    stream.ledger.assert_clean()


def test_a_refused_schema_releases_the_stream_before_any_batch(twin: arrow.Implementation) -> None:
    stream = stream_of(2)
    with pytest.raises(InvalidTableError, match="the partition column 'k' is binary"):
        ArrowReader(stream, partition="k", implementation=twin)
    assert stream.next_calls == 0
    stream.ledger.assert_clean()
    pair = HandArray(table({"k": column(b"a")}, 1), table({"k": column(b"a")}, 1))
    with pytest.raises(InvalidTableError, match="the partition column 'k' is binary"):
        ArrowReader(pair, partition="k", implementation=twin)
    pair.ledger.assert_clean()


def test_a_refused_batch_is_released_at_once(twin: arrow.Implementation) -> None:
    good = table({"k": column(b"a")}, 1)
    bad = table({"k": Node("z", 2, [None, i32(0, 5, 1), b"abcde"])}, 2)
    stream = HandStream(good, [good, bad, good])
    reader = ArrowReader(stream, key="k", implementation=twin)
    kept = next(reader)
    try:
        next(reader)
    except InvalidTableError as error:
        assert error.column == "k"
        assert stream.ledger.unreleased() == ["batch0"]  # batch1 and the stream went while the error is still alive
    else:
        pytest.fail("the batch with decreasing offsets was read")
    assert stream.next_calls == 2
    del kept
    stream.ledger.assert_clean()


def pyarrow_table(rows: int) -> pa.Table:
    keys = pa.array([b"key-%d" % i for i in range(rows)], pa.binary_view())
    headers = pa.array([[{"key": "a", "value": b"b"}]] * rows)
    return pa.table({"k": keys, "t": pa.array(["t"] * rows).dictionary_encode(), "h": headers})


def test_pyarrow_memory_returns_to_its_start(twin: arrow.Implementation) -> None:
    start = pa.total_allocated_bytes()
    data = pyarrow_table(5000)
    read_all(data.to_batches(max_chunksize=700)[3], twin, key="k", topic="t", headers="h")
    with ArrowReader(data, key="k", headers="h", implementation=twin) as reader:
        batch = next(reader)
    del data
    assert pa.total_allocated_bytes() > start  # the batch we hold keeps its buffers
    del batch
    assert pa.total_allocated_bytes() == start
    with pytest.raises(InvalidTableError):
        read_all(pyarrow_table(100), twin, partition="k")
    assert pa.total_allocated_bytes() == start


def test_a_stream_larger_than_what_is_held_streams_through(twin: arrow.Implementation) -> None:
    """400 batches of 1 MiB through a reader: pyarrow never holds more than a few of them at once."""
    batch_bytes, batches = 1 << 20, 400
    schema = pa.schema([("k", pa.binary()), ("v", pa.large_binary())])

    def generate() -> Iterator[pa.RecordBatch]:
        for i in range(batches):
            values = pa.array([bytes([i % 256]) * 1024] * (batch_bytes // 1024), pa.large_binary())
            yield pa.record_batch([pa.array([b"k"] * len(values)), values], schema=schema)

    start = pa.total_allocated_bytes()
    peak, rows = 0, 0
    with ArrowReader(pa.RecordBatchReader.from_batches(schema, generate()), value="v", implementation=twin) as reader:
        for batch in reader:
            assert batch.value is not None
            assert batch.value.bytes_at(0) == bytes([(rows // 1024) % 256]) * 1024
            rows += batch.num_rows
            peak = max(peak, pa.total_allocated_bytes() - start)
    assert rows == batches * 1024
    assert peak < 4 * batch_bytes + (1 << 20), f"{peak} bytes held for batches of {batch_bytes}"
    del batch  # the last one
    assert pa.total_allocated_bytes() == start
