"""The peer rows' tables: per batching, each row's idiom of ours against the fastest peer idiom of the same work (and
the warm Java producer), then every idiom's records/s, CPU per record of the client and of the broker, and cores.

Owns the aggregation of the rows' runs (medians over verified runs, min-max) and their markdown; it must not run
anything. A cell is only computed from runs whose records the broker holds exactly; a row whose runs are missing or
unverified says so instead of claiming a ratio.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.benchmarks.rows import BATCHINGS, IDIOMS, MATCHED_BATCH_BYTES, MATCHED_LINGER_MS, PARTITIONS, ROWS, Row

__all__ = ["PeerTable", "Stat", "peer_sections"]

Run = dict[str, Any]
NAN = float("nan")
BATCHING_TITLES = {
    "defaults": "each client's default batching",
    "matched": f"matched batching (linger.ms={MATCHED_LINGER_MS}, batch.size={MATCHED_BATCH_BYTES // 1024} KiB for "
    "everyone; aioproducer's batches held there too)",
}


@dataclass(frozen=True)
class Stat:
    """Median and range over the verified runs of one idiom; `runs` and `verified` count them."""

    median: float
    low: float
    high: float
    verified: int
    runs: int

    @classmethod
    def of(cls, runs: list[Run], value: Callable[[Run], float]) -> Stat:
        good = [value(r) for r in runs if "error" not in r and r.get("verified")]
        if not good:
            return cls(NAN, NAN, NAN, 0, len(runs))
        return cls(statistics.median(good), min(good), max(good), len(good), len(runs))

    @property
    def ok(self) -> bool:
        return self.verified > 0


def rate(run: Run) -> float:
    return float(run["records"]) / float(run["elapsed_s"])


def client_cpu_per_million(run: Run) -> float:
    return float(run["cpu_s"]) / float(run["records"]) * 1e6


def broker_cpu_per_million(run: Run) -> float:
    return float(run["broker_cpu_s"]) / float(run["records"]) * 1e6


def cores(run: Run) -> float:
    return float(run["cpu_s"]) / float(run["cpu_window_s"])


class PeerTable:
    """The rows' runs of one batching, grouped by (work, idiom)."""

    def __init__(self, runs: list[Run], batching: str) -> None:
        self.batching = batching
        self.groups: dict[tuple[str, str], list[Run]] = defaultdict(list)
        for run in runs:
            if run.get("part") == "rows" and run.get("batching") == batching:
                self.groups[run["workload"], run["idiom"]].append(run)

    def stat(self, row: Row, idiom: str, value: Callable[[Run], float] = rate) -> Stat:
        return Stat.of(self.groups.get((row.work.name, idiom), []), value)

    def ran(self, row: Row) -> bool:
        """Whether this row's own idiom ran (the peers' runs may serve other rows of the same work)."""
        return (row.work.name, row.ours) in self.groups

    def fastest_peer(self, row: Row) -> str | None:
        """The peer idiom with the highest median records/s among those with verified runs."""
        measured = [(self.stat(row, peer).median, peer) for peer in row.peers if self.stat(row, peer).ok]
        return max(measured)[1] if measured else None

    def failures(self) -> list[Run]:
        return [r for runs in self.groups.values() for r in runs if "error" in r or not r.get("verified")]


def _k(value: float) -> str:
    return "-" if value != value else f"{value:,.0f}"


def _range_k(stat: Stat) -> str:
    return "-" if not stat.ok else f"{stat.low / 1000:,.0f}-{stat.high / 1000:,.0f} k"


def _num(value: float, digits: int = 2) -> str:
    return "-" if value != value else f"{value:,.{digits}f}"


def _verdict(ratio: float) -> str:
    return "-" if ratio != ratio else ("**≥ 1**" if ratio >= 1 else "below")


def _label(idiom: str) -> str:
    return IDIOMS[idiom].label


