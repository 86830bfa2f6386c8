"""Developer sessions: tests (on every CPython 3.10-3.13 the machine has), compat (every Kafka minor), build, lint,
typecheck, docs, demo, chaos, bench.

Each works on a fresh machine with only Python and the registries.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import nox

nox.options.sessions = ["tests", "lint", "typecheck", "docs"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).resolve().parent
PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
# The interpreter that runs the whole suite (every broker, Spark, the older Kafka line, both twins); the others run
# the broker-free, Tansu and librdkafka-mock tests (`-m "not kafka"`) on the compiled twins, within CI's time.
FULL_SUITE_PYTHON = "3.11"


def _kafka_versions() -> ModuleType:
    """tests/kafka_versions.py, which imports nothing: the Kafka releases the suite and `compat` run on."""
    spec = importlib.util.spec_from_file_location("kafka_versions", ROOT / "tests" / "kafka_versions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


KAFKA = _kafka_versions()


def _pyenv_interpreters_on_path() -> None:
    """pyenv's shims answer only for the active version: put each installed CPython 3.1x's own bin directory on
    PATH, so that `python3.10` ... `python3.13` resolve for nox wherever pyenv installed them."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(root.glob("3.1[0-9].*/bin"), key=lambda path: [int(part) for part in path.parent.name.split(".")])
    newest = {path.parent.name.rsplit(".", 1)[0]: str(path) for path in found}  # the newest patch of each minor
    if newest:
        os.environ["PATH"] = os.pathsep.join([*newest.values(), os.environ.get("PATH", "")])


_pyenv_interpreters_on_path()

