"""Version negotiation and the ApiVersions fallback (KIP-511), over hand-built broker answers."""

from __future__ import annotations

import struct

import pytest

from aioproducer.errors import ProtocolError, UnsupportedVersionError
from aioproducer.protocol import (
    SUPPORTED_VERSIONS,
    TRANSACTION_V2_VERSIONS,
    ApiKey,
    api_version_ranges,
    api_versions_error_code,
    api_versions_fallback_version,
    negotiate_versions,
    transaction_versions,
)

KAFKA_3_X = {0: (0, 9), 3: (0, 12), 17: (0, 1), 18: (0, 3), 19: (0, 7), 22: (0, 4), 36: (0, 2), 1: (0, 13)}
# What kafka-clients 4.1.1's ApiKeys reports (oldestVersion, latestVersion(false)), with Produce's advertised floor.
KAFKA_4_1 = {
    0: (0, 13),
    1: (4, 17),
    3: (0, 13),
    10: (0, 6),
    17: (0, 1),
    18: (0, 4),
    19: (2, 7),
    22: (0, 5),
    24: (0, 5),
    25: (0, 4),
    26: (0, 5),
    28: (0, 5),
    36: (0, 2),
    65: (0, 0),
}


def v0_error_body(entries: list[tuple[int, int, int]], error: int = 35) -> bytes:
    """What a Java broker sends for a too-new ApiVersions request: a v0 body (int32 count, no tags)."""
    return struct.pack(">hi", error, len(entries)) + b"".join(struct.pack(">hhh", *e) for e in entries)


def test_negotiation_picks_the_highest_common_version() -> None:
    chosen = negotiate_versions(KAFKA_3_X, [ApiKey.PRODUCE, ApiKey.METADATA])
    assert chosen == {
        ApiKey.PRODUCE: 9,
        ApiKey.METADATA: 12,
        ApiKey.SASL_HANDSHAKE: 1,
        ApiKey.API_VERSIONS: 3,
        ApiKey.CREATE_TOPICS: 7,
        ApiKey.INIT_PRODUCER_ID: 4,
        ApiKey.SASL_AUTHENTICATE: 2,
    }


def test_negotiation_against_kafka_4_1_1() -> None:
    """The ranges a default Kafka 4.1.1 broker advertises (ApiKeys.latestVersion(false), Produce's advertised floor
    v0 per KAFKA-18659): we pick Produce v12, Metadata v13, EndTxn v5, never an unstable or removed version."""
    chosen = negotiate_versions(KAFKA_4_1, list(SUPPORTED_VERSIONS))
    assert chosen == {
        ApiKey.PRODUCE: 12,
        ApiKey.METADATA: 13,
        ApiKey.FIND_COORDINATOR: 6,
        ApiKey.SASL_HANDSHAKE: 1,
        ApiKey.API_VERSIONS: 4,
        ApiKey.CREATE_TOPICS: 7,
        ApiKey.INIT_PRODUCER_ID: 5,
        ApiKey.ADD_PARTITIONS_TO_TXN: 3,
        ApiKey.ADD_OFFSETS_TO_TXN: 4,
        ApiKey.END_TXN: 5,
        ApiKey.TXN_OFFSET_COMMIT: 5,
        ApiKey.SASL_AUTHENTICATE: 2,
        ApiKey.DESCRIBE_TRANSACTIONS: 0,
    }


def test_negotiation_against_kafka_4_4_0() -> None:
    """Kafka 4.4 adds ApiVersions v5 (KIP-1242) and TxnOffsetCommit v6 (KIP-1319): both are picked; Produce stays
    at v12 (v13 is not spoken) and InitProducerId at v5 (v6 is unstable and not advertised)."""
    kafka_4_4 = {**KAFKA_4_1, 18: (0, 5), 28: (0, 6)}
    chosen = negotiate_versions(kafka_4_4, list(SUPPORTED_VERSIONS))
    assert chosen[ApiKey.API_VERSIONS] == 5 and chosen[ApiKey.TXN_OFFSET_COMMIT] == 6
    assert chosen[ApiKey.PRODUCE] == 12 and chosen[ApiKey.INIT_PRODUCER_ID] == 5
    assert {
        api: version for api, version in chosen.items() if api not in (ApiKey.API_VERSIONS, ApiKey.TXN_OFFSET_COMMIT)
    } == {
        api: version
        for api, version in negotiate_versions(KAFKA_4_1, list(SUPPORTED_VERSIONS)).items()
        if api not in (ApiKey.API_VERSIONS, ApiKey.TXN_OFFSET_COMMIT)
    }


def test_a_broker_advertising_produce_v0_never_gets_below_v3() -> None:
    """Kafka 4 advertises Produce v0-v13 but rejects v0-2 (KIP-896): only our own floor bounds the pick."""
    assert negotiate_versions({0: (0, 3)}, [ApiKey.PRODUCE])[ApiKey.PRODUCE] == 3
    for high in range(0, 3):
        with pytest.raises(UnsupportedVersionError, match="older than aioproducer supports"):
            negotiate_versions({0: (0, high)}, [ApiKey.PRODUCE])


