"""Lazy access to the optional Spark stack (pyspark, pyarrow; anyio for the worker's loop thread) for
`aioproducer.spark`.

Owns the one clear ImportError naming the extra; nothing else in the package imports pyspark or pyarrow directly.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRA_HINT", "require"]

EXTRA_HINT = "aioproducer.spark needs pyspark>=4, pyarrow, pandas and anyio: `pip install 'aioproducer[spark]'`"


def require(module: str) -> ModuleType:
    """Import `module` (e.g. "pyarrow", "pyspark.sql.datasource") or raise ImportError naming the extra.

    Through importlib, so the package type-checks the same with and without the extra installed: everything
    reached through the returned module is `Any` at this boundary.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{EXTRA_HINT} ({exc})") from exc
