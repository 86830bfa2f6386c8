"""Turning the raw runs into results.md: the peer rows (`peer_report.py`), then the other workloads per broker
(latency, event-loop lag, memory, the cost of observing, ways of waiting) with their targets' verdicts, then every
failed or unverified run.

Owns the aggregation and the markdown of the other workloads; the plots are `plot.py`'s. It must not run anything.
"""

from __future__ import annotations

import os
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.benchmarks.peer_report import peer_sections
from tests.benchmarks.plot import write_behaviour_plot, write_peer_plot
from tests.benchmarks.rows import IDIOMS, MATCHED_BATCH_BYTES, MATCHED_LINGER_MS
from tests.benchmarks.workloads import BROKER_LABELS, BROKERS, CLIENT_LABELS, CLIENTS, LINGER_MS, WORKLOADS

__all__ = ["Table", "write_report"]

Run = dict[str, Any]
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
        "and the broker's end offsets must grow by exactly the run's records. Ratios compare runs of the same rounds "
        "only. The done-callback idiom is a peer row above.",
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
    """Event-loop lag while every handle is kept and waited for (when it ran)."""
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


def _where(run: Run) -> str:
    what = IDIOMS[run["idiom"]].label if "idiom" in run else CLIENT_LABELS[run["client"]]
    batching = f", {run['batching']} batching" if "batching" in run else ""
    return f"{BROKER_LABELS[broker_of(run)]}, {run['workload']}{batching}, {what}"


def _errors(runs: list[Run]) -> list[str]:
    """Failed runs, one entry per distinct failure (with the rounds it happened in), and unverified ones."""
    failures: dict[tuple[str, str], list[Run]] = defaultdict(list)
    lines = []
    for run in runs:
        if "error" in run:
            failures[_where(run), str(run["error"]).strip().splitlines()[-1]].append(run)
        elif not run.get("verified"):
            lines.append(
                f"- round {run['round']}, {_where(run)}: the broker's end offsets grew by {run.get('on_broker')} "
                f"records, the client reported {run['records']}; {run.get('count_error', '')}".rstrip("; ")
            )
    for (where, _), failed in failures.items():
        rounds = ", ".join(str(r["round"]) for r in failed)
        lines.append(f"- {where}, round(s) {rounds}:\n")
        lines.append("  ```\n  " + "\n  ".join(str(failed[0]["error"]).strip().splitlines()[-12:]) + "\n  ```")
    return lines or ["None: every run finished and the broker held exactly the records each client reported."]


def _load(meta: dict[str, Any], runs: list[Run]) -> str:
    loads = [float(r["load1"]) for r in runs if "load1" in r]
    if not loads:
        return ""
    return (
        f"The 1-minute load average before each run ranged {min(loads):.1f}-{max(loads):.1f} (median "
        f"{statistics.median(loads):.1f}; {meta.get('load_at_start', float('nan')):.1f} when the bench started) on "
        f"this machine's {os.cpu_count()} CPUs: whatever else ran is noise here."
    )


def _header(meta: dict[str, Any], runs: list[Run]) -> list[str]:
    versions = ", ".join(f"{name} {version}" for name, version in meta["versions"].items())
    return [
        "# aioproducer side-by-side benchmark",
        "",
        f"Run {meta['started']} ({meta['mode']} mode, {meta['rounds']} round(s), {meta.get('duration_s', '?')} s) on "
        f"{meta['machine']}, Python {meta['python']}, aioproducer's hot path {meta.get('hot_path', 'compiled')}. "
        f"Peers: {versions}. {_load(meta, runs)}",
        "",
        "How: every client run is its own process (a JVM for the Java peers) on the same machine as one real Apache "
        "Kafka node (KRaft, 1 GB heap, full JIT, warmed by an untimed pass of every work before the first round). "
        "Every client runs with acks=all and idempotence (aioproducer's and Java's default), on topics of "
        f"{meta.get('partitions', 6)} partitions, with the same records (fixed seeds, the same bytes and "
        "compressibility, cycled alike; perf-test picks its payloads at random from the same pool). Each client "
        "connects and has one warm-up record acknowledged before its clock starts; the clock stops when every "
        "record is acknowledged. Clients alternate, and the order rotates each round. Each run is judged on the "
        "broker: its end offsets over the timed part must grow by exactly the records the client reports, and a "
        "sample read back (CRCs checked) must hold the run's own records. Numbers are medians over rounds with the "
        "slowest and fastest round. **This machine is shared**: see the load averages.",
        "",
        "The peers at their best: confluent-kafka's sync Producer as a `produce()` loop with `poll(0)` every 1000 "
        "records and no delivery callback (its fastest idiom), and with a callback per record; its AIOProducer; "
        "aiokafka; kafka-python; the Java producer (kafka-clients of the broker's version: `send()` with a callback, "
        "then `flush()`) **warm** (an untimed pass of the same size in the same JVM first) and **cold** (a fresh "
        "JVM); and `kafka-producer-perf-test` (org.apache.kafka.tools.ProducerPerformance from kafka-tools, with its "
        "script's JVM flags) as Java users run it. Two batchings: each client's defaults, then everyone at linger.ms="
        f"{MATCHED_LINGER_MS} and batch.size={MATCHED_BATCH_BYTES} (aioproducer's `batch_max_size` too). The other "
        f"workloads run everyone at linger.ms={LINGER_MS} with their own batch sizes.",
        "",
    ]


