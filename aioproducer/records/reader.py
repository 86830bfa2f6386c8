"""Reading magic v2 record batches back into `RecordBatch` and `Record` values, validating magic and CRC-32C.

Pure decoding of bytes; every malformed input raises ProtocolError. Knows nothing about fetching or offsets commits.
"""

from __future__ import annotations

from dataclasses import dataclass

from crc32c import crc32c

from aioproducer.errors import ProtocolError
from aioproducer.records.compression import CompressionType, decompress
from aioproducer.records.layout import (
    BATCH_HEADER_SIZE,
    CODEC_MASK,
    CONTROL_BIT,
    CRC_START,
    HEADER_TAIL,
    LENGTH_FIELD_END,
    MAGIC,
    PREFIX,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    read_varint,
)

__all__ = ["Record", "RecordBatch", "read_batches"]

_LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a batch, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A decoded v2 batch. `timestamp_type` is 0 for create time, 1 for log-append time."""

    base_offset: int
    partition_leader_epoch: int
    compression: CompressionType
    timestamp_type: int
    is_transactional: bool
    is_control: bool
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: tuple[Record, ...]


def read_batches(data: bytes | memoryview) -> list[RecordBatch]:
    """Decode every batch in `data`; a wrong magic, a CRC mismatch or any truncation raises ProtocolError."""
    buf = bytes(data)
    batches = []
    pos = 0
    while pos < len(buf):
        if len(buf) - pos < BATCH_HEADER_SIZE:
            raise ProtocolError(f"truncated record batch: {len(buf) - pos} bytes left, a header needs 61")
        length = int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True)
        end = pos + LENGTH_FIELD_END + length
        if length < BATCH_HEADER_SIZE - LENGTH_FIELD_END or end > len(buf):
            raise ProtocolError(f"record batch length {length} does not fit the {len(buf) - pos} bytes left")
        batches.append(_read_batch(buf, pos, end))
        pos = end
    return batches


def _read_batch(buf: bytes, start: int, end: int) -> RecordBatch:
    base_offset, _, leader_epoch, magic, crc = PREFIX.unpack_from(buf, start)
    if magic != MAGIC:
        raise ProtocolError(f"record batch magic {magic} is not supported (only v2)")
    if crc32c(memoryview(buf)[start + CRC_START : end]) != crc:
        raise ProtocolError("record batch CRC-32C mismatch")
    (attributes, last_delta, base_ts, max_ts, producer_id, producer_epoch, base_sequence, count) = (
        HEADER_TAIL.unpack_from(buf, start + CRC_START)
    )
    codec_id = attributes & CODEC_MASK
    if codec_id > max(CompressionType):
        raise ProtocolError(f"unknown compression codec id {codec_id}")
    codec = CompressionType(codec_id)
    section = buf[start + BATCH_HEADER_SIZE : end]
    if codec is not CompressionType.NONE:
        section = decompress(codec, section)
    timestamp_type = 1 if attributes & TIMESTAMP_TYPE_BIT else 0
    # With log-append time every record carries the broker's time (Java's DefaultRecordBatch iterator).
    fixed_ts = max_ts if timestamp_type == _LOG_APPEND_TIME else None
    records = _read_records(section, count, base_offset, base_ts, fixed_ts)
    return RecordBatch(
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        compression=codec,
        timestamp_type=timestamp_type,
        is_transactional=bool(attributes & TRANSACTIONAL_BIT),
        is_control=bool(attributes & CONTROL_BIT),
        last_offset_delta=last_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records=records,
    )


def _read_records(
    section: bytes, count: int, base_offset: int, base_ts: int, fixed_ts: int | None
) -> tuple[Record, ...]:
    if count < 0:
        raise ProtocolError(f"negative record count {count}")
    records = []
    pos = 0
    size = len(section)
    for _ in range(count):
        length, pos = read_varint(section, pos, size)
        end = pos + length
        if length < 0 or end > size:
            raise ProtocolError(f"record length {length} does not fit the {size - pos} bytes left")
        records.append(_read_record(section, pos, end, base_offset, base_ts, fixed_ts))
        pos = end
    if pos != size:
        raise ProtocolError(f"{size - pos} bytes left after the batch's {count} records")
    return tuple(records)


def _read_record(data: bytes, pos: int, end: int, base_offset: int, base_ts: int, fixed_ts: int | None) -> Record:
    pos += 1  # attributes: unused in v2
    timestamp_delta, pos = read_varint(data, pos, end)
    offset_delta, pos = read_varint(data, pos, end)
    key, pos = _read_bytes(data, pos, end)
    value, pos = _read_bytes(data, pos, end)
    header_count, pos = read_varint(data, pos, end)
    if header_count < 0:
        raise ProtocolError(f"negative header count {header_count}")
    headers = []
    for _ in range(header_count):
        raw_key, pos = _read_bytes(data, pos, end)
        if raw_key is None:
            raise ProtocolError("null header key")
        try:
            header_key = raw_key.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"header key is not utf-8: {exc}") from exc
        header_value, pos = _read_bytes(data, pos, end)
        headers.append((header_key, header_value))
    if pos != end:
        raise ProtocolError(f"record length disagrees with its fields by {end - pos} bytes")
    return Record(
        offset=base_offset + offset_delta,
        timestamp=base_ts + timestamp_delta if fixed_ts is None else fixed_ts,
        key=key,
        value=value,
        headers=tuple(headers),
    )


def _read_bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(data, pos, end)
    if length == -1:
        return None, pos
    if length < 0 or pos + length > end:
        raise ProtocolError(f"field length {length} does not fit the {end - pos} bytes left in the record")
    return data[pos : pos + length], pos + length
