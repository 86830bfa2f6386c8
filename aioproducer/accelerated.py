"""Which implementation runs the per-record hot path: the compiled `_speedups` extension or its pure-Python twins.

The extension is built from `_speedups.pyx` when the package is installed on a machine with a C compiler; without
it, or with the environment variable AIOPRODUCER_NO_EXTENSIONS set to a non-empty value, every part falls back to
pure Python. Both behave the same (the test suite runs both); only the speed differs.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

__all__ = ["COMPILED", "AccumulatorFields", "BatchFields", "DeliveryFields", "speedups"]


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

if speedups is not None:
    from .models import ProducerRecord

    # The named tuple's generated constructor is Python code; callers of send_many build one record per row.
    speedups.install_producer_record(ProducerRecord)


class PureDeliveryFields:
    """What a `Delivery` holds: its batch's outcome, its index there, and what its RecordMetadata needs."""

    __slots__ = (
        "_asyncio_future_blocking",
        "_callback",
        "_callback_context",
        "_callbacks",
        "_cancel_message",
        "_cancelled",
        "_index",
        "_key_size",
        "_outcome",
        "_timestamp_ms",
        "_value_size",
        "_watching",
    )

    _outcome: Any
    _index: int
    _timestamp_ms: int
    _key_size: int
    _value_size: int
    # The first waiter's callback and its context sit in two slots of their own: most records have one waiter (a
    # task, gather, a done-callback), and a list of (callback, context) tuples per waiting record was two more
    # objects for the cyclic collector to walk while the batch is in flight.
    _callback: Any  # the first done callback, or None
    _callback_context: Any  # the context it runs in
    _callbacks: list[Any] | None  # (callback, context) pairs of the later callbacks, only while _callback is set
    _cancelled: bool
    _cancel_message: Any
    _watching: bool  # registered with the batch outcome, to run the callbacks when it settles
    _asyncio_future_blocking: bool  # asyncio's future protocol: set while a task awaits the handle


class PureBatchFields:
    """What the per-record path reads and writes on a `ProducerBatch`."""

    __slots__ = ("builder", "full", "outcome", "reserved_bytes", "sealed")

    builder: Any  # the BatchBuilder taking records, until the batch is closed
    full: bool
    outcome: Any
    reserved_bytes: int
    sealed: bool


class PureAccumulatorFields:
    """What the per-record path reads and writes on the `RecordAccumulator`."""

    __slots__ = ("batch_size", "buffer_memory", "memory_waiters", "queues", "used_bytes")

    batch_size: int
    buffer_memory: int
    memory_waiters: int
    queues: dict[Any, Any]
    used_bytes: int


if TYPE_CHECKING:
    DeliveryFields = PureDeliveryFields
    BatchFields = PureBatchFields
    AccumulatorFields = PureAccumulatorFields
elif speedups is not None:
    DeliveryFields, BatchFields, AccumulatorFields = (
        speedups.DeliveryFields,
        speedups.BatchFields,
        speedups.AccumulatorFields,
    )
else:
    DeliveryFields, BatchFields, AccumulatorFields = PureDeliveryFields, PureBatchFields, PureAccumulatorFields
