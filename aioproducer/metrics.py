"""Re-exports `MetricsSnapshot` and `HistogramSnapshot`, what `Producer.metrics()` returns, from
`aioproducer.observability.metrics` (where the metrics live): the documented path of the types an exporter reads."""

from __future__ import annotations

from aioproducer.observability.metrics import HistogramSnapshot, MetricsSnapshot

__all__ = ["HistogramSnapshot", "MetricsSnapshot"]
