"""Developer sessions: tests, lint, typecheck, docs, demo, chaos.

Each works on a fresh machine with only Python and the registries.
"""

from __future__ import annotations

import os
import shutil

import nox

nox.options.sessions = ["tests", "lint", "typecheck", "docs"]
nox.options.reuse_existing_virtualenvs = True


# The suites that prove the producer against a broker, run once more on the last 3.x release of Kafka: version
# negotiation with an older broker (Produce up to v11, no KIP-896 floor, no KIP-966 eligible leader replicas).
OLDER_KAFKA = "3.9.1"
CORE_ON_OLDER_KAFKA = [
    "tests/test_producer_e2e.py",
    "tests/test_kafka_semantics.py",
    "tests/test_security_kafka.py",
    "tests/test_protocol_brokers.py",
]


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite on real Apache Kafka (started by the tests from Maven Central's jars; AIOPRODUCER_BOOTSTRAP
    points the default broker elsewhere), Tansu and librdkafka's mock cluster: compiled, then pure Python, then the
    core suites on Kafka 3.9; then (a full run) the docs session builds the documentation site."""
    ensure_java_and_maven(session)
    ensure_native_codecs(session)
    session.install("-e", ".[test]")
    session.run("pytest", *(session.posargs or ["--durations=25"]))
    if session.posargs:
        return
    session.notify("docs")  # the full run also builds the documentation site, warnings as errors
    # Again on the pure-Python twins of the compiled hot path (what installs without a C compiler get). The Spark
    # tests and the twin comparisons need the compiled parts; the fixture's own tests, the multi-node failover and
    # the fresh-project test exercise no compiled code: those run only above.
    session.run(
        "pytest",
        "--durations=10",
        "--ignore=tests/test_spark.py",
        "--ignore=tests/test_spark_stream.py",
        "--ignore=tests/test_spark_cache.py",
        "--ignore=tests/test_spark_transactional.py",
        "--ignore=tests/test_docs_spark.py",
        "--ignore=tests/test_speedups.py",
        "--ignore=tests/test_speedups_hostile.py",
        "--ignore=tests/test_fresh_project.py",  # it installs a pure-Python wheel itself
        "--ignore=tests/test_kafka_cluster.py",
        "--ignore=tests/test_kafka_failover.py",
        # The fault campaign and the transactions on real Kafka judge sequence and transaction rules, which are pure
        # Python on both paths; their compiled run above covers them.
        "--ignore=tests/test_chaos.py",
        "--ignore=tests/test_transactions_kafka.py",
        env={"AIOPRODUCER_NO_EXTENSIONS": "1"},
    )
    older = {"AIOPRODUCER_KAFKA_VERSION": OLDER_KAFKA, "AIOPRODUCER_BOOTSTRAP": ""}
    session.run("pytest", *CORE_ON_OLDER_KAFKA, env=older)


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
    session.install("-e", ".[snappy,otel,prometheus,cli,testing]", "mypy>=1.10")
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
    cost of observing; asyncio's floors; and Spark's JVM sink warm and cold against aioproducer.spark. Writes
    tests/benchmarks/results/. `-- --quick` is a smoke run of a few minutes (small counts, one round, the Spark
    comparison alone); the full run, not yet timed with these peers, should take one and a half to two hours on
    2 cores."""
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
