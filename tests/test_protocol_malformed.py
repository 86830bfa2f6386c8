"""Malformed and truncated input: decoding either succeeds or raises ProtocolError, quickly, for every API and
version; no IndexError, struct.error or UnicodeDecodeError escapes, and hostile lengths allocate nothing."""

from __future__ import annotations

import contextlib
import struct
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioproducer.errors import ProtocolError
from aioproducer.protocol import SUPPORTED_VERSIONS, ApiKey, decode_request, decode_response, encode_request
from aioproducer.protocol import encode_response as encode_response_frame
from aioproducer.protocol.messages import REQUESTS, RESPONSES
from aioproducer.protocol.schema import Field

CASES = [(api, v) for api, (low, high) in SUPPORTED_VERSIONS.items() for v in range(low, high + 1)]
CASE_IDS = [f"{api.name}-v{v}" for api, v in CASES]

_SAMPLE = {
    "bool": True,
    "int8": -3,
    "int16": 300,
    "uint16": 3,
    "int32": -70000,
    "uint32": 5,
    "int64": 2**40,
    "float64": 1.5,
    "string": "é-x",
    "bytes": b"\x00\x01",
    "records": b"batch",
    "uuid": uuid.UUID(int=0x1234),
}


def sample(fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    """A body with every field of the version filled with non-default values and two-element arrays."""
    out: dict[str, Any] = {}
    for fld in fields:
        if version not in fld.versions:
            continue
        item = sample(fld.fields, version) if fld.is_struct else _SAMPLE[fld.element_type]
        out[fld.name] = [item, item] if fld.is_array else item
    return out


def response_payload(api: ApiKey, version: int) -> bytes:
    return encode_response_frame(api, version, 1, sample(RESPONSES[api].fields, version))[8:]


def request_frame(api: ApiKey, version: int) -> bytes:
    return encode_request(api, version, 1, "client", sample(REQUESTS[api].fields, version))[4:]


def _decode_or_protocol_error(call: Any, *args: Any) -> None:
    with contextlib.suppress(ProtocolError):
        call(*args)


@pytest.mark.parametrize(("api", "version"), CASES, ids=CASE_IDS)
def test_every_truncation_of_a_response_raises_protocol_error(api: ApiKey, version: int) -> None:
    payload = response_payload(api, version)
    assert decode_response(api, version, payload)  # the whole thing is valid
    for cut in range(len(payload)):
        with pytest.raises(ProtocolError):
            decode_response(api, version, payload[:cut])


@pytest.mark.parametrize(("api", "version"), CASES, ids=CASE_IDS)
def test_every_truncation_of_a_request_raises_protocol_error(api: ApiKey, version: int) -> None:
    frame = request_frame(api, version)
    assert decode_request(frame)[1]
    for cut in range(len(frame)):
        with pytest.raises(ProtocolError):
            decode_request(frame[:cut])


@pytest.mark.parametrize(("api", "version"), CASES, ids=CASE_IDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_corrupted_responses_decode_or_raise_protocol_error(api: ApiKey, version: int, data: st.DataObject) -> None:
    payload = bytearray(response_payload(api, version))
    for _ in range(data.draw(st.integers(1, 4))):
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    _decode_or_protocol_error(decode_response, api, version, bytes(payload))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(CASES), st.binary(max_size=64))
def test_random_bytes_decode_or_raise_protocol_error(case: tuple[ApiKey, int], junk: bytes) -> None:
    _decode_or_protocol_error(decode_response, case[0], case[1], junk)
    _decode_or_protocol_error(decode_request, junk)


def test_hostile_array_count_fails_fast() -> None:
    payload = struct.pack(">i", 2**31 - 1) + b"\x00" * 16  # Produce v3 response claiming 2**31-1 topics
    start = time.perf_counter()
    with pytest.raises(ProtocolError, match="claims 2147483647 items"):
        decode_response(ApiKey.PRODUCE, 3, payload)
    assert time.perf_counter() - start < 0.1


def test_hostile_compact_lengths_fail_fast() -> None:
    # Produce v9 response: top-level compact array whose uvarint count is 2**32-1.
    with pytest.raises(ProtocolError):
        decode_response(ApiKey.PRODUCE, 9, b"\x00" + b"\xff\xff\xff\xff\x0f" + b"\x00" * 8)
    # A string whose length exceeds what is left.
    with pytest.raises(ProtocolError, match="truncated"):
        decode_response(ApiKey.SASL_HANDSHAKE, 1, b"\x00\x00\x00\x00\x00\x01\x7f\xffabc")


@pytest.mark.parametrize("length", [-2, -32768])
def test_negative_string_lengths_other_than_null_are_refused(length: int) -> None:
    payload = b"\x00\x00" + struct.pack(">ih", 1, length)
    with pytest.raises(ProtocolError, match="invalid length"):
        decode_response(ApiKey.SASL_HANDSHAKE, 1, payload)


def test_null_where_the_version_forbids_it_is_refused() -> None:
    payload = struct.pack(">ih", 1, -1) + struct.pack(">i", 0) + struct.pack(">i", 0)  # Produce v3: null topic name
    with pytest.raises(ProtocolError, match="invalid length -1"):
        decode_response(ApiKey.PRODUCE, 3, payload)


def test_invalid_utf8_is_a_protocol_error() -> None:
    payload = b"\x00\x00" + struct.pack(">ih", 1, 2) + b"\xc3\x28"
    with pytest.raises(ProtocolError, match="UTF-8"):
        decode_response(ApiKey.SASL_HANDSHAKE, 1, payload)


def test_tagged_field_overrunning_its_struct_is_refused() -> None:
    base = bytearray(encode_response_frame(ApiKey.API_VERSIONS, 3, 1, {"zk_migration_ready": True})[8:])
    assert base[-4:] == b"\x01\x03\x01\x01"  # one tag: 3, size 1, true
    base[-2] = 9  # claim 9 bytes
    with pytest.raises(ProtocolError, match="overruns"):
        decode_response(ApiKey.API_VERSIONS, 3, bytes(base))


def test_tagged_field_with_wrong_size_is_refused() -> None:
    base = encode_response_frame(ApiKey.API_VERSIONS, 3, 1, {"zk_migration_ready": True})[8:]
    # Tag 3 (a bool) claims 2 bytes: the value ends before the declared size.
    with pytest.raises(ProtocolError, match="ends elsewhere"):
        decode_response(ApiKey.API_VERSIONS, 3, base[:-2] + b"\x02\x01\x00")
