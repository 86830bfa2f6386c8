"""Admin work on a real cluster through confluent-kafka's AdminClient, an independent client: topics with
partitions, replication and configs, real CreatePartitions, config changes, and who leads a partition.

Owns those calls only; it uses no aioproducer client code, so what it sets up is independent of what is tested.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aioproducer.errors import AioProducerError, ConfigError, KafkaTimeoutError

__all__ = ["PartitionState", "add_partitions", "alter_topic_config", "create_topic", "partition_state"]

_POLL_S = 0.05


@dataclass(frozen=True)
class PartitionState:
    """A partition as Metadata describes it: leader node id (-1 when none), replicas and in-sync replicas."""

    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def _admin_module() -> Any:
    try:
        import confluent_kafka.admin
    except ImportError as exc:
        raise ImportError("aioproducer.testing needs confluent-kafka: `pip install aioproducer[testing]`") from exc
    return confluent_kafka.admin


def _admin(bootstrap_servers: str, client_config: Mapping[str, str] | None) -> Any:
    return _admin_module().AdminClient({"bootstrap.servers": bootstrap_servers, **(client_config or {})})


def _result(future: Any, what: str, timeout_s: float) -> Any:
    import confluent_kafka

    try:
        return future.result(timeout=timeout_s)
    except confluent_kafka.KafkaException as exc:
        raise AioProducerError(f"{what} failed: {exc}") from exc
    except concurrent.futures.TimeoutError as exc:
        raise KafkaTimeoutError(f"{what} took more than {timeout_s} s") from exc


def _states(admin: Any, topic: str, timeout_s: float) -> dict[int, PartitionState] | None:
    described = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if described is None or described.error is not None:
        return None
    return {
        p.id: PartitionState(leader=p.leader, replicas=tuple(p.replicas), isr=tuple(p.isrs))
        for p in described.partitions.values()
    }


def _wait_for_leaders(admin: Any, topic: str, partitions: int, deadline: float) -> None:
    # CreateTopics / CreatePartitions return before every broker knows the change (Java's admin client has the
    # same race): wait until Metadata shows every partition with a leader, so a producer started next finds them.
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise KafkaTimeoutError(f"topic {topic!r} did not show {partitions} partitions with leaders in time")
        states = _states(admin, topic, max(0.1, remaining))
        if states is not None and len(states) == partitions and all(s.leader >= 0 for s in states.values()):
            break
        time.sleep(_POLL_S)
    _wait_until_served(admin, topic, partitions, deadline)


def _wait_until_served(admin: Any, topic: str, partitions: int, deadline: float) -> None:
    # Kafka's broker updates its metadata cache before its ReplicaManager has made itself leader of the new
    # partitions: for a moment Metadata names a leader that answers NOT_LEADER_OR_FOLLOWER. A ListOffsets that every
    # leader answers means the partitions really take writes.
    import confluent_kafka

    admin_module = _admin_module()
    wanted = {confluent_kafka.TopicPartition(topic, p): admin_module.OffsetSpec.latest() for p in range(partitions)}
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise KafkaTimeoutError(f"the leaders of topic {topic!r} did not serve ListOffsets in time")
        futures = admin.list_offsets(wanted, request_timeout=max(0.1, min(remaining, 5.0)))
        try:
            for future in futures.values():
                future.result(timeout=remaining)
        except (confluent_kafka.KafkaException, concurrent.futures.TimeoutError):
            time.sleep(_POLL_S)
            continue
        return


def create_topic(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    *,
    replication_factor: int = -1,
    config: Mapping[str, str] | None = None,
    replica_assignment: Sequence[Sequence[int]] | None = None,
    timeout_s: float = 30.0,
    client_config: Mapping[str, str] | None = None,
) -> None:
    """Create `topic` (replication -1: the broker's `default.replication.factor`) and wait for its leaders.

    `replica_assignment` lists each partition's replicas, preferred leader first (then `partitions` must match it
    and `replication_factor` is taken from it).
    """
    if partitions < 1:
        raise ConfigError(f"partitions must be at least 1, got {partitions}")
    admin_module = _admin_module()
    admin = _admin(bootstrap_servers, client_config)
    deadline = time.monotonic() + timeout_s
    placement: dict[str, Any] = {"replication_factor": replication_factor}
    if replica_assignment is not None:
        if len(replica_assignment) != partitions:
            raise ConfigError(f"replica_assignment names {len(replica_assignment)} partitions, not {partitions}")
        placement = {"replica_assignment": [list(replicas) for replicas in replica_assignment]}
    new_topic = admin_module.NewTopic(topic, num_partitions=partitions, config=dict(config or {}), **placement)
    futures = admin.create_topics([new_topic], operation_timeout=timeout_s, request_timeout=timeout_s)
    _result(futures[topic], f"creating topic {topic!r}", timeout_s)
    _wait_for_leaders(admin, topic, partitions, deadline)


def add_partitions(
    bootstrap_servers: str,
    topic: str,
    total: int,
    *,
    timeout_s: float = 30.0,
    client_config: Mapping[str, str] | None = None,
) -> None:
    """Grow `topic` to `total` partitions with a real CreatePartitions request, and wait for the new leaders."""
    admin_module = _admin_module()
    admin = _admin(bootstrap_servers, client_config)
    deadline = time.monotonic() + timeout_s
    futures = admin.create_partitions(
        [admin_module.NewPartitions(topic, total)], operation_timeout=timeout_s, request_timeout=timeout_s
    )
    _result(futures[topic], f"growing {topic!r} to {total} partitions", timeout_s)
    _wait_for_leaders(admin, topic, total, deadline)


def alter_topic_config(
    bootstrap_servers: str,
    topic: str,
    config: Mapping[str, str],
    *,
    timeout_s: float = 30.0,
    client_config: Mapping[str, str] | None = None,
) -> None:
    """Set `config` on `topic` (IncrementalAlterConfigs SET; other settings keep their values)."""
    admin_module = _admin_module()
    admin = _admin(bootstrap_servers, client_config)
    entries = [
        admin_module.ConfigEntry(name, value, incremental_operation=admin_module.AlterConfigOpType.SET)
        for name, value in config.items()
    ]
    resource = admin_module.ConfigResource(admin_module.ResourceType.TOPIC, topic, incremental_configs=entries)
    futures = admin.incremental_alter_configs([resource], request_timeout=timeout_s)
    for future in futures.values():
        _result(future, f"altering {topic!r}'s config", timeout_s)


def partition_state(
    bootstrap_servers: str,
    topic: str,
    partition: int,
    *,
    timeout_s: float = 10.0,
    client_config: Mapping[str, str] | None = None,
) -> PartitionState:
    """What Metadata from `bootstrap_servers` says about `topic`'s `partition` now."""
    admin = _admin(bootstrap_servers, client_config)
    states = _states(admin, topic, timeout_s)
    if states is None or partition not in states:
        raise AioProducerError(f"the cluster does not describe {topic!r} partition {partition}")
    return states[partition]
