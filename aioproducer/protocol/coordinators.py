"""FindCoordinator in every version we speak: one body and one answer shape, batched (v4+, KIP-699) or not; pure.

Owns the translation between "find these keys" and the wire shapes; choosing whom to ask and retrying is the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import ProtocolError, UnsupportedVersionError

__all__ = ["Coordinator", "CoordinatorType", "coordinators_from_response", "find_coordinator_body"]

_FIRST_BATCHED_VERSION = 4


class CoordinatorType(IntEnum):
    """FindCoordinator's key type (Java's FindCoordinatorRequest.CoordinatorType)."""

    GROUP = 0
    TRANSACTION = 1


@dataclass(frozen=True, slots=True)
class Coordinator:
    """The broker coordinating one key, or the error that kept the broker from saying (`error_code` other than NONE)."""

    key: str
    node_id: int
    host: str
    port: int
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


def find_coordinator_body(version: int, key_type: CoordinatorType, keys: Sequence[str]) -> dict[str, Any]:
    """The FindCoordinator request body asking for `keys` at `version`.

    Before v4 a request names one key (Java's FindCoordinatorRequest.Builder raises UnsupportedBatchLookupException
    for more): asking for several there is an UnsupportedVersionError, so the caller sends one request per key.
    """
    if not keys:
        raise ProtocolError("FindCoordinator needs at least one key")
    if version >= _FIRST_BATCHED_VERSION:
        return {"key_type": int(key_type), "coordinator_keys": list(keys)}
    if len(keys) > 1:
        raise UnsupportedVersionError(
            f"FindCoordinator v{version} looks up one key at a time; batching needs v{_FIRST_BATCHED_VERSION}+"
        )
    return {"key_type": int(key_type), "key": keys[0]}


def coordinators_from_response(
    version: int, response: Mapping[str, Any], keys: Sequence[str]
) -> dict[str, Coordinator]:
    """Each asked key's coordinator (or error) from a decoded FindCoordinator response to a request for `keys`.

    Before v4 the answer carries no key: it is the one key asked. From v4 on, every key asked must be answered;
    a missing one is a ProtocolError rather than a silent gap.
    """
    if version < _FIRST_BATCHED_VERSION:
        if len(keys) != 1:
            raise UnsupportedVersionError(f"FindCoordinator v{version} answers for exactly one key, not {len(keys)}")
        key = keys[0]
        return {
            key: Coordinator(
                key,
                response["node_id"],
                response["host"],
                response["port"],
                response["error_code"],
                response["error_message"],
            )
        }
    found = {
        entry["key"]: Coordinator(
            entry["key"], entry["node_id"], entry["host"], entry["port"], entry["error_code"], entry["error_message"]
        )
        for entry in response["coordinators"]
    }
    missing = [key for key in keys if key not in found]
    if missing:
        raise ProtocolError(f"FindCoordinator v{version} response does not answer for {missing}")
    return {key: found[key] for key in keys}
