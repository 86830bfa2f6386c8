"""Apache Kafka's jars from Maven Central: fetched once per version with Maven into a cache directory, then reused.

Owns the cache layout and the throw-away pom; it starts no broker. Needs `java` and `mvn` on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from aioproducer.errors import AioProducerError

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "KafkaSetupError",
    "kafka_cache_dir",
    "kafka_libs",
    "require_tool",
]

DEFAULT_KAFKA_VERSION = "4.4.0"
CACHE_ENV = "AIOPRODUCER_KAFKA_CACHE"
# The dependency plugin is pinned: Maven 3.8 defaults to a 2.x plugin whose `copy-dependencies` behaves differently.
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
# The published kafka_2.13 pom brings no SLF4J binding (the release tarball adds one): without it the broker's
# Scala-side logging, "Kafka Server started" included, goes nowhere. log4j-slf4j-impl binds SLF4J 1.7 to Log4j 2.
_LOG4J_VERSION = "2.24.3"
_FETCH_TIMEOUT_S = 900.0
_INSTALL_HINTS = {
    "java": "install a Java 17+ runtime (e.g. `apt-get install openjdk-17-jre-headless`)",
    "mvn": "install Apache Maven (e.g. `apt-get install maven`)",
}


class KafkaSetupError(AioProducerError):
    """Real Kafka cannot be assembled or started here: a tool is missing, Maven failed, or the JVM would not run."""


def require_tool(name: str) -> str:
    """The absolute path of `java` or `mvn`, or a `KafkaSetupError` that says what to install."""
    found = shutil.which(name)
    if found is None:
        hint = _INSTALL_HINTS.get(name, f"install {name}")
        raise KafkaSetupError(f"running real Apache Kafka needs `{name}` on PATH: {hint}")
    return found


def kafka_cache_dir() -> Path:
    """`$AIOPRODUCER_KAFKA_CACHE`, else `$XDG_CACHE_HOME/aioproducer/kafka`, else `~/.cache/aioproducer/kafka`."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aioproducer" / "kafka"


def _pom(version: str) -> str:
    # kafka-tools (ProducerPerformance, FeatureCommand) with every transitive dependency excluded: the tools need
    # only clients, server-common and argparse4j, which the broker brings; their own deps would add Jetty & co.
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>aioproducer.testing</groupId><artifactId>kafka-runtime</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>{_LOG4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>{version}</version>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>
    </dependency>
  </dependencies>
</project>
"""


def _fetch(version: str, into: Path) -> None:
    mvn = require_tool("mvn")
    require_tool("java")
    work = into.parent
    (work / "pom.xml").write_text(_pom(version))
    command = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(work / "pom.xml"),
        f"{_DEPENDENCY_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={into}",
    ]
    try:
        done = subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=_FETCH_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise KafkaSetupError(f"Maven did not fetch Kafka {version}'s jars in {_FETCH_TIMEOUT_S:.0f} s") from exc
    jars = list(into.glob("*.jar")) if into.is_dir() else []
    if done.returncode != 0 or not any(j.name == f"kafka_2.13-{version}.jar" for j in jars):
        output = (done.stdout + done.stderr)[-3000:]
        raise KafkaSetupError(f"Maven could not fetch Apache Kafka {version} (exit {done.returncode}):\n{output}")


def kafka_libs(version: str = DEFAULT_KAFKA_VERSION) -> Path:
    """The directory holding Kafka `version`'s runtime jars (use it as `<dir>/*` on a classpath), fetched if absent.

    The jars are downloaded into a temporary directory beside the cache entry and renamed into place, so a run
    interrupted half-way leaves nothing behind, and two first runs at once cannot mix their files: the loser of
    the rename throws its copy away.
    """
    if not version or "/" in version or version.startswith("."):
        raise KafkaSetupError(f"not a Kafka version: {version!r}")
    target = kafka_cache_dir() / version / "lib"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".fetch-", dir=target.parent))
    try:
        staged = scratch / "lib"
        _fetch(version, staged)
        try:
            staged.rename(target)
        except OSError:
            # Another process installed the same version first (rename onto a non-empty directory fails).
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
