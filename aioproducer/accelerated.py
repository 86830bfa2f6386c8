"""The one switch between the hot path's compiled twins and their pure-Python originals.

A twinned module (`records/builder.py`, `buffer/batch.py`, `buffer/pool.py`, `partitioner.py`,
`deliveries/delivery.py`, `deliveries/bulk.py`, `append/appender.py`, ...) holds the reference implementation in
Python. Beside it sits its twin, a Cython module of the same name with a leading underscore (`records/_builder.pyx`,
with a `.pyi` for type checkers), built when the package is installed on a machine with a C compiler. At its bottom
the Python module asks `compiled_twin` for that twin and, when it is there, lets the twin's classes take the public
names; the pure class stays reachable as `Pure<Name>`. Both behave the same (the test suite runs both and compares
them); only the speed differs. AIOPRODUCER_NO_EXTENSIONS set to a non-empty value keeps every module on its
pure-Python code.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["EXTENSIONS_DISABLED", "compiled_twin"]  # and COMPILED, answered when asked (see __getattr__)

EXTENSIONS_DISABLED = bool(os.environ.get("AIOPRODUCER_NO_EXTENSIONS"))


def compiled_twin(name: str) -> ModuleType | None:
    """The compiled module `name` (e.g. "aioproducer._partitioner"), or None when it is not built or disabled."""
    if EXTENSIONS_DISABLED:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def __getattr__(name: str) -> bool:
    """`COMPILED`: whether the compiled hot path runs (the record builder is the twin every other twin builds on).
    Answered when first asked, not at import: the twins themselves import this module while they load."""
    if name == "COMPILED":
        return compiled_twin("aioproducer.records._builder") is not None
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
