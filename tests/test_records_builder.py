"""BatchBuilder and ClosedBatch: sizes and limits, producer state in the header, input errors, and byte equality with
kafka-python's own v2 batch builder."""

from __future__ import annotations

import os
import struct
import warnings

import pytest
from crc32c import crc32c

from aioproducer.errors import AioProducerError, ConfigError, InvalidRecordError
from aioproducer.records import BatchBuilder, read_batches
from aioproducer.records.compression import CompressionType

with warnings.catch_warnings():  # kafka-python's package import trips importlib.resources deprecations
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder

TS = 1_700_000_000_000


def _append_all(builder: BatchBuilder, records: list[tuple[int, bytes | None, bytes | None, list]]) -> None:
    for i, (ts, key, value, headers) in enumerate(records):
        assert builder.try_append(ts, key, value, headers) == i


MIXED = [
    (TS, b"key-1", b"value-1", []),
    (TS + 5, None, b"keyless", [("trace", b"abc")]),
    (TS - 3, b"", b"", [("h1", None), ("h2", b"")]),
    (TS + 70_000, b"k" * 300, None, []),
    (TS + 1, None, None, [("ключ", b"\x00\xff")]),
]


def test_uncompressed_batch_is_byte_identical_to_kafka_pythons() -> None:
    ours = BatchBuilder()
    _append_all(ours, MIXED)
    theirs = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        batch_size=1 << 20,
    )  # fmt: skip
    for offset, (ts, key, value, headers) in enumerate(MIXED):
        theirs.append(offset, ts, key, value, headers)
    # kafka-python writes leader epoch 0 where Java's producer (and our default) writes -1.
    assert ours.close().encode(partition_leader_epoch=0) == bytes(theirs.build())


def test_producer_state_matches_kafka_python_for_a_transactional_batch() -> None:
    ours = BatchBuilder()
    _append_all(ours, MIXED[:2])
    theirs = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=True, producer_id=4242, producer_epoch=7, base_sequence=99,
        batch_size=1 << 20,
    )  # fmt: skip
    for offset, (ts, key, value, headers) in enumerate(MIXED[:2]):
        theirs.append(offset, ts, key, value, headers)
    encoded = ours.close().encode(
        producer_id=4242, producer_epoch=7, base_sequence=99, transactional=True, partition_leader_epoch=0
    )
    assert encoded == bytes(theirs.build())


def test_header_fields_sit_at_their_documented_offsets() -> None:
    builder = BatchBuilder()
    _append_all(builder, MIXED)
    data = builder.close().encode(producer_id=12, producer_epoch=3, base_sequence=40, partition_leader_epoch=9)
    base_offset, length, leader_epoch, magic, crc = struct.unpack_from(">qiibI", data, 0)
    attributes, last_delta, base_ts, max_ts, pid, epoch, seq, count = struct.unpack_from(">hiqqqhii", data, 21)
    assert (base_offset, length, leader_epoch, magic) == (0, len(data) - 12, 9, 2)
    assert crc == crc32c(data[21:])
    assert (attributes, last_delta, count) == (0, len(MIXED) - 1, len(MIXED))
    assert (base_ts, max_ts) == (TS, TS + 70_000)
    assert (pid, epoch, seq) == (12, 3, 40)


def test_encode_again_with_new_producer_state_keeps_the_records() -> None:
    builder = BatchBuilder(compression=CompressionType.ZSTD)
    _append_all(builder, MIXED)
    closed = builder.close()
    first = closed.encode(producer_id=1, producer_epoch=0, base_sequence=0)
    retry = closed.encode(producer_id=1, producer_epoch=1, base_sequence=17)
    assert first[61:] == retry[61:]
    assert len(first) == len(retry) == closed.size_in_bytes
    (batch,) = read_batches(retry)
    assert (batch.producer_epoch, batch.base_sequence) == (1, 17)
    assert [r.value for r in batch.records] == [r.value for r in read_batches(first)[0].records]


def _built(records: list) -> BatchBuilder:
    builder = BatchBuilder()
    _append_all(builder, records)
    return builder


def test_estimated_size_is_the_exact_uncompressed_size() -> None:
    builder = BatchBuilder()
    assert builder.estimated_size == 61
    for i, (ts, key, value, headers) in enumerate(MIXED):
        builder.try_append(ts, key, value, headers)
        assert builder.record_count == i + 1
        assert builder.estimated_size == len(_built(MIXED[: i + 1]).close().encode())


def test_size_limit_refuses_the_record_that_would_overflow() -> None:
    builder = BatchBuilder(size_limit=1000)
    accepted = 0
    while builder.try_append(TS, None, b"v" * 100) is not None:
        accepted += 1
    # Each record: length varint (2) + attributes, deltas, null key (4) + value length (2) + 100 + header count (1).
    record_size = 109
    assert accepted == builder.record_count == (1000 - 61) // record_size == 8
    assert builder.estimated_size == 61 + 8 * record_size
    assert builder.try_append(TS, None, b"") is not None  # a smaller record still fits
    assert len(builder.close().encode()) == builder.estimated_size


def test_an_empty_builder_takes_one_oversized_record_and_then_refuses() -> None:
    builder = BatchBuilder(size_limit=100)
    assert builder.try_append(TS, None, b"x" * 500) == 0
    assert builder.try_append(TS, None, b"") is None
    assert builder.record_count == 1


