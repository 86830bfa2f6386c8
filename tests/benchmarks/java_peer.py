"""The Java producer as a benchmark peer: compiles `java/ProducerBench.java` against Kafka's own kafka-clients jar (the
one `KafkaCluster` fetches), writes the shared payload pools, and runs one workload per JVM.

Owns the harness's build directory and its command line; timing happens inside the JVM, judging in `run.py`.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from aioproducer.testing import DEFAULT_KAFKA_VERSION, kafka_libs
from tests.benchmarks.workloads import LINGER_MS, RunSpec, key_pool, value_pool

__all__ = ["JavaPeer", "JavaUnavailableError"]

SOURCE = Path(__file__).resolve().parent / "java" / "ProducerBench.java"
RESULT_MARK = "BENCH-RESULT "
# Full JIT (no -XX:TieredStopAtLevel=1, unlike the test brokers): a benchmark must measure the warmed-up producer.
# The heap leaves room for buffer.memory (32 MB) and the prepared record list.
_JVM_FLAGS = ("-Xmx768m", "-XX:+UseG1GC", "-Djava.awt.headless=true")


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
        classes = self._work / "classes"
        done = subprocess.run(
            [javac, "-nowarn", "-cp", f"{self.libs}/*", "-d", str(classes), str(SOURCE)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise JavaUnavailableError(f"javac failed:\n{done.stderr[-3000:]}")
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

    def command(self, spec: RunSpec) -> list[str]:
        """The JVM command for one loop-mode run of `spec`."""
        # Its loop is send() with a callback per record, then flush(): the "callback" idiom too.
        if spec.mode != "loop" and not (spec.mode == "idiom" and spec.extra.get("idiom") == "callback"):
            raise ValueError(f"the Java peer runs throughput loops only, not {spec.mode!r}")
        java = shutil.which("java") or "java"
        values = self._values(spec.value_size, compressible=spec.compression != "none")
        keys = str(self._keys()) if spec.keyed else "-"
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
            str(LINGER_MS),
        ]

    def run(self, spec: RunSpec, timeout_s: float) -> dict[str, Any]:
        """One run in its own JVM: the harness's result, or {"error": ...}."""
        try:
            done = subprocess.run(self.command(spec), capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout_s} s"}
        for line in reversed(done.stdout.splitlines()):
            if line.startswith(RESULT_MARK):
                result: dict[str, Any] = json.loads(line[len(RESULT_MARK) :])
                return result
        return {"error": f"the Java peer exited {done.returncode} without a result:\n{done.stderr[-3000:]}"}
