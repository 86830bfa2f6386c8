"""Kafka's own reference data for the suite, taken from the release it runs on: the message JSON inside the
`kafka-clients` jar (`common/message/*.json`), and the error table and murmur2 values computed by Kafka's Java classes
(`Errors`, `Utils.murmur2`, `BuiltInPartitioner.partitionForKey`) through `tests/java/KafkaReference.java`, compiled
here against that jar.

The jars come from `aioproducer.testing.kafka_libs` (Maven Central, cached per version); what the Java program
derives is cached beside them (`<cache>/<version>/reference/`), keyed by the program's source and its input, so only
a first run pays for javac and a JVM. Needs `java` and `javac` (a JDK): a missing one fails with what to install.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from kafka_versions import OLDER_KAFKA_VERSION

from aioproducer.testing import DEFAULT_KAFKA_VERSION, kafka_libs
from aioproducer.testing.kafka_jars import kafka_cache_dir

__all__ = [
    "MURMUR2_PARTITION_COUNTS",
    "error_table",
    "message_spec",
    "message_specs",
    "murmur2_vectors",
    "suite_kafka_versions",
]

SOURCE = Path(__file__).resolve().parent / "java" / "KafkaReference.java"
KAFKA_VERSION_ENV = "AIOPRODUCER_KAFKA_VERSION"
# Partition counts the key → partition vectors cover; the last is the largest count Kafka allows.
MURMUR2_PARTITION_COUNTS = (1, 2, 3, 6, 12, 100, 1009, 2**31 - 1)
_JAVA_TIMEOUT_S = 120


def suite_kafka_versions() -> tuple[str, ...]:
    """The releases this run judges with: the default, the older line, and `AIOPRODUCER_KAFKA_VERSION` when set."""
    chosen = [DEFAULT_KAFKA_VERSION, OLDER_KAFKA_VERSION, os.environ.get(KAFKA_VERSION_ENV) or DEFAULT_KAFKA_VERSION]
    return tuple(dict.fromkeys(chosen))


def _clients_jar(version: str) -> Path:
    return kafka_libs(version) / f"kafka-clients-{version}.jar"


@functools.cache
def message_specs(version: str) -> dict[str, str]:
    """Every message JSON of Kafka `version`, by name (`ProduceRequest`, ...), as the jar carries it."""
    prefix = "common/message/"
    with zipfile.ZipFile(_clients_jar(version)) as jar:
        texts = {
            name[len(prefix) : -len(".json")]: jar.read(name).decode()
            for name in jar.namelist()
            if name.startswith(prefix) and name.endswith(".json")
        }
    if not texts:
        pytest.fail(f"kafka-clients {version} carries no {prefix}*.json")
    return texts


def message_spec(name: str, version: str) -> dict[str, Any]:
    """One message JSON parsed: whole-line `//` comments dropped (Kafka's generator reads them so)."""
    text = message_specs(version)[name]
    spec: dict[str, Any] = json.loads(
        "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    )
    return spec


def error_table(version: str) -> list[dict[str, Any]]:
    """Kafka `version`'s `Errors` enum: code, name, message, exception, retriable, invalid_metadata per constant."""
    table: list[dict[str, Any]] = _run_java(version, ["errors"], "")
    return table


def murmur2_keys() -> list[bytes]:
    """Keys that exercise murmur2's every branch: each length 0..64 (all tails), bytes above 0x7f (Java's signed
    bytes), Kafka's own UtilsTest strings and a few kilobyte-sized ones; the same list on every run."""
    rng = random.Random(2541)
    keys = [b"", b"\x00", b"\xff", b"\x80\x00\x00\x00", b"\x7f\xff\xff\xff", b"\xff" * 4, b"\x00" * 8]
    keys += [s.encode() for s in ("21", "foobar", "a-little-bit-long-string", "a-little-bit-longer-string")]
    keys += [b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", "clé-ключ-键".encode()]
    keys += [bytes(rng.randrange(256) for _ in range(length)) for length in range(65)]
    keys += [bytes(rng.randrange(128, 256) for _ in range(length)) for length in (1, 2, 3, 5, 7, 13)]
    keys += [rng.randbytes(size) for size in (255, 1000, 4099)]
    return keys


def murmur2_vectors(version: str = DEFAULT_KAFKA_VERSION) -> list[dict[str, Any]]:
    """For each of `murmur2_keys()`: `key_hex`, Java's signed `murmur2`, and `partition` {count: partition}."""
    stdin = "".join(key.hex() + "\n" for key in murmur2_keys())
    vectors: list[dict[str, Any]] = _run_java(version, ["murmur2", *map(str, MURMUR2_PARTITION_COUNTS)], stdin)
    return vectors


def _run_java(version: str, arguments: list[str], stdin: str) -> Any:
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source + b"\0" + " ".join(arguments).encode() + b"\0" + stdin.encode()).hexdigest()[:20]
    cached = kafka_cache_dir() / version / "reference" / f"{arguments[0]}-{digest}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    classes = _compiled(version, hashlib.sha256(source).hexdigest()[:20])
    java = _tool("java")
    done = subprocess.run(
        [java, "-cp", f"{classes}{os.pathsep}{kafka_libs(version)}/*", "KafkaReference", *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=_JAVA_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"KafkaReference {' '.join(arguments)} failed on Kafka {version}:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout)
    _write_atomically(cached, json.dumps(result, indent=0))
    return result


def _compiled(version: str, source_digest: str) -> Path:
    """The program's classes for `version` (compiled once per source and version)."""
    target = kafka_cache_dir() / version / "reference" / f"classes-{source_digest}"
    if (target / "KafkaReference.class").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".javac-", dir=target.parent))
    try:
        done = subprocess.run(
            [_tool("javac"), "-nowarn", "-cp", str(_clients_jar(version)), "-d", str(scratch), str(SOURCE)],
            capture_output=True,
            text=True,
            timeout=_JAVA_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            pytest.fail(f"javac failed on {SOURCE.name} against kafka-clients {version}:\n{done.stderr[-3000:]}")
        try:
            scratch.rename(target)
        except OSError:  # another run compiled it first
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"Kafka's reference data needs `{name}` (a JDK 17+, e.g. apt-get install openjdk-17-jdk-headless)")
    return found


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    with os.fdopen(handle, "w") as out:
        out.write(text)
    os.replace(temporary, path)
