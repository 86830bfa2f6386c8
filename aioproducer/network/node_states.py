"""Per-node connection bookkeeping, pure: when a node may be tried again, how long its next connection setup may
take, which open connections have been idle too long, and which nodes have stopped taking the batches ready for them.

Mirrors Java's ClusterConnectionStates (exponential reconnect backoff, KIP-144/KIP-580; exponential connection
setup timeout, KIP-601) and the idle expiry of its Selector (`connections.max.idle.ms`). Time arrives as an argument
and randomness from an injected `random.Random`; nothing here opens or closes a socket.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Iterable
from typing import TypeVar

__all__ = ["ExponentialBackoff", "NodeLatency", "NodeStates", "idle_expiry"]

K = TypeVar("K")
_JITTER = 0.2  # Java's CommonClientConfigs RECONNECT_BACKOFF_JITTER and CONNECTION_SETUP_TIMEOUT_JITTER


class ExponentialBackoff:
    """`base_ms * 2**attempts`, capped at `max_ms`, times a random factor in [0.8, 1.2) (Java's
    ExponentialBackoff with multiplier 2 and jitter 0.2)."""

    __slots__ = ("_base_ms", "_max_exponent")

    def __init__(self, base_ms: int, max_ms: int) -> None:
        self._base_ms = base_ms
        self._max_exponent = math.log2(max_ms / base_ms) if max_ms > base_ms > 0 else 0.0

    def value(self, attempts: int, rng: random.Random) -> int:
        term = self._base_ms * 2 ** min(attempts, self._max_exponent)
        return int(term * rng.uniform(1 - _JITTER, 1 + _JITTER))


class _Node:
    __slots__ = ("failures", "next_attempt_ms")

    def __init__(self) -> None:
        self.failures = 0  # connection attempts failed in a row
        self.next_attempt_ms = 0


class NodeStates:
    """Connection attempts per node (a broker id, or a bootstrap address): each failure doubles both the wait before
    the next attempt and the time that attempt may take to set up; a success resets both."""

    def __init__(
        self,
        *,
        reconnect_backoff_ms: int,
        reconnect_backoff_max_ms: int,
        setup_timeout_ms: int,
        setup_timeout_max_ms: int,
        rng: random.Random,
    ) -> None:
        self._reconnect = ExponentialBackoff(reconnect_backoff_ms, reconnect_backoff_max_ms)
        self._setup = ExponentialBackoff(setup_timeout_ms, setup_timeout_max_ms)
        self._rng = rng
        self._nodes: dict[Hashable, _Node] = {}

    def can_connect(self, node: Hashable, now_ms: int) -> bool:
        """Whether an attempt to `node` may start now (its reconnect backoff is over)."""
        state = self._nodes.get(node)
        return state is None or state.next_attempt_ms <= now_ms

    def setup_timeout_ms(self, node: Hashable) -> int:
        """How long the next attempt may take to connect (TCP and TLS): `socket_connection_setup_timeout_ms`,
        doubled per failure in a row up to `socket_connection_setup_timeout_max_ms`, with jitter (KIP-601)."""
        state = self._nodes.get(node)
        return self._setup.value(0 if state is None else state.failures, self._rng)

    def failed(self, node: Hashable, now_ms: int) -> None:
        """An attempt failed: back off `reconnect_backoff_ms`, doubled per failure in a row, before the next."""
        state = self._nodes.setdefault(node, _Node())
        state.next_attempt_ms = now_ms + self._reconnect.value(state.failures, self._rng)
        state.failures += 1

    def connected(self, node: Hashable) -> None:
        self._nodes.pop(node, None)

    def next_attempt_delay_ms(self, now_ms: int) -> int | None:
        """Time until the earliest node now backing off may be tried again; None when none is backing off."""
        delays = [s.next_attempt_ms - now_ms for s in self._nodes.values() if s.next_attempt_ms > now_ms]
        return min(delays) if delays else None


class NodeLatency:
    """When each node last had batches ready to go, and when it last could take them (Java's
    RecordAccumulator.NodeLatencyStats, KIP-794): a node whose ready batches have waited longer than
    partitioner_availability_timeout_ms (no connection, every request slot taken, a socket that does not drain)
    stops getting keyless records until it takes batches again."""

    __slots__ = ("_drained_ms", "_ready_ms")

    def __init__(self) -> None:
        self._ready_ms: dict[int, int] = {}
        self._drained_ms: dict[int, int] = {}

    def ready(self, node: int, now_ms: int, *, drained: bool) -> None:
        """`node` had batches ready at `now_ms`, and took them (`drained`) or could not."""
        self._ready_ms[node] = now_ms
        if drained or node not in self._drained_ms:
            self._drained_ms[node] = now_ms

    def unavailable(self, timeout_ms: int) -> set[int]:
        """The nodes whose ready batches have waited more than `timeout_ms`."""
        drained = self._drained_ms
        return {node for node, ready in self._ready_ms.items() if ready - drained[node] > timeout_ms}


def idle_expiry(
    connections: Iterable[tuple[K, float, int]], now: float, max_idle: float
) -> tuple[list[K], float | None]:
    """Which of `connections` (key, last activity, requests in flight) to close as idle, and how long until the next
    check. A connection is idle once nothing was sent or received for `max_idle` (Java's Selector); one with a
    request in flight is never idle (its request times out first). Any time unit, as long as it is one."""
    expired: list[K] = []
    next_check: float | None = None
    for key, last_active, in_flight in connections:
        due = last_active + max_idle - now
        if in_flight:
            due = max_idle
        elif due <= 0:
            expired.append(key)
            continue
        next_check = due if next_check is None else min(next_check, due)
    return expired, next_check
