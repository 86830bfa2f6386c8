"""The protocol pieces transactions build on: finalized features from ApiVersions (transaction.version), FindCoordinator
in its batched and single-key shapes, the versions that are their predecessor on the wire (Produce v12, TxnOffsetCommit
v5), EndTxn v5's next producer id and epoch, and Metadata v13's top-level error code. kafka-python is the second judge.
"""

from __future__ import annotations

import uuid
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol import metadata as kp_metadata
    from kafka.protocol.producer import transaction as kp_txn

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import ProtocolError, UnsupportedVersionError
from aioproducer.protocol import (
    TRANSACTION_VERSION,
    ApiKey,
    Coordinator,
    CoordinatorType,
    FinalizedFeatures,
    FrameDecoder,
    coordinators_from_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    finalized_features,
    find_coordinator_body,
)

REBOOTSTRAP_REQUIRED = ErrorCode.REBOOTSTRAP_REQUIRED


def _payload(kafka_python_response: Any) -> bytes:
    kafka_python_response.with_header(correlation_id=3)
    ((correlation_id, payload),) = FrameDecoder().feed(bytes(kafka_python_response.encode(header=True, framed=True)))
    assert correlation_id == 3
    return payload


def _api_versions_v3(epoch: int, features: list[tuple[str, int, int]]) -> bytes:
    response = kp_metadata.ApiVersionsResponse(
        version=3,
        error_code=0,
        api_keys=[],
        throttle_time_ms=0,
        finalized_features_epoch=epoch,
        finalized_features=[
            kp_metadata.ApiVersionsResponse.FinalizedFeatureKey(
                version=3, name=name, max_version_level=high, min_version_level=low
            )
            for name, high, low in features
        ],
    )
    return _payload(response)


def test_finalized_features_from_a_kafka_python_api_versions_response() -> None:
    payload = _api_versions_v3(42, [("metadata.version", 27, 1), (TRANSACTION_VERSION, 2, 0), ("group.version", 1, 0)])
    features = finalized_features(decode_response(ApiKey.API_VERSIONS, 3, payload))
    assert features.epoch == 42
    assert dict(features.levels) == {"metadata.version": 27, TRANSACTION_VERSION: 2, "group.version": 1}
    assert features.transaction_version == 2


def test_a_feature_the_cluster_did_not_finalize_is_level_zero() -> None:
    """As Java: an absent feature means level 0, i.e. transaction version 1 semantics (the classic protocol)."""
    features = finalized_features(decode_response(ApiKey.API_VERSIONS, 4, _api_versions_v3(5, [])))
    assert (features.epoch, features.transaction_version, features.level("anything")) == (5, 0, 0)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_api_versions_before_v3_report_no_features(version: int) -> None:
    body = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 3, "max_version": 9}]}
    decoded = decode_response(ApiKey.API_VERSIONS, version, encode_response(ApiKey.API_VERSIONS, version, 1, body)[8:])
    assert finalized_features(decoded) == FinalizedFeatures()
    assert finalized_features(decoded).epoch == -1


def test_the_newest_report_wins_whatever_the_order() -> None:
    """Brokers learn of a feature change at different times: keep the report with the highest epoch (Java's
    ApiVersions.update), so a lagging broker cannot turn transaction version 2 back off."""
    old = FinalizedFeatures(7, {TRANSACTION_VERSION: 1})
    new = FinalizedFeatures(9, {TRANSACTION_VERSION: 2})
    assert old.newest(new) is new and new.newest(old) is new
    assert FinalizedFeatures().newest(old) is old
    assert old.newest(FinalizedFeatures(7, {TRANSACTION_VERSION: 2})) is old  # a tie keeps what we have


@pytest.mark.parametrize("version", range(1, 7))
@pytest.mark.parametrize("key_type", list(CoordinatorType))
def test_find_coordinator_for_one_key_in_every_version(version: int, key_type: CoordinatorType) -> None:
    body = find_coordinator_body(version, key_type, ["the-key"])
    frame = encode_request(ApiKey.FIND_COORDINATOR, version, 11, "t", body)
    theirs = kp_metadata.FindCoordinatorRequest.decode(frame[4:], version=version, header=True)
    assert theirs.key_type == key_type
    if version >= 4:
        assert theirs.coordinator_keys == ["the-key"]
        answer: dict[str, Any] = {
            "coordinators": [
                {"key": "the-key", "node_id": 2, "host": "h", "port": 9, "error_code": 0, "error_message": None}
            ]
        }
    else:
        assert theirs.key == "the-key"
        answer = {"error_code": 0, "error_message": None, "node_id": 2, "host": "h", "port": 9}
    decoded = decode_response(
        ApiKey.FIND_COORDINATOR, version, encode_response(ApiKey.FIND_COORDINATOR, version, 11, answer)[8:]
    )
    assert coordinators_from_response(version, decoded, ["the-key"]) == {"the-key": Coordinator("the-key", 2, "h", 9)}


def test_find_coordinator_batches_from_v4_and_reports_each_keys_error() -> None:
    body = find_coordinator_body(4, CoordinatorType.GROUP, ["g1", "g2"])
    assert body == {"key_type": 0, "coordinator_keys": ["g1", "g2"]}
    answer = {
        "coordinators": [
            {"key": "g2", "node_id": -1, "host": "", "port": -1, "error_code": 15, "error_message": "not yet"},
            {"key": "g1", "node_id": 1, "host": "b1", "port": 9092, "error_code": 0, "error_message": None},
        ]
    }
    found = coordinators_from_response(4, answer, ["g1", "g2"])
    assert list(found) == ["g1", "g2"]  # in the order asked
    assert found["g1"] == Coordinator("g1", 1, "b1", 9092)
    assert (found["g2"].error_code, found["g2"].error_message) == (15, "not yet")


