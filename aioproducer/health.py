"""Re-exports `Health`, what `Producer.health()` returns, from `aioproducer.observability.health` (where the
readiness and liveness rules live): the documented path of the type a probe handler may annotate with."""

from __future__ import annotations

from aioproducer.observability.health import Health

__all__ = ["Health"]
