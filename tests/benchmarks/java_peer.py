"""The Java peers: the Java producer (`java/ProducerBench.java`, compiled against Kafka's own kafka-clients jar, the
one `KafkaCluster` fetches), and `kafka-producer-perf-test` (org.apache.kafka.tools.ProducerPerformance, from the
kafka-tools jar of the broker's version, which `kafka_libs` fetches with its dependencies excluded); the shared
payload pools written for them; one JVM per run.

Owns the harness's build directory and the command lines; the orchestrator (`run.py`) runs them, timing happens
inside the JVM (ProducerBench) or is the tool's own (perf-test), judging is `run.py`'s.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from aioproducer.testing import DEFAULT_KAFKA_VERSION, kafka_libs
from tests.benchmarks.workloads import RunSpec, batching_of, key_pool, value_pool

__all__ = ["JavaPeer", "JavaUnavailableError", "perf_test_result"]

SOURCE = Path(__file__).resolve().parent / "java" / "ProducerBench.java"
PERF_TEST_CLASS = "org.apache.kafka.tools.ProducerPerformance"
# Full JIT (no -XX:TieredStopAtLevel=1, unlike the test brokers): a benchmark must measure the warmed-up producer.
# The heap leaves room for buffer.memory (32 MB) and the prepared record list.
_JVM_FLAGS = ("-Xmx768m", "-XX:+UseG1GC", "-Djava.awt.headless=true")
# What bin/kafka-producer-perf-test.sh gives the tool: its 512 MB heap and kafka-run-class.sh's performance flags.
_PERF_TEST_FLAGS = (
    "-Xmx512M",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
# Its closing line: "500000 records sent, 412201.2 records/sec (39.31 MB/sec), 12.3 ms avg latency, ..."
_PERF_TEST_TOTAL = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec")


class JavaUnavailableError(RuntimeError):
    """The Java peer cannot run here (no JDK to compile it, or Kafka's jars cannot be fetched)."""


class JavaPeer:
    """Compiles the harness once (`with JavaPeer() as peer`) and runs `peer.run(spec)` in a fresh JVM each time."""

    def __init__(self, kafka_version: str = DEFAULT_KAFKA_VERSION) -> None:
        self.kafka_version = kafka_version
        self._work = Path(tempfile.mkdtemp(prefix="aioproducer-java-bench-"))
        self._pools: dict[tuple[int, bool], Path] = {}
        self.libs: Path | None = None
        self.java_version = ""

    def __enter__(self) -> JavaPeer:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        shutil.rmtree(self._work, ignore_errors=True)

    def _build(self) -> None:
        javac, java = shutil.which("javac"), shutil.which("java")
        if javac is None or java is None:
            raise JavaUnavailableError(
                "the Java peer needs a JDK (javac): e.g. apt-get install openjdk-17-jdk-headless"
            )
        self.libs = kafka_libs(self.kafka_version)
        compile_java(SOURCE, self.libs, self._work / "classes")
        version = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
        self.java_version = (version.stderr or version.stdout).splitlines()[0] if version.returncode == 0 else "?"

    def _write_pool(self, name: str, pool: list[bytes]) -> Path:
        path = self._work / f"{name}.bin"
        path.write_bytes(b"".join(struct.pack(">i", len(item)) + item for item in pool))
        return path

    def _values(self, size: int, compressible: bool) -> Path:
        key = (size, compressible)
        if key not in self._pools:
            self._pools[key] = self._write_pool(f"values-{size}-{int(compressible)}", value_pool(size, compressible))
        return self._pools[key]

    def _keys(self) -> Path:
        path = self._work / "keys.bin"
        return path if path.is_file() else self._write_pool("keys", key_pool())

    def _payload_file(self, size: int, compressible: bool) -> Path:
        """The value pool as perf-test reads it: UTF-8 text, one payload per line (the pools are ASCII, no newline)."""
        path = self._work / f"payloads-{size}-{int(compressible)}.txt"
        if not path.is_file():
            pool = value_pool(size, compressible)
            if any(b"\n" in value or not value.isascii() for value in pool):
                raise ValueError("perf-test payloads must be ASCII text without newlines")
            path.write_bytes(b"\n".join(pool))
        return path

    def command(self, spec: RunSpec) -> list[str]:
        """The JVM command for one run of the Java producer's send loop (a callback per record), warm or cold."""
        style = spec.extra.get("style", "warm")
        if spec.mode != "loop" or style not in ("warm", "cold"):
            raise ValueError(f"the Java peer runs throughput loops only, warm or cold, not {spec.mode!r}/{style!r}")
        java = shutil.which("java") or "java"
        values = self._values(spec.value_size, compressible=spec.compression != "none")
        keys = str(self._keys()) if spec.keyed else "-"
        linger_ms, batch_size = batching_of(str(spec.extra.get("batching", "defaults")))
        return [
            java,
            *_JVM_FLAGS,
            "-cp",
            f"{self.libs}/*:{self._work / 'classes'}",
            "ProducerBench",
            spec.bootstrap,
            spec.topic,
            str(spec.count),
            str(values),
            keys,
            spec.compression,
            "true" if spec.idempotent else "false",
            "-" if linger_ms is None else str(linger_ms),
            "-" if batch_size is None else str(batch_size),
            str(style),
            "true" if spec.extra.get("handshake") else "false",
        ]

    def perf_test_command(self, spec: RunSpec) -> list[str]:
        """kafka-producer-perf-test as its script runs it: the records of `spec` (values chosen at random from the
        shared pool, no keys), unthrottled, with the run's producer settings."""
        if spec.keyed:
            raise ValueError("kafka-producer-perf-test sends no keys")
        java = shutil.which("java") or "java"
        payloads = self._payload_file(spec.value_size, compressible=spec.compression != "none")
        linger_ms, batch_size = batching_of(str(spec.extra.get("batching", "defaults")))
        props = [
            f"bootstrap.servers={spec.bootstrap}",
            f"acks={'all' if spec.idempotent else '1'}",
            f"enable.idempotence={'true' if spec.idempotent else 'false'}",
            f"compression.type={spec.compression}",
            # As in ProducerBench.java: 4.4's cluster check (KIP-1242) names the cluster in ApiVersions v5, which
            # Tansu drops; the producer would retry forever.
            "metadata.cluster.check.enable=false",
        ]
        if linger_ms is not None:
            props.append(f"linger.ms={linger_ms}")
        if batch_size is not None:
            props.append(f"batch.size={batch_size}")
        return [
            java,
            *_PERF_TEST_FLAGS,
            "-cp",
            f"{self.libs}/*",
            PERF_TEST_CLASS,
            "--topic",
            spec.topic,
            "--num-records",
            str(spec.count),
            "--throughput",
            "-1",
            "--payload-file",
            str(payloads),
            "--producer-props",
            *props,
        ]


def compile_java(source: Path, libs: Path, into: Path) -> None:
    """Compile one Java harness against Kafka's jars in `libs`, its classes into `into`; JavaUnavailableError when
    there is no JDK or javac refuses it."""
    javac = shutil.which("javac")
    if javac is None:
        raise JavaUnavailableError("the Java peer needs a JDK (javac): e.g. apt-get install openjdk-17-jdk-headless")
    done = subprocess.run(
        [javac, "-nowarn", "-cp", f"{libs}/*", "-d", str(into), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise JavaUnavailableError(f"javac failed:\n{done.stderr[-3000:]}")


def perf_test_result(stdout: str) -> dict[str, Any]:
    """The records and the records/s perf-test reports in its closing line (its clock runs from before the first
    send to after close(), which flushes), or {"error": ...}."""
    for line in reversed(stdout.splitlines()):
        total = _PERF_TEST_TOTAL.match(line.strip())
        if total:
            records, rate = int(total.group(1)), float(total.group(2))
            return {"records": records, "elapsed_s": records / rate if rate else float("inf"), "perf_test": line}
    return {"error": f"kafka-producer-perf-test printed no total:\n{stdout[-3000:]}"}
