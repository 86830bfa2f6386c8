"""One benchmark run in its own process: build the client, warm it up, run one workload, print one JSON result line.

Owns the timing of a run (wall clock, CPU of the whole process, RSS, latencies, event-loop lag); it must not start
brokers or judge results — the orchestrator (`run.py`) counts what reached the broker.
    python -m tests.benchmarks.bench_worker '<RunSpec as JSON>'

With `"handshake": true` in the spec's extra, the worker prints READY_MARK once the client is connected, its warm-up
record acknowledged and the records prepared, then waits for a line on stdin before the clock starts: the
orchestrator reads the broker's CPU and end offsets in between, so that both cover the timed part alone. The result
line is printed as soon as the timed part ends, before the client closes, for the same reason.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

from tests.benchmarks.bench_async_clients import AsyncClient, make_async_client
from tests.benchmarks.bench_sync_clients import SyncClient, make_sync_client, pace
from tests.benchmarks.driver import READY_MARK, RESULT_MARK
from tests.benchmarks.measure import cpu_seconds, peak_rss_mb, rss_mb, summary_ms
from tests.benchmarks.workloads import ASYNC_CLIENTS, BULK_CHUNK, RunSpec, key_pool, records_for, value_pool

IDLE_GAP_S = 0.02  # four times linger.ms: each idle send finds the producer with nothing buffered
TICK_S = 0.001
SETTLE_S = 10.0


def _payloads(spec: RunSpec) -> tuple[list[bytes], list[bytes] | None]:
    values = records_for(spec.count, value_pool(spec.value_size, compressible=spec.compression != "none"))
    keys = records_for(spec.count, key_pool()) if spec.keyed else None
    return values, keys


def _await_go(spec: RunSpec) -> None:
    """Tell the orchestrator the run is ready to time, and wait until it says go (see the module's docstring)."""
    if not spec.extra.get("handshake"):
        return
    print(READY_MARK, flush=True)
    if not sys.stdin.readline():
        raise RuntimeError("the orchestrator went away before the timed part")


def _emit(result: dict[str, Any]) -> None:
    print(RESULT_MARK + json.dumps(result), flush=True)


def table_of(source: str, values: list[bytes]) -> Any:
    """The records as one table with a binary `value` column: a pyarrow Table or a polars DataFrame."""
    if source == "pyarrow":
        import pyarrow as pa

        return pa.table({"value": pa.array(values, type=pa.binary())})
    if source == "polars":
        import polars as pl

        return pl.DataFrame({"value": pl.Series("value", values, dtype=pl.Binary)})
    raise ValueError(f"no such table source: {source!r}")


class _Acks:
    """Latency samples from enqueue to acknowledgement, recorded by delivery callbacks (any thread)."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.failed = 0

    def done(self, t0: float, ok: bool) -> None:
        if ok:
            self.latencies.append(time.perf_counter() - t0)
        else:
            self.failed += 1

    def future_done(self, t0: float, future: asyncio.Future[Any]) -> None:
        self.done(t0, not future.cancelled() and future.exception() is None)

    @property
    def settled(self) -> int:
        return len(self.latencies) + self.failed

    def report(self, sent: int, send_s: float) -> dict[str, Any]:
        return {"latency": summary_ms(self.latencies), "failed": self.failed, "achieved_rate": sent / send_s}


# -- asyncio clients ------------------------------------------------------------------------------------------------
async def _rate_async(client: AsyncClient, values: Sequence[bytes], rate: int) -> dict[str, Any]:
    acks = _Acks()
    futures: list[asyncio.Future[Any]] = []
    started = time.perf_counter()
    sent, count = 0, len(values)
    while sent < count:
        due = min(count, int((time.perf_counter() - started) * rate) + 1)
        while sent < due:
            t0 = time.perf_counter()
            future = await client.produce(values[sent])
            future.add_done_callback(functools.partial(acks.future_done, t0))
            futures.append(future)
            sent += 1
        await asyncio.sleep(0.0005)
    send_s = time.perf_counter() - started
    # Our callbacks were added first, so they have run by the time wait() sees every future done.
    await asyncio.wait(futures, timeout=SETTLE_S)
    return acks.report(sent, send_s)


async def _idle_async(client: AsyncClient, samples: int, budget_s: float) -> dict[str, Any]:
    latencies: list[float] = []
    deadline = time.monotonic() + budget_s
    while len(latencies) < samples and time.monotonic() < deadline:
        await asyncio.sleep(IDLE_GAP_S)
        t0 = time.perf_counter()
        await client.send_and_wait(b"idle-%d" % len(latencies))
        latencies.append(time.perf_counter() - t0)
    return {"latency": summary_ms(latencies), "records": len(latencies)}


async def _ticker(ticks: list[tuple[float, float]], stop: asyncio.Event) -> None:
    """Sleep 1 ms over and over; record (woke at, lateness) for each tick."""
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(TICK_S)
        woke = time.perf_counter()
        ticks.append((woke, woke - t0 - TICK_S))


def _with_missed_ticks(lags: Sequence[float]) -> list[float]:
    """Each late tick plus the ticks a stall swallowed (a 50 ms stall hid 49 ticks, late by 49, 48, ... ms).

    Plain tick samples under-count stalls: one 50 ms stall is one sample among hundreds of punctual ones. This is
    the usual correction for coordinated omission (as HdrHistogram's recordValueWithExpectedInterval does).
    """
    filled: list[float] = []
    for lag in lags:
        filled.append(lag)
        hidden = lag - TICK_S
        while hidden > 0:
            filled.append(hidden)
            hidden -= TICK_S
    return filled


async def _lag_async(client: AsyncClient, values: Sequence[bytes], bulk: bool, idiom: str = "") -> dict[str, Any]:
    ticks: list[tuple[float, float]] = []
    stop = asyncio.Event()
    ticker = asyncio.create_task(_ticker(ticks, stop))
    await asyncio.sleep(0.3)  # the ticker runs before production starts; its idle jitter is the baseline
    begin = time.perf_counter()
    if idiom:
        _check_settled(await client.idiom(idiom, values))
    else:
        await (client.bulk(values, BULK_CHUNK) if bulk else client.loop(values, None))
    end = time.perf_counter()
    stop.set()
    await ticker
    idle = [lag for woke, lag in ticks if woke <= begin]
    # A tick counts when it was asleep during production: it started before the end and woke after the start.
    busy = [lag for woke, lag in ticks if woke > begin and woke - lag - TICK_S < end]
    return {
        "lag": summary_ms(busy),
        "lag_corrected": summary_ms(_with_missed_ticks(busy)),
        "lag_idle": summary_ms(idle),
    }


async def _run_async(spec: RunSpec) -> dict[str, Any]:
    client = make_async_client(spec)
    await client.start()
    await client.send_and_wait(b"warm-up")  # connections and metadata exist before the clock starts
    values, keys = _payloads(spec)
    table = table_of(str(spec.extra["source"]), values) if spec.mode == "table" else None
    result: dict[str, Any] = {"rss_before_mb": rss_mb()}
    _await_go(spec)
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    if spec.mode in ("loop", "memory"):
        await client.loop(values, keys)
    elif spec.mode == "nowait":
        await client.loop_nowait(values, keys)  # type: ignore[attr-defined]
    elif spec.mode == "bulk":
        await client.bulk(values, BULK_CHUNK)
    elif spec.mode == "bulk_overlap":
        await client.bulk_overlap(values, BULK_CHUNK)  # type: ignore[attr-defined]
    elif spec.mode == "bulk_stream":
        await client.bulk_stream(values, BULK_CHUNK)  # type: ignore[attr-defined]
    elif spec.mode == "bulk_overlap_stream":
        await client.bulk_overlap(values, BULK_CHUNK, stream=True)  # type: ignore[attr-defined]
    elif spec.mode == "rate":
        result.update(await _rate_async(client, values, spec.rate))
    elif spec.mode == "idle":
        result.update(await _idle_async(client, spec.count, float(spec.extra.get("budget_s", 15))))
    elif spec.mode == "lag":
        result.update(await _lag_async(client, values, bool(spec.extra.get("bulk")), str(spec.extra.get("idiom", ""))))
    elif spec.mode == "idiom":
        _check_settled(await client.idiom(str(spec.extra["idiom"]), values))
    elif spec.mode == "callback":
        _check_settled(await client.callback(values, keys))
    elif spec.mode == "callback_nowait":
        _check_settled(await client.callback_nowait(values, keys))  # type: ignore[attr-defined]
    elif spec.mode == "table":
        await client.table(table)  # type: ignore[attr-defined]
    result.update(elapsed_s=time.perf_counter() - t0, cpu_s=cpu_seconds() - cpu0, peak_rss_mb=peak_rss_mb())
    result.setdefault("records", spec.count)
    _emit(result)
    await client.close()
    return result


# -- thread-based clients -------------------------------------------------------------------------------------------
def _rate_sync(client: SyncClient, values: Sequence[bytes], rate: int) -> dict[str, Any]:
    acks = _Acks()

    def send_one(index: int) -> None:
        client.produce(values[index], time.perf_counter(), acks.done)

    send_s = pace(len(values), rate, send_one, client.serve)
    client.flush()
    deadline = time.monotonic() + SETTLE_S
    while acks.settled < len(values) and time.monotonic() < deadline:
        client.serve()
        time.sleep(0.001)
    return acks.report(len(values), send_s)


def _idle_sync(client: SyncClient, samples: int, budget_s: float) -> dict[str, Any]:
    latencies: list[float] = []
    deadline = time.monotonic() + budget_s
    while len(latencies) < samples and time.monotonic() < deadline:
        time.sleep(IDLE_GAP_S)
        t0 = time.perf_counter()
        client.send_and_wait(b"idle-%d" % len(latencies))
        latencies.append(time.perf_counter() - t0)
    return {"latency": summary_ms(latencies), "records": len(latencies)}


def _run_sync(spec: RunSpec) -> dict[str, Any]:
    if spec.mode == "lag":
        raise ValueError(f"{spec.client} has no event loop to measure")
    client = make_sync_client(spec)
    client.send_and_wait(b"warm-up")
    values, keys = _payloads(spec)
    result: dict[str, Any] = {"rss_before_mb": rss_mb()}
    _await_go(spec)
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    if spec.mode in ("loop", "memory"):
        client.loop(values, keys)
    elif spec.mode == "bulk":
        client.bulk(values, BULK_CHUNK)
    elif spec.mode == "rate":
        result.update(_rate_sync(client, values, spec.rate))
    elif spec.mode == "idle":
        result.update(_idle_sync(client, spec.count, float(spec.extra.get("budget_s", 15))))
    elif spec.mode == "idiom":
        _check_settled(client.idiom(str(spec.extra["idiom"]), values))  # type: ignore[attr-defined]
    elif spec.mode == "callback":
        _check_settled(client.callback(values, keys))  # type: ignore[attr-defined]
    result.update(elapsed_s=time.perf_counter() - t0, cpu_s=cpu_seconds() - cpu0, peak_rss_mb=peak_rss_mb())
    result.setdefault("records", spec.count)
    _emit(result)
    client.close()
    return result


def _check_settled(failed: int) -> None:
    """An idiom run counts only when every record was delivered (the broker's count is checked afterwards)."""
    if failed:
        raise RuntimeError(f"{failed} record(s) failed")


def run(spec: RunSpec) -> dict[str, Any]:
    """Run `spec` in this process and print its result line; `records` is how many records the timed part produced
    (the warm-up excluded)."""
    return asyncio.run(_run_async(spec)) if spec.client in ASYNC_CLIENTS else _run_sync(spec)


def main(argv: list[str]) -> int:
    spec = RunSpec.from_json(json.loads(argv[1]))
    try:
        run(spec)
    except Exception:
        # Printed after a result line (a failure while closing), it replaces that result: the run failed.
        _emit({"error": traceback.format_exc()})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