# Tests that need the compiled hot path, or exercise no compiled code at all: the pure-Python pass leaves them out.
_COMPILED_ONLY = [
    "--ignore=tests/test_spark.py",
    "--ignore=tests/test_spark_stream.py",
    "--ignore=tests/test_spark_cache.py",
    "--ignore=tests/test_spark_transactional.py",
    "--ignore=tests/test_docs_spark.py",
    "--ignore=tests/test_speedups.py",
    "--ignore=tests/test_speedups_hostile.py",
    "--ignore=tests/test_fresh_project.py",  # it builds and installs wheels of both kinds itself
    "--ignore=tests/test_kafka_cluster.py",
    "--ignore=tests/test_kafka_failover.py",
    # The fault campaign and the transactions on real Kafka judge sequence and transaction rules, which are pure
    # Python on both paths; their compiled run covers them.
    "--ignore=tests/test_chaos.py",
    "--ignore=tests/test_transactions_kafka.py",
]
PURE = {"AIOPRODUCER_NO_EXTENSIONS": "1"}


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The test suite, on each CPython 3.10-3.13 found. On FULL_SUITE_PYTHON: everything, on real Apache Kafka
    (started by the tests from Maven Central's jars; AIOPRODUCER_BOOTSTRAP points the default broker elsewhere),
    Tansu and librdkafka's mock cluster, compiled then pure Python (the `kafka`-marked tests in one lane, the others
    and then the core broker suites on the last 3.x Kafka in another, side by side). On the others: every test that
    needs no Kafka JVM (`-m "not kafka"`) on the compiled twins, its files in two lanes side by side.
    A full run (no arguments) then has the docs session build the documentation site. Arguments after `--` go to
    pytest instead (`nox -s tests-3.13 -- tests/test_x.py`)."""
    ensure_java_and_maven(session, jdk=True)  # javac: the suite compiles a probe against Kafka's own classes
    ensure_native_codecs(session)
    session.install("-e", ".[test]")
    if session.posargs:
        session.run("pytest", *session.posargs)
        return
    if session.python != FULL_SUITE_PYTHON:
        # What differs between Pythons is the compiled twins (built for each ABI) and asyncio's own behaviour, which
        # the compiled run exercises as much as the pure one; the pure twins are the same code on every Python, run
        # whole on FULL_SUITE_PYTHON. The test files are dealt into two lanes, one core each.
        broker_free = ["pytest", "-m", "not kafka", "-p", "no:cacheprovider", "--durations=5"]
        first, second = _two_halves(sorted(str(path.relative_to(ROOT)) for path in ROOT.glob("tests/**/test_*.py")))
        _side_by_side(session, [([*broker_free, *first], {})], [([*broker_free, *second], {})])
        return
    session.notify("docs")  # the full run also builds the documentation site, warnings as errors
    # The tests on real Kafka wait on a JVM much of the time: the broker-free ones run beside them, on the other core,
    # compiled then on the pure-Python twins of the compiled hot path (what installs without a C compiler get), then
    # the core broker suites on the last 3.x Kafka; the two lanes take about as long.
    kafka = ["pytest", "-m", "kafka", "-p", "no:cacheprovider", "--durations=25"]
    broker_free = ["pytest", "-m", "not kafka", "-p", "no:cacheprovider", "--durations=5"]
    older = {"AIOPRODUCER_KAFKA_VERSION": KAFKA.OLDER_KAFKA_VERSION, "AIOPRODUCER_BOOTSTRAP": ""}
    _side_by_side(
        session,
        [(kafka, {}), ([*kafka, *_COMPILED_ONLY], PURE)],
        [(broker_free, {}), ([*broker_free, *_COMPILED_ONLY], PURE), (["pytest", *KAFKA.CORE_BROKER_SUITES], older)],
    )


def _two_halves(files: list[str]) -> tuple[list[str], list[str]]:
    """The files dealt alternately into two lists (neighbouring files are often alike in length)."""
    return files[0::2], files[1::2]


def _side_by_side(session: nox.Session, *lanes: list[tuple[list[str], dict[str, str]]]) -> None:
    """Run lanes of commands of the session's virtualenv at once, each lane's commands one after another, each with
    its own extra environment; print each command's output once its lane has ended, and fail the session if any
    command failed (a lane goes on after a failure, so one run shows every failure)."""
    logs = Path(session.create_tmp())
    env = {**os.environ, "PATH": os.pathsep.join([str(session.bin), os.environ.get("PATH", "")])}
    failed: list[str] = []

    def run_lane(index: int, lane: list[tuple[list[str], dict[str, str]]]) -> list[tuple[str, int, Path]]:
        ran = []
        for step, (command, extra) in enumerate(lane):
            log = logs / f"lane-{index}-{step}.log"
            with log.open("w") as out:
                status = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT, env={**env, **extra}, cwd=ROOT)
            ran.append((f"{' '.join(command)} {extra or ''}".strip(), status, log))
        return ran

    for index, lane in enumerate(lanes):
        for command, extra in lane:
            session.log(f"lane {index + 1}: {' '.join(command)} (environment {extra or 'as is'})")
    with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
        results = list(pool.map(lambda item: run_lane(*item), enumerate(lanes)))
    for ran in results:
        for command, status, log in ran:
            session.log(f"{command}: exit {status}")
            print(log.read_text(), flush=True)
            if status != 0:
                failed.append(command)
    if failed:
        session.error("failed: " + "; ".join(failed))


@nox.session(python=FULL_SUITE_PYTHON)
def compat(session: nox.Session) -> None:
    """The core broker suites on every Kafka minor from the 3.9 line to the newest (tests/kafka_versions.py), one
    release after another, then a table: release, result, tests passed, broker start-up, wall time. Arguments after
    `--` pick releases (`nox -s compat -- 4.0.2 4.4.0`)."""
    ensure_java_and_maven(session, jdk=True)
    session.install("-e", ".[test]")
    releases = session.posargs or list(KAFKA.COMPAT_KAFKA_VERSIONS)
    rows = []
    for release in releases:
        report = Path(session.create_tmp()) / f"compat-{release}.xml"
        env = {"AIOPRODUCER_KAFKA_VERSION": release, "AIOPRODUCER_BOOTSTRAP": ""}
        began = time.monotonic()
        ok, output = True, ""
        try:
            # Silent: its output is printed below (and by nox on failure), and read for the broker's start-up time.
            output = session.run(
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--junitxml={report}",
                *KAFKA.CORE_BROKER_SUITES,
                env=env,
                silent=True,
            )
            print(output, flush=True)
        except nox.command.CommandFailed:
            ok = False
        started = re.search(r"kafka_cluster \(1 node\): started in ([0-9.]+) s", output or "")
        rows.append(
            (release, ok, _junit_counts(report), started.group(1) + " s" if started else "?", time.monotonic() - began)
        )
    lines = ["", "| Kafka | result | passed / tests | broker start-up | time |", "|---|---|---|---|---|"]
    for release, ok, (passed, total), startup, seconds in rows:
        result = "pass" if ok else "FAIL"
        lines.append(f"| {release} | {result} | {passed} / {total} | {startup} | {seconds / 60:.1f} min |")
    session.log("\n".join(lines))
    if not all(row[1] for row in rows):
        session.error("the core suites failed on: " + ", ".join(row[0] for row in rows if not row[1]))


def _junit_counts(report: Path) -> tuple[int, int]:
    """(passed, tests) from pytest's JUnit XML report; (0, 0) when there is none."""
    import xml.etree.ElementTree as ElementTree

    if not report.is_file():
        return 0, 0
    suite = ElementTree.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    total = int(suite.get("tests", 0))
    bad = sum(int(suite.get(key, 0)) for key in ("failures", "errors", "skipped"))
    return total - bad, total