def test_find_coordinator_refuses_what_a_version_cannot_carry() -> None:
    with pytest.raises(UnsupportedVersionError, match="one key at a time"):
        find_coordinator_body(3, CoordinatorType.GROUP, ["g1", "g2"])
    with pytest.raises(ProtocolError, match="at least one key"):
        find_coordinator_body(6, CoordinatorType.GROUP, [])
    with pytest.raises(UnsupportedVersionError, match="exactly one key"):
        coordinators_from_response(3, {"node_id": 1, "host": "h", "port": 1, "error_code": 0}, ["a", "b"])


def test_a_batched_answer_missing_a_key_is_a_protocol_error_not_a_gap() -> None:
    entry = {"key": "g1", "node_id": 1, "host": "h", "port": 1, "error_code": 0, "error_message": None}
    with pytest.raises(ProtocolError, match=r"\['g2'\]"):
        coordinators_from_response(5, {"coordinators": [entry]}, ["g1", "g2"])


def _body_bytes(api: ApiKey, version: int, body: dict[str, Any]) -> bytes:
    """A request's bytes with the api version in its header masked, to compare two versions' bodies."""
    frame = bytearray(encode_request(api, version, 1, "same", body))
    frame[6:8] = b"\x00\x00"
    return bytes(frame)


PRODUCE = {
    "transactional_id": "tx",
    "acks": -1,
    "timeout_ms": 30000,
    "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"\x00" * 70}]}],
}
TXN_OFFSET_COMMIT = {
    "transactional_id": "tx",
    "group_id": "g",
    "producer_id": 7,
    "producer_epoch": 1,
    "generation_id": 4,
    "member_id": "m-1",
    "group_instance_id": None,
    "topics": [
        {
            "name": "t",
            "topic_id": uuid.UUID(int=0),  # only v6 sends it: what the decoder fills in below v6
            "partitions": [
                {"partition_index": 0, "committed_offset": 99, "committed_leader_epoch": 2, "committed_metadata": ""}
            ],
        }
    ],
}


@pytest.mark.parametrize(
    ("api", "tv2", "body"),
    [(ApiKey.PRODUCE, 12, PRODUCE), (ApiKey.TXN_OFFSET_COMMIT, 5, TXN_OFFSET_COMMIT)],
    ids=["Produce", "TxnOffsetCommit"],
)
def test_the_transaction_v2_version_is_its_predecessor_on_the_wire(api: ApiKey, tv2: int, body: dict[str, Any]) -> None:
    """Produce v12 and TxnOffsetCommit v5 change only what the version number tells the coordinator (KIP-890)."""
    assert _body_bytes(api, tv2, body) == _body_bytes(api, tv2 - 1, body)
    header, decoded = decode_request(encode_request(api, tv2, 1, "same", body)[4:])
    assert header.api_version == tv2
    assert decoded == {**decoded, **body}


def test_txn_offset_commit_v6_names_the_topic_by_id_where_v5_named_it() -> None:
    """KIP-1319: v6 is v5 with each topic's name (a compact string) replaced by its 16-byte id, in the same place."""
    topic_id = uuid.UUID("5b2b0a5e-3f4c-4f7e-9d3a-7c1e2f0a9b11")
    body = {**TXN_OFFSET_COMMIT, "topics": [{**TXN_OFFSET_COMMIT["topics"][0], "topic_id": topic_id}]}
    # After the size (4 bytes, 14 more for v6) and the masked version, the bodies differ only there.
    v5, v6 = _body_bytes(ApiKey.TXN_OFFSET_COMMIT, 5, body)[4:], _body_bytes(ApiKey.TXN_OFFSET_COMMIT, 6, body)[4:]
    assert v5.count(b"\x02t") == 1 and v6 == v5.replace(b"\x02t", topic_id.bytes)
    _, decoded = decode_request(encode_request(ApiKey.TXN_OFFSET_COMMIT, 6, 1, "c", body)[4:])
    assert decoded["topics"][0]["topic_id"] == topic_id and decoded["topics"][0]["name"] == ""


def test_end_txn_v5_names_the_next_producer_id_and_epoch() -> None:
    reply = kp_txn.EndTxnResponse(version=5, throttle_time_ms=0, error_code=0, producer_id=4001, producer_epoch=0)
    ours = decode_response(ApiKey.END_TXN, 5, _payload(reply))
    assert (ours["producer_id"], ours["producer_epoch"]) == (4001, 0)
    previous = kp_txn.EndTxnResponse(version=4, throttle_time_ms=0, error_code=0)
    assert decode_response(ApiKey.END_TXN, 4, _payload(previous))["producer_id"] == -1


def test_metadata_v13_carries_rebootstrap_required_at_the_top() -> None:
    """KIP-1102: the broker's verdict on the whole response, after the topics; earlier versions have none."""
    reply = kp_metadata.MetadataResponse(
        version=13, throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1, topics=[], error_code=129
    )
    assert decode_response(ApiKey.METADATA, 13, _payload(reply))["error_code"] == REBOOTSTRAP_REQUIRED
    body = {"brokers": [], "topics": [], "error_code": REBOOTSTRAP_REQUIRED}
    older = decode_response(ApiKey.METADATA, 12, encode_response(ApiKey.METADATA, 12, 1, body)[8:])
    assert older["error_code"] == 0  # v12 cannot say it: the field's default