@pytest.mark.parametrize(
    ("key", "value", "headers"),
    [
        (None, None, []),
        (b"k", b"v" * 200, []),
        (b"k" * 5000, b"v" * 70000, [("a", b"b"), ("ключ", None)]),
        (None, b"", [("x" * 200, b"y" * 300)] * 3),
    ],
)
def test_record_size_upper_bound_bounds_the_record_in_any_batch(
    key: bytes | None, value: bytes | None, headers: list
) -> None:
    bound = BatchBuilder.record_size_upper_bound(key, value, headers)
    alone = BatchBuilder()
    alone.try_append(TS, key, value, headers)
    assert alone.estimated_size <= bound
    crowded = BatchBuilder(size_limit=1 << 30)
    for _ in range(20_000):  # offset deltas past two varint bytes
        crowded.try_append(TS, None, None)
    before = crowded.estimated_size
    crowded.try_append(TS - 10**15, key, value, headers)  # a wide negative timestamp delta
    assert crowded.estimated_size - before <= bound - 61
    assert bound - alone.estimated_size <= 21  # Java's MAX_RECORD_OVERHEAD is all the slack


def test_compression_that_does_not_shrink_falls_back_to_none() -> None:
    builder = BatchBuilder(compression=CompressionType.GZIP)
    builder.try_append(TS, None, os.urandom(2000))
    closed = builder.close()
    assert closed.compression is CompressionType.NONE
    assert closed.size_in_bytes == builder.estimated_size
    assert read_batches(closed.encode())[0].compression is CompressionType.NONE


def test_compression_that_shrinks_is_kept() -> None:
    builder = BatchBuilder(compression=CompressionType.LZ4, compression_level=9)
    for i in range(100):
        builder.try_append(TS + i, None, b"the same text again and again " * 3)
    closed = builder.close()
    assert closed.compression is CompressionType.LZ4
    assert closed.size_in_bytes < builder.estimated_size // 5
    assert struct.unpack_from(">h", closed.encode(), 21)[0] & 0x07 == 3


def test_close_is_idempotent_and_appending_afterwards_fails() -> None:
    builder = BatchBuilder()
    builder.try_append(TS, None, b"v")
    closed = builder.close()
    assert builder.close() is closed
    with pytest.raises(AioProducerError):
        builder.try_append(TS, None, b"w")
    empty = BatchBuilder()
    empty.close()
    with pytest.raises(AioProducerError):
        empty.try_append(TS, None, b"w")


def test_closed_batch_reports_its_timestamps_and_count() -> None:
    builder = BatchBuilder()
    _append_all(builder, MIXED)
    closed = builder.close()
    assert (closed.record_count, closed.base_timestamp, closed.max_timestamp) == (5, TS, TS + 70_000)


@pytest.mark.parametrize(
    ("timestamp", "key", "value", "headers"),
    [
        (TS, "text key", b"v", []),
        (TS, None, "text value", []),
        (TS, None, 42, []),
        (TS, None, b"v", [(b"bytes-key", b"v")]),
        (TS, None, b"v", [("k", "text header value")]),
        (TS, None, b"v", [("\ud800", b"lone surrogate")]),
        (1.5, None, b"v", []),
        (2**63, None, b"v", []),
    ],
)
def test_invalid_records_raise_and_leave_the_batch_untouched(
    timestamp: object, key: object, value: object, headers: list
) -> None:
    for builder in (BatchBuilder(), _built(MIXED[:1])):
        before = (builder.record_count, builder.estimated_size)
        with pytest.raises(InvalidRecordError):
            builder.try_append(timestamp, key, value, headers)  # type: ignore[arg-type]
        assert (builder.record_count, builder.estimated_size) == before
        assert len(builder.close().encode()) == builder.estimated_size


def test_timestamps_at_the_int64_edges() -> None:
    low, high = -(2**63), 2**63 - 1
    builder = BatchBuilder()
    assert builder.try_append(high, None, b"a") == 0
    assert builder.try_append(high - 1, None, b"b") == 1
    with pytest.raises(InvalidRecordError):
        builder.try_append(high + 1, None, b"c")
    (batch,) = read_batches(builder.close().encode())
    assert [r.timestamp for r in batch.records] == [high, high - 1]
    builder = BatchBuilder()
    builder.try_append(low, None, b"a")
    with pytest.raises(InvalidRecordError):
        builder.try_append(low - 1, None, b"b")


def test_a_timestamp_delta_beyond_int64_cannot_share_the_batch() -> None:
    builder = BatchBuilder()
    builder.try_append(-(2**62) * 2, None, b"a")
    assert builder.try_append(2**62, None, b"b") is None  # delta 3 * 2**62 overflows int64
    assert builder.record_count == 1


@pytest.mark.parametrize("kwargs", [{"size_limit": 0}, {"size_limit": True}, {"compression": 9}])
def test_bad_builder_settings_raise_config_error(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        BatchBuilder(**kwargs)


def test_bad_level_for_the_codec_raises_config_error() -> None:
    with pytest.raises(ConfigError):
        BatchBuilder(compression=CompressionType.GZIP, compression_level=12)


def test_producer_state_out_of_range_raises() -> None:
    builder = BatchBuilder()
    builder.try_append(TS, None, b"v")
    with pytest.raises(InvalidRecordError):
        builder.close().encode(producer_epoch=1 << 15)
