"""The layering docs/architecture.md describes: imports point downwards, the pure core never touches I/O or clocks."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import aioproducer

PACKAGE = Path(aioproducer.__file__).parent
PURE = [
    "protocol",
    "records",
    "compression",
    "compression_pacing",
    "partitioner",
    "metadata",
    "node_states",
    "accumulator",
    "batch",
    "buffer_pool",
    "idempotence",
    "producer_identity",
    "validation",
    "metrics",
    "metrics_fold",
    "transactions_state",
    "transactions_verdicts",
    "transactions_group",
    "columnar",
]
IO_MODULES = {"asyncio", "socket", "anyio", "ssl", "selectors", "time"}
# Each layer may import only from the layers listed after it (and from errors / kafka_errors, below everything).
LAYERS = [
    ["__main__"],
    ["cli"],  # `aioproducer broker` runs the test peers as development brokers
    ["spark", "testing", "schema_registry", "contrib"],
    ["producer"],
    ["transactions_api"],
    ["transactions"],
    ["transactions_requests"],
    ["table_appender", "table_records"],
    ["appender", "sender", "health", "transactions_coordinator"],
    ["cluster"],
    ["connection", "memory", "observer", "record_hooks"],
    ["security"],
    ["accumulator", "metrics_fold", "compression_pacing", "bulk_deliveries", "table_deliveries"],
    ["delivery", "hooks", "metrics"],
    ["transactions_state", "transactions_verdicts", "batch", "columnar"],
    ["metadata", "node_states", "idempotence", "partitioner", "validation", "models", "transactions_group"],
    ["producer_identity", "buffer_pool"],
    ["records"],
    ["compression"],
    ["protocol"],
]
# `accelerated` is the switch each twinned module asks for its compiled twin.
BASE = {
    "error_codes",
    "errors",
    "kafka_errors",
    "version",
    "config",
    "config_values",
    "settings",
    "serializers",
    "accelerated",
    "__init__",
}


def imports_of(path: Path) -> set[str]:
    """Absolute module names imported by one file (relative imports resolved against the package)."""
    tree = ast.parse(path.read_text())
    package = ".".join(("aioproducer", *path.relative_to(PACKAGE).parent.parts))
    found: set[str] = set()
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                found.add(f"{base}.{node.module}" if node.module else base)
            elif node.module:
                found.add(node.module)
    return found


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under `if TYPE_CHECKING:` (imports for annotations only, never run)."""
    nodes: list[ast.AST] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        nodes.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return nodes


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


def test_every_declared_dependency_is_imported() -> None:
    """anyio sat in the runtime dependencies for months while nothing imported it: every package the core or a
    user-facing extra declares must be imported by some module of the package."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra, requirements in project["optional-dependencies"].items():
        if extra not in ("test", "dev", "docs"):  # the project's own tooling
            declared += [r for r in requirements if not r.startswith("aioproducer")]
    imported = {name.split(".")[0] for path in PACKAGE.rglob("*.py") for name in imports_of(path) | dynamic(path)}
    for requirement in declared:
        name = re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("-", "_")
        if name in INDIRECT:
            continue
        name = IMPORT_NAMES.get(name, name)
        assert name in imported, f"{requirement} is declared but no module of aioproducer imports {name}"


# Distributions whose import name differs from their name.
IMPORT_NAMES = {"opentelemetry_api": "opentelemetry"}
# Declared for another dependency's sake, never imported by aioproducer itself.
INDIRECT = {
    "pandas": "pyspark's Arrow functions (mapInArrow) need it; declared to pin a version pyspark supports",
    "pytest_asyncio": "the testing extra's users write async tests with the fixtures (the README's); pytest runs them",
}


def dynamic(path: Path) -> set[str]:
    """Modules named by string in `require("x")` / `import_module("x")` calls (the lazy optional imports)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if function in ("require", "import_module") and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found
