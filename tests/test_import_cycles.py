"""No import cycle in the package: module A importing B (at module level, `if TYPE_CHECKING:` included) while B, or
something B imports, imports A. A cycle through `aioproducer/__init__.py` counts too (a module importing a name
from the package itself). Imports inside functions are left out: they run after every module is loaded."""

from __future__ import annotations

import ast
from pathlib import Path

import aioproducer

PACKAGE = Path(aioproducer.__file__).parent


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_level_imports(path: Path, root: Path, modules: set[str]) -> set[str]:
    """The package's modules `path` imports outside functions (relative imports resolved; `from p import name`
    counts as importing `p.name` when that is a module, else `p`)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def nearest(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            if isinstance(child, ast.Import):
                found.update(filter(None, (nearest(alias.name) for alias in child.names)))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                for alias in child.names:
                    target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else nearest(base)
                    if target is not None:
                        found.add(target)
            visit(child)

    visit(ast.parse(path.read_text()))
    found.discard(name)
    return found


def import_cycles(root: Path) -> list[list[str]]:
    """Each cycle of the package rooted at `root`, as the modules on it (Tarjan's strongly connected components)."""
    paths = {module_name(path, root): path for path in root.rglob("*.py")}
    # Compiled twins (.pyx) are modules too, so `from . import _twin` is not read as importing the package.
    modules = set(paths) | {module_name(path, root) for path in root.rglob("*.pyx")}
    graph = {name: sorted(module_level_imports(path, root, modules)) for name, path in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                connect(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return sorted(cycles)


def test_the_package_has_no_import_cycle() -> None:
    assert import_cycles(PACKAGE) == []


def test_the_check_finds_cycles_through_type_only_imports_and_the_package_but_not_through_functions(
    tmp_path: Path,
) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .core import Thing\nVERSION = 1\n")
    (package / "core.py").write_text("from pkg import VERSION\nfrom . import lazy\nclass Thing: ...\n")
    (package / "lazy.py").write_text("def later():\n    from pkg.core import Thing\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n")
    (package / "sub" / "b.py").write_text("from pkg.sub import a\nclass B: ...\n")
    assert sorted(import_cycles(package)) == [["pkg", "pkg.core"], ["pkg.sub.a", "pkg.sub.b"]]
