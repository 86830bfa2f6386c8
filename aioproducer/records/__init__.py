"""Kafka record batches, magic v2: build them (`BatchBuilder` → `ClosedBatch`) and read them (`read_batches`).

The wire layout is spelled out in `aioproducer.records.layout`. Pure: no I/O, no clock, no producer state.
"""

from __future__ import annotations

from aioproducer.records.builder import BatchBuilder, ClosedBatch
from aioproducer.records.reader import Record, RecordBatch, read_batches

__all__ = ["BatchBuilder", "ClosedBatch", "Record", "RecordBatch", "read_batches"]
