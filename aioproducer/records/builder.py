"""Building magic v2 record batches: `BatchBuilder` appends records, `ClosedBatch` encodes the finished batch.

Pure and synchronous: no I/O, no clock (timestamps are arguments), no knowledge of partitions or producer state
beyond what `ClosedBatch.encode` is given.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from crc32c import crc32c

from aioproducer.accelerated import compiled_twin
from aioproducer.errors import AioProducerError, ConfigError, InvalidRecordError
from aioproducer.records.compression import CompressionType, compress, validate_level
from aioproducer.records.layout import (
    BATCH_HEADER_SIZE,
    HEADER_TAIL,
    INT64_MAX,
    INT64_MIN,
    LENGTH_FIELD_END,
    MAGIC,
    MAX_RECORD_OVERHEAD,
    PREFIX,
    TRANSACTIONAL_BIT,
    VARINT_TABLE_SIZE,
    VARINTS,
    varint_size,
    zigzag_varint,
)

__all__ = [
    "BatchBuilder",
    "ClosedBatch",
    "PureBatchBuilder",
    "check_builder_settings",
    "encode_headers",
    "record_size_upper_bound",
]

Headers = Sequence[tuple[str, "bytes | None"]]

_ZERO = b"\x00"
_NULL = b"\x01"  # zigzag(-1): a null key, value or header value


@dataclass(frozen=True, slots=True)
class ClosedBatch:
    """A finished batch: its (possibly compressed) records section and everything but the producer state."""

    records_section: bytes = field(repr=False)
    compression: CompressionType
    record_count: int
    base_timestamp: int
    max_timestamp: int

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the encoded batch on the wire."""
        return BATCH_HEADER_SIZE + len(self.records_section)

    def encode(
        self,
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        partition_leader_epoch: int = -1,
    ) -> bytes:
        """The full v2 batch (base offset 0) with its CRC-32C, stamped with the given producer state.

        Only the 61-byte header is rebuilt, so a retry with a new epoch or sequence costs one CRC pass.
        """
        attributes = int(self.compression) | (TRANSACTIONAL_BIT if transactional else 0)
        try:
            tail = HEADER_TAIL.pack(
                attributes,
                self.record_count - 1,
                self.base_timestamp,
                self.max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                self.record_count,
            )
            crc = crc32c(self.records_section, crc32c(tail))
            prefix = PREFIX.pack(
                0, BATCH_HEADER_SIZE - LENGTH_FIELD_END + len(self.records_section), partition_leader_epoch, MAGIC, crc
            )
        except struct.error as exc:
            raise InvalidRecordError(f"producer state out of range for a v2 batch header: {exc}") from exc
        return b"".join((prefix, tail, self.records_section))


