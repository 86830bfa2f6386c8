"""Running a test against each twin of the hot path: the pure-Python originals and, when built, the compiled twins.

`TWINS` lists the kinds present ("pure", and "compiled" unless AIOPRODUCER_NO_EXTENSIONS is set or nothing is
built); `use_twin(monkeypatch, kind)` makes every twinned module's public names, and the names other modules
imported from it, point at that kind for the test. A module that parametrizes an autouse fixture over `TWINS` runs
each of its tests on both, in the same session (as multidict's suite runs its C and Python builds).
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from aioproducer import models, partitioner
from aioproducer.accelerated import COMPILED, compiled_twin
from aioproducer.append import appender, table_appender
from aioproducer.buffer import batch
from aioproducer.buffer import pool as buffer_pool
from aioproducer.columnar import arrow
from aioproducer.deliveries import bulk as bulk_deliveries
from aioproducer.deliveries import delivery
from aioproducer.deliveries import table as table_deliveries
from aioproducer.records import builder
from aioproducer.send import pipeline

TWINS = ["pure", "compiled"] if COMPILED else ["pure"]

# module, its compiled twin, and the names the twin replaces (each also kept as Pure<name> / pure_<name>).
TWINNED: list[tuple[ModuleType, str, tuple[str, ...]]] = [
    (builder, "aioproducer.records._builder", ("BatchBuilder",)),
    (batch, "aioproducer.buffer._batch", ("ProducerBatch", "queued_bytes")),
    (buffer_pool, "aioproducer.buffer._pool", ("BufferPool",)),
    (partitioner, "aioproducer._partitioner", ("DefaultPartitioner", "murmur2")),
    (
        delivery,
        "aioproducer.deliveries._delivery",
        ("Delivery", "new_delivery", "run_callbacks_of", "track_again", "schedule_callbacks"),
    ),
    (bulk_deliveries, "aioproducer.deliveries._bulk", ("BulkDeliveries",)),
    (appender, "aioproducer.append._appender", ("Appender",)),
    (pipeline, "aioproducer.send._pipeline", ("BatchPipeline",)),
    (table_deliveries, "aioproducer.deliveries._table", ("TableDeliveries",)),
    (table_appender, "aioproducer.append._table_appender", ("TableAppender",)),
]

# Modules that imported a twinned name (`from .delivery import Delivery`): their copies are switched too.
IMPORTERS = [
    "aioproducer.buffer.accumulator",
    "aioproducer.append.appender",
    "aioproducer.deliveries.bulk",
    "aioproducer.producer",
    "aioproducer.producer_bulk",
    "aioproducer.producer_tables",
    "aioproducer.observability.observer",
    "aioproducer.records",
    "aioproducer.send.sender",
    "aioproducer.send.answers",
    "aioproducer.append.table_appender",
    "aioproducer.testing.mock_producer",
]


def pure_name(name: str) -> str:
    return f"Pure{name}" if name[0].isupper() else f"pure_{name}"


def implementations(kind: str) -> dict[int, object]:
    """id(active object) -> the object of `kind`, for every twinned name."""
    swap: dict[int, object] = {}
    for module, twin_name, names in TWINNED:
        compiled = compiled_twin(twin_name)
        for name in names:
            pure = getattr(module, pure_name(name))
            chosen = getattr(compiled, name) if kind == "compiled" and compiled is not None else pure
            for current in (pure, getattr(compiled, name, pure)):
                swap[id(current)] = chosen
    return swap


def use_twin(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Point every twinned name, wherever it was imported, at the `kind` implementation for this test."""
    if kind == "compiled" and not COMPILED:
        raise RuntimeError("the compiled twins are not built")
    swap = implementations(kind)
    modules = [module for module, _twin, _names in TWINNED] + [importlib.import_module(m) for m in IMPORTERS]
    for module in modules:
        for attribute, value in list(vars(module).items()):
            if attribute.startswith(("Pure", "pure_")):
                continue  # the originals stay reachable under their own names
            replacement = swap.get(id(value))
            if replacement is not None and replacement is not value:
                monkeypatch.setattr(module, attribute, replacement)
    # ProducerRecord's constructor is set on the class itself (models.py's bottom).
    constructor = compiled_twin("aioproducer._models")
    if kind == "compiled" and constructor is not None:
        monkeypatch.setattr(models.ProducerRecord, "__new__", staticmethod(constructor.ProducerRecord))
    else:
        monkeypatch.setattr(models.ProducerRecord, "__new__", models.PureProducerRecordNew)
    # The columnar views pick their twin through `arrow.IMPLEMENTATION` (the readers ask it when they start).
    implementation = arrow.COMPILED if kind == "compiled" else arrow.PURE
    monkeypatch.setattr(arrow, "IMPLEMENTATION", implementation)
