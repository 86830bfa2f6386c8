"""`Producer.health()`: what a readiness probe needs, read from the producer's live parts at call time.

Owns the `Health` value and the rule for `ready`; it reads the cluster, accumulator and observer and changes none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = ["Health", "health_of"]


@dataclass(frozen=True)
class Health:
    """The producer's health at one moment.

    `ready` holds when the producer is running, is connected to at least one broker, and knows a leader for every
    partition of the topics it uses. `leaders[topic][partition]` is the leader's node id (-1: none known).
    `last_error` is the most recent error seen (a failed or retried batch, a failed connection, fencing) and
    `last_error_age_s` how long ago, or None when there was none.
    """

    ready: bool
    state: str
    connected_brokers: tuple[int, ...]
    leaders: Mapping[str, Mapping[int, int]]
    buffer_used_bytes: int
    buffer_total_bytes: int
    last_error: str | None
    last_error_age_s: float | None


def health_of(
    state: str, connections: Iterable[Any], metadata: Any, topics: Iterable[str], accumulator: Any, observer: Any
) -> Health:
    """Build a `Health` from duck-typed parts (connections with `node_id`, a ClusterMetadata, the accumulator)."""
    brokers = tuple(sorted({conn.node_id for conn in connections if conn.node_id >= 0}))
    leaders: dict[str, Mapping[int, int]] = {}
    complete = True
    for topic in sorted(topics):
        info = metadata.topics.get(topic)
        if info is None:
            complete = False
            leaders[topic] = MappingProxyType({})
            continue
        parts = {p.partition: p.leader for p in info.partitions}
        complete = complete and bool(parts) and all(leader >= 0 for leader in parts.values())
        leaders[topic] = MappingProxyType(parts)
    error = observer.last_error
    age = None if error is None else max(observer.clock_ms() - observer.last_error_ms, 0) / 1000
    return Health(
        ready=state == "running" and bool(brokers) and complete,
        state=state,
        connected_brokers=brokers,
        leaders=MappingProxyType(leaders),
        buffer_used_bytes=accumulator.used_bytes,
        buffer_total_bytes=accumulator.buffer_memory,
        last_error=None if error is None else f"{type(error).__name__}: {error}",
        last_error_age_s=age,
    )
