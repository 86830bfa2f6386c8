"""The benchmark's figures (matplotlib, Agg): the peer rows (ours, the fastest peer idiom and the warm Java producer,
records/s and client CPU per record, per batching), and latency and event-loop lag per client on one broker.

Owns only drawing from aggregated tables (`peer_report.PeerTable`, `report.Table`); it must not compute medians.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display here, and none needed

import matplotlib.pyplot as plt

from tests.benchmarks.peer_report import BATCHING_TITLES, PeerTable, client_cpu_per_million
from tests.benchmarks.rows import BATCHINGS, ROWS, Row
from tests.benchmarks.workloads import ASYNC_CLIENTS, CLIENT_LABELS, CLIENTS, LINGER_MS, PYTHON_CLIENTS

if TYPE_CHECKING:
    from tests.benchmarks.report import Table

__all__ = ["write_behaviour_plot", "write_peer_plot"]

COLOURS = dict(zip(CLIENTS, ("#d62728", "#1f77b4", "#2ca02c", "#98df8a", "#9467bd", "#ff7f0e"), strict=True))
_SERIES = (("ours", "#d62728"), ("fastest peer idiom", "#1f77b4"), ("Java producer, warm", "#ff7f0e"))


def _grouped(ax: Any, groups: list[str], clients: tuple[str, ...], value: Callable[[str, str], float]) -> None:
    """Bars per group, one per client; a missing value leaves a gap."""
    width = 0.8 / max(len(clients), 1)
    for index, client in enumerate(clients):
        xs = [g + index * width - 0.4 + width / 2 for g in range(len(groups))]
        ys = [value(group, client) for group in groups]
        ax.bar(xs, [y if y == y else 0 for y in ys], width, label=CLIENT_LABELS[client], color=COLOURS[client])
    ax.set_xticks(range(len(groups)))


def _log_scale(ax: Any) -> None:
    """Log scale when the panel has data (a narrowed run can leave a panel empty)."""
    if any(patch.get_height() > 0 for patch in ax.patches):
        ax.set_yscale("log")


def _pick(table: PeerTable, row: Row, series: str) -> str | None:
    """The idiom a bar of `series` shows for `row`: ours, the fastest peer's, or the warm Java producer's."""
    if series == "ours":
        return row.ours
    if series == "fastest peer idiom":
        return table.fastest_peer(row)
    return "java.warm" if "java.warm" in row.peers else None


def write_peer_plot(runs: list[dict[str, Any]], path: Path) -> None:
    """Per batching, two panels: records/s and client CPU-s per million records of ours, the fastest peer idiom and
    the warm Java producer, for each row that ran."""
    tables = [PeerTable(runs, batching) for batching in BATCHINGS]
    tables = [t for t in tables if t.groups]
    figure, axes = plt.subplots(len(tables), 2, figsize=(18, 5.5 * len(tables)), squeeze=False)
    for (speed, cpu), table in zip(axes, tables, strict=True):
        rows = [row for row in ROWS if table.ran(row)]
        width = 0.8 / len(_SERIES)
        for index, (series, colour) in enumerate(_SERIES):
            xs = [g + index * width - 0.4 + width / 2 for g in range(len(rows))]
            for ax, value in ((speed, None), (cpu, client_cpu_per_million)):
                ys = []
                for row in rows:
                    idiom = _pick(table, row, series)
                    stat = table.stat(row, idiom) if value is None else table.stat(row, idiom, value)
                    ys.append(stat.median if idiom is not None and stat.ok else 0.0)
                ax.bar(xs, ys, width, label=series, color=colour)
        for ax, title, unit in (
            (speed, "records/s (median)", "records/s"),
            (cpu, "client CPU-s per million records (median)", "CPU-s per M"),
        ):
            ax.set_xticks(range(len(rows)))
            ax.set_xticklabels([row.name for row in rows], rotation=20, ha="right", fontsize=8)
            ax.set_ylabel(unit)
            ax.set_title(f"{title}, {BATCHING_TITLES[table.batching].split(' (')[0]}", fontsize=10)
            ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write_behaviour_plot(table: Table, path: Path, where: str) -> bool:
    """Latency (at 20 k records/s, and an idle send) and event-loop lag per client; False (no file) when neither
    ran on this broker."""
    ran = any(table.ran(w, c) for w in ("latency_20k", "idle_send", "loop_lag_zstd_1KB") for c in CLIENTS)
    if not ran:
        return False
    figure, (latency, lag) = plt.subplots(1, 2, figsize=(16, 5.5))

    def latency_ms(group: str, client: str) -> float:
        workload, stat = group.rsplit(" ", 1)
        return table.median(workload, client, lambda r: r["latency"][f"{stat}_ms"])

    latency_groups = ["latency_20k p50", "latency_20k p99", "idle_send p50", "idle_send p99"]
    _grouped(latency, latency_groups, PYTHON_CLIENTS, latency_ms)
    _log_scale(latency)
    latency.axhline(LINGER_MS + 2, color="grey", linestyle="--", linewidth=1, label="linger_ms + 2 ms")
    latency.set_ylabel("milliseconds (log scale)")
    latency.set_title(f"Latency at 20 k records/s, and a single send on an idle producer ({where})")
    latency.set_xticklabels(["20 k/s p50", "20 k/s p99", "idle send p50", "idle send p99"])
    latency.legend(fontsize=8)

    lag_groups = {
        "loop\np99": ("loop_lag_zstd_1KB", "lag", "p99"),
        "loop p99\n+ missed ticks": ("loop_lag_zstd_1KB", "lag_corrected", "p99"),
        "loop\nmax": ("loop_lag_zstd_1KB", "lag", "max"),
        "send_many\np99": ("loop_lag_zstd_1KB_bulk", "lag", "p99"),
        "send_many p99\n+ missed ticks": ("loop_lag_zstd_1KB_bulk", "lag_corrected", "p99"),
        "send_many\nmax": ("loop_lag_zstd_1KB_bulk", "lag", "max"),
    }

    def lag_ms(group: str, client: str) -> float:
        workload, series, stat = lag_groups[group]
        return table.median(workload, client, lambda r: r[series][f"{stat}_ms"])

    _grouped(lag, list(lag_groups), ASYNC_CLIENTS, lag_ms)
    lag.axhline(5, color="grey", linestyle="--", linewidth=1, label="5 ms target (p99)")
    _log_scale(lag)
    lag.set_ylabel("ticker lateness, ms (log scale)")
    lag.set_title(f"Event-loop lag while producing zstd 1 KB flat out: enqueue loop | send_many ({where})")
    lag.set_xticklabels(list(lag_groups), fontsize=8)
    lag.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True
