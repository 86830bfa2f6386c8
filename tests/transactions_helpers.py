"""Helpers for the transaction tests on real Kafka: set the cluster's `transaction.version`, find a transactional id's
coordinator, and read a topic as read_committed / read_uncommitted consumers and their last stable offset."""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import Any

from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol import ApiKey, CoordinatorType, coordinators_from_response, find_coordinator_body
from aioproducer.testing import KafkaCluster, kafka_libs, read_back

__all__ = ["coordinator_of", "last_stable_offsets", "set_transaction_version", "values"]


def set_transaction_version(cluster: KafkaCluster, level: int, timeout_s: float = 60.0) -> None:
    """Upgrade or downgrade the cluster's finalized `transaction.version` with Kafka's own FeatureCommand, then wait
    until a broker reports it in ApiVersions (a new client reads it there)."""
    verb = "upgrade" if level >= 2 else "downgrade"
    command = [
        "java",
        "-cp",
        f"{kafka_libs(cluster.version)}/*",
        "org.apache.kafka.tools.FeatureCommand",
        "--bootstrap-server",
        cluster.bootstrap_servers,
        verb,
        "--feature",
        f"transaction.version={level}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"FeatureCommand {verb} transaction.version={level} failed: {done.stdout}{done.stderr}")
    deadline = time.monotonic() + timeout_s
    while asyncio.run(_reported_transaction_version(cluster.bootstrap_servers)) != level:
        if time.monotonic() > deadline:
            raise TimeoutError(f"brokers do not report transaction.version={level}")
        time.sleep(0.2)


async def _open(bootstrap: str) -> BrokerConnection:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return await BrokerConnection.open(
        host, int(port), node_id=-1, client_id="txn-test", request_timeout_ms=10000, connect_timeout_ms=10000
    )


async def _reported_transaction_version(bootstrap: str) -> int:
    conn = await _open(bootstrap)
    try:
        return conn.features.transaction_version
    finally:
        conn.close()
        await asyncio.sleep(0)  # the transport closes on the next loop iteration: before asyncio.run ends


async def coordinator_of(bootstrap: str, transactional_id: str) -> int:
    """The node id coordinating `transactional_id` now (a FindCoordinator of our own, retried while loading)."""
    for _ in range(100):
        conn = await _open(bootstrap)
        try:
            version = conn.versions[ApiKey.FIND_COORDINATOR]
            body = find_coordinator_body(version, CoordinatorType.TRANSACTION, [transactional_id])
            response = await conn.request(ApiKey.FIND_COORDINATOR, body, version=version)
            found = coordinators_from_response(version, response, [transactional_id])[transactional_id]
            if found.error_code == 0:
                return found.node_id
        finally:
            conn.close()
        await asyncio.sleep(0.2)
    raise TimeoutError(f"no coordinator for {transactional_id!r}")


def values(bootstrap: str, topic: str, isolation_level: str) -> list[bytes | None]:
    """The values of every record of `topic` (partition then offset order) as a consumer with that isolation sees."""
    return [record.value for record in read_back(bootstrap, topic, isolation_level=isolation_level)]


def last_stable_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's last stable offset: ListOffsets(latest) with READ_COMMITTED, asked by librdkafka's admin."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = {confluent_kafka.TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    futures: dict[Any, Any] = admin.list_offsets(
        request, isolation_level=confluent_kafka.IsolationLevel.READ_COMMITTED, request_timeout=15
    )
    return {tp.partition: future.result().offset for tp, future in futures.items()}
