"""The Apache Kafka releases the suite runs on, with no imports so that `noxfile.py` can read it before anything is
installed. The default judge is `aioproducer.testing.DEFAULT_KAFKA_VERSION` (the newest release; a test keeps the
two in step)."""

from __future__ import annotations

# The last 3.x line: the core broker suites run on it again in every `nox -s tests` (version negotiation with an
# older broker: Produce up to v11, no KIP-896 floors, no KIP-966 eligible leader replicas).
OLDER_KAFKA_VERSION = "3.9.2"

# The newest patch release of every minor from the 3.9 line on: `nox -s compat` runs the core suites on each.
COMPAT_KAFKA_VERSIONS = ("3.9.2", "4.0.2", "4.1.2", "4.2.2", "4.3.1", "4.4.0")

# What proves the producer against a broker: run on the older line in `nox -s tests`, on each release in compat.
# Each holds no expectation tied to one release (test_protocol_kafka and test_transactions_kafka do: they run on the
# default judge and on the older line within the suite itself).
CORE_BROKER_SUITES = (
    "tests/test_producer_e2e.py",
    "tests/test_kafka_semantics.py",
    "tests/test_security_kafka.py",
    "tests/test_protocol_brokers.py",
)
