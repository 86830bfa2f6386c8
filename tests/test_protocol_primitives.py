"""Wire primitives: varints against the protobuf/Kafka definitions and kafka-python's codecs, and the Reader's
refusal to read past its end."""

from __future__ import annotations

import io
import uuid
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.errors import ProtocolError
from aioproducer.protocol.primitives import (
    Reader,
    decode_uvarint,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    encode_varlong,
    uvarint_size,
    varint_size,
    varlong_size,
    zigzag32,
    zigzag64,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.schemas.fields.codecs import types as kp_types

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
UINT32 = st.integers(0, 2**32 - 1)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, 0), (-1, 1), (1, 2), (-2, 3), (2, 4), (2**31 - 1, 2**32 - 2), (-(2**31), 2**32 - 1)],
)
def test_zigzag32_matches_the_protobuf_table(value: int, encoded: int) -> None:
    assert zigzag32(value) == encoded


def test_zigzag64_extremes() -> None:
    assert zigzag64(2**63 - 1) == 2**64 - 2
    assert zigzag64(-(2**63)) == 2**64 - 1


@pytest.mark.parametrize(
    ("value", "wire"),
    [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"), (16384, b"\x80\x80\x01")],
)
def test_uvarint_known_encodings(value: int, wire: bytes) -> None:
    assert encode_uvarint(value) == wire
    assert decode_uvarint(wire, 0) == (value, len(wire))
    assert uvarint_size(value) == len(wire)


@settings(max_examples=200)
@given(UINT32)
def test_uvarint_matches_kafka_python(value: int) -> None:
    ours = encode_uvarint(value)
    assert ours == kp_types.UnsignedVarInt32.encode(value)
    assert decode_uvarint(b"\xff" + ours, 1) == (value, len(ours) + 1)
    assert uvarint_size(value) == len(ours)


@settings(max_examples=200)
@given(INT32)
def test_varint_matches_kafka_python(value: int) -> None:
    ours = encode_varint(value)
    assert ours == kp_types.VarInt32.encode(value)
    assert decode_varint(ours, 0) == (value, len(ours))
    assert varint_size(value) == len(ours)


@settings(max_examples=200)
@given(INT64)
def test_varlong_matches_kafka_python(value: int) -> None:
    ours = encode_varlong(value)
    assert ours == kp_types.VarInt64.encode(value)
    assert kp_types.VarInt64.decode(io.BytesIO(ours)) == value
    assert decode_varlong(ours, 0) == (value, len(ours))
    assert varlong_size(value) == len(ours)


@pytest.mark.parametrize("value", [-1, 2**32])
def test_uvarint_out_of_range_is_refused(value: int) -> None:
    with pytest.raises(ProtocolError):
        encode_uvarint(value)


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_varint_out_of_range_is_refused(value: int) -> None:
    with pytest.raises(ProtocolError):
        encode_varint(value)


def test_truncated_varint_raises() -> None:
    with pytest.raises(ProtocolError, match="truncated"):
        decode_uvarint(b"\x80\x80", 0)
    with pytest.raises(ProtocolError, match="truncated"):
        decode_varlong(b"", 0)


def test_overlong_varints_raise() -> None:
    with pytest.raises(ProtocolError, match="longer than 5"):
        decode_uvarint(b"\x80" * 5 + b"\x01", 0)
    with pytest.raises(ProtocolError, match="longer than 10"):
        decode_varlong(b"\x80" * 10 + b"\x01", 0)
    with pytest.raises(ProtocolError, match="32 bits"):
        decode_uvarint(b"\xff\xff\xff\xff\x7f", 0)  # 35 bits of payload


def test_reader_reads_fixed_width_values_big_endian() -> None:
    reader = Reader(b"\xff\x00\x01\x00\x00\x00\x02" + b"\x00" * 7 + b"\x03\x01")
    assert (reader.int8(), reader.int16(), reader.int32(), reader.int64(), reader.boolean()) == (-1, 1, 2, 3, True)
    assert reader.remaining == 0


def test_reader_refuses_to_read_past_its_end() -> None:
    reader = Reader(b"\x00\x01\x02")
    with pytest.raises(ProtocolError, match="need 4 bytes"):
        reader.int32()
    assert reader.int16() == 1  # a failed read consumes nothing
    with pytest.raises(ProtocolError):
        reader.raw(2)
    with pytest.raises(ProtocolError):
        reader.skip(-1)


def test_reader_window_end_is_respected() -> None:
    reader = Reader(b"\x00\x00\x00\x07\x00\x00\x00\x08", end=4)
    assert reader.int32() == 7
    with pytest.raises(ProtocolError):
        reader.int32()


def test_reader_text_rejects_invalid_utf8() -> None:
    with pytest.raises(ProtocolError, match="UTF-8"):
        Reader(b"\xc3\x28").text(2)


def test_reader_accepts_memoryviews_of_other_formats() -> None:
    import array

    words = array.array("H", [0x0102])
    assert Reader(memoryview(words)).remaining == 2


def test_reader_uuid() -> None:
    value = uuid.uuid4()
    assert Reader(value.bytes).uuid() == value
