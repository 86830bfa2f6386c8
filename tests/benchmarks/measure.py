"""Process measurements for a benchmark worker: CPU seconds, resident memory, percentiles.

Owns only reads of this process's own accounting (getrusage, /proc/self/statm); it must not touch any client.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Sequence

__all__ = ["cpu_seconds", "peak_rss_mb", "percentile", "rss_mb", "summary_ms"]

_PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds() -> float:
    """User + system CPU of the whole process, every thread included (librdkafka and kafka-python use threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mb() -> float:
    """Resident memory now."""
    with open("/proc/self/statm") as statm:
        resident_pages = int(statm.read().split()[1])
    return resident_pages * _PAGE / 2**20


def peak_rss_mb() -> float:
    """This program's resident-memory high-water mark, from VmHWM.

    Not ru_maxrss: Linux carries that over from the parent across fork + exec, so every worker would report at
    least the orchestrator's size.
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of unsorted samples; NaN when there are none."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def summary_ms(samples_s: Sequence[float]) -> dict[str, float]:
    """p50 / p99 / max in milliseconds of samples in seconds, and how many there were."""
    return {
        "p50_ms": percentile(samples_s, 50) * 1000,
        "p99_ms": percentile(samples_s, 99) * 1000,
        "max_ms": max(samples_s, default=float("nan")) * 1000,
        "n": float(len(samples_s)),
    }