@nox.session(python=FULL_SUITE_PYTHON)
def build(session: nox.Session) -> None:
    """The sdist and wheel into dist/ (the wheel compiled here when a C compiler is found, pure Python otherwise),
    checked by twine."""
    session.install("build>=1.2", "twine>=5")
    shutil.rmtree(ROOT / "dist", ignore_errors=True)
    session.run("python", "-m", "build", "--outdir", "dist")
    session.run("twine", "check", "--strict", *map(str, sorted((ROOT / "dist").iterdir())))


@nox.session
def chaos(session: nox.Session) -> None:
    """The seeded fault campaign for minutes, on real Kafka (3 nodes) and librdkafka's mock cluster; prints a table
    per seed. Options: `-- --seeds N --duration S --first-seed N --target kafka|mock|both`."""
    ensure_java_and_maven(session)
    session.install("-e", ".[test]")
    session.run("python", "tests/chaos_campaign.py", *(session.posargs or ["--seeds", "10", "--duration", "60"]))


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff over the package, tests, examples and this file."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", "aioproducer", "tests", "examples", "noxfile.py")
    session.run("ruff", "format", "--check", "aioproducer")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package."""
    session.install("-e", ".[snappy,otel,prometheus,cli,testing]", "anyio>=4.4", "mypy>=1.10")
    session.run("mypy", "--strict", "aioproducer")


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site (mkdocs-material; API reference from the docstrings by mkdocstrings) into site/, built
    strict: a warning (a broken link, a docstring mkdocstrings cannot read) fails it. Its snippets run in the tests
    (tests/test_docs.py). `-- serve` serves it at localhost:8000 instead."""
    session.install("-e", ".[docs]", "ruff>=0.6")  # mkdocstrings formats the signatures with ruff
    env = {"NO_MKDOCS_2_WARNING": "1"}
    if session.posargs[:1] == ["serve"]:
        session.run("mkdocs", "serve", *session.posargs[1:], env=env)
        return
    session.run("mkdocs", "build", "--strict", "--clean", env=env)


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
    """aioproducer against every peer at its best on one real Apache Kafka node (tests/benchmarks/run.py): each row
    (100 B keyless and keyed enqueue loops, send_many, the done-callback idiom, 1 KB lz4/zstd/snappy/gzip, and the
    columnar rows when the producer has send_table) against confluent-kafka (produce loop with and without
    callback, AIOProducer), aiokafka, kafka-python, the Java producer warm and cold (compiled here: needs a JDK) and
    kafka-producer-perf-test, under each client's defaults and under matched batching, acks=all + idempotence for
    all, 3 alternating rounds; then latency, loop lag, memory and the ways of waiting; the pure-Python twins; the
    cost of observing; asyncio's floors; the cost of one more batch; and Spark's JVM sink warm and cold against
    aioproducer.spark. Writes tests/benchmarks/results/. `-- --quick` is a smoke run of a few minutes (small
    counts, one round, the Spark comparison alone); the full run, not yet timed with these peers, should take one
    and a half to two hours on 2 cores."""
    ensure_java_and_maven(session, jdk=True)
    ensure_native_codecs(session)
    session.install(
        "-e",
        ".[snappy,testing,otel]",
        "opentelemetry-sdk",
        "aiokafka",
        "kafka-python",
        "python-snappy",  # kafka-python's snappy codec
        "confluent-kafka",
        "matplotlib",
        "pyarrow",
        "polars",
    )
    session.run("python", "-m", "tests.benchmarks.run", *session.posargs)
    quick = ["--quick"] if "--quick" in session.posargs else []
    # The pure-Python twins (what installs without a C compiler run), 100 B rows on Kafka: results/pure/.
    session.run(
        "python",
        "-m",
        "tests.benchmarks.run",
        *quick,
        "--rows",
        "enqueue_100B,keyed_100B,send_many_100B",
        "--batchings",
        "defaults",
        "--only",
        "idiom_wait_100B",
        "--clients",
        "aioproducer",
        "--out",
        "tests/benchmarks/results/pure",
        env={"AIOPRODUCER_NO_EXTENSIONS": "1"},
    )
    # The cost of observing, measured in many short alternating rounds in one process: results/observability.md.
    session.run("python", "-m", "tests.benchmarks.observe_bench", *quick)
    # What asyncio alone costs per record in the gather and done-callback idioms: results/asyncio_floor.md.
    session.run("python", "-m", "tests.benchmarks.asyncio_floor", *quick)
    # What one more batch costs the event loop, broker-free (librdkafka's mock cluster): results/batch_cost.md.
    session.run("python", "-m", "tests.benchmarks.batch_cost", *quick)
    # The Spark section (tests/benchmarks/spark_bench.py), with the newest Spark that both PyPI (pyspark) and Maven
    # Central (its Kafka connector) serve: Spark's JVM sink and aioproducer.spark, warm and cold, batch and
    # streaming, on a real Kafka node; what Spark alone costs; the producer cache. Writes results/spark.md.
    spark = session.run("python", "-m", "tests.benchmarks.spark_bench", "version", silent=True)
    session.install("-e", ".[spark,testing]", f"pyspark=={str(spark).strip().splitlines()[-1]}")
    session.run("python", "-m", "tests.benchmarks.spark_bench", "all", *quick)


