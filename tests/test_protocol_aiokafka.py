"""A second, hand-written judge for the non-flexible versions: aiokafka's protocol structs (no JSON behind them)
must produce exactly our body bytes, and decode to the same values."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.protocol import admin as ak_admin
from aiokafka.protocol import coordination as ak_coordination
from aiokafka.protocol import metadata as ak_metadata
from aiokafka.protocol import produce as ak_produce
from aiokafka.protocol import transaction as ak_txn

from aioproducer.protocol import (
    ApiKey,
    Coordinator,
    CoordinatorType,
    coordinators_from_response,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    find_coordinator_body,
)

RECORDS = bytes(range(256)) * 3


def _request_body(api: ApiKey, version: int, body: dict[str, Any]) -> bytes:
    frame = encode_request(api, version, 1, "aiokafka-check", body)[4:]
    _, offset = decode_request_header(frame)
    return frame[offset:]


def _response_payload(api: ApiKey, version: int, body: dict[str, Any]) -> bytes:
    return encode_response(api, version, 1, body)[8:]


PRODUCE = {
    "transactional_id": "tx",
    "acks": -1,
    "timeout_ms": 1500,
    "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": RECORDS}, {"index": 0, "records": None}]}],
}


@pytest.mark.parametrize("version", range(3, 9))
def test_produce_request_bytes_match_aiokafka(version: int) -> None:
    theirs = getattr(ak_produce, f"ProduceRequest_v{version}")("tx", -1, 1500, [("t", [(2, RECORDS), (0, None)])])
    assert _request_body(ApiKey.PRODUCE, version, PRODUCE) == theirs.encode()


@pytest.mark.parametrize("version", range(3, 9))
def test_produce_response_from_aiokafka_decodes(version: int) -> None:
    partition: tuple[Any, ...] = (1, 6, 42)
    if version >= 2:
        partition += (1700000000000,)
    if version >= 5:
        partition += (7,)
    if version >= 8:
        partition += ([(3, "bad record")], "batch dropped")
    theirs = getattr(ak_produce, f"ProduceResponse_v{version}")([("t", [partition])], 250)
    ours = decode_response(ApiKey.PRODUCE, version, theirs.encode())
    part = ours["responses"][0]["partition_responses"][0]
    assert ours["throttle_time_ms"] == 250
    assert (ours["responses"][0]["name"], part["index"], part["error_code"], part["base_offset"]) == ("t", 1, 6, 42)
    assert part["log_append_time_ms"] == 1700000000000
    assert part["log_start_offset"] == (7 if version >= 5 else -1)
    if version >= 8:
        assert part["record_errors"] == [{"batch_index": 3, "batch_index_error_message": "bad record"}]
        assert part["error_message"] == "batch dropped"


@pytest.mark.parametrize("version", range(1, 6))
def test_metadata_request_bytes_match_aiokafka(version: int) -> None:
    cls = getattr(ak_metadata, f"MetadataRequest_v{version}")
    args: tuple[Any, ...] = (["a", "b"],) + ((False,) if version >= 4 else ())
    body = {"topics": [{"name": "a"}, {"name": "b"}], "allow_auto_topic_creation": False}
    assert _request_body(ApiKey.METADATA, version, body) == cls(*args).encode()


@pytest.mark.parametrize("version", range(3, 6))
def test_metadata_response_from_aiokafka_decodes(version: int) -> None:
    partition: tuple[Any, ...] = (0, 1, 111, [111, 112], [111]) + (([112],) if version >= 5 else ())
    cls = getattr(ak_metadata, f"MetadataResponse_v{version}")
    theirs = cls(9, [(111, "h1", 9092, None), (112, "h2", 9093, "r2")], "cid", 111, [(0, "t", False, [partition])])
    ours = decode_response(ApiKey.METADATA, version, theirs.encode())
    assert ours["throttle_time_ms"] == 9 and ours["cluster_id"] == "cid" and ours["controller_id"] == 111
    assert ours["brokers"] == [
        {"node_id": 111, "host": "h1", "port": 9092, "rack": None},
        {"node_id": 112, "host": "h2", "port": 9093, "rack": "r2"},
    ]
    part = ours["topics"][0]["partitions"][0]
    assert (part["partition_index"], part["leader_id"], part["replica_nodes"], part["isr_nodes"]) == (
        1,
        111,
        [111, 112],
        [111],
    )
    assert part["offline_replicas"] == ([112] if version >= 5 else [])
    assert part["leader_epoch"] == -1  # v7+ only: the declared default


@pytest.mark.parametrize("version", range(0, 3))
def test_api_versions_response_from_aiokafka_decodes(version: int) -> None:
    cls = getattr(ak_admin, f"ApiVersionResponse_v{version}")
    args: tuple[Any, ...] = (0, [(0, 3, 11), (18, 0, 4)]) + ((5,) if version >= 1 else ())
    ours = decode_response(ApiKey.API_VERSIONS, version, cls(*args).encode())
    assert ours["api_keys"] == [
        {"api_key": 0, "min_version": 3, "max_version": 11},
        {"api_key": 18, "min_version": 0, "max_version": 4},
    ]
    assert ours["throttle_time_ms"] == (5 if version >= 1 else 0)


@pytest.mark.parametrize("version", [2, 3])
def test_create_topics_request_bytes_match_aiokafka(version: int) -> None:
    cls = getattr(ak_admin, f"CreateTopicsRequest_v{version}")
    theirs = cls([("t", 3, 1, [(0, [1, 2])], [("cleanup.policy", "compact"), ("x", None)])], 30000, True)
    body = {
        "topics": [
            {
                "name": "t",
                "num_partitions": 3,
                "replication_factor": 1,
                "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}],
                "configs": [{"name": "cleanup.policy", "value": "compact"}, {"name": "x", "value": None}],
            }
        ],
        "timeout_ms": 30000,
        "validate_only": True,
    }
    assert _request_body(ApiKey.CREATE_TOPICS, version, body) == theirs.encode()


def test_init_producer_id_v0_both_ways() -> None:
    request = ak_txn.InitProducerIdRequest_v0(None, 60000)
    body = {"transactional_id": None, "transaction_timeout_ms": 60000}
    assert _request_body(ApiKey.INIT_PRODUCER_ID, 0, body) == request.encode()
    response = ak_txn.InitProducerIdResponse_v0(0, 0, 4000, 2)
    ours = decode_response(ApiKey.INIT_PRODUCER_ID, 0, response.encode())
    assert ours == {"throttle_time_ms": 0, "error_code": 0, "producer_id": 4000, "producer_epoch": 2}


@pytest.mark.parametrize("version", [0, 1])
def test_sasl_both_ways(version: int) -> None:
    handshake = getattr(ak_admin, f"SaslHandShakeRequest_v{version}")("PLAIN")
    assert _request_body(ApiKey.SASL_HANDSHAKE, version, {"mechanism": "PLAIN"}) == handshake.encode()
    reply = getattr(ak_admin, f"SaslHandShakeResponse_v{version}")(0, ["PLAIN", "SCRAM-SHA-256"])
    assert decode_response(ApiKey.SASL_HANDSHAKE, version, reply.encode())["mechanisms"] == ["PLAIN", "SCRAM-SHA-256"]
    auth = getattr(ak_admin, f"SaslAuthenticateRequest_v{version}")(b"\x00u\x00p")
    assert _request_body(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": b"\x00u\x00p"}) == auth.encode()
    auth_args: tuple[Any, ...] = (0, None, b"ok") + ((3600000,) if version >= 1 else ())
    auth_reply = getattr(ak_admin, f"SaslAuthenticateResponse_v{version}")(*auth_args)
    ours = decode_response(ApiKey.SASL_AUTHENTICATE, version, auth_reply.encode())
    assert (ours["auth_bytes"], ours["session_lifetime_ms"]) == (b"ok", 3600000 if version >= 1 else 0)


def test_produce_response_we_encode_decodes_in_aiokafka() -> None:
    body = {
        "responses": [{"name": "t", "partition_responses": [{"index": 4, "error_code": 0, "base_offset": 99}]}],
        "throttle_time_ms": 3,
    }
    theirs = ak_produce.ProduceResponse_v7.decode(_response_payload(ApiKey.PRODUCE, 7, body))
    assert theirs.topics == [("t", [(4, 0, 99, -1, -1)])]
    assert theirs.throttle_time_ms == 3


@pytest.mark.parametrize("version", [1, 2])
def test_find_coordinator_both_ways(version: int) -> None:
    """aiokafka has FindCoordinator v1 only; v2 is the same on the wire (brokers answer before throttling)."""
    request = ak_coordination.FindCoordinatorRequest_v1("my-txn", 1)
    body = find_coordinator_body(version, CoordinatorType.TRANSACTION, ["my-txn"])
    assert _request_body(ApiKey.FIND_COORDINATOR, version, body) == request.encode()
    reply = ak_coordination.FindCoordinatorResponse_v1(7, 0, "", 3, "broker-3", 9093)
    ours = decode_response(ApiKey.FIND_COORDINATOR, version, reply.encode())
    found = coordinators_from_response(version, ours, ["my-txn"])
    assert found == {"my-txn": Coordinator("my-txn", 3, "broker-3", 9093, 0, "")}
    assert ours["throttle_time_ms"] == 7


# v0-2 of these three are one wire shape (v1 and v2 only widen the errors a broker may answer with).
@pytest.mark.parametrize("version", [0, 1, 2])
def test_add_partitions_to_txn_both_ways(version: int) -> None:
    request = ak_txn.AddPartitionsToTxnRequest_v0("tx", 4000, 3, [("a", [0, 2]), ("b", [])])
    body = {
        "v3_and_below_transactional_id": "tx",
        "v3_and_below_producer_id": 4000,
        "v3_and_below_producer_epoch": 3,
        "v3_and_below_topics": [{"name": "a", "partitions": [0, 2]}, {"name": "b", "partitions": []}],
    }
    assert _request_body(ApiKey.ADD_PARTITIONS_TO_TXN, version, body) == request.encode()
    reply = ak_txn.AddPartitionsToTxnResponse_v0(5, [("a", [(0, 0), (2, 51)])])
    ours = decode_response(ApiKey.ADD_PARTITIONS_TO_TXN, version, reply.encode())
    assert ours["throttle_time_ms"] == 5
    assert ours["results_by_topic_v3_and_below"] == [
        {
            "name": "a",
            "results_by_partition": [
                {"partition_index": 0, "partition_error_code": 0},
                {"partition_index": 2, "partition_error_code": 51},
            ],
        }
    ]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_add_offsets_to_txn_both_ways(version: int) -> None:
    request = ak_txn.AddOffsetsToTxnRequest_v0("tx", 4000, 3, "group-1")
    body = {"transactional_id": "tx", "producer_id": 4000, "producer_epoch": 3, "group_id": "group-1"}
    assert _request_body(ApiKey.ADD_OFFSETS_TO_TXN, version, body) == request.encode()
    reply = ak_txn.AddOffsetsToTxnResponse_v0(1, 15)
    ours = decode_response(ApiKey.ADD_OFFSETS_TO_TXN, version, reply.encode())
    assert ours == {"throttle_time_ms": 1, "error_code": 15}


@pytest.mark.parametrize(("version", "committed"), [(0, True), (1, False), (2, True)])
def test_end_txn_both_ways(version: int, committed: bool) -> None:
    request = ak_txn.EndTxnRequest_v0("tx", 4000, 3, committed)
    body = {"transactional_id": "tx", "producer_id": 4000, "producer_epoch": 3, "committed": committed}
    assert _request_body(ApiKey.END_TXN, version, body) == request.encode()
    reply = ak_txn.EndTxnResponse_v0(0, 48)
    ours = decode_response(ApiKey.END_TXN, version, reply.encode())
    # Before v5 the response names no next producer id/epoch: the declared defaults say "unchanged".
    assert ours == {"throttle_time_ms": 0, "error_code": 48, "producer_id": -1, "producer_epoch": -1}
