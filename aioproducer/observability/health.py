"""`Producer.health()`: what a Kubernetes readiness or liveness probe gates on, read from the producer at call time.

Owns the `Health` value and the two rules:

- **live**: the producer can still do its job some day. False once it is closing or closed, once its sender task
  crashed (it then closes itself), or after a fatal error (a fenced transactional id, sequence state it cannot
  safely continue from). A liveness probe that fails on this restarts a process that only a restart can mend.
- **ready**: it can deliver now. Running and live, holding cluster metadata that a broker sent, no older than
  `metadata_max_age_ms + request_timeout_ms` (the producer refreshes every `metadata_max_age_ms`, and a refresh takes
  at most `request_timeout_ms`), and no broker found unreachable since that answer. `start()` fetches that metadata
  (waiting for it at most `max_block_ms`), so a producer whose cluster answers is ready when `start()` returns. Open
  connections play no part: an idle connection closed after `connections_max_idle_ms` does not un-ready it. Nor do
  partitions without a leader: they are listed in `leaders` (-1), and another replica of the service would see the
  same cluster.

It reads the producer's parts and changes none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = ["Health", "health_of"]

_NEW, _RUNNING = "new", "running"


@dataclass(frozen=True)
class Health:
    """The producer's health at one moment.

    `ready` and `live` are the probes' answers (this module states their rules); `reason` says why the
    producer is not ready (None when it is). `metadata_age_s` is the age of the newest metadata a broker sent
    (None before the first). `connected_brokers` are the brokers with an open connection now, and
    `leaders[topic][partition]` the leader's node id of each partition of the topics in use (-1: none known).
    `last_error` is the most recent error seen (a failed or retried batch, a failed connection or metadata request,
    fencing) and `last_error_age_s` how long ago, or None when there was none.
    """

    ready: bool
    live: bool
    reason: str | None
    state: str
    connected_brokers: tuple[int, ...]
    leaders: Mapping[str, Mapping[int, int]]
    metadata_age_s: float | None
    buffer_used_bytes: int
    buffer_total_bytes: int
    last_error: str | None
    last_error_age_s: float | None


def health_of(
    state: str,
    *,
    connections: Iterable[Any],
    metadata: Any,
    topics: Iterable[str],
    accumulator: Any,
    observer: Any,
    max_metadata_age_ms: int,
    fatal: BaseException | None = None,
) -> Health:
    """Build a `Health` from duck-typed parts: connections with `node_id`, a ClusterMetadata, the accumulator (its
    `used_bytes`, `buffer_memory`) and the observer (the last error, when metadata last came, whether the cluster is
    unreachable, its clock). `fatal` is the error that ended the producer's usefulness, if one did."""
    now = observer.clock_ms()
    brokers = tuple(sorted({conn.node_id for conn in connections if conn.node_id >= 0}))
    leaders: dict[str, Mapping[int, int]] = {}
    for topic in sorted(topics):
        info = metadata.topics.get(topic) if metadata is not None else None
        parts = {} if info is None else {p.partition: p.leader for p in info.partitions}
        leaders[topic] = MappingProxyType(parts)
    error = observer.last_error
    refreshed = observer.metadata_refreshed_ms
    age_ms = None if refreshed is None else max(now - refreshed, 0)
    live = state in (_NEW, _RUNNING) and fatal is None
    reason = _not_ready_reason(state, fatal, age_ms, max_metadata_age_ms, observer.unreachable_since_ms, now, error)
    return Health(
        ready=reason is None,
        live=live,
        reason=reason,
        state=state,
        connected_brokers=brokers,
        leaders=MappingProxyType(leaders),
        metadata_age_s=None if age_ms is None else age_ms / 1000,
        buffer_used_bytes=accumulator.used_bytes,
        buffer_total_bytes=accumulator.buffer_memory,
        last_error=None if error is None else _describe(error),
        last_error_age_s=None if error is None else max(now - observer.last_error_ms, 0) / 1000,
    )


def _not_ready_reason(
    state: str,
    fatal: BaseException | None,
    age_ms: int | None,
    max_age_ms: int,
    unreachable_since_ms: int | None,
    now_ms: int,
    error: BaseException | None,
) -> str | None:
    """Why the producer cannot deliver now, or None when it can (the `ready` rule, in the order a reader checks)."""
    if state == _NEW:
        return "the producer is not started"
    if state != _RUNNING:
        return f"the producer is {state}"
    if fatal is not None:
        return f"the producer hit a fatal error: {_describe(fatal)}"
    cause = f" (last error: {_describe(error)})" if error is not None else ""
    if unreachable_since_ms is not None:
        for_s = max(now_ms - unreachable_since_ms, 0) / 1000
        return f"no broker has answered for {for_s:.1f} s{cause}"
    if age_ms is None:
        return f"no metadata from the cluster yet{cause}"
    if age_ms > max_age_ms:
        return (
            f"the cluster's metadata is {age_ms / 1000:.1f} s old: no refresh succeeded within "
            f"metadata_max_age_ms + request_timeout_ms ({max_age_ms / 1000:.1f} s){cause}"
        )
    return None


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