def test_a_broker_that_dropped_every_version_we_speak_says_upgrade() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"PRODUCE .*speaks v3-v12, the broker offers v13-v14.*upgrade"):
        negotiate_versions({0: (13, 14)}, [ApiKey.PRODUCE])


def test_negotiation_caps_at_our_maximum_and_skips_apis_we_do_not_speak() -> None:
    chosen = negotiate_versions({0: (0, 99), 1: (0, 17)}, [ApiKey.PRODUCE])
    assert chosen == {ApiKey.PRODUCE: SUPPORTED_VERSIONS[ApiKey.PRODUCE][1]}


def test_optional_apis_the_broker_lacks_are_left_out() -> None:
    chosen = negotiate_versions({0: (3, 11), 3: (1, 12)}, [ApiKey.PRODUCE])
    assert ApiKey.CREATE_TOPICS not in chosen and chosen[ApiKey.METADATA] == 12


def test_a_required_api_the_broker_lacks_names_it() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"INIT_PRODUCER_ID \(API key 22\).*does not offer it"):
        negotiate_versions({0: (3, 11)}, [ApiKey.PRODUCE, ApiKey.INIT_PRODUCER_ID])


def test_disjoint_ranges_name_both_sides() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"TXN_OFFSET_COMMIT .*speaks v3-v6, the broker offers v0-v2"):
        negotiate_versions({28: (0, 2)}, [ApiKey.TXN_OFFSET_COMMIT])


def test_api_version_ranges_reads_a_decoded_response() -> None:
    body = {"api_keys": [{"api_key": 0, "min_version": 3, "max_version": 11}]}
    assert api_version_ranges(body) == {0: (3, 11)}


def test_error_code_is_read_from_the_first_two_bytes_whatever_follows() -> None:
    assert api_versions_error_code(b"\x00\x23garbage") == 35
    assert api_versions_error_code(memoryview(b"\x00\x00")) == 0
    with pytest.raises(ProtocolError):
        api_versions_error_code(b"\x00")


def test_fallback_uses_the_max_a_java_broker_advertises() -> None:
    payload = v0_error_body([(0, 0, 9), (18, 0, 2), (3, 0, 12)])
    assert api_versions_fallback_version(payload) == 2


def test_fallback_reads_a_compact_body_too() -> None:
    entries = [(0, 0, 9), (18, 0, 3)]
    body = b"".join(struct.pack(">hhh", *e) + b"\x00" for e in entries)
    payload = struct.pack(">h", 35) + bytes([len(entries) + 1]) + body + b"\x00\x00\x00\x00\x00"
    assert api_versions_fallback_version(payload) == 3


def test_fallback_reads_the_librdkafka_mock_body() -> None:
    """The mock writes a bare uvarint count and untagged entries; captured from librdkafka 2.x."""
    payload = bytes.fromhex("00230100120000000200000000")
    assert api_versions_fallback_version(payload) == 2


def test_fallback_caps_at_our_maximum() -> None:
    assert api_versions_fallback_version(v0_error_body([(18, 0, 9)])) == 5


@pytest.mark.parametrize("payload", [struct.pack(">h", 35), v0_error_body([]), v0_error_body([(0, 0, 9)])])
def test_fallback_is_v0_when_the_body_does_not_say(payload: bytes) -> None:
    assert api_versions_fallback_version(payload) == 0


def test_fallback_never_repeats_or_raises_the_version_tried() -> None:
    payload = v0_error_body([(18, 0, 4)])  # a confused broker rejects v4 yet claims v4
    assert api_versions_fallback_version(payload, tried_version=4) == 3
    assert api_versions_fallback_version(payload, tried_version=1) == 0
    with pytest.raises(UnsupportedVersionError, match="lowest"):
        api_versions_fallback_version(payload, tried_version=0)


def test_fallback_refuses_a_response_that_is_not_unsupported_version() -> None:
    with pytest.raises(ProtocolError, match="UNSUPPORTED_VERSION"):
        api_versions_fallback_version(v0_error_body([(18, 0, 4)], error=0))


@pytest.mark.parametrize("transaction_v2", [True, False])
def test_transaction_versions_stay_below_tv2_unless_the_cluster_runs_it(transaction_v2: bool) -> None:
    negotiated = negotiate_versions(KAFKA_4_1, list(SUPPORTED_VERSIONS))
    capped = transaction_versions(negotiated, transaction_v2=transaction_v2)
    expected = dict(negotiated)
    if not transaction_v2:
        expected.update({ApiKey.PRODUCE: 11, ApiKey.TXN_OFFSET_COMMIT: 4, ApiKey.END_TXN: 4})
    assert capped == expected
    assert set(TRANSACTION_V2_VERSIONS) == {ApiKey.PRODUCE, ApiKey.TXN_OFFSET_COMMIT, ApiKey.END_TXN}


def test_transaction_versions_never_raise_a_version() -> None:
    """An older broker's lower versions pass through: the cap only ever lowers."""
    negotiated = negotiate_versions(KAFKA_3_X, [ApiKey.PRODUCE])
    assert transaction_versions(negotiated, transaction_v2=False) == negotiated
