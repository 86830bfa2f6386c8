"""What an idle producer uses while it waits: the process's CPU time and the sender's passes (each pass is one
wake-up of its task), with the bounds the idle checks hold them to. This is the one test helper that reaches into
the producer's sender; the checks themselves say nothing of its internals."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from aioproducer import Producer

# What an idle producer may use of a core while it waits out an outage. The regressions these checks pin spun a
# whole core. Idle, the producer wakes a few dozen times a second: 1.5-2 % of a core when the test runs alone, but up
# to 7.7 % measured when it ran beside a busy test lane on a 2-core machine. A fifth of a core tells a spin from a
# wait on any machine.
IDLE_CPU_SHARE = 0.2
# How often a producer may wake while it can only wait: for reconnect backoffs, metadata retries, batches' delivery
# timeouts. Measured: 28 passes a second with every broker of a 3-node mock cluster down (backoffs capped at 1 s), 21
# with no broker listening at all. A sender polling every 3 ms made 300-310 a second, and stayed under the CPU bound
# above: this bound is what catches it.
IDLE_PASSES_PER_SECOND = 100


@dataclass(frozen=True)
class IdleUse:
    """What the producer's process used over `elapsed_s` seconds of waiting."""

    cpu_s: float
    elapsed_s: float
    passes: int


async def idle_use(producer: Producer, seconds: float) -> IdleUse:
    """Wait `seconds`, counting the sender's passes (its `_send_ready` runs once per pass) and the CPU time used."""
    sender: Any = producer._sender
    passes = 0
    send_ready = sender._send_ready

    def counted(now_ms: int) -> Any:
        nonlocal passes
        passes += 1
        return send_ready(now_ms)

    sender._send_ready = counted
    try:
        started_cpu, started = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        return IdleUse(time.process_time() - started_cpu, time.monotonic() - started, passes)
    finally:
        del sender._send_ready  # the class's method again