def _behaviour_targets(table: Table) -> list[str]:
    """The latency, event-loop lag and memory targets on one broker, where their workloads ran."""

    def check(value: float, passes: Callable[[float], bool]) -> bool | None:
        return None if value != value else passes(value)

    idle_p99 = table.median("idle_send", "aioproducer", lambda r: r["latency"]["p99_ms"])
    lag_p99 = table.median(
        "loop_lag_zstd_1KB", "aioproducer", lambda r: max(r["lag"]["p99_ms"], r["lag_corrected"]["p99_ms"])
    )
    slopes = [slope for slope, _ in memory_overhead(table).values()]
    targets = [
        (
            f"single idle send p99 ≤ linger_ms + 2 ms = {LINGER_MS + 2} ms",
            idle_p99,
            " ms",
            lambda v: v <= LINGER_MS + 2,
        ),
        ("event-loop lag p99 ≤ 5 ms, zstd 1 KB flat out (enqueue loop)", lag_p99, " ms", lambda v: v <= 5),
        (
            "RSS growth per MB of buffer_memory ≤ 1.0 (worst record size)",
            max(slopes) if slopes else NAN,
            " MB/MB",
            lambda v: v <= 1.0,
        ),
    ]
    rows = ["| target | measured | verdict |", "|---|---|---|"]
    for name, value, unit, passes in targets:
        if value == value:
            rows.append(f"| {name} | {_num(value, 2)}{unit} | {_verdict(check(value, passes))} |")
    return rows if len(rows) > 2 else []


def _behaviour_sections(broker: str, table: Table) -> list[str]:
    """Latency, event-loop lag, memory, the cost of observing and the ways of waiting, on one broker."""
    label = BROKER_LABELS[broker]
    lines: list[str] = []
    targets = _behaviour_targets(table)
    if targets:
        lines += [f"## Latency, event-loop lag and memory targets on {label}", "", *targets, ""]
    if any(table.ran(w, c) for w in ("latency_20k", "idle_send") for c in CLIENTS):
        lines += [
            f"## Latency on {label}: enqueue → acknowledgement at a fixed 20 k records/s, and one idle `send`",
            "",
        ]
        lines += [*_latency_rows(table), ""]
    if any(table.ran(w.name, c) for w in WORKLOADS if w.mode == "lag" and not w.idiom for c in CLIENTS):
        lines += [f"## Event-loop lag on {label}: a 1 ms ticker's lateness while producing zstd 1 KB flat out", ""]
        lines += [*_lag_rows(table), ""]
    if any(table.ok(w.name, "aioproducer") for w in WORKLOADS if w.mode == "memory"):
        lines += [f"## aioproducer memory under a flood of records on {label} (no futures kept by the caller)", ""]
        lines += [*_memory_rows(table), ""]
    if any(table.ran(w.name, "aioproducer") for w in WORKLOADS if w.observe):
        lines += [
            f"## The cost of observing on {label} (metrics are always on; the target is ≤ 3 % without an exporter)",
            "",
        ]
        lines += [*_observe_rows(table), ""]
    lines += _idiom_sections(broker, table)
    return lines


def write_report(meta: dict[str, Any], runs: list[Run], out: Path) -> None:
    """Write results.md and the figures (peers.png for the peer rows, behaviour_<broker>.png for latency and lag)
    into `out`."""
    others = [r for r in runs if r.get("part") != "rows"]
    tables = {broker: Table([r for r in others if broker_of(r) == broker]) for broker in BROKERS}
    lines = _header(meta, runs)
    peers = peer_sections(meta, runs)
    lines += peers
    if peers:
        lines += ["![the peer rows: ours, the fastest peer and the warm Java producer](peers.png)", ""]
        write_peer_plot(runs, out / "peers.png")
    for broker, table in tables.items():
        if table.groups:
            lines += _behaviour_sections(broker, table)
            if write_behaviour_plot(table, out / f"behaviour_{broker}.png", BROKER_LABELS[broker]):
                lines += [f"![latency and event-loop lag on {BROKER_LABELS[broker]}](behaviour_{broker}.png)", ""]
    lines += ["## Failed or unverified runs", "", *_errors(runs), ""]
    (out / "results.md").write_text("\n".join(lines))
