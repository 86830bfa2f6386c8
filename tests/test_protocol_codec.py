"""The codec's contract: header versions (KIP-482/511), defaults, tagged fields, nullability, and typed errors.
Expected bytes here are spelled out by hand from the protocol guide, not produced by our encoder."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from aioproducer.errors import ProtocolError, UnsupportedVersionError
from aioproducer.protocol import (
    ApiKey,
    FrameDecoder,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)


def payload_of(frame: bytes) -> bytes:
    ((_, payload),) = FrameDecoder().feed(frame)
    return payload


def test_request_header_v1_for_non_flexible_versions() -> None:
    frame = encode_request(ApiKey.API_VERSIONS, 2, 0x01020304, "ab", {})
    assert frame == struct.pack(">ihhih", 12, 18, 2, 0x01020304, 2) + b"ab"


def test_request_header_v2_keeps_an_int16_client_id_and_adds_tags() -> None:
    body = {"client_software_name": "x", "client_software_version": "1"}
    frame = encode_request(ApiKey.API_VERSIONS, 3, 7, "ab", body)
    header = struct.pack(">hhih", 18, 3, 7, 2) + b"ab" + b"\x00"
    assert frame[4:] == header + b"\x02x\x021\x00"
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4


def test_null_client_id_is_int16_minus_one() -> None:
    frame = encode_request(ApiKey.METADATA, 9, 1, None, {"topics": None})
    assert frame[12:14] == b"\xff\xff"
    header, _ = decode_request(frame[4:])
    assert header.client_id is None


def test_api_versions_response_keeps_header_v0_even_when_flexible() -> None:
    frame = encode_response(ApiKey.API_VERSIONS, 3, 9, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0})
    # size, correlation id, then the body at once: error_code, compact empty array, throttle, empty tags.
    assert frame == struct.pack(">iih", 12, 9, 0) + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"
    assert decode_response(ApiKey.API_VERSIONS, 3, payload_of(frame))["api_keys"] == []


def test_flexible_response_header_tags_are_skipped_even_unknown_ones() -> None:
    # throttle_time_ms, error_code, producer_id, producer_epoch, empty tag section
    body = struct.pack(">ihqh", 0, 0, -1, 0) + b"\x00"
    # InitProducerId v2 is flexible: header v1 carries a tag section; this one holds unknown tag 5 (2 bytes).
    payload = b"\x01\x05\x02zz" + body
    decoded = decode_response(ApiKey.INIT_PRODUCER_ID, 2, payload)
    assert decoded == {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1, "producer_epoch": 0}


def test_unknown_tags_in_a_body_are_skipped() -> None:
    known = encode_response(ApiKey.INIT_PRODUCER_ID, 4, 1, {"producer_id": 5, "producer_epoch": 1})[8:]
    assert known[-1:] == b"\x00"
    with_unknown = known[:-1] + b"\x02\x07\x01!\x09\x03abc"
    assert decode_response(ApiKey.INIT_PRODUCER_ID, 4, with_unknown)["producer_id"] == 5


PRODUCE_V10_RESPONSE: dict[str, Any] = {
    "responses": [
        {
            "name": "t",
            "partition_responses": [
                {"index": 0, "error_code": 6, "base_offset": -1, "current_leader": {"leader_id": 2, "leader_epoch": 9}}
            ],
        }
    ],
    "node_endpoints": [{"node_id": 2, "host": "b2", "port": 9092, "rack": None}],
}


def test_kip951_leader_hints_round_trip() -> None:
    decoded = decode_response(
        ApiKey.PRODUCE, 10, payload_of(encode_response(ApiKey.PRODUCE, 10, 1, PRODUCE_V10_RESPONSE))
    )
    partition = decoded["responses"][0]["partition_responses"][0]
    assert partition["current_leader"] == {"leader_id": 2, "leader_epoch": 9}
    assert decoded["node_endpoints"] == [{"node_id": 2, "host": "b2", "port": 9092, "rack": None}]


def test_tagged_fields_at_their_default_are_not_written() -> None:
    lean = {"responses": [{"name": "t", "partition_responses": [{"index": 0, "current_leader": {}}]}]}
    explicit = {
        "responses": [
            {
                "name": "t",
                "partition_responses": [{"index": 0, "current_leader": {"leader_id": -1, "leader_epoch": -1}}],
            }
        ],
        "node_endpoints": [],
    }
    frame = encode_response(ApiKey.PRODUCE, 10, 1, explicit)
    assert frame == encode_response(ApiKey.PRODUCE, 10, 1, lean)
    decoded = decode_response(ApiKey.PRODUCE, 10, payload_of(frame))
    assert decoded["responses"][0]["partition_responses"][0]["current_leader"] == {"leader_id": -1, "leader_epoch": -1}
    assert frame.endswith(b"\x00\x00\x00\x00\x00")  # partition tags, topic tags, throttle 0 ... top-level tags: none


def test_decode_fills_every_field_with_its_default() -> None:
    frame = encode_response(ApiKey.PRODUCE, 3, 1, {"responses": [{"name": "t", "partition_responses": [{}]}]})
    decoded = decode_response(ApiKey.PRODUCE, 3, payload_of(frame))
    assert decoded["node_endpoints"] == []
    partition = decoded["responses"][0]["partition_responses"][0]
    assert partition == {
        "index": 0,
        "error_code": 0,
        "base_offset": 0,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": None,
        "current_leader": {"leader_id": -1, "leader_epoch": -1},
    }


def test_decoded_defaults_are_fresh_objects() -> None:
    payload = payload_of(encode_response(ApiKey.PRODUCE, 3, 1, {"responses": []}))
    first = decode_response(ApiKey.PRODUCE, 3, payload)
    first["node_endpoints"].append("mutated")
    assert decode_response(ApiKey.PRODUCE, 3, payload)["node_endpoints"] == []


def test_encode_ignores_keys_the_version_lacks_and_defaults_missing_ones() -> None:
    frame = encode_request(ApiKey.INIT_PRODUCER_ID, 2, 1, "c", {"transactional_id": None, "producer_id": 77, "x": 1})
    _, body = decode_request(frame[4:])
    assert body == {"transactional_id": None, "transaction_timeout_ms": 0, "producer_id": -1, "producer_epoch": -1}
    frame = encode_request(ApiKey.INIT_PRODUCER_ID, 3, 1, "c", {"transactional_id": "t"})
    assert decode_request(frame[4:])[1]["producer_id"] == -1  # the declared default, not 0


@pytest.mark.parametrize("records", [b"abc", bytearray(b"abc"), memoryview(b"xabcx")[1:4]])
def test_records_accept_any_bytes_like_and_decode_as_bytes(records: Any) -> None:
    body = {
        "acks": 1,
        "timeout_ms": 5,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    }
    for version in (3, 9):
        _, decoded = decode_request(encode_request(ApiKey.PRODUCE, version, 1, "c", body)[4:])
        value = decoded["topic_data"][0]["partition_data"][0]["records"]
        assert value == b"abc" and type(value) is bytes


def test_large_records_survive_intact() -> None:
    big = bytes(range(256)) * 1024
    body = {"topic_data": [{"name": "t", "partition_data": [{"index": i, "records": big} for i in range(3)]}]}
    _, decoded = decode_request(encode_request(ApiKey.PRODUCE, 11, 1, "c", body)[4:])
    assert [p["records"] for p in decoded["topic_data"][0]["partition_data"]] == [big] * 3


def test_null_records_round_trip() -> None:
    body = {"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": None}]}]}
    _, decoded = decode_request(encode_request(ApiKey.PRODUCE, 9, 1, "c", body)[4:])
    assert decoded["topic_data"][0]["partition_data"][0]["records"] is None


def test_metadata_null_topics_means_all_topics() -> None:
    for version in (1, 9, 12):
        _, body = decode_request(encode_request(ApiKey.METADATA, version, 1, "c", {"topics": None})[4:])
        assert body["topics"] is None


@pytest.mark.parametrize(
    ("api", "version", "body", "match"),
    [
        (ApiKey.PRODUCE, 3, {"topic_data": [{"name": None}]}, "not nullable"),
        (ApiKey.METADATA, 9, {"topics": [{"name": None}]}, "not nullable"),  # nullable only from v10
        (ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "x" * 40000}, "32767"),
        (ApiKey.PRODUCE, 3, {"acks": 70000}, "cannot encode"),
        (ApiKey.PRODUCE, 3, {"timeout_ms": "soon"}, "cannot encode"),
        (ApiKey.PRODUCE, 9, {"topic_data": [{"name": "t", "partition_data": [{"records": "text"}]}]}, "bytes"),
        (ApiKey.METADATA, 10, {"topics": [{"topic_id": b"short", "name": "t"}]}, "16 bytes"),
        (ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "\ud800"}, "cannot encode"),
    ],
)
def test_bodies_that_cannot_be_encoded_raise_protocol_error(
    api: ApiKey, version: int, body: dict[str, Any], match: str
) -> None:
    with pytest.raises(ProtocolError, match=match):
        encode_request(api, version, 1, "c", body)


@pytest.mark.parametrize(
    ("api", "version"),
    [(ApiKey.PRODUCE, 2), (ApiKey.PRODUCE, 13), (ApiKey.CREATE_TOPICS, 1), (ApiKey.ADD_PARTITIONS_TO_TXN, 4)],
)
def test_versions_outside_our_range_are_refused(api: ApiKey, version: int) -> None:
    with pytest.raises(UnsupportedVersionError):
        encode_request(api, version, 1, "c", {})
    with pytest.raises(UnsupportedVersionError):
        decode_response(api, version, b"")


def test_unknown_api_keys_are_refused() -> None:
    frame = struct.pack(">hhih", 1, 11, 3, -1)  # a Fetch request
    with pytest.raises(UnsupportedVersionError, match="API key 1"):
        decode_request(frame)


def test_trailing_bytes_after_a_response_are_ignored() -> None:
    """librdkafka's mock cluster appends a stray byte to flexible Metadata responses; Java ignores such bytes."""
    payload = payload_of(encode_response(ApiKey.METADATA, 12, 1, {"brokers": [], "topics": []}))
    assert decode_response(ApiKey.METADATA, 12, payload + b"\x00")["brokers"] == []
    with pytest.raises(ProtocolError, match="1 unexpected bytes"):
        decode_response(ApiKey.METADATA, 12, payload + b"\x00", strict=True)


def test_trailing_bytes_after_a_request_are_an_error() -> None:
    frame = encode_request(ApiKey.SASL_HANDSHAKE, 1, 1, "c", {"mechanism": "PLAIN"})[4:]
    with pytest.raises(ProtocolError, match="unexpected bytes"):
        decode_request(frame + b"\x00")


def test_decode_request_header_gives_the_body_offset() -> None:
    frame = encode_request(ApiKey.SASL_AUTHENTICATE, 2, 3, "client", {"auth_bytes": b"\x01\x02"})[4:]
    header, offset = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        ApiKey.SASL_AUTHENTICATE,
        2,
        3,
        "client",
    )
    assert frame[offset:] == b"\x03\x01\x02\x00"


def test_produce_example_from_the_contract() -> None:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"..."}]}],
    }
    frame = encode_request(ApiKey.PRODUCE, 9, 1, "c", body)
    expected_body = b"\x00" + b"\xff\xff" + struct.pack(">i", 30000) + b"\x02\x02t\x02" + b"\x00\x00\x00\x00\x04..."
    assert frame.endswith(expected_body + b"\x00\x00\x00")  # partition, topic and request tag sections
    assert decode_request(frame[4:])[1] == body
