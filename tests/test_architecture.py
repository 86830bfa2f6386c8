"""The layering the README describes: imports point downwards, and the pure core never touches I/O or the clock."""

from __future__ import annotations

import ast
from pathlib import Path

import aioproducer

PACKAGE = Path(aioproducer.__file__).parent
PURE = [
    *("protocol", "records", "compression", "partitioner", "metadata", "accumulator", "idempotence", "validation"),
    *("transactions_state", "transactions_verdicts", "transactions_group"),
]
IO_MODULES = {"asyncio", "socket", "anyio", "ssl", "selectors", "time"}
# Each layer may import only from the layers listed after it (and from errors / kafka_errors, below everything).
LAYERS = [
    ["spark", "testing"],
    ["producer"],
    ["transactions_api"],
    ["transactions"],
    ["appender", "sender", "transactions_coordinator"],
    ["cluster"],
    ["connection", "memory"],
    ["security"],
    ["accumulator"],
    ["delivery"],
    ["transactions_state", "transactions_verdicts", "transactions_group"],
    ["metadata", "idempotence", "partitioner", "validation", "models"],
    ["records"],
    ["compression"],
    ["protocol"],
]
# `accelerated` picks the compiled `_speedups` twins of hot-path parts; the extension itself imports nothing else.
BASE = {"errors", "kafka_errors", "config", "config_values", "serializers", "accelerated", "_speedups", "__init__"}


def imports_of(path: Path) -> set[str]:
    """Absolute module names imported by one file (relative imports resolved against the package)."""
    tree = ast.parse(path.read_text())
    package = ".".join(("aioproducer", *path.relative_to(PACKAGE).parent.parts))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                found.add(f"{base}.{node.module}" if node.module else base)
            elif node.module:
                found.add(node.module)
    return found


def files_of(module: str) -> list[Path]:
    target = PACKAGE / module
    return sorted(target.rglob("*.py")) if target.is_dir() else [PACKAGE / f"{module}.py"]


def top(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "aioproducer" and len(parts) > 1 else None


def test_pure_core_imports_no_io_and_no_clock() -> None:
    for module in PURE:
        for path in files_of(module):
            roots = {name.split(".")[0] for name in imports_of(path)}
            assert not roots & IO_MODULES, f"{path.relative_to(PACKAGE)} imports {roots & IO_MODULES}"


def test_imports_point_downwards() -> None:
    rank = {module: level for level, modules in enumerate(LAYERS) for module in modules}
    for module, level in rank.items():
        for path in files_of(module):
            for name in imports_of(path):
                target = top(name)
                if target is None or target in BASE or target == module:
                    continue
                assert target in rank, f"{path.relative_to(PACKAGE)} imports unlisted module {name}"
                assert rank[target] > level, f"{path.relative_to(PACKAGE)} imports {name}, which is not below it"


def test_every_module_opens_with_a_docstring() -> None:
    for path in PACKAGE.rglob("*.py"):
        assert ast.get_docstring(ast.parse(path.read_text())), f"{path.relative_to(PACKAGE)} has no docstring"


def test_public_api_is_exactly_all() -> None:
    public = {name for name in vars(aioproducer) if not name.startswith("_")} - {"annotations"}
    submodules = {name for name in public if type(getattr(aioproducer, name)).__name__ == "module"} - {"errors"}
    assert set(aioproducer.__all__) == (public - submodules) | {"__version__"}
