"""The package's import rule (docs/architecture.md), checked on every module and compiled twin.

Each part of the package (a top-level module, or a sub-package with everything in it) has a rank. A module may
import, at run time, only from its own rank or a lower one; an import under `if TYPE_CHECKING:` is for annotations
and never runs, so it does not count. Ranks, lowest first:

0. foundation: `error_codes`, `errors`, `kafka_errors`, `version`.
1. formats: `protocol/`, `records/` (the record batch and its codecs), `columnar/`, `models`, `partitioner`,
   `validation`, and `accelerated`, the switch every compiled twin (`_models`, `_partitioner`, ...) is loaded
   through: the wire, the batch bytes, Arrow input, the value types and the rules on a record's shape.
2. settings: `config`, `config_values`, `settings`, `serializers`, `security/`, `hooks`: what a user configures.
3. buffer: `idempotence/` (the producer's identity and sequence rules), `buffer/`, `deliveries/`.
4. observability: `observability/`, and `health` / `metrics`, the public paths of its types.
5. network: `network/` (connections, the cluster, its metadata).
6. the two ends of the data path: `append/` (records and rows in) and `send/` (batches out).
7. transactions: `transactions/`.
8. the producer: `producer`, `producer_bulk` (its `send_many` and `enqueue_many`), `producer_tables` (its
   `send_table`), and the package's own `__init__`.
9. around it: `spark/`, `cli/`, `testing/`, `contrib/`, `schema_registry`, `__main__`.

The pure core (PURE) never reaches an I/O or clock module (FORBIDDEN), **transitively**: every import inside the
package is followed to its leaves, including the compiled twin a module loads (`compiled_twin("...")`, whose `.pyx`
imports and cimports are read) and each sub-package `__init__` an import runs. `aioproducer/__init__.py`, run by
any import, is the public facade of everything and is not followed.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

import aioproducer

PACKAGE = Path(aioproducer.__file__).parent
ROOT = PACKAGE.parent

RANKS: list[list[str]] = [
    ["error_codes", "errors", "kafka_errors", "version"],
    [
        "protocol",
        "records",
        "columnar",
        "models",
        "_models",
        "partitioner",
        "_partitioner",
        "validation",
        "accelerated",
    ],
    ["config", "config_values", "settings", "serializers", "security", "hooks"],
    ["idempotence", "buffer", "deliveries"],
    ["observability", "health", "metrics"],
    ["network"],
    ["append", "send"],
    ["transactions"],
    ["producer", "producer_bulk", "producer_tables", "__init__"],
    ["spark", "cli", "testing", "contrib", "schema_registry", "__main__"],
]
RANK = {part: rank for rank, parts in enumerate(RANKS) for part in parts}

# The pure core: decisions over data, time handed in as arguments (modules, or packages with all they hold).
PURE = [
    "protocol",
    "records",
    "columnar",
    "models",
    "partitioner",
    "validation",
    "idempotence",
    "buffer.accumulator",
    "buffer.batch",
    "buffer.pool",
    "network.metadata",
    "network.node_states",
    "observability.metrics",
    "observability.metrics_fold",
    "observability.health",
    "send.compression_pacing",
    "transactions.state",
    "transactions.verdicts",
    "transactions.group",
]
# Event loops, sockets, threads, processes and clocks: none may be reached from the pure core.
FORBIDDEN = {
    "asyncio",
    "anyio",
    "socket",
    "ssl",
    "selectors",
    "select",
    "threading",
    "_thread",
    "concurrent",
    "subprocess",
    "multiprocessing",
    "time",
}
# Calls that import the module named by their first argument, at run time.
DYNAMIC_IMPORTS = {"compiled_twin", "import_module", "require"}
# Cython's own declarations, not modules.
CYTHON_BUILTINS = {"cython", "libc", "cpython", "libcpp", "posix"}


# -- reading imports ----------------------------------------------------------------------------------------------


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name: Python files and compiled twins' `.pyx` sources."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")) + sorted(root.rglob("*.pyx")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
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


def python_imports(source: str, package: str) -> set[tuple[str, tuple[str, ...]]]:
    """What Python source imports at run time, anywhere in it (functions included): (module, names) pairs, relative
    imports resolved against `package`, `import_module("x")`-like calls as ("x", ())."""
    found: set[tuple[str, tuple[str, ...]]] = set()
    for node in _runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{anchor}.{module}" if module else anchor
            found.add((module, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if function in DYNAMIC_IMPORTS and isinstance(node.args[0].value, str):
                found.add((node.args[0].value, ()))
    return found


_CYTHON_FROM = re.compile(r"^\s*from\s+([\w.]+)\s+c?import\s+\(?([\w, ]*)", re.M)
_CYTHON_IMPORT = re.compile(r"^\s*c?import\s+([\w.]+)", re.M)


def cython_imports(source: str) -> set[tuple[str, tuple[str, ...]]]:
    """What a `.pyx` imports and cimports (`from x cimport y` imports module x at run time too)."""
    found = {(m[1], tuple(n.strip() for n in m[2].split(",") if n.strip())) for m in _CYTHON_FROM.finditer(source)}
    found |= {(m[1], ()) for m in _CYTHON_IMPORT.finditer(source)}
    return {(module, names) for module, names in found if module.split(".")[0] not in CYTHON_BUILTINS}


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of the package -> the modules it runs by importing: the package's own resolved to a module of
    it (`from p import m` is module p.m when there is one, else p), each with the sub-package `__init__`s the
    import runs; modules outside the package by their dotted name."""
    files = module_files(root)
    top = root.name
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        source = path.read_text()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        pairs = cython_imports(source) if path.suffix == ".pyx" else python_imports(source, package)
        targets: set[str] = set()
        for module, names in pairs:
            if module != top and not module.startswith(top + "."):
                targets.add(module)
                continue
            resolved = {f"{module}.{n}" for n in names if f"{module}.{n}" in files}
            if not resolved or len(resolved) < len(names):
                resolved.add(nearest(module, files))
            for target in resolved:
                targets.add(target)
                targets.update(parent_packages(target))
        targets.discard(name)
        graph[name] = targets
    return graph