@nox.session
def bench_transactions(session: nox.Session) -> None:
    """Transactional throughput (transactions of 1 k and 10 k records) of aioproducer, confluent-kafka and the Java
    producer on real Kafka; writes tests/benchmarks/results/transactions.md. `-- --quick` for a short run."""
    ensure_java_and_maven(session)
    session.install("-e", ".[testing]", "confluent-kafka")
    session.run("python", "-m", "tests.benchmarks.txn_bench", *session.posargs)


@nox.session
def bench_adaptive(session: nox.Session) -> None:
    """Adaptive partitioning (KIP-794): keyless records/s of aioproducer and the Java producer before and while one
    of three real Kafka nodes is slowed or stops taking requests; writes tests/benchmarks/results/adaptive.md.
    `-- --quick` for one short round."""
    ensure_java_and_maven(session, jdk=True)
    session.install("-e", ".[testing]")
    session.run("python", "-m", "tests.benchmarks.adaptive_bench", *session.posargs)


@nox.session
def profile(session: nox.Session) -> None:
    """A profile of aioproducer's hot path (py-spy and cProfile) into tests/benchmarks/results/profile/."""
    session.install("-e", ".[snappy,testing]", "py-spy")
    session.run("python", "-m", "tests.benchmarks.profile_hot_path", *session.posargs)


def ensure_native_codecs(session: nox.Session) -> None:
    """The batch pipeline's compiled twin calls lz4, zstd and snappy in C when their headers are there at build time
    (else those codecs compress on the event loop): install Debian's -dev packages for the missing ones, when we may."""
    headers = {
        "lz4frame.h": "liblz4-dev",
        "zstd.h": "libzstd-dev",
        "snappy-c.h": "libsnappy-dev",
        "zlib.h": "zlib1g-dev",
    }
    missing = [package for header, package in headers.items() if not os.path.exists(f"/usr/include/{header}")]
    if missing and shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        session.run("apt-get", "update", "-qq", external=True)
        session.run("apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing, external=True)


def ensure_java_and_maven(session: nox.Session, *, jdk: bool = False) -> None:
    """Real Kafka and Spark need a Java runtime (17 or 21), and Maven fetches Kafka's jars: install Debian's
    packages for whichever is missing, when we may. `jdk`: also javac (the benchmark compiles its Java peer)."""
    packages = {"java": "openjdk-17-jre-headless", "mvn": "maven"}
    if jdk:
        packages["javac"] = "openjdk-17-jdk-headless"
    missing = [package for tool, package in packages.items() if not shutil.which(tool)]
    if not missing:
        return
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        session.run("apt-get", "update", "-qq", external=True)
        session.run("apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing, external=True)
        return
    session.error(f"the tests need Java 17 or 21 and Maven: install them (e.g. apt-get install {' '.join(missing)})")
