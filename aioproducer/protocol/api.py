"""The Kafka APIs aioproducer speaks and the version range of each; the single source both sides of the codec read.

Owns constants only; version negotiation against a broker lives in versions.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType

__all__ = ["SUPPORTED_VERSIONS", "ApiKey"]


class ApiKey(IntEnum):
    """Kafka API keys (the `apiKey` of each message JSON) for the APIs a producer needs."""

    PRODUCE = 0
    METADATA = 3
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    INIT_PRODUCER_ID = 22
    SASL_AUTHENTICATE = 36


# Floors follow KIP-896 (Kafka 4.0 drops pre-2.1 client versions): Produce v3 is the first with record batches v2
# and a transactional id. CreateTopics v0-1 are deprecated, so v2 is the floor there.
SUPPORTED_VERSIONS: Mapping[ApiKey, tuple[int, int]] = MappingProxyType(
    {
        ApiKey.PRODUCE: (3, 11),
        ApiKey.METADATA: (1, 12),
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.API_VERSIONS: (0, 4),
        ApiKey.CREATE_TOPICS: (2, 7),
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
    }
)
