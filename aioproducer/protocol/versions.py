"""Choosing API versions with a broker: negotiation over ApiVersions ranges, and the ApiVersions fallback.

Owns the decisions only (pure functions over decoded data or raw payloads); sending the requests is the caller's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import ProtocolError, UnsupportedVersionError
from aioproducer.protocol.api import SUPPORTED_VERSIONS, TRANSACTION_V2_VERSIONS, ApiKey
from aioproducer.protocol.primitives import Reader

__all__ = [
    "api_version_ranges",
    "api_versions_error_code",
    "api_versions_fallback_version",
    "negotiate_versions",
    "transaction_versions",
]


def api_version_ranges(api_versions_response: Mapping[str, Any]) -> dict[int, tuple[int, int]]:
    """The broker's `{api_key: (min, max)}` from a decoded ApiVersions response body."""
    return {
        entry["api_key"]: (entry["min_version"], entry["max_version"]) for entry in api_versions_response["api_keys"]
    }


def _describe(api: ApiKey) -> str:
    low, high = SUPPORTED_VERSIONS[api]
    return f"{api.name} (API key {int(api)}); aioproducer speaks v{low}-v{high}"


def negotiate_versions(broker_ranges: Mapping[int, tuple[int, int]], required: Iterable[ApiKey]) -> dict[ApiKey, int]:
    """For each API both sides share, the highest version both support (Java's NodeApiVersions.latestUsableVersion).

    The result covers every API in SUPPORTED_VERSIONS the broker shares; APIs in `required` must be among them,
    otherwise UnsupportedVersionError names the API and both ranges. The pick is always within our own range, never
    the broker's minimum: Kafka 4.x advertises Produce v0 yet rejects v0-2 (KIP-896, KAFKA-18659).
    """
    chosen: dict[ApiKey, int] = {}
    for api, (our_low, our_high) in SUPPORTED_VERSIONS.items():
        theirs = broker_ranges.get(int(api))
        if theirs is None:
            continue
        low, high = max(our_low, theirs[0]), min(our_high, theirs[1])
        if low <= high:
            chosen[api] = high
    for api in required:
        if api in chosen:
            continue
        theirs = broker_ranges.get(int(api))
        broker = "does not offer it" if theirs is None else f"offers v{theirs[0]}-v{theirs[1]}"
        raise UnsupportedVersionError(f"no common version of {_describe(api)}, the broker {broker}{_hint(api, theirs)}")
    return chosen


def _hint(api: ApiKey, theirs: tuple[int, int] | None) -> str:
    our_low, our_high = SUPPORTED_VERSIONS[api]
    if theirs is not None and theirs[1] < our_low:
        return ": the broker is older than aioproducer supports (Kafka 2.1 or later is needed)"
    if theirs is not None and theirs[0] > our_high:
        return ": the broker is newer than this aioproducer release supports; upgrade aioproducer"
    return ""


def transaction_versions(negotiated: Mapping[ApiKey, int], *, transaction_v2: bool) -> dict[ApiKey, int]:
    """The versions a transactional producer may use, from the `negotiated` ones.

    With `transaction_v2` (the cluster's finalized `transaction.version` is 2 or more, KIP-890 part 2) they are
    unchanged. Otherwise Produce, TxnOffsetCommit and EndTxn stay below their first TV2 version, as Java's
    request builders do for a TV1 transaction: Produce v12 / TxnOffsetCommit v5 would let the coordinator add
    partitions and offsets implicitly, and EndTxn v5 would bump the epoch, none of which a TV1 client expects.
    """
    if transaction_v2:
        return dict(negotiated)
    return {
        api: min(version, TRANSACTION_V2_VERSIONS[api] - 1) if api in TRANSACTION_V2_VERSIONS else version
        for api, version in negotiated.items()
    }


def api_versions_error_code(payload: bytes | memoryview) -> int:
    """The error code of an ApiVersions response payload (after the correlation id), even if the rest is malformed.

    KIP-511: whatever version was asked, the response header is v0 and the body starts with the int16 error
    code, so it can be read before (and without) trusting the rest of the body.
    """
    return Reader(payload).int16()


def api_versions_fallback_version(payload: bytes | memoryview, *, tried_version: int | None = None) -> int:
    """Which ApiVersions version to retry with after an UNSUPPORTED_VERSION answer.

    Mirrors Java's NetworkClient.handleApiVersionsResponse: a broker answers a too-new ApiVersions request with
    a v0-shaped body listing its own ApiVersions range; retry at that max (capped at ours), else at v0. The body
    is read leniently, in each shape peers are known to send (see `_BODY_SHAPES`). With `tried_version`, the
    answer is always lower than it, so a confused peer cannot loop the handshake; when there is nothing lower
    to try, UnsupportedVersionError.
    """
    if api_versions_error_code(payload) != ErrorCode.UNSUPPORTED_VERSION:
        raise ProtocolError("the ApiVersions response is not an UNSUPPORTED_VERSION error; nothing to fall back from")
    our_low, our_high = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]
    advertised = _advertised_api_versions_max(payload)
    version = our_low if advertised is None else max(our_low, min(advertised, our_high))
    if tried_version is not None and version >= tried_version:
        if tried_version <= our_low:
            raise UnsupportedVersionError(f"the broker rejected ApiVersions v{tried_version}, the lowest we speak")
        version = tried_version - 1
    return version


# (how the entry count is written, whether each entry ends with a tagged-field section). Kafka brokers send the
# v0 shape (KIP-511); a v3+ body is compact with tags; librdkafka's mock cluster writes a bare uvarint count and
# untagged entries (rdkafka_mock_handlers.c hand-crafts that reply).
_BODY_SHAPES = (("int32", False), ("compact", True), ("uvarint", False))
_ENTRY_BYTES = 6


def _advertised_api_versions_max(payload: bytes | memoryview) -> int | None:
    for count_kind, tagged in _BODY_SHAPES:
        try:
            found = _scan_api_versions(Reader(payload, 2), count_kind, tagged)
        except ProtocolError:
            continue
        if found is not None:
            return found
    return None


def _scan_api_versions(reader: Reader, count_kind: str, tagged: bool) -> int | None:
    count = reader.int32() if count_kind == "int32" else reader.uvarint() - int(count_kind == "compact")
    if count < 0 or count * _ENTRY_BYTES > reader.remaining:
        return None
    for _ in range(count):
        api_key, _low, high = reader.int16(), reader.int16(), reader.int16()
        if tagged:
            for _tag in range(reader.uvarint()):
                reader.uvarint()
                reader.skip(reader.uvarint())
        if api_key == ApiKey.API_VERSIONS:
            return high
    return None
