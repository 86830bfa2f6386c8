"""Every code snippet of the documentation (`docs/`, and the README's) runs, as a reader would run it.

Per page, in document order and in one namespace (as a reader pastes them one after another):
- ```python blocks run with top-level `await` allowed, against an embedded Tansu broker: the address
  `localhost:9092` the pages show is replaced by the broker's. A block without `await` runs in a worker thread, so a
  script's own `asyncio.run(...)` works.
- ```python title="name.py" blocks are files: written into a fresh project directory; those named `test_*.py` are run
  there by pytest, in a subprocess with no configuration (pytest-asyncio in its default strict mode), as a user's
  own test suite would run.
- ```bash blocks (the command line) run in bash, with the `aioproducer` command on the PATH; they must exit 0.
- `<!-- docs-test ... -->` comments hold code a reader does not need (a stand-in for their own objects, a check that
  the snippet did what the page says); `DOCS_PROJECT` is the directory the page's files are written to.
  `<!-- docs-test-replace OLD => NEW -->` rewrites the page's later blocks.
Blocks of other languages (console transcripts, YAML, text) are shown, not run.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SHOWN_ADDRESS = "localhost:9092"
# The pages whose snippets need Spark run in tests/test_docs_spark.py (on real Kafka, with a local Spark).
SPARK_PAGES = {"spark.md"}
TESTING_PAGE = DOCS / "testing.md"  # run by its own regression test below

_BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$"
    r"|<!--[ \t]*docs-test(?P<hidden_kind>-replace)?(?P<hidden>.*?)-->",
    re.MULTILINE | re.DOTALL,
)
_TITLE = re.compile(r'title="(?P<title>[^"]+)"')
_REPLACE = re.compile(r"^\s*(?P<old>.+?)\s+=>\s+(?P<new>.+?)\s*$", re.DOTALL)


@dataclass(frozen=True)
class Block:
    kind: str  # "python", "file", "bash", "replace"
    code: str
    line: int
    title: str = ""


def blocks_of(path: Path) -> list[Block]:
    """The runnable blocks of a page, in order."""
    text = path.read_text(encoding="utf-8")
    found: list[Block] = []
    for match in _BLOCK.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        if match["hidden_kind"] == "-replace":
            found.append(Block("replace", match["hidden"], line))
            continue
        if match["hidden"] is not None:
            found.append(Block("python", textwrap.dedent(match["hidden"]).strip("\n") + "\n", line))
            continue
        info = match["info"].strip()
        language = info.split(" ", 1)[0]
        body = textwrap.dedent(match["body"])
        title = _TITLE.search(info)
        if language == "python" and title is not None:
            found.append(Block("file", body, line, title["title"]))
        elif language == "python":
            found.append(Block("python", body, line))
        elif language == "bash":
            found.append(Block("bash", body, line))
    return found


def pages() -> list[Path]:
    return [*sorted(p for p in DOCS.rglob("*.md") if p.name not in SPARK_PAGES), ROOT / "README.md"]


def generic_pages() -> list[Path]:
    return [p for p in pages() if p != TESTING_PAGE]


def page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


async def run_page(path: Path, replacements: dict[str, str], project: Path, namespace: dict[str, Any]) -> None:
    """Run a page's blocks in order (see the module's docstring)."""
    replacements = dict(replacements)
    files: list[str] = []
    for block in blocks_of(path):
        where = f"{page_id(path)}:{block.line}"
        if block.kind == "replace":
            pair = _REPLACE.match(block.code)
            assert pair is not None, f"{where}: docs-test-replace takes OLD => NEW"
            replacements[pair["old"]] = pair["new"]
            continue
        code = block.code
        # The page's own replacements first (they may produce the shown address), the shown address last.
        for old, new in reversed(replacements.items()):
            code = code.replace(old, new.replace("{DOCS_PROJECT}", str(project)))
        if block.kind == "file":
            target = project / block.title
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code, encoding="utf-8")
            files.append(block.title)
        elif block.kind == "bash":
            await run_bash(code, where, project)
        else:
            await run_python(code, where, namespace)
    tests = [name for name in files if Path(name).name.startswith("test_")]
    if tests:
        run_pytest(project, tests, page_id(path))


async def run_python(code: str, where: str, namespace: dict[str, Any]) -> None:
    compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if compiled.co_flags & inspect.CO_COROUTINE:
        result = eval(compiled, namespace)  # a coroutine: the block awaits at top level
        await result
    else:
        await asyncio.to_thread(exec, compiled, namespace)


async def run_bash(code: str, where: str, cwd: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["COLUMNS"] = "200"
    done = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-euo", "pipefail", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
        check=False,
    )
    assert done.returncode == 0, f"{where}: exit {done.returncode}\n{code}\n{done.stdout}\n{done.stderr}"


def run_pytest(project: Path, tests: list[str], page: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHONPATH"))}
    env["PYTHONPATH"] = str(project)  # the page's own modules, as a project's root is importable
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, f"{page}: its tests failed\n{done.stdout}\n{done.stderr}"
    assert " passed" in done.stdout and "skipped" not in done.stdout, done.stdout


SHOWN_ONLY = {"console", "text", "yaml", "toml", "ini", "properties", "json", "dockerfile"}


def test_every_code_block_is_run_or_declared_shown_only() -> None:
    # A Python block fenced without its language (or with a typo) would never run: each block says what it is.
    for path in [*pages(), DOCS / "spark.md"]:
        text = path.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            if match["info"] is None:
                continue
            language = match["info"].strip().split(" ", 1)[0]
            line = text.count("\n", 0, match.start()) + 1
            assert language in {"python", "bash", *SHOWN_ONLY}, f"{page_id(path)}:{line}: ```{language}"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", generic_pages(), ids=page_id)
async def test_the_page_snippets_run(path: Path, tansu_bootstrap: str, tmp_path: Path) -> None:
    namespace: dict[str, Any] = {"__name__": f"docs_{path.stem}", "DOCS_PROJECT": tmp_path}
    await run_page(path, {SHOWN_ADDRESS: tansu_bootstrap}, tmp_path, namespace)


@pytest.mark.timeout(600)
async def test_the_testing_guides_async_tests_pass_in_a_project_of_their_own(tmp_path: Path) -> None:
    """Bug: the README's `async def test_...(mock_producer)` example failed in a project with only
    `aioproducer[testing]` installed: pytest cannot run an async test by itself, and pytest-asyncio, in its default
    strict mode, runs only the async tests marked `@pytest.mark.asyncio`, which the example was not."""
    tests = [b for b in blocks_of(TESTING_PAGE) if b.kind == "file" and b.title.startswith("test_")]
    assert tests and all("@pytest.mark.asyncio" in b.code for b in tests)
    # The page's files, written into a project with no pytest configuration, and its tests run there.
    await run_page(TESTING_PAGE, {}, tmp_path, {"__name__": "docs_testing"})
    assert (tmp_path / "test_checkout.py").exists() and not (tmp_path / "pytest.ini").exists()


def test_no_page_reads_a_node_by_an_id_it_assumed() -> None:
    """Bug: the metrics snippet read `snapshot.nodes["node-1"]`, a KeyError on a cluster whose broker ids differ
    (Tansu's node is node-111): node names come from the cluster, so a page iterates them."""
    for path in [*pages(), DOCS / "spark.md"]:
        assert not re.search(r'nodes\["node-\d', path.read_text(encoding="utf-8")), page_id(path)


def test_the_readme_is_a_front_page_that_links_to_the_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    # The two commands a newcomer needs, and a link to every guide.
    assert "nox -s demo" in readme and "nox -s tests" in readme
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)", readme))
    guides = {f"docs/{p.relative_to(DOCS)}" for p in DOCS.rglob("*.md") if p.parent.name != "reference"}
    assert guides - {"docs/index.md"} <= linked, guides - linked
    for link in linked:
        assert (ROOT / link).is_file(), link