def nearest(module: str, known: Mapping[str, Path]) -> str:
    while module not in known and "." in module:
        module = module.rpartition(".")[0]
    return module


def parent_packages(module: str) -> list[str]:
    """The sub-packages whose `__init__` importing `module` runs (the top package's own excepted)."""
    parts = module.split(".")
    return [".".join(parts[:end]) for end in range(2, len(parts))]


# -- the two rules, as functions of an import graph ---------------------------------------------------------------


def part_of(module: str) -> str:
    """The part of the package a module belongs to: its top-level module or sub-package (`__init__` for the
    package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def rank_violations(graph: Mapping[str, Iterable[str]], ranks: Mapping[str, int], top: str) -> list[str]:
    """Each import of a part of the package by a module of a lower rank, and each part the ranks do not list."""
    found = []
    for module, targets in sorted(graph.items()):
        own = part_of(module)
        if own not in ranks:
            found.append(f"{module}: its part {own!r} has no rank")
            continue
        for target in sorted(targets):
            if target == top or not target.startswith(top + "."):
                if target == top and ranks.get("__init__", 0) > ranks[own]:
                    found.append(f"{module} (rank {ranks[own]}) imports the package itself")
                continue
            other = part_of(target)
            if ranks.get(other, len(ranks)) > ranks[own]:
                found.append(f"{module} (rank {ranks[own]}) imports {target} (rank {ranks.get(other)})")
    return found


def forbidden_path(graph: Mapping[str, Iterable[str]], start: str, forbidden: set[str]) -> list[str] | None:
    """The shortest chain of runtime imports from `start` to a forbidden module, or None: the package's modules are
    followed (breadth first), every other module is a leaf judged by its top-level name."""
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        module = queue.popleft()
        for target in sorted(graph.get(module, ())):
            if target in previous:
                continue
            previous[target] = module
            if target not in graph:
                if target.split(".")[0] in forbidden:
                    chain = [target]
                    while (step := previous[chain[-1]]) is not None:
                        chain.append(step)
                    return chain[::-1]
                continue
            queue.append(target)
    return None


# -- the package against them -------------------------------------------------------------------------------------

GRAPH = import_graph()


def test_every_part_of_the_package_has_a_rank() -> None:
    parts = {part_of(module) for module in GRAPH}
    assert parts - set(RANK) == set(), "give each new module or sub-package a rank (this file's docstring)"
    assert set(RANK) - parts == set(), "a rank lists a part that no longer exists"


def test_imports_point_downwards_or_sideways() -> None:
    assert rank_violations(GRAPH, RANK, "aioproducer") == []


def test_the_compiled_twins_are_checked_too() -> None:
    """The `.pyx` sources are in the graph, with their cimports: the rule and the purity check see them."""
    assert {"aioproducer.buffer", "aioproducer.buffer._batch"} <= GRAPH["aioproducer.append._appender"]  # a cimport
    assert (
        "aioproducer.buffer._batch" in GRAPH["aioproducer.buffer.batch"]
    )  # compiled_twin("aioproducer.buffer._batch")
    assert "asyncio" in GRAPH["aioproducer.deliveries._delivery"]


def test_pure_core_reaches_no_io_and_no_clock_transitively() -> None:
    checked = 0
    for part in PURE:
        name = f"aioproducer.{part}"
        modules = [m for m in GRAPH if m == name or m.startswith(name + ".")]
        assert modules, f"PURE lists {part}, which does not exist"
        for module in modules:
            chain = forbidden_path(GRAPH, module, FORBIDDEN)
            assert chain is None, " -> ".join(chain)
            checked += 1
    assert checked > 40


# -- the checkers against graphs made to break them ---------------------------------------------------------------


def test_a_transitive_io_import_into_the_pure_core_fails() -> None:
    """Pure A imports pure B, which imports asyncio: A is not pure, though none of its own imports is I/O."""
    graph = {"p.a": {"p.b", "logging"}, "p.b": {"asyncio.events"}, "p.c": {"p.a"}}
    assert forbidden_path(graph, "p.a", FORBIDDEN) == ["p.a", "p.b", "asyncio.events"]
    assert forbidden_path(graph, "p.c", FORBIDDEN) == ["p.c", "p.a", "p.b", "asyncio.events"]
    assert forbidden_path({"p.a": {"p.b", "logging"}, "p.b": {"collections"}}, "p.a", FORBIDDEN) is None
    assert forbidden_path({"p.a": {"p.b"}, "p.b": {"p.a", "time"}}, "p.a", FORBIDDEN) == ["p.a", "p.b", "time"]


def test_a_transitive_io_import_through_a_compiled_twin_fails(tmp_path: Path) -> None:
    """The chain runs through a twin loaded by name and a `.pyx` that imports asyncio, and through a sub-package's
    `__init__` that the import of one of its modules runs."""
    package = tmp_path / "p"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text('from p.accelerated import compiled_twin\n_twin = compiled_twin("p._a")\n')
    (package / "_a.pyx").write_text("from libc.stdint cimport int64_t\nfrom asyncio import get_running_loop\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import socket\n")
    (package / "c.py").write_text("from p.sub.leaf import x\n")
    (package / "sub" / "__init__.py").write_text("import threading\n")
    (package / "sub" / "leaf.py").write_text("x = 1\n")
    graph = import_graph(package)
    assert forbidden_path(graph, "p.a", FORBIDDEN) == ["p.a", "p._a", "asyncio"]
    assert forbidden_path(graph, "p.b", FORBIDDEN) is None  # an import for annotations only never runs
    assert forbidden_path(graph, "p.c", FORBIDDEN) == ["p.c", "p.sub", "threading"]


def test_an_upward_import_fails_and_a_type_checking_one_does_not(tmp_path: Path) -> None:
    package = tmp_path / "p"
    (package / "low").mkdir(parents=True)
    for path in (package / "__init__.py", package / "low" / "__init__.py", package / "high.py"):
        path.write_text("")
    (package / "low" / "rule.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p import high\n"
    )
    (package / "low" / "_rule.pyx").write_text("from p.high cimport Thing\n")
    ranks = {"low": 0, "high": 1, "__init__": 2}
    assert rank_violations(import_graph(package), ranks, "p") == ["p.low._rule (rank 0) imports p.high (rank 1)"]
    assert rank_violations(import_graph(package), {"low": 0, "__init__": 2}, "p") == [
        "p.high: its part 'high' has no rank",
        "p.low._rule (rank 0) imports p.high (rank None)",
    ]


# -- the rest of the layout ---------------------------------------------------------------------------------------


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
    imported = {target.split(".")[0] for targets in GRAPH.values() for target in targets}
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
