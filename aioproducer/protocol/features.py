"""The cluster's finalized feature levels (KIP-584) as ApiVersions v3+ reports them, e.g. `transaction.version`; pure.

Owns reading them and picking the newest report; what a level means to the producer is decided by its users.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["TRANSACTION_VERSION", "FinalizedFeatures", "finalized_features"]

# The feature whose level 2 turns on transaction version 2 (KIP-890 part 2); Kafka 4.0+ formats new clusters with it.
TRANSACTION_VERSION = "transaction.version"


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    """Finalized feature levels and the epoch they were finalized at (-1: unknown, as before ApiVersions v3).

    Brokers learn of feature changes at different times, so as Java's ApiVersions does, a client keeps the report
    with the highest epoch across brokers (`newest`).
    """

    epoch: int = -1
    levels: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    def level(self, name: str) -> int:
        """The finalized (max) level of a feature; 0 when the cluster has not finalized it (Kafka's default)."""
        return self.levels.get(name, 0)

    @property
    def transaction_version(self) -> int:
        """`transaction.version`: 2 or more means transaction version 2 (Produce v12+, TxnOffsetCommit v5+, EndTxn
        v5+ with an epoch bump per transaction); 0 or 1 means the classic protocol."""
        return self.level(TRANSACTION_VERSION)

    def newest(self, other: FinalizedFeatures) -> FinalizedFeatures:
        """Whichever report has the higher epoch (this one on a tie)."""
        return other if other.epoch > self.epoch else self


def finalized_features(api_versions_response: Mapping[str, Any]) -> FinalizedFeatures:
    """The finalized features of a decoded ApiVersions response (empty, epoch -1, before v3)."""
    entries = api_versions_response.get("finalized_features") or ()
    levels = {entry["name"]: entry["max_version_level"] for entry in entries}
    return FinalizedFeatures(api_versions_response.get("finalized_features_epoch", -1), MappingProxyType(levels))
