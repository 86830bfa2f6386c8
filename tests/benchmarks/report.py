from __future__ import annotations
from pathlib import Path
from typing import Any
def write_report(meta: dict[str, Any], runs: list[dict[str, Any]], out: Path) -> None:
    pass
