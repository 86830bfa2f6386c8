"""Turning the raw runs into results.md: medians per broker x workload x client, ratios to aioproducer, the targets'
verdicts.

Owns the aggregation and the markdown; the plots are `plot.py`'s. It must not run anything.
"""

from __future__ import annotations

import os
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.benchmarks.plot import write_plot, write_throughput_plot
from tests.benchmarks.workloads import BROKER_LABELS, BROKERS, CLIENT_LABELS, CLIENTS, LINGER_MS, WORKLOADS

__all__ = ["Table", "write_report"]

Run = dict[str, Any]
THROUGHPUT = [w for w in WORKLOADS if w.mode in ("loop", "bulk")]
IDIOM_ROWS = [w for w in WORKLOADS if w.mode == "idiom"]
NAN = float("nan")


def broker_of(run: Run) -> str:
    """The broker a run used (runs recorded before the bench ran on real Kafka used Tansu)."""
    return str(run.get("broker", "tansu"))


class Table:
    """One broker's runs grouped by (workload, client), with medians over the successful ones."""

    def __init__(self, runs: list[Run]) -> None:
        self.groups: dict[tuple[str, str], list[Run]] = defaultdict(list)
        for run in runs:
            self.groups[run["workload"], run["client"]].append(run)

    def clients(self) -> list[str]:
        """The clients that ran at least one throughput workload, in the usual column order."""
        return [c for c in CLIENTS if any(self.ran(w.name, c) for w in THROUGHPUT)]

    def ok(self, workload: str, client: str) -> list[Run]:
        return [r for r in self.groups.get((workload, client), []) if "error" not in r]

    def median(self, workload: str, client: str, value: Callable[[Run], float]) -> float:
        runs = self.ok(workload, client)
        return statistics.median(value(r) for r in runs) if runs else NAN

    def rate(self, workload: str, client: str) -> float:
        return self.median(workload, client, lambda r: r["records"] / r["elapsed_s"])

    def unverified(self, workload: str, client: str) -> bool:
        return any(not r.get("verified") for r in self.ok(workload, client))

    def ran(self, workload: str, client: str) -> bool:
        return (workload, client) in self.groups


def _num(value: float, digits: int = 0) -> str:
    return "-" if value != value else f"{value:,.{digits}f}"


def _cell(table: Table, workload: str, client: str, value: Callable[[Run], float], digits: int = 0) -> str:
    if not table.ran(workload, client):
        return "n/a"
    if not table.ok(workload, client):
        return "failed (see below)"
    text = _num(table.median(workload, client, value), digits)
    return text + (" ⚠ count mismatch" if table.unverified(workload, client) else "")


def _head(clients: list[str]) -> list[str]:
    return ["| workload | " + " | ".join(CLIENT_LABELS[c] for c in clients) + " |", "|---" * (len(clients) + 1) + "|"]


def _throughput_rows(table: Table) -> list[str]:
    clients = table.clients()
    rows = _head(clients)
    for w in THROUGHPUT:
        ours = table.rate(w.name, "aioproducer")
        cells = []
        for client in clients:
            cell = _cell(table, w.name, client, lambda r: r["records"] / r["elapsed_s"])
            theirs = table.rate(w.name, client)
            if client != "aioproducer" and theirs == theirs and ours == ours:
                cell += f" ({ours / theirs:.2f}x)"
            cells.append(cell)
        rows.append(f"| {w.title} | " + " | ".join(cells) + " |")
    return rows


def _spread_rows(table: Table) -> list[str]:
    clients = table.clients()
    rows = _head(clients)
    for w in THROUGHPUT:
        cells = []
        for client in clients:
            rates = sorted(r["records"] / r["elapsed_s"] / 1000 for r in table.ok(w.name, client))
            cells.append(f"{rates[0]:,.0f}-{rates[-1]:,.0f}" if rates else "n/a")
        rows.append(f"| {w.title} | " + " | ".join(cells) + " |")
    return rows


def _grid(table: Table, value: Callable[[Run], float], digits: int, workloads: list[str]) -> list[str]:
    clients = table.clients()
    rows = _head(clients)
    titles = {w.name: w.title for w in WORKLOADS}
    for name in workloads:
        rows.append(f"| {titles[name]} | " + " | ".join(_cell(table, name, c, value, digits) for c in clients) + " |")
    return rows