class BatchBuilder:
    """Appends records to one uncompressed records section; `close` compresses it once into a `ClosedBatch`."""

    __slots__ = (
        "_base_timestamp",
        "_buf",
        "_closed",
        "_compression",
        "_compression_level",
        "_count",
        "_delta_limit",
        "_max_timestamp",
        "_size",
        "_size_limit",
    )

    def __init__(
        self,
        *,
        compression: CompressionType = CompressionType.NONE,
        compression_level: int | None = None,
        size_limit: int = 16384,
    ) -> None:
        codec = check_builder_settings(compression, compression_level, size_limit)
        self._compression = codec
        self._compression_level = compression_level
        self._size_limit = size_limit
        self._buf = bytearray()
        self._count = 0
        self._size = BATCH_HEADER_SIZE
        self._base_timestamp = -1
        self._max_timestamp = -1
        self._delta_limit = VARINT_TABLE_SIZE
        self._closed: ClosedBatch | None = None

    @property
    def record_count(self) -> int:
        """Records appended so far."""
        return self._count

    @property
    def estimated_size(self) -> int:
        """Bytes of the whole batch (61-byte header included) if it were sent uncompressed."""
        return self._size

    @staticmethod
    def record_size_upper_bound(key: bytes | None, value: bytes | None, headers: Headers = ()) -> int:
        """See the module function `record_size_upper_bound`."""
        return record_size_upper_bound(key, value, headers)

    def try_append(
        self, timestamp_ms: int, key: bytes | None, value: bytes | None, headers: Headers = ()
    ) -> int | None:
        """Append one record and return its offset delta, or None when it would push the uncompressed batch past
        `size_limit` (an empty builder always takes one record) or its timestamp cannot share this batch."""
        count = self._count
        try:
            if count:
                delta = timestamp_ms - self._base_timestamp
                if 0 <= delta < self._delta_limit:
                    timestamp_delta = VARINTS[delta]
                else:
                    wide = _wide_timestamp_delta(timestamp_ms, delta)
                    if wide is None:
                        self._check_open()
                        return None
                    timestamp_delta = wide
                offset_delta = VARINTS[count] if count < VARINT_TABLE_SIZE else zigzag_varint(count)
            else:
                self._check_open()
                _check_timestamp(timestamp_ms)
                timestamp_delta = offset_delta = _ZERO
            body = _record_body(timestamp_delta, offset_delta, key, value, headers)
        except TypeError as exc:
            raise InvalidRecordError(
                f"record timestamp must be an int, key, value and header values bytes or None: {exc}"
            ) from exc
        body_size = len(body)
        length = VARINTS[body_size] if body_size < VARINT_TABLE_SIZE else zigzag_varint(body_size)
        size = self._size + body_size + len(length)
        if size > self._size_limit and count:
            # A closed builder has size_limit -1, so every append to it lands here (or in _check_open when empty).
            self._check_open()
            return None
        buf = self._buf
        buf += length
        buf += body
        self._size = size
        self._count = count + 1
        if not count:
            self._base_timestamp = self._max_timestamp = timestamp_ms
            # Deltas inside the table are also known not to push a timestamp past int64.
            self._delta_limit = min(VARINT_TABLE_SIZE, INT64_MAX - timestamp_ms + 1)
        elif timestamp_ms > self._max_timestamp:
            self._max_timestamp = timestamp_ms
        return count

    def close(self) -> ClosedBatch:
        """Finish the batch (idempotent): compress the records once. When compression does not shrink them they
        go out uncompressed with codec none, as librdkafka's message-set writer does; the builder is then closed."""
        if self._closed is not None:
            return self._closed
        records = bytes(self._buf)
        codec = self._compression
        if codec is not CompressionType.NONE:
            packed = compress(codec, records, self._compression_level) if records else records
            if len(packed) < len(records):
                records = packed
            else:
                codec = CompressionType.NONE
        self._closed = ClosedBatch(
            records_section=records,
            compression=codec,
            record_count=self._count,
            base_timestamp=self._base_timestamp,
            max_timestamp=self._max_timestamp,
        )
        self._buf = bytearray()
        self._size_limit = -1
        return self._closed

    def _check_open(self) -> None:
        if self._closed is not None:
            raise AioProducerError("cannot append to a batch that was closed")


def record_size_upper_bound(key: bytes | None, value: bytes | None, headers: Headers = ()) -> int:
    """An upper bound of the bytes of a batch holding only this record, uncompressed.

    Mirrors Java's DefaultRecordBatch.estimateBatchSizeUpperBound: worst-case varints for the record's length and
    deltas, so it also bounds what the record adds to any batch.
    """
    size = BATCH_HEADER_SIZE + MAX_RECORD_OVERHEAD + _field_size(key) + _field_size(value)
    size += varint_size(len(headers))
    for header_key, header_value in headers:
        size += _field_size(_utf8(header_key)) + _field_size(header_value)
    return size


def check_builder_settings(compression: int, compression_level: int | None, size_limit: object) -> CompressionType:
    """The codec a batch builder with these settings uses; ConfigError for settings it cannot take."""
    if type(compression) is CompressionType and compression_level is None:
        # The accumulator's settings, checked once per new batch: a member is its own codec and every codec takes
        # no level (validate_level's first rule), so the enum lookup and the level's checks are skipped.
        codec = compression
    else:
        try:
            codec = CompressionType(compression)
        except ValueError:
            raise ConfigError(f"unknown compression type {compression!r}") from None
        validate_level(codec, compression_level)
    if isinstance(size_limit, bool) or not isinstance(size_limit, int) or size_limit <= 0:
        raise ConfigError(f"batch size_limit must be a positive int, got {size_limit!r}")
    return codec


