"""read_batches: batches written by other clients, header flags, several batches at once, and every way bytes can
be truncated or corrupted (always ProtocolError, never another exception)."""

from __future__ import annotations

import contextlib
import struct
import warnings

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AiokafkaBuilder
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.errors import ProtocolError
from aioproducer.records import BatchBuilder, Record, read_batches
from aioproducer.records.compression import CompressionType

with warnings.catch_warnings():  # kafka-python's package import trips importlib.resources deprecations
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder

TS = 1_700_000_000_000
RECORDS = [
    (TS, b"key", b"value " * 30, [("h", b"1")]),
    (TS - 50, None, None, []),
    (TS + 9, b"", b"", [("ключ", None)]),
]


def _ours(records: list = RECORDS, codec: CompressionType = CompressionType.NONE, **state: int) -> bytes:
    builder = BatchBuilder(compression=codec)
    for ts, key, value, headers in records:
        builder.try_append(ts, key, value, headers)
    return builder.close().encode(**state)  # type: ignore[arg-type]


def _with_crc(data: bytes | bytearray) -> bytes:
    patched = bytearray(data)
    struct.pack_into(">I", patched, 17, crc32c(bytes(patched[21:])))
    return bytes(patched)


def _patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    patched = bytearray(data)
    struct.pack_into(fmt, patched, offset, value)
    return _with_crc(patched)


# kafka-python compresses snappy only through python-snappy, which is not installed; aiokafka covers that codec.
FOREIGN = [(AiokafkaBuilder, codec) for codec in CompressionType] + [
    (KafkaPythonBuilder, codec) for codec in CompressionType if codec is not CompressionType.SNAPPY
]


@pytest.mark.parametrize(("builder_cls", "codec"), FOREIGN)
def test_reads_batches_other_clients_wrote(builder_cls: type, codec: CompressionType) -> None:
    foreign = builder_cls(2, int(codec), 0, 31, 4, 500, 1 << 20)
    for offset, (ts, key, value, headers) in enumerate(RECORDS):
        foreign.append(offset, ts, key, value, headers)
    (batch,) = read_batches(bytes(foreign.build()))
    assert batch.compression is codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (31, 4, 500)
    assert (batch.base_timestamp, batch.max_timestamp, batch.last_offset_delta) == (TS, TS + 9, 2)
    assert batch.records == tuple(
        Record(offset=i, timestamp=ts, key=key, value=value, headers=tuple(headers))
        for i, (ts, key, value, headers) in enumerate(RECORDS)
    )


def test_header_flags_and_producer_state_are_reported() -> None:
    data = _ours(producer_id=9, producer_epoch=8, base_sequence=7, partition_leader_epoch=6, transactional=True)
    (batch,) = read_batches(data)
    assert (batch.base_offset, batch.partition_leader_epoch, batch.producer_id) == (0, 6, 9)
    assert (batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (8, 7, True)
    assert (batch.is_control, batch.timestamp_type) == (False, 0)


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    data = _ours()
    attributes = struct.unpack_from(">h", data, 21)[0] | 0x08
    data = _patch(_patch(data, 21, ">h", attributes), 35, ">q", 1234)
    (batch,) = read_batches(data)
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch.records] == [1234, 1234, 1234]


def test_control_flag_is_reported() -> None:
    data = _ours()
    (batch,) = read_batches(_patch(data, 21, ">h", 0x20 | 0x10))
    assert batch.is_control and batch.is_transactional


def test_reads_consecutive_batches_and_applies_base_offsets() -> None:
    first = _patch(_ours(), 0, ">q", 100)
    second = _patch(_ours(RECORDS[:1], CompressionType.GZIP), 0, ">q", 103)
    batches = read_batches(memoryview(first + second))
    assert [r.offset for b in batches for r in b.records] == [100, 101, 102, 103]
    assert [b.compression for b in batches] == [CompressionType.NONE, CompressionType.GZIP]
    assert read_batches(bytearray(first)) == read_batches(first)
    assert read_batches(b"") == []


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
def test_every_truncation_raises_protocol_error(codec: CompressionType) -> None:
    data = _ours(codec=codec)
    for cut in range(1, len(data)):
        with pytest.raises(ProtocolError):
            read_batches(data[:cut])
    with pytest.raises(ProtocolError):
        read_batches(data + data[:70])  # a whole batch, then a torn one


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD])
def test_any_flipped_byte_from_the_magic_on_raises_protocol_error(codec: CompressionType) -> None:
    data = _ours(codec=codec)
    for position in range(16, len(data)):
        corrupt = bytearray(data)
        corrupt[position] ^= 0x41
        with pytest.raises(ProtocolError):
            read_batches(bytes(corrupt))


def test_wrong_magic_raises_even_though_the_crc_does_not_cover_it() -> None:
    data = bytearray(_ours())
    data[16] = 1
    with pytest.raises(ProtocolError, match="magic"):
        read_batches(bytes(data))


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "message"),
    [
        (21, ">h", 5, "codec"),  # no codec has id 5
        (57, ">i", 4, "record length|varint"),  # one record more than the section holds
        (57, ">i", 2, "bytes left"),  # one record fewer: bytes remain
        (57, ">i", -1, "record count"),
        (8, ">i", 10, "length"),  # shorter than a header
    ],
)
def test_inconsistent_headers_raise_protocol_error(offset: int, fmt: str, value: int, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        read_batches(_patch(_ours(), offset, fmt, value))


def test_corrupt_compressed_section_with_a_valid_crc_raises_protocol_error() -> None:
    data = bytearray(_ours(codec=CompressionType.GZIP))
    data[61:71] = b"\x00" * 10
    with pytest.raises(ProtocolError):
        read_batches(_with_crc(data))


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_protocol_error(noise: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        read_batches(noise)


@settings(max_examples=200, deadline=None)
@given(
    position=st.integers(61, 10_000),
    replacement=st.binary(min_size=1, max_size=4),
    codec=st.sampled_from([CompressionType.NONE, CompressionType.SNAPPY]),
)
def test_mangled_records_with_a_valid_crc_decode_or_raise_protocol_error(
    position: int, replacement: bytes, codec: CompressionType
) -> None:
    data = bytearray(_ours(codec=codec))
    position = 61 + position % (len(data) - 61)
    data[position : position + len(replacement)] = replacement
    struct.pack_into(">i", data, 8, len(data) - 12)
    with contextlib.suppress(ProtocolError):
        read_batches(_with_crc(data))
