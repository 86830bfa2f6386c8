"""Developer sessions: tests, lint, typecheck, demo.

Each works on a fresh machine with only Python and the registries.
"""

from __future__ import annotations

import os
import shutil

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite against real Apache Kafka started from Maven Central's jars (or AIOPRODUCER_BOOTSTRAP,
    when set), Tansu and librdkafka's mock cluster: compiled, then pure Python."""
    ensure_java_and_maven(session)
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)
    if not session.posargs:
        # Again on the pure-Python twins of the compiled hot path (what installs without a C compiler get); the
        # Spark tests and the twin comparisons (test_speedups*.py), which need the compiled parts, run only above.
        session.run(
            "pytest",
            "--ignore=tests/test_spark.py",
            "--ignore=tests/test_spark_stream.py",
            "--ignore=tests/test_speedups.py",
            "--ignore=tests/test_speedups_hostile.py",
            env={"AIOPRODUCER_NO_EXTENSIONS": "1"},
        )


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff over the package, tests, examples and this file."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", "aioproducer", "tests", "examples", "noxfile.py")
    session.run("ruff", "format", "--check", "aioproducer")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package."""
    session.install("-e", ".[snappy]", "mypy>=1.10")
    session.run("mypy", "--strict", "aioproducer")


@nox.session
def demo(session: nox.Session) -> None:
    """The main job: start a broker, produce, read back, report. Pass options after `--`: `-- --broker kafka` runs
    it on real Apache Kafka (one node, from Maven Central's jars) instead of the embedded Tansu."""
    if "kafka" in session.posargs:
        ensure_java_and_maven(session)
    session.install("-e", ".[snappy,testing,cli]")
    session.run("python", "examples/demo.py", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Side-by-side benchmark against aiokafka, confluent-kafka (AIOProducer, Producer) and kafka-python on an
    embedded broker; writes tests/benchmarks/results/. `-- --quick` is a ~2-minute smoke run, the full run ~15."""
    session.install("-e", ".[snappy,testing]", "aiokafka", "kafka-python", "confluent-kafka", "matplotlib")
    session.run("python", "-m", "tests.benchmarks.run", *session.posargs)
    # The Spark section (tests/benchmarks/spark_bench.py): aioproducer.spark against Spark's own Kafka sink on a real
    # Kafka node, batch and streaming, then the producer cache; appends to results/spark.md.
    ensure_java_and_maven(session)
    session.install("-e", ".[spark,testing]")
    quick = ["--quick"] if "--quick" in session.posargs else []
    session.run("python", "-m", "tests.benchmarks.spark_bench", "all", *quick)


@nox.session
def profile(session: nox.Session) -> None:
    """A profile of aioproducer's hot path (py-spy and cProfile) into tests/benchmarks/results/profile/."""
    session.install("-e", ".[snappy,testing]", "py-spy")
    session.run("python", "-m", "tests.benchmarks.profile_hot_path", *session.posargs)


def ensure_java_and_maven(session: nox.Session) -> None:
    """Real Kafka and Spark need a Java runtime (17 or 21), and Maven fetches Kafka's jars: install Debian's
    packages for whichever is missing, when we may."""
    packages = {"java": "openjdk-17-jre-headless", "mvn": "maven"}
    missing = [package for tool, package in packages.items() if not shutil.which(tool)]
    if not missing:
        return
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        session.run("apt-get", "update", "-qq", external=True)
        session.run("apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing, external=True)
        return
    session.error(f"the tests need Java 17 or 21 and Maven: install them (e.g. apt-get install {' '.join(missing)})")