def _record_body(
    timestamp_delta: bytes, offset_delta: bytes, key: bytes | None, value: bytes | None, headers: Headers
) -> bytes:
    # One join per record: it either builds the whole body or raises before the batch buffer is touched.
    tail = encode_headers(headers) if headers else _ZERO
    if key is None:
        if value is None:
            return b"".join((_ZERO, timestamp_delta, offset_delta, _NULL, _NULL, tail))
        n = len(value)
        value_length = VARINTS[n] if n < VARINT_TABLE_SIZE else zigzag_varint(n)
        return b"".join((_ZERO, timestamp_delta, offset_delta, _NULL, value_length, value, tail))
    n = len(key)
    key_length = VARINTS[n] if n < VARINT_TABLE_SIZE else zigzag_varint(n)
    if value is None:
        return b"".join((_ZERO, timestamp_delta, offset_delta, key_length, key, _NULL, tail))
    n = len(value)
    value_length = VARINTS[n] if n < VARINT_TABLE_SIZE else zigzag_varint(n)
    return b"".join((_ZERO, timestamp_delta, offset_delta, key_length, key, value_length, value, tail))


def encode_headers(headers: Headers) -> bytes:
    """A record's header section: the count, then each key (utf-8) and value, all length-prefixed."""
    n = len(headers)
    parts = [VARINTS[n] if n < VARINT_TABLE_SIZE else zigzag_varint(n)]
    append = parts.append
    for header_key, header_value in headers:
        encoded_key = _HEADER_KEYS.get(header_key)
        if encoded_key is None:
            encoded_key = _encode_header_key(header_key)
        append(encoded_key)
        if header_value is None:
            append(_NULL)
        else:
            n = len(header_value)
            append(VARINTS[n] if n < VARINT_TABLE_SIZE else zigzag_varint(n))
            append(header_value)
    return b"".join(parts)


# Header keys repeat from record to record ("trace-id", "content-type"): keep their length-prefixed utf-8 form.
# Bounded and cleared when full, so arbitrary keys cannot grow it without limit.
_HEADER_KEYS: dict[str, bytes] = {}
_HEADER_KEYS_MAX = 1024


def _encode_header_key(header_key: str) -> bytes:
    encoded = _utf8(header_key)
    prefixed = zigzag_varint(len(encoded)) + encoded
    if len(_HEADER_KEYS) >= _HEADER_KEYS_MAX:
        _HEADER_KEYS.clear()
    _HEADER_KEYS[header_key] = prefixed
    return prefixed


def _utf8(header_key: str) -> bytes:
    if not isinstance(header_key, str):
        raise InvalidRecordError(f"header keys must be str, got {type(header_key).__name__}")
    try:
        return header_key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidRecordError(f"header key {header_key!r} is not valid unicode: {exc}") from exc


def _field_size(data: bytes | None) -> int:
    return 1 if data is None else varint_size(len(data)) + len(data)


def _check_timestamp(timestamp_ms: int) -> None:
    if (
        isinstance(timestamp_ms, bool)
        or not isinstance(timestamp_ms, int)
        or not INT64_MIN <= timestamp_ms <= INT64_MAX
    ):
        raise InvalidRecordError(f"record timestamp must be an int64 of milliseconds, got {timestamp_ms!r}")


def _wide_timestamp_delta(timestamp_ms: int, delta: int) -> bytes | None:
    """The varlong of a delta outside the lookup table, or None when it overflows int64 and so cannot share the
    batch's base timestamp (Java would silently wrap it)."""
    _check_timestamp(timestamp_ms)
    if not INT64_MIN <= delta <= INT64_MAX:
        return None
    return zigzag_varint(delta)


# The compiled twin, when built (see aioproducer.accelerated): the same bytes, faster appends.
PureBatchBuilder = BatchBuilder
_twin = compiled_twin("aioproducer.records._builder")
if not TYPE_CHECKING and _twin is not None:
    BatchBuilder = _twin.BatchBuilder
