"""Independent truth for the codec: kafka-python (and aiokafka's hand-written structs) read what we write and we
read what they write, for every API and version we speak, requests and responses, with Hypothesis bodies."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    # kafka-python 3 loads its schemas through importlib.resources' deprecated legacy API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol import admin as kp_admin
    from kafka.protocol import metadata as kp_metadata
    from kafka.protocol import producer as kp_producer
    from kafka.protocol import sasl as kp_sasl
    from kafka.protocol.producer import transaction as kp_txn

from aioproducer.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    FrameDecoder,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from aioproducer.protocol.messages import REQUESTS, RESPONSES
from aioproducer.protocol.schema import Field, Message

KAFKA_PYTHON = {
    ApiKey.PRODUCE: (kp_producer.ProduceRequest, kp_producer.ProduceResponse),
    ApiKey.METADATA: (kp_metadata.MetadataRequest, kp_metadata.MetadataResponse),
    ApiKey.API_VERSIONS: (kp_metadata.ApiVersionsRequest, kp_metadata.ApiVersionsResponse),
    ApiKey.CREATE_TOPICS: (kp_admin.CreateTopicsRequest, kp_admin.CreateTopicsResponse),
    ApiKey.INIT_PRODUCER_ID: (kp_producer.InitProducerIdRequest, kp_producer.InitProducerIdResponse),
    ApiKey.SASL_HANDSHAKE: (kp_sasl.SaslHandshakeRequest, kp_sasl.SaslHandshakeResponse),
    ApiKey.SASL_AUTHENTICATE: (kp_sasl.SaslAuthenticateRequest, kp_sasl.SaslAuthenticateResponse),
    ApiKey.FIND_COORDINATOR: (kp_metadata.FindCoordinatorRequest, kp_metadata.FindCoordinatorResponse),
    ApiKey.ADD_PARTITIONS_TO_TXN: (kp_producer.AddPartitionsToTxnRequest, kp_producer.AddPartitionsToTxnResponse),
    ApiKey.ADD_OFFSETS_TO_TXN: (kp_producer.AddOffsetsToTxnRequest, kp_producer.AddOffsetsToTxnResponse),
    ApiKey.END_TXN: (kp_producer.EndTxnRequest, kp_producer.EndTxnResponse),
    ApiKey.TXN_OFFSET_COMMIT: (kp_txn.TxnOffsetCommitRequest, kp_txn.TxnOffsetCommitResponse),
    ApiKey.DESCRIBE_TRANSACTIONS: (kp_admin.DescribeTransactionsRequest, kp_admin.DescribeTransactionsResponse),
}
# Every version we speak that kafka-python knows; it stops short of Kafka 4.4's ApiVersions v5 and TxnOffsetCommit
# v6, which Kafka's own JSON checks (test_spec_drift) and a real broker (test_protocol_kafka) judge instead.
CASES = [
    (api, v)
    for api, (low, high) in SUPPORTED_VERSIONS.items()
    for v in range(low, min(high, KAFKA_PYTHON[api][0].max_version) + 1)
]
CASE_IDS = [f"{api.name}-v{v}" for api, v in CASES]


def test_kafka_python_still_knows_all_but_kafka_4_4s_newest_versions() -> None:
    """If kafka-python learns them, the cases above take them in; if it forgets older ones, we want to know."""
    left_out = {api: high for api, (_, high) in SUPPORTED_VERSIONS.items() if KAFKA_PYTHON[api][0].max_version < high}
    assert left_out == {ApiKey.API_VERSIONS: 5, ApiKey.TXN_OFFSET_COMMIT: 6}


FEW = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_INTS = {"int8": 7, "int16": 15, "int32": 31, "int64": 63, "uint16": 16, "uint32": 32}
_TEXT = st.text(st.characters(codec="utf-8"), max_size=6)


def _primitive(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in _INTS:
        bits = _INTS[kafka_type]
        low = 0 if kafka_type.startswith("u") else -(1 << bits)
        return st.integers(low, (1 << bits) - 1)
    return {
        "bool": st.booleans(),
        "string": _TEXT,
        "bytes": st.binary(max_size=12),
        "records": st.binary(max_size=40),
        "uuid": st.uuids(),
    }[kafka_type]


def field_values(fld: Field, version: int) -> st.SearchStrategy[Any]:
    if fld.is_struct:
        item: st.SearchStrategy[Any] = struct_values(fld.fields, version)
    else:
        item = _primitive(fld.element_type)
    value = st.lists(item, max_size=3) if fld.is_array else item
    return st.none() | value if version in fld.nullable else value


def struct_values(fields: tuple[Field, ...], version: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({fld.name: field_values(fld, version) for fld in fields if version in fld.versions})


def body_values(message: Message, version: int) -> st.SearchStrategy[dict[str, Any]]:
    strategy = struct_values(message.fields, version)
    if message.name == "ApiVersionsResponse":
        # kafka-python reads any ApiVersions error response as v0 (the KIP-511 fallback); keep this to success.
        strategy = strategy.map(lambda body: {**body, "error_code": 0})
    return strategy


# kafka-python renames MetadataResponse's *_authorized_operations to `authorized_operations` and decodes the
# int32 bit field as a set of bit numbers (None for Kafka's "not requested" value, -2**31).
_KP_BITFIELD = "authorized_operations"


def _kp_name(cls: Any, fld: Field) -> str:
    return fld.name if fld.name in cls._struct.fields else _KP_BITFIELD


def _bits_to_int(bits: set[int] | None) -> int:
    value = sum(1 << bit for bit in ({31} if bits is None else bits))
    return value - (1 << 32) if value >= 1 << 31 else value


def _int_to_bits(value: int) -> set[int] | None:
    bits = {bit for bit in range(32) if (value >> bit) & 1}
    return None if bits == {31} else bits


def to_kafka_python(cls: Any, data: dict[str, Any], fields: tuple[Field, ...], version: int) -> Any:
    kwargs: dict[str, Any] = {}
    for fld in fields:
        if version not in fld.versions:
            continue
        value = data[fld.name]
        name = _kp_name(cls, fld)
        if name == _KP_BITFIELD:
            value = _int_to_bits(value)
        elif fld.is_struct and value is not None:
            item_cls = cls._struct.fields[fld.name].data_class
            if fld.is_array:
                value = [to_kafka_python(item_cls, item, fld.fields, version) for item in value]
            else:
                value = to_kafka_python(item_cls, value, fld.fields, version)
        kwargs[name] = value
    return cls(version=version, **kwargs)


def from_kafka_python(obj: Any, fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fld in fields:
        if version not in fld.versions:
            continue
        name = _kp_name(type(obj), fld)
        value = getattr(obj, name)
        if name == _KP_BITFIELD:
            value = _bits_to_int(value)
        elif fld.is_struct and value is None and version not in fld.nullable:
            value = fld.default()  # kafka-python leaves an absent tagged struct as None; Kafka means its default
        elif fld.is_struct and value is not None:
            if fld.is_array:
                value = [from_kafka_python(item, fld.fields, version) for item in value]
            else:
                value = from_kafka_python(value, fld.fields, version)
        elif isinstance(value, (bytearray, memoryview)):
            value = bytes(value)
        out[fld.name] = value
    return out


def present(data: dict[str, Any], fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    """Only the fields a version has, recursively: what both libraries must agree on."""
    out: dict[str, Any] = {}
    for fld in fields:
        if version not in fld.versions:
            continue
        value = data[fld.name]
        if fld.is_struct and value is not None:
            if fld.is_array:
                value = [present(item, fld.fields, version) for item in value]
            else:
                value = present(value, fld.fields, version)
        out[fld.name] = value
    return out


@pytest.mark.parametrize(("api", "version"), CASES, ids=CASE_IDS)
@FEW
@given(data=st.data())
def test_requests_we_encode_decode_in_kafka_python(api: ApiKey, version: int, data: st.DataObject) -> None:
    message = REQUESTS[api]
    body = data.draw(body_values(message, version))
    client_id = data.draw(st.none() | _TEXT)
    frame = encode_request(api, version, 1234, client_id, body)
    theirs = KAFKA_PYTHON[api][0].decode(frame[4:], version=version, header=True)
    assert theirs.header.correlation_id == 1234
    assert theirs.header.client_id == client_id
    assert theirs.header.request_api_key == api and theirs.header.request_api_version == version
    assert from_kafka_python(theirs, message.fields, version) == body
    # And our own decoder agrees with our encoder.
    header, ours = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api,
        version,
        1234,
        client_id,
    )
    assert present(ours, message.fields, version) == body


@pytest.mark.parametrize(("api", "version"), CASES, ids=CASE_IDS)
@FEW
@given(data=st.data())
def test_requests_kafka_python_encodes_decode_in_ours(api: ApiKey, version: int, data: st.DataObject) -> None:
    message = REQUESTS[api]
    body = data.draw(body_values(message, version))
    theirs = to_kafka_python(KAFKA_PYTHON[api][0], body, message.fields, version)
    theirs.with_header(correlation_id=99, client_id="kp")
    frame = bytes(theirs.encode(header=True, framed=True))
    header, ours = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (api, version, 99, "kp")
    assert present(ours, message.fields, version) == body
    assert encode_request(api, version, 99, "kp", body) == frame, "same body, same bytes"


@pytest.mark.parametrize(("api", "version"), CASES, ids=CASE_IDS)
@FEW
@given(data=st.data())
def test_responses_we_encode_decode_in_kafka_python(api: ApiKey, version: int, data: st.DataObject) -> None:
    message = RESPONSES[api]
    body = data.draw(body_values(message, version))
    frame = encode_response(api, version, 77, body)
    theirs = KAFKA_PYTHON[api][1].decode(frame[4:], version=version, header=True)
    assert theirs.header.correlation_id == 77
    assert from_kafka_python(theirs, message.fields, version) == body


@pytest.mark.parametrize(("api", "version"), CASES, ids=CASE_IDS)
@FEW
@given(data=st.data())
def test_responses_kafka_python_encodes_decode_in_ours(api: ApiKey, version: int, data: st.DataObject) -> None:
    message = RESPONSES[api]
    body = data.draw(body_values(message, version))
    theirs = to_kafka_python(KAFKA_PYTHON[api][1], body, message.fields, version)
    theirs.with_header(correlation_id=5)
    frame = bytes(theirs.encode(header=True, framed=True))
    ((correlation_id, payload),) = FrameDecoder().feed(frame)
    assert correlation_id == 5
    assert present(decode_response(api, version, payload), message.fields, version) == body
    assert encode_response(api, version, 5, body) == frame, "same body, same bytes"