def _headline(table: PeerTable, rows: list[Row]) -> list[str]:
    lines = [
        "| row | ours: records/s (min-max) | fastest peer idiom | its records/s (min-max) | ours ÷ fastest "
        "| Java warm: records/s | ours ÷ Java warm |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if not table.ran(row):
            continue
        ours = table.stat(row, row.ours)
        ours_cell = f"{_k(ours.median)} ({_range_k(ours)})" if ours.ok else "no verified run"
        best = table.fastest_peer(row)
        if best is None:
            lines.append(f"| {row.title} | {ours_cell} | no verified peer run | - | - | - | - |")
            continue
        theirs = table.stat(row, best)
        ratio = ours.median / theirs.median if ours.ok else NAN
        java = table.stat(row, "java.warm") if "java.warm" in row.peers else None
        java_cells = ["n/a", "n/a"]
        if java is not None and java.ok:
            java_ratio = ours.median / java.median if ours.ok else NAN
            java_cells = [_k(java.median), f"{_num(java_ratio)}x {_verdict(java_ratio)}"]
        lines.append(
            f"| {row.title} | {ours_cell} | {_label(best)} | {_k(theirs.median)} ({_range_k(theirs)}) "
            f"| {_num(ratio)}x {_verdict(ratio)} | " + " | ".join(java_cells) + " |"
        )
        for also in row.also:
            mine = table.stat(row, also)
            if mine.ok and ours.ok:
                lines.append(
                    f"| ↳ the same row against {_label(also)} | | {_label(also)} | {_k(mine.median)} "
                    f"({_range_k(mine)}) | {_num(ours.median / mine.median)}x | | |"
                )
    return lines


def _every_idiom(table: PeerTable, rows: list[Row]) -> list[str]:
    lines = [
        "| work | idiom | records/s | min-max | client CPU-s per M records | cores used (CPU ÷ wall) "
        "| broker CPU-s per M records | verified runs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    seen: set[tuple[str, str]] = set()
    for row in rows:
        for idiom in row.idioms():
            key = (row.work.name, idiom)
            if key in seen or key not in table.groups:
                continue
            seen.add(key)
            speed = table.stat(row, idiom)
            client = table.stat(row, idiom, client_cpu_per_million)
            used = table.stat(row, idiom, cores)
            broker = table.stat(row, idiom, broker_cpu_per_million)
            lines.append(
                f"| {row.work.title} | {_label(idiom)} | {_k(speed.median)} | {_range_k(speed)} "
                f"| {_num(client.median)} | {_num(used.median)} | {_num(broker.median)} "
                f"| {speed.verified} of {speed.runs} |"
            )
    return lines


def _not_run(meta: dict[str, Any], rows: list[Row], tables: list[PeerTable]) -> list[str]:
    """Rows this run could not measure, and why (an idiom this build lacks, or no run at all)."""
    available = set(meta.get("available", []))
    requested = set(meta.get("rows", []))
    lines = []
    for row in rows:
        if row.name not in requested:
            continue
        missing = sorted(
            {IDIOMS[i].needs for i in row.idioms() if IDIOMS[i].needs and IDIOMS[i].needs not in available}
        )
        if missing and not any(t.stat(row, row.ours).ok for t in tables):
            lines.append(
                f"- {row.title}: not measured, this build of aioproducer has no `Producer.{', '.join(missing)}`."
            )
    return lines


def peer_sections(meta: dict[str, Any], runs: list[Run]) -> list[str]:
    """The peer rows' part of results.md (empty when the run had no rows)."""
    rows = list(ROWS)
    tables = [PeerTable(runs, batching) for batching in BATCHINGS]
    tables = [t for t in tables if t.groups]
    if not tables:
        return []
    lines = [
        f"## Against every peer at its best, on Apache Kafka (one node, {meta.get('partitions', PARTITIONS)} "
        "partitions per topic), acks=all + idempotence for every client",
        "",
        "Each row's idiom of ours against the **fastest peer idiom** of the same work (the same records, the same "
        "topic layout) and against the warm Java producer; medians over rounds, with the slowest and fastest round "
        "in thousands of records/s. A ratio is computed only from runs whose records the broker holds exactly "
        "(end-offset delta over the timed part, a sample read back). '≥ 1' marks a ratio at or above parity.",
        "",
    ]
    for table in tables:
        title = BATCHING_TITLES[table.batching]
        lines += [f"### {title[0].upper()}{title[1:]}", "", *_headline(table, rows), ""]
    for table in tables:
        lines += [
            f"### Every idiom, {BATCHING_TITLES[table.batching]}: speed and cost",
            "",
            "Client CPU is the client's whole process, every thread (the Python worker's getrusage, the Java "
            "harness's process CPU time, perf-test's whole JVM from wait4 — start-up included, since it cannot be "
            "told apart); cores used is that CPU over the timed wall time (over the process's life for perf-test). "
            "Broker CPU is the broker JVM's, from /proc, over the timed part (the whole process's life for "
            "perf-test). On 2 cores shared by client and broker, a client that uses more than one core leaves the "
            "broker less.",
            "",
            *_every_idiom(table, rows),
            "",
        ]
    not_run = _not_run(meta, rows, tables)
    if not_run:
        lines += ["Not measured in this run:", "", *not_run, ""]
    return lines
