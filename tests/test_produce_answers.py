"""The Produce response's own reader (protocol.produce_answers) against the generic codec, the one reader built from
Kafka's message JSON: the same result for every response it reads, a hand-over (None) for every shape it does not
cover, the generic codec's ProtocolError for malformed bytes, and the layout it assumes held to the schema."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schema_layout import layout

import aioproducer.protocol.wire as wire
from aioproducer.errors import ProtocolError
from aioproducer.protocol import SUPPORTED_VERSIONS, ApiKey, FrameDecoder, decode_response, encode_response
from aioproducer.protocol.messages import RESPONSES
from aioproducer.protocol.produce_answers import FAST_VERSIONS, read_produce_response

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# Short names and messages are the reader's; 127 bytes and more go to the generic codec (two-byte lengths).
TEXT = st.one_of(st.text(max_size=12), st.text(min_size=120, max_size=140), st.just("é" * 64))
LEADER = st.fixed_dictionaries({"leader_id": INT32, "leader_epoch": INT32})
NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


def partition_answers() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "index": INT32,
            "error_code": st.integers(-(2**15), 2**15 - 1),
            "base_offset": INT64,
            "log_append_time_ms": INT64,
            "log_start_offset": INT64,
            "record_errors": st.one_of(
                st.just([]),
                st.lists(
                    st.fixed_dictionaries(
                        {"batch_index": INT32, "batch_index_error_message": st.one_of(st.none(), TEXT)}
                    ),
                    max_size=2,
                ),
            ),
            "error_message": st.one_of(st.none(), TEXT),
            "current_leader": st.one_of(st.just(NO_LEADER), LEADER),
        }
    )


def bodies() -> st.SearchStrategy[dict[str, Any]]:
    topic = st.fixed_dictionaries(
        {
            "name": TEXT,
            "partition_responses": st.one_of(
                st.lists(partition_answers(), max_size=6), st.lists(partition_answers(), min_size=127, max_size=128)
            ),
        }
    )
    endpoint = st.fixed_dictionaries(
        {
            "node_id": INT32,
            "host": st.text(max_size=8),
            "port": INT32,
            "rack": st.one_of(st.none(), st.text(max_size=4)),
        }
    )
    return st.fixed_dictionaries(
        {
            "responses": st.lists(topic, max_size=3),
            "throttle_time_ms": INT32,
            "node_endpoints": st.one_of(st.just([]), st.lists(endpoint, min_size=1, max_size=2)),
        }
    )


def payload(version: int, body: dict[str, Any]) -> bytes:
    ((_, answer),) = FrameDecoder().feed(encode_response(ApiKey.PRODUCE, version, 7, body))
    return bytes(answer)


@contextmanager
def generic_codec_only() -> Iterator[None]:
    """decode_response as it is without the Produce reader: the oracle."""
    original = wire.read_produce_response
    wire.read_produce_response = lambda version, data: None
    try:
        yield
    finally:
        wire.read_produce_response = original


def generic(version: int, data: bytes) -> dict[str, Any]:
    with generic_codec_only():
        return decode_response(ApiKey.PRODUCE, version, data)


def test_the_reader_covers_the_flexible_versions_we_send() -> None:
    low, high = SUPPORTED_VERSIONS[ApiKey.PRODUCE]
    assert set(FAST_VERSIONS) == set(range(max(low, 9), high + 1))


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(list(FAST_VERSIONS)), body=bodies(), trailing=st.binary(max_size=3))
def test_every_answer_decodes_as_the_generic_codec_decodes_it(
    version: int, body: dict[str, Any], trailing: bytes
) -> None:
    data = payload(version, body) + trailing  # bytes after a complete body are ignored by both
    expected = generic(version, data)
    assert decode_response(ApiKey.PRODUCE, version, data) == expected
    assert decode_response(ApiKey.PRODUCE, version, memoryview(data)) == expected
    assert decode_response(ApiKey.PRODUCE, version, memoryview(data).cast("b")) == expected  # signed bytes too
    mine = read_produce_response(version, data)
    assert mine is None or mine == expected


def test_the_usual_answer_is_read_here_and_the_others_handed_over() -> None:
    """The shapes the reader covers and those it leaves to the generic codec, each decoded the same either way."""
    usual = {"index": 3, "error_code": 0, "base_offset": 42, "log_append_time_ms": -1, "log_start_offset": 0}
    body = {"responses": [{"name": "orders", "partition_responses": [usual]}], "throttle_time_ms": 5}
    data = payload(12, body)
    assert read_produce_response(12, data) == generic(12, data)
    assert read_produce_response(12, data)["responses"][0]["partition_responses"][0]["base_offset"] == 42
    message = {**usual, "error_code": 6, "error_message": "not the leader"}
    handed_over = {
        # Node 0's hint: read as if it were not there, its bytes would pass for the rest of a well-formed answer.
        "a KIP-951 leader hint": {**usual, "error_code": 6, "current_leader": {"leader_id": 0, "leader_epoch": 9}},
        "per-record errors": {**usual, "error_code": 87, "record_errors": [{"batch_index": 0}]},
    }
    data = payload(12, {"responses": [{"name": "orders", "partition_responses": [message]}]})
    assert read_produce_response(12, data) == generic(12, data)
    for why, part in handed_over.items():
        data = payload(12, {"responses": [{"name": "orders", "partition_responses": [part]}]})
        assert read_produce_response(12, data) is None, why
        assert decode_response(ApiKey.PRODUCE, 12, data) == generic(12, data), why
    endpoints = [{"node_id": 1, "host": "h", "port": 9092, "rack": None}]
    data = payload(12, {"responses": [], "node_endpoints": endpoints})
    assert read_produce_response(12, data) is None
    assert decode_response(ApiKey.PRODUCE, 12, data)["node_endpoints"] == [{**endpoints[0]}]
    older = payload(8, body)
    assert read_produce_response(8, older) is None
    assert decode_response(ApiKey.PRODUCE, 8, older) == generic(8, older)


@settings(max_examples=60, deadline=None)
@given(version=st.sampled_from(list(FAST_VERSIONS)), body=bodies())
def test_a_truncated_answer_is_the_generic_codecs_protocol_error(version: int, body: dict[str, Any]) -> None:
    data = payload(version, body)
    for cut in range(len(data)):
        assert read_produce_response(version, data[:cut]) is None
        with pytest.raises(ProtocolError):
            decode_response(ApiKey.PRODUCE, version, data[:cut])


@settings(max_examples=500, deadline=None)
@given(version=st.sampled_from(list(FAST_VERSIONS)), data=st.binary(max_size=80))
def test_hostile_bytes_decode_or_fail_as_with_the_generic_codec(version: int, data: bytes) -> None:
    try:
        expected: dict[str, Any] | type[ProtocolError] = generic(version, data)
    except ProtocolError:
        expected = ProtocolError
    if expected is ProtocolError:
        assert read_produce_response(version, data) is None
        with pytest.raises(ProtocolError):
            decode_response(ApiKey.PRODUCE, version, data)
    else:
        assert decode_response(ApiKey.PRODUCE, version, data) == expected


@pytest.mark.parametrize("version", list(FAST_VERSIONS))
def test_the_layout_read_here_is_the_schemas(version: int) -> None:
    """What read_produce_response assumes, field by field; a change to ProduceResponse in a version read here must
    change the reader too (the schema is itself held to Kafka's JSON by test_spec_drift)."""
    leader = [("leader_id", "int32", None, False, []), ("leader_epoch", "int32", None, False, [])]
    partition = [
        ("index", "int32", None, False, []),
        ("error_code", "int16", None, False, []),
        ("base_offset", "int64", None, False, []),
        ("log_append_time_ms", "int64", None, False, []),
        ("log_start_offset", "int64", None, False, []),
        (
            "record_errors",
            "[]BatchIndexAndErrorMessage",
            None,
            False,
            [("batch_index", "int32", None, False, []), ("batch_index_error_message", "string", None, True, [])],
        ),
        ("error_message", "string", None, True, []),
        ("current_leader", "LeaderIdAndEpoch", 0, False, leader if version >= 10 else []),
    ]
    endpoint = [
        ("node_id", "int32", None, False, []),
        ("host", "string", None, False, []),
        ("port", "int32", None, False, []),
        ("rack", "string", None, True, []),
    ]
    expected = [
        (
            "responses",
            "[]TopicProduceResponse",
            None,
            False,
            [
                ("name", "string", None, False, []),
                ("partition_responses", "[]PartitionProduceResponse", None, False, partition),
            ],
        ),
        ("throttle_time_ms", "int32", None, False, []),
    ]
    if version >= 10:
        expected.append(("node_endpoints", "[]NodeEndpoint", 0, False, endpoint))
    else:
        partition.pop()
    assert layout(RESPONSES[ApiKey.PRODUCE].fields, version) == expected
