"""Summaries of a perf-test run: latency percentiles and per-second series; pure functions of the samples.

Percentiles are picked as Java's ProducerPerformance does (the sorted sample at index `int(p * n)`), so numbers
compare with `kafka-producer-perf-test` one to one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["PERCENTILES", "RunSummary", "Series", "latency_summary", "per_second", "percentiles"]

PERCENTILES = (0.5, 0.95, 0.99, 0.999)


def percentiles(samples: Sequence[float], points: Sequence[float] = PERCENTILES) -> dict[str, float]:
    """{"p50": ..., "p95": ..., "p99": ..., "p99.9": ...} in the samples' unit; NaN for no samples."""
    ordered = sorted(samples)
    result: dict[str, float] = {}
    for point in points:
        name = "p" + f"{point * 100:.1f}".rstrip("0").rstrip(".")
        result[name] = ordered[min(int(point * len(ordered)), len(ordered) - 1)] if ordered else math.nan
    return result


@dataclass(frozen=True)
class Series:
    """Per-second points: `seconds[i]` is the end of window i; throughput in records/s; latencies in ms."""

    seconds: list[float]
    records_per_s: list[float]
    p50_ms: list[float]
    p99_ms: list[float]


def per_second(
    completed_at: Sequence[float], latencies_ms: Sequence[float], sample_every: int, window_s: float = 1.0
) -> Series:
    """Throughput and latency per `window_s`, from the latency samples (each stands for `sample_every` records).

    The last window ends at the last sample; one shorter than a quarter window joins the one before it, so a run's
    tail does not show as a sudden drop in throughput.
    """
    if not completed_at:
        return Series([], [], [], [])
    end = max(completed_at)
    windows = int(end // window_s) + 1
    if windows > 1 and end - (windows - 1) * window_s < window_s / 4:
        windows -= 1
    buckets: list[list[float]] = [[] for _ in range(windows)]
    for at, latency in zip(completed_at, latencies_ms, strict=True):
        buckets[min(int(at // window_s), windows - 1)].append(latency)
    seconds = [
        round(min((i + 1) * window_s, end) if i == windows - 1 else (i + 1) * window_s, 3) for i in range(windows)
    ]
    starts = [i * window_s for i in range(windows)]
    rates = [
        round(len(bucket) * sample_every / max(stop - start, 1e-3), 1)
        for bucket, start, stop in zip(buckets, starts, seconds, strict=True)
    ]
    p50 = [round(percentiles(bucket, (0.5,))["p50"], 3) for bucket in buckets]
    p99 = [round(percentiles(bucket, (0.99,))["p99"], 3) for bucket in buckets]
    return Series(seconds, rates, p50, p99)


@dataclass(frozen=True)
class RunSummary:
    """What `perf-test` reports, also as JSON (`--json`)."""

    records: int
    delivered: int
    failed: int
    errors: dict[str, int]
    record_size: int
    seconds: float
    records_per_s: float
    mb_per_s: float
    latency_ms: dict[str, float]  # avg, max, p50, p95, p99, p99.9
    latency_samples: int
    settings: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["latency_ms"] = {key: (None if math.isnan(value) else value) for key, value in self.latency_ms.items()}
        return data


def latency_summary(samples: Sequence[float]) -> dict[str, float]:
    """avg, max and the percentiles of latency samples (ms)."""
    if not samples:
        return {"avg": math.nan, "max": math.nan, **percentiles(samples)}
    return {"avg": sum(samples) / len(samples), "max": max(samples), **percentiles(samples)}