def _latency_rows(table: Table) -> list[str]:
    rows = [
        "| client | p50 ms at 20 k/s | p99 ms at 20 k/s | achieved rate "
        "| idle send p50 ms | idle send p99 ms | idle samples |",
        "|---|---|---|---|---|---|---|",
    ]
    for client in CLIENTS:
        if not (table.ran("latency_20k", client) or table.ran("idle_send", client)):
            continue
        rate = [
            _cell(table, "latency_20k", client, lambda r: r["latency"]["p50_ms"], 2),
            _cell(table, "latency_20k", client, lambda r: r["latency"]["p99_ms"], 2),
            _cell(table, "latency_20k", client, lambda r: r["achieved_rate"]),
        ]
        idle = [
            _cell(table, "idle_send", client, lambda r: r["latency"]["p50_ms"], 2),
            _cell(table, "idle_send", client, lambda r: r["latency"]["p99_ms"], 2),
            _cell(table, "idle_send", client, lambda r: r["latency"]["n"]),
        ]
        rows.append(f"| {CLIENT_LABELS[client]} | " + " | ".join(rate + idle) + " |")
    return rows


def _lag_rows(table: Table) -> list[str]:
    rows = [
        "| workload | client | p50 ms | p99 ms (tick samples) | p99 ms (with missed ticks) | max ms "
        "| idle-loop p99 ms | records/s meanwhile |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for w in WORKLOADS:
        if w.mode != "lag" or w.idiom:  # the kept-handles lag rows have their own table
            continue
        for client in CLIENTS:
            if not table.ran(w.name, client):
                continue
            cells = _lag_cells(table, w.name, client, with_idle=True)
            rows.append(f"| {w.title} | {CLIENT_LABELS[client]} | " + " | ".join(cells) + " |")
    rows += [
        "",
        "A tick sample is taken only when the loop gets round to the ticker, so one 100 ms stall is one sample among "
        "hundreds of punctual ones. 'With missed ticks' adds the ticks a stall swallowed (late by L-1, L-2, … ms), "
        "the usual coordinated-omission correction. The target is judged on the larger p99 of the enqueue loop.",
    ]
    return rows


def _memory_rows(table: Table) -> list[str]:
    rows = [
        "| record | buffer_memory | records | RSS before MB | peak RSS MB | growth MB | growth - buffer MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for w in WORKLOADS:
        if w.mode != "memory" or not table.ok(w.name, "aioproducer"):
            continue
        before = table.median(w.name, "aioproducer", lambda r: r["rss_before_mb"])
        peak = table.median(w.name, "aioproducer", lambda r: r["peak_rss_mb"])
        records = table.median(w.name, "aioproducer", lambda r: r["records"])
        buffer_mb = w.buffer_memory / 2**20
        cells = [f"{w.value_size} B", f"{buffer_mb:.0f} MB", _num(records), _num(before, 1), _num(peak, 1)]
        rows.append("| " + " | ".join([*cells, _num(peak - before, 1), _num(peak - before - buffer_mb, 1)]) + " |")
    for size, (slope, constant) in memory_overhead(table).items():
        rows.append(
            f"\n{size} B records: RSS growth = {_num(slope, 2)} x buffer_memory + {_num(constant, 1)} MB "
            "(a line through the two buffer sizes)."
        )
    return rows


def memory_overhead(table: Table) -> dict[int, tuple[float, float]]:
    """Per record size: (RSS growth per buffer MB, constant MB), a line through the smallest and largest buffer."""
    points: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for w in WORKLOADS:
        if w.mode == "memory" and table.ok(w.name, "aioproducer"):
            growth = table.median(w.name, "aioproducer", lambda r: r["peak_rss_mb"] - r["rss_before_mb"])
            points[w.value_size].append((w.buffer_memory / 2**20, growth))
    fits = {}
    for size, pairs in points.items():
        if len(pairs) >= 2:
            (x0, y0), (x1, y1) = min(pairs), max(pairs)
            slope = (y1 - y0) / (x1 - x0)
            fits[size] = (slope, y0 - slope * x0)
    return fits


def _observe_rows(table: Table) -> list[str]:
    """aioproducer with the observer off, metrics only, and OpenTelemetry: throughput, CPU, and cost against off."""
    rows = [
        "| workload | variant | records/s | CPU s per million | CPU cost vs off |",
        "|---|---|---|---|---|",
    ]
    per_million = lambda r: r["cpu_s"] / r["records"] * 1e6  # noqa: E731
    for mode, title in (("loop", "keyless 100 B, enqueue loop"), ("bulk", "keyless 100 B, send_many")):
        base = table.median(f"observe_off_{mode}_100B", "aioproducer", per_million)
        for observe, label in (("off", "observer off"), ("metrics", "metrics only"), ("otel", "OpenTelemetry")):
            name = f"observe_{observe}_{mode}_100B"
            if not table.ran(name, "aioproducer"):
                continue
            cpu = table.median(name, "aioproducer", per_million)
            cost = "-" if observe == "off" or base != base else f"{(cpu / base - 1) * 100:+.1f} %"
            rows.append(f"| {title} | {label} | {_num(table.rate(name, 'aioproducer'))} | {_num(cpu, 2)} | {cost} |")
    rows += [
        "",
        "CPU time is the measure (throughput on a shared machine swings more than the cost measured). 'Observer off' "
        "silences the observer's per-batch work in the benchmark's worker only: the producer has no such switch. "
        "A few rounds of one process each cannot resolve a few percent here: `observability.md` "
        "(`tests/benchmarks/observe_bench.py`) measures the same three in many short alternating rounds in one "
        "process, as paired ratios, and times the observer's own work directly.",
    ]
    return rows


def _idiom_sections(broker: str, table: Table) -> list[str]:
    """Each way of waiting for every record's outcome, per client that has the idiom, on one broker."""
    clients = [c for c in CLIENTS if any(table.ran(w.name, c) for w in IDIOM_ROWS)]
    if not clients:
        return []
    label = BROKER_LABELS[broker]
    rate = lambda r: r["records"] / r["elapsed_s"]  # noqa: E731
    rows = _head(clients)
    spreads = _head(clients)
    for w in IDIOM_ROWS:
        if not any(table.ran(w.name, c) for c in clients):
            continue
        ours = table.rate(w.name, "aioproducer")
        cells, spread = [], []
        for client in clients:
            cell = _cell(table, w.name, client, rate)
            theirs = table.rate(w.name, client)
            if client != "aioproducer" and theirs == theirs and ours == ours:
                cell += f" ({ours / theirs:.2f}x)"
            cells.append(cell)
            rates = sorted(rate(r) / 1000 for r in table.ok(w.name, client))
            spread.append(f"{rates[0]:,.0f}-{rates[-1]:,.0f}" if rates else "n/a")
        rows.append(f"| {w.title} | " + " | ".join(cells) + " |")
        spreads.append(f"| {w.title} | " + " | ".join(spread) + " |")
    names = [w.name for w in IDIOM_ROWS if any(table.ran(w.name, c) for c in clients)]
    cpu = _head(clients)
    titles = {w.name: w.title for w in IDIOM_ROWS}
    for name in names:
        cpu.append(
            f"| {titles[name]} | "
            + " | ".join(_cell(table, name, c, lambda r: r["cpu_s"] / r["records"] * 1e6, 2) for c in clients)
            + " |"
        )
    return [
        f"## Idioms on {label}: records/s when every record's outcome is waited for (aioproducer ÷ peer in brackets)",
        "",
        "100 B keyless records; each run checks that every record was delivered (a failed record fails the run) "
        "and an independent consumer counts the topic afterwards. Ratios compare runs of the same rounds only.",
        "",
        *rows,
        "",
        "Slowest-fastest round, thousands of records/s:",
        "",
        *spreads,
        "",
        f"CPU seconds per million records (the client's whole process, all threads), {label}:",
        "",
        *cpu,
        "",
        *_kept_handles_rows(table, label),
    ]


def _kept_handles_rows(table: Table, label: str) -> list[str]:
    """Event-loop lag while every handle is kept and waited for, and idle sends on this broker (when they ran)."""
    lines: list[str] = []
    lag = [w for w in WORKLOADS if w.mode == "lag" and w.idiom and any(table.ran(w.name, c) for c in CLIENTS)]
    if lag:
        lines += [
            f"## Event-loop lag on {label} while a caller waits for every record (the collector's pauses show here)",
            "",
            "| workload | client | p50 ms | p99 ms (tick samples) | p99 ms (with missed ticks) | max ms "
            "| records/s meanwhile |",
            "|---|---|---|---|---|---|---|",
        ]
        for w in lag:
            for client in CLIENTS:
                if not table.ran(w.name, client):
                    continue
                cells = _lag_cells(table, w.name, client, with_idle=False)
                lines.append(f"| {w.title} | {CLIENT_LABELS[client]} | " + " | ".join(cells) + " |")
        lines.append("")
    idle = [w for w in WORKLOADS if w.name == "idle_send_kafka" and any(table.ran(w.name, c) for c in CLIENTS)]
    for w in idle:
        lines += [
            f"## One `send` on an idle producer, {label} (linger.ms={LINGER_MS}: the target is p99 ≤ "
            f"{LINGER_MS + 2} ms)",
            "",
            "| client | p50 ms | p99 ms | max ms | samples |",
            "|---|---|---|---|---|",
        ]
        for client in CLIENTS:
            if table.ran(w.name, client):
                cells = [
                    _cell(table, w.name, client, lambda r: r["latency"]["p50_ms"], 2),
                    _cell(table, w.name, client, lambda r: r["latency"]["p99_ms"], 2),
                    _cell(table, w.name, client, lambda r: r["latency"]["max_ms"], 2),
                    _cell(table, w.name, client, lambda r: r["latency"]["n"]),
                ]
                lines.append(f"| {CLIENT_LABELS[client]} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _lag_cells(table: Table, workload: str, client: str, *, with_idle: bool) -> list[str]:
    """A lag row's cells: p50, p99 of the tick samples, p99 with missed ticks, max, (the idle loop's p99,)
    records/s."""
    lag = [
        _cell(table, workload, client, lambda r: r["lag"]["p50_ms"], 2),
        _cell(table, workload, client, lambda r: r["lag"]["p99_ms"], 2),
        _cell(table, workload, client, lambda r: r["lag_corrected"]["p99_ms"], 2),
        _cell(table, workload, client, lambda r: r["lag"]["max_ms"], 2),
    ]
    if with_idle:
        lag.append(_cell(table, workload, client, lambda r: r["lag_idle"]["p99_ms"], 2))
    return [*lag, _cell(table, workload, client, lambda r: r["records"] / r["elapsed_s"])]


def _verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("**met**" if ok else "**missed**")


def _ratio(table: Table, workload: str, peer: str) -> float:
    return table.rate(workload, "aioproducer") / table.rate(workload, peer)


def _target_rows(table: Table) -> list[str]:
    def check(value: float, passes: Callable[[float], bool]) -> bool | None:
        return None if value != value else passes(value)

    asyncio_peers = {p: table.rate("enqueue_100B", p) for p in ("aiokafka", "confluent_aio")}
    best_peer = max(asyncio_peers, key=lambda p: asyncio_peers[p] if asyncio_peers[p] == asyncio_peers[p] else -1)
    idle_p99 = table.median("idle_send", "aioproducer", lambda r: r["latency"]["p99_ms"])
    lag_p99 = table.median(
        "loop_lag_zstd_1KB", "aioproducer", lambda r: max(r["lag"]["p99_ms"], r["lag_corrected"]["p99_ms"])
    )
    slopes = [slope for slope, _ in memory_overhead(table).values()]
    worst_slope = max(slopes) if slopes else NAN
    targets = [
        ("enqueue loop ≥ 5x aiokafka", _ratio(table, "enqueue_100B", "aiokafka"), "x", lambda v: v >= 5),
        (
            f"enqueue loop ≥ 4x best asyncio peer ({CLIENT_LABELS[best_peer]})",
            _ratio(table, "enqueue_100B", best_peer),
            "x",
            lambda v: v >= 4,
        ),
        (
            "send_many ≥ confluent-kafka sync Producer (same 10 k-chunk workload)",
            _ratio(table, "send_many_100B", "confluent_sync"),
            "x",
            lambda v: v >= 1,
        ),
        (
            "send_many ≥ confluent-kafka sync Producer (its flat-out produce loop)",
            table.rate("send_many_100B", "aioproducer") / table.rate("enqueue_100B", "confluent_sync"),
            "x",
            lambda v: v >= 1,
        ),
        ("keyed ≥ 3x aiokafka", _ratio(table, "keyed_100B", "aiokafka"), "x", lambda v: v >= 3),
        (
            f"single idle send p99 ≤ linger_ms + 2 ms = {LINGER_MS + 2} ms",
            idle_p99,
            " ms",
            lambda v: v <= LINGER_MS + 2,
        ),
        ("event-loop lag p99 < 5 ms, zstd 1 KB flat out (enqueue loop)", lag_p99, " ms", lambda v: v < 5),
        (
            "memory bounded by buffer_memory + constant: RSS growth per buffer MB ≤ 1.2 (worst record size)",
            worst_slope,
            " MB/MB",
            lambda v: v <= 1.2,
        ),
    ]
    rows = ["| target | measured | verdict |", "|---|---|---|"]
    for name, value, unit, passes in targets:
        rows.append(f"| {name} | {_num(value, 2)}{unit} | {_verdict(check(value, passes))} |")
    return rows


# Per broker: every idiom against aiokafka, the callback-style idioms and the compressed rows against
# confluent-kafka's synchronous Producer, the 100 B rows against the Java producer.
_IDIOMS_AGAINST_AIOKAFKA = ("gather", "callback", "tasks", "enqueue_flush", "send_many")
_IDIOMS_AGAINST_CONFLUENT = ("callback", "enqueue_flush", "send_many")
_CODECS = ("lz4", "zstd", "gzip", "snappy")
_AGAINST_JAVA = ("enqueue_100B", "keyed_100B", "idempotent_100B")


def _peer_target_rows(table: Table) -> list[str]:
    """The per-idiom, per-codec and per-peer targets, on one broker; rows whose runs are missing are left out."""
    wanted: list[tuple[str, str, str, float]] = [
        *(
            (f"idiom_{idiom}_100B", "aiokafka", f"idiom {idiom} ≥ 5x aiokafka", 5.0)
            for idiom in _IDIOMS_AGAINST_AIOKAFKA
        ),
        *(
            (f"idiom_{idiom}_100B", "confluent_sync", f"idiom {idiom} ≥ 1x confluent-kafka sync Producer", 1.0)
            for idiom in _IDIOMS_AGAINST_CONFLUENT
        ),
        *(
            (f"{codec}_1KB", "confluent_sync", f"1 KB {codec} ≥ 1x confluent-kafka sync Producer", 1.0)
            for codec in _CODECS
        ),
        *((workload, "java", f"{workload} ≥ 1x the Java producer", 1.0) for workload in _AGAINST_JAVA),
    ]
    rows = ["| target | measured | verdict |", "|---|---|---|"]
    for workload, peer, name, bound in wanted:
        if not (table.ran(workload, "aioproducer") and table.ran(workload, peer)):
            continue
        value = _ratio(table, workload, peer)
        rows.append(f"| {name} | {_num(value, 2)}x | {_verdict(None if value != value else value >= bound)} |")
    if table.ran("idle_send_kafka", "aioproducer"):
        p99 = table.median("idle_send_kafka", "aioproducer", lambda r: r["latency"]["p99_ms"])
        verdict = _verdict(None if p99 != p99 else p99 <= LINGER_MS + 2)
        rows.append(f"| single idle send p99 ≤ linger_ms + 2 ms = {LINGER_MS + 2} ms | {_num(p99, 2)} ms | {verdict} |")
    return rows if len(rows) > 2 else []


def _errors(runs: list[Run]) -> list[str]:
    """Failed runs, one entry per distinct failure (with the rounds it happened in), and unverified counts."""
    failures: dict[tuple[str, str, str, str], list[Run]] = defaultdict(list)
    lines = []
    for run in runs:
        where = f"{BROKER_LABELS[broker_of(run)]}, {run['workload']}, {CLIENT_LABELS[run['client']]}"
        if "error" in run:
            failures[broker_of(run), run["workload"], run["client"], str(run["error"]).strip().splitlines()[-1]].append(
                run
            )
        elif not run.get("verified"):
            lines.append(
                f"- round {run['round']}, {where}: the broker holds {run.get('on_broker')} records, expected "
                f"{run['records'] + 1 + run.get('untimed_records', 0)} {run.get('count_error', '')}"
            )
    for (broker, workload, client, _), failed in failures.items():
        rounds = ", ".join(str(r["round"]) for r in failed)
        lines.append(f"- {BROKER_LABELS[broker]}, {workload}, {CLIENT_LABELS[client]}, round(s) {rounds}:\n")
        lines.append("  ```\n  " + "\n  ".join(str(failed[0]["error"]).strip().splitlines()[-12:]) + "\n  ```")
    if any(
        "error" in r and r["client"] == "aiokafka" and r["workload"] == "idempotent_100B" and broker_of(r) == "tansu"
        for r in runs
    ):
        lines.append(f"\n{_AIOKAFKA_IDEMPOTENCE}")
    return lines or ["None: every run finished and the broker held exactly the records each client reported."]


_AIOKAFKA_IDEMPOTENCE = (
    "Known cause of aiokafka's idempotent failure: aiokafka speaks only InitProducerId v0, and Tansu answers that "
    "version with error -1 (it serves InitProducerId from v3 on; see /work/shared/TEST-TARGETS.md). Its idempotent "
    "producer therefore cannot start against this broker; this is not a benchmark fault."
)


def _load(runs: list[Run]) -> str:
    loads = [float(r["load1"]) for r in runs if "load1" in r]
    if not loads:
        return ""
    return (
        f"The 1-minute load average before each run ranged {min(loads):.1f}-{max(loads):.1f} (median "
        f"{statistics.median(loads):.1f}) on this machine's {os.cpu_count()} CPUs: whatever else ran is noise here."
    )


def _header(meta: dict[str, Any], runs: list[Run]) -> list[str]:
    versions = ", ".join(f"{name} {version}" for name, version in meta["versions"].items())
    return [
        "# aioproducer side-by-side benchmark",
        "",
        f"Run {meta['started']} ({meta['mode']} mode, {meta['rounds']} round(s), {meta.get('duration_s', '?')} s) on "
        f"{meta['machine']}, Python {meta['python']}, aioproducer's hot path {meta.get('hot_path', 'compiled')}. "
        f"Peers: {versions}. {_load(runs)}",
        "",
        "How: every run is its own process (a JVM for the Java producer) producing to a fresh topic of 4 "
        "partitions on loopback: on Tansu (an embedded in-memory broker, fresh per run), then on real Apache Kafka "
        "(one KRaft node for the whole bench, on the same 2 CPUs as the clients, with the test fixture's settings, "
        "a 1 GB heap and the full JIT). Clients alternate and the first client "
        "rotates each round; each client sends one warm-up record and waits for it before the clock starts; the "
        "clock stops when every record is acknowledged (flush). Afterwards an independent consumer (librdkafka, "
        "check.crcs) counts the topic: a cell marked ⚠ means the broker did not hold exactly the records sent. "
        "Numbers are medians over rounds. **This machine is shared with other work and noisy**: see the load "
        "averages, and the slowest-fastest spreads below each table.",
        "",
        f"Settings: linger.ms={LINGER_MS} for all, acks=1 without idempotence unless the workload says otherwise, "
        "compression as named, everything else each client's default (batch.size 16 KiB for aioproducer, aiokafka "
        "and kafka-python; librdkafka batches up to 1 MB / 10 000 messages; AIOProducer also buffers 1000 "
        "messages or 1 s before handing them to librdkafka). Sync clients use their documented idioms "
        "(confluent: produce + poll(0); kafka-python: send); asyncio clients `await` their produce call in a loop; "
        "the Java producer (kafka-clients, same version as the broker, full JIT) calls send() with a callback in a "
        "loop, then flush(), with acks=1 and idempotence off unless the workload says otherwise (Java's defaults "
        "are acks=all and idempotence on); it runs each workload once untimed first, to warm up its JIT.",
        "",
    ]


def _broker_sections(broker: str, table: Table) -> list[str]:
    label = BROKER_LABELS[broker]
    per_million = 1e6
    names = [w.name for w in THROUGHPUT]
    lines = [
        f"## Throughput on {label}: records/s (aioproducer ÷ peer in brackets: above 1 means aioproducer is faster)"
    ]
    lines += ["", *_throughput_rows(table), ""]
    lines += ["Slowest-fastest round, thousands of records/s (how much to trust a median):", ""]
    lines += [*_spread_rows(table), ""]
    lines += [f"## CPU seconds per million records on {label} (the client's whole process, all threads)", ""]
    lines += [*_grid(table, lambda r: r["cpu_s"] / r["records"] * per_million, 2, names), ""]
    lines += [f"The broker's own CPU seconds per million records in the same runs ({label}):", ""]
    lines += [*_grid(table, lambda r: r["broker_cpu_s"] / r["records"] * per_million, 2, names), ""]
    if "java" in table.clients():
        lines += [*_java_rows(table), ""]
    return lines


def _java_rows(table: Table) -> list[str]:
    """The Java producer's untimed first pass (JIT still compiling) beside the timed second one."""
    rows = [
        "The Java producer runs each workload twice in one JVM and the tables above show the second pass: the first "
        "one, while the JIT compiles the send path, is what a short-lived Java job gets:",
        "",
        "| workload | first pass records/s | timed pass records/s | first pass CPU-s per M | timed pass CPU-s per M |",
        "|---|---|---|---|---|",
    ]
    for w in THROUGHPUT:
        if not table.ok(w.name, "java"):
            continue
        cells = [
            _num(table.median(w.name, "java", lambda r: r["records"] / r["cold_elapsed_s"])),
            _num(table.rate(w.name, "java")),
            _num(table.median(w.name, "java", lambda r: r["cold_cpu_s"] / r["records"] * 1e6), 2),
            _num(table.median(w.name, "java", lambda r: r["cpu_s"] / r["records"] * 1e6), 2),
        ]
        rows.append(f"| {w.title} | " + " | ".join(cells) + " |")
    return rows


def _tansu_only_sections(tansu: Table) -> list[str]:
    """What runs on Tansu alone: memory, latency and event-loop lag (the client's behaviour, whatever the broker)."""
    lines = ["## Peak RSS on Tansu, MB (whole process: interpreter or JVM, client, and the prepared payload list)", ""]
    lines += [*_grid(tansu, lambda r: r["peak_rss_mb"], 0, [w.name for w in THROUGHPUT]), ""]
    lines += ["## Latency on Tansu: enqueue → acknowledgement at a fixed 20 k records/s, and one `send` when idle", ""]
    lines += [*_latency_rows(tansu), ""]
    lines += ["## Event-loop lag on Tansu: a 1 ms ticker's lateness while producing zstd 1 KB records flat out", ""]
    lines += [*_lag_rows(tansu), ""]
    lines += ["## aioproducer memory under a flood of records on Tansu (no futures kept by the caller)", ""]
    lines += [*_memory_rows(tansu), ""]
    lines += ["## The cost of observing on Tansu (metrics are always on; the target is ≤ 3 % without an exporter)", ""]
    lines += [*_observe_rows(tansu), ""]
    return lines


def write_report(meta: dict[str, Any], runs: list[Run], out: Path) -> None:
    """Write results.md, benchmark.png (Tansu) and benchmark_kafka.png (real Kafka) into `out`."""
    tables = {broker: Table([r for r in runs if broker_of(r) == broker]) for broker in BROKERS}
    idiom_names = {w.name for w in WORKLOADS if w.mode == "idiom" or w.idiom or w.name == "idle_send_kafka"}
    if runs and all(r["workload"] in idiom_names for r in runs):  # an idioms-only run: its tables alone
        lines = _header(meta, runs)
        for broker, table in tables.items():
            lines += _idiom_sections(broker, table)
        lines += ["## Failed or unverified runs", "", *_errors(runs), ""]
        (out / "results.md").write_text("\n".join(lines))
        return
    tansu = tables["tansu"]
    lines = _header(meta, runs)
    if tansu.groups:
        lines += ["## Targets (judged on Tansu, where the broker is not the bottleneck)", "", *_target_rows(tansu), ""]
    for broker, table in tables.items():
        peer_targets = _peer_target_rows(table) if table.groups else []
        if peer_targets:
            lines += [f"## Targets per idiom, codec and peer on {BROKER_LABELS[broker]}", "", *peer_targets, ""]
    for broker, table in tables.items():
        if table.groups:
            lines += _broker_sections(broker, table)
            lines += _idiom_sections(broker, table)
    if tansu.groups:
        lines += _tansu_only_sections(tansu)
    lines += ["## Failed or unverified runs", "", *_errors(runs), ""]
    if tansu.groups:
        lines += ["![throughput, CPU, latency and loop lag per client on Tansu](benchmark.png)", ""]
    if tables["kafka"].groups:
        lines += ["![throughput and CPU per client on Apache Kafka](benchmark_kafka.png)", ""]
        write_throughput_plot(tables["kafka"], out / "benchmark_kafka.png", BROKER_LABELS["kafka"])
    (out / "results.md").write_text("\n".join(lines))
    if tansu.groups:
        write_plot(tansu, out / "benchmark.png")
