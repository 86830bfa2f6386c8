"""`perf-test --plot`: throughput and latency per second as a PNG, drawn with matplotlib (the `plot` extra)."""

from __future__ import annotations

from aioproducer.cli.stats import RunSummary, Series
from aioproducer.errors import ConfigError

__all__ = ["write_plot"]


def write_plot(path: str, series: Series, summary: RunSummary) -> None:
    """Two panels sharing the time axis: records/s, and p50/p99 latency (ms), one point per second."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("--plot needs matplotlib: pip install 'aioproducer[plot]'") from None
    figure, (rate_axis, latency_axis) = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    rate_axis.plot(series.seconds, series.records_per_s, marker=".", color="tab:blue")
    rate_axis.set_ylabel("records/s")
    rate_axis.set_ylim(bottom=0)
    rate_axis.set_title(
        f"{summary.delivered:,} records of {summary.record_size} B: {summary.records_per_s:,.0f} records/s, "
        f"{summary.mb_per_s:.2f} MB/s"
    )
    latency_axis.plot(series.seconds, series.p50_ms, marker=".", label="p50", color="tab:green")
    latency_axis.plot(series.seconds, series.p99_ms, marker=".", label="p99", color="tab:red")
    latency_axis.set_ylabel("latency (ms)")
    latency_axis.set_xlabel("seconds since start")
    latency_axis.set_ylim(bottom=0)
    latency_axis.legend()
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=100)
    except OSError as exc:
        raise ConfigError(f"cannot write the plot to {path!r}: {exc.strerror or exc}") from None
    finally:
        plt.close(figure)
