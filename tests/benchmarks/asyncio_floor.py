"""What asyncio itself costs per record in the idioms that wait for every record, with no Kafka client at all.

`asyncio.gather(*futures)` over plain asyncio futures that are already resolved (as most deliveries are once an
`enqueue` loop ends); a done-callback on each of many plain futures, then resolving them; and 1000 tasks each
awaiting one future after another (the `send`-in-many-tasks idiom: its task switches, none of the sending). No
client can wait for its records through these idioms for less than this: it is the ceiling of records/s for any
client, before the client does anything. Median of alternating rounds in one process; CPU time (`time.process_time`).

    python -m tests.benchmarks.asyncio_floor [--items N] [--rounds N]

Writes results/asyncio_floor.md; part of `nox -s bench`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


async def gather_resolved(count: int) -> float:
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(count)]
    for index, future in enumerate(futures):
        future.set_result(index)
    started = time.process_time()
    await asyncio.gather(*futures, return_exceptions=True)
    return time.process_time() - started


async def callback_each(count: int) -> float:
    loop = asyncio.get_running_loop()
    seen = 0
    done = loop.create_future()

    def on_done(future: asyncio.Future[Any]) -> None:
        nonlocal seen
        if future.cancelled() or future.exception() is not None:
            return
        seen += 1
        if seen == count:
            done.set_result(None)

    started = time.process_time()
    futures = [loop.create_future() for _ in range(count)]
    for future in futures:
        future.add_done_callback(on_done)
    for index, future in enumerate(futures):
        future.set_result(index)
    await done
    return time.process_time() - started


async def tasks_each(count: int, tasks: int = 1000) -> float:
    """`tasks` tasks, each awaiting one future after another; a round's futures resolve together once every task
    waits (as a batch's acknowledgement wakes the tasks whose records it carried)."""
    loop = asyncio.get_running_loop()
    waiting: list[asyncio.Future[None]] = []

    def settle_round() -> None:
        settling = waiting[:]
        waiting.clear()
        for future in settling:
            future.set_result(None)

    async def worker(rounds: int) -> None:
        for _ in range(rounds):
            future = loop.create_future()
            waiting.append(future)
            if len(waiting) == 1:  # runs after the tasks already woken this round have all added theirs
                loop.call_soon(settle_round)
            await future

    started = time.process_time()
    await asyncio.gather(*(worker(count // tasks) for _ in range(tasks)))
    return time.process_time() - started


IDIOMS: dict[str, tuple[str, Callable[[int], Any]]] = {
    "gather": ("`asyncio.gather` over already-resolved futures", gather_resolved),
    "callback": ("a done-callback per future (create, add the callback, resolve, run it)", callback_each),
    "tasks": ("1000 tasks, each awaiting a future per record, resolved a round at a time", tasks_each),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--out", type=Path, default=RESULTS, help="output folder (default: results/)")
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else args.rounds
    seconds: dict[str, list[float]] = {name: [] for name in IDIOMS}
    for _ in range(rounds):
        for name, (_title, run) in IDIOMS.items():
            gc.collect()
            seconds[name].append(asyncio.run(run(args.items)))
    lines = [
        "# What asyncio alone costs per record in the wait-for-every-record idioms",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}, Python {platform.python_version()}, {args.items:,} plain asyncio "
        f"futures per run, median of {rounds} rounds, CPU time. No Kafka client is involved: this is the floor "
        "under any client's cost in these idioms.",
        "",
        "| idiom | CPU-µs per record | records/s ceiling (one core) |",
        "|---|---|---|",
    ]
    for name, (title, _run) in IDIOMS.items():
        per_record = statistics.median(seconds[name]) / args.items
        lines.append(f"| {title} | {per_record * 1e6:.2f} | {1 / per_record:,.0f} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "asyncio_floor.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
