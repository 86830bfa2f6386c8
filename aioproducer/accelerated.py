"""Which implementation runs the per-record hot path: the compiled `_speedups` extension or its pure-Python twins.

The extension is built from `_speedups.pyx` when the package is installed on a machine with a C compiler; without
it, or with the environment variable AIOPRODUCER_NO_EXTENSIONS set to a non-empty value, every part falls back to
pure Python. Both behave the same (the test suite runs both); only the speed differs.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

__all__ = ["COMPILED", "DeliveryFields", "speedups"]


def _load() -> ModuleType | None:
    if os.environ.get("AIOPRODUCER_NO_EXTENSIONS"):
        return None
    try:
        from . import _speedups  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _speedups  # type: ignore[no-any-return]


speedups = _load()
COMPILED = speedups is not None


class PureDeliveryFields:
    """What a `Delivery` holds: its batch's outcome, its index there, and what its RecordMetadata needs."""

    __slots__ = ("_future", "_index", "_key_size", "_outcome", "_timestamp_ms", "_value_size")

    _outcome: Any
    _index: int
    _timestamp_ms: int
    _key_size: int
    _value_size: int
    _future: Any  # the asyncio.Future waited through, once something waits


if TYPE_CHECKING:
    DeliveryFields = PureDeliveryFields
else:
    DeliveryFields = speedups.DeliveryFields if speedups is not None else PureDeliveryFields
