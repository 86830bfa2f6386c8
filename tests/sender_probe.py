"""Counts the sender's passes (each pass is one wake-up of its task) for the tests that bound how often an idle
producer wakes. This is the one test helper that reaches into the producer's sender; the checks themselves say
nothing of its internals."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from aioproducer import Producer

# How often a producer may wake while it can only wait: for reconnect backoffs, metadata retries, batches' delivery
# timeouts. Measured: 28 passes a second with every broker of a 3-node mock cluster down (backoffs capped at 1 s), 21
# with no broker listening at all. A sender polling every 3 ms made 300-310 a second, and stayed under the CPU bound
# of the same checks (`IDLE_CPU_SHARE`): this bound is what catches it.
IDLE_PASSES_PER_SECOND = 100


class PassCount:
    """How many passes the sender made while the `counting_sender_passes` block ran."""

    def __init__(self) -> None:
        self.passes = 0


@contextlib.contextmanager
def counting_sender_passes(producer: Producer) -> Iterator[PassCount]:
    """Count the sender's passes while the block runs (its `_send_ready` runs once per pass)."""
    sender: Any = producer._sender
    count = PassCount()
    send_ready = sender._send_ready

    def counted(now_ms: int) -> Any:
        count.passes += 1
        return send_ready(now_ms)

    sender._send_ready = counted
    try:
        yield count
    finally:
        del sender._send_ready  # the class's method again
