"""The benchmark's figures: throughput, CPU per record, latency and event-loop lag per client (matplotlib, Agg).

Owns only drawing from an aggregated table; it must not compute medians itself.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display here, and none needed

import matplotlib.pyplot as plt

from tests.benchmarks.workloads import ASYNC_CLIENTS, CLIENT_LABELS, CLIENTS, LINGER_MS, PYTHON_CLIENTS, WORKLOADS

if TYPE_CHECKING:
    from tests.benchmarks.report import Table

__all__ = ["write_plot", "write_throughput_plot"]

COLOURS = dict(zip(CLIENTS, ("#d62728", "#1f77b4", "#2ca02c", "#98df8a", "#9467bd", "#ff7f0e"), strict=True))
THROUGHPUT = [w for w in WORKLOADS if w.mode in ("loop", "bulk")]


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


def _throughput_panels(table: Table, throughput: Any, cpu: Any, where: str) -> None:
    names = [w.name for w in THROUGHPUT]
    clients = tuple(table.clients())
    _grouped(throughput, names, clients, table.rate)
    _log_scale(throughput)
    throughput.set_ylabel("records/s (median, log scale)")
    throughput.set_title(f"Throughput, {where}")
    throughput.set_xticklabels([w.title for w in THROUGHPUT], rotation=20, ha="right", fontsize=8)
    throughput.legend(fontsize=8)

    def cpu_per_million(workload: str, client: str) -> float:
        return table.median(workload, client, lambda r: r["cpu_s"] / r["records"] * 1e6)

    _grouped(cpu, names, clients, cpu_per_million)
    cpu.set_ylabel("CPU seconds per million records")
    cpu.set_title(f"CPU cost (whole client process), {where}")
    cpu.set_xticklabels([w.title for w in THROUGHPUT], rotation=20, ha="right", fontsize=8)


def write_throughput_plot(table: Table, path: Path, where: str) -> None:
    """Throughput and CPU per record only: the figure for a broker that runs the throughput workloads alone."""
    figure, (throughput, cpu) = plt.subplots(1, 2, figsize=(16, 5.5))
    _throughput_panels(table, throughput, cpu, where)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_plot(table: Table, path: Path) -> None:
    figure, axes = plt.subplots(2, 2, figsize=(16, 10))
    throughput, cpu, latency, lag = axes[0][0], axes[0][1], axes[1][0], axes[1][1]
    _throughput_panels(table, throughput, cpu, "Tansu")

    def latency_ms(group: str, client: str) -> float:
        workload, stat = group.rsplit(" ", 1)
        return table.median(workload, client, lambda r: r["latency"][f"{stat}_ms"])

    latency_groups = ["latency_20k p50", "latency_20k p99", "idle_send p50", "idle_send p99"]
    _grouped(latency, latency_groups, PYTHON_CLIENTS, latency_ms)
    _log_scale(latency)
    latency.axhline(LINGER_MS + 2, color="grey", linestyle="--", linewidth=1, label="linger_ms + 2 ms")
    latency.set_ylabel("milliseconds (log scale)")
    latency.set_title("Latency: at 20 k records/s, and a single send on an idle producer")
    latency.set_xticklabels(["20 k/s p50", "20 k/s p99", "idle send p50", "idle send p99"])

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
    lag.set_title("Event-loop lag while producing zstd 1 KB flat out: enqueue loop | send_many")
    lag.set_xticklabels(list(lag_groups), fontsize=8)
    lag.legend(fontsize=8)

    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
