"""Cluster state built from Metadata responses, and the bookkeeping of which topics to ask about; pure.

Owns brokers, topic layouts and leaders, which of two views of a partition is newer (leader epochs, KIP-320), and
the decision of *when* to refresh (age, staleness, idle topics, as Java's `ProducerMetadata`). It never does I/O and
never reads the clock: `now_ms` arrives as an argument.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import KafkaError
from aioproducer.kafka_errors import kafka_error

__all__ = ["BrokerInfo", "ClusterMetadata", "MetadataState", "PartitionInfo", "TopicInfo"]

# Topic-level errors that mean "not there yet, keep asking" (auto-creation, elections) rather than "give up".
_TRANSIENT_TOPIC_ERRORS = frozenset(
    {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER}
)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int = -1
    error_code: int = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """One topic's layout. Satisfies `aioproducer.partitioner.TopicPartitions`."""

    name: str
    partitions: tuple[PartitionInfo, ...]
    available_partitions: tuple[int, ...]
    error_code: int = ErrorCode.NONE
    topic_id: uuid.UUID | None = None  # Metadata v10+ (KIP-516); None when the broker did not say

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    def leader(self, partition: int) -> int:
        """The leader's node id, or -1 when unknown or the partition does not exist."""
        if 0 <= partition < len(self.partitions):
            return self.partitions[partition].leader
        return -1


@dataclass(frozen=True)
class ClusterMetadata:
    """An immutable snapshot of what the cluster told us."""

    brokers: Mapping[int, BrokerInfo] = field(default_factory=dict)
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)
    topic_errors: Mapping[str, int] = field(default_factory=dict)
    cluster_id: str | None = None
    controller_id: int = -1

    @classmethod
    def from_response(cls, response: Mapping[str, Any]) -> ClusterMetadata:
        """Build a snapshot from a decoded Metadata response (any version we speak)."""
        brokers = {
            b["node_id"]: BrokerInfo(b["node_id"], b["host"], b["port"], b.get("rack"))
            for b in response.get("brokers", ())
        }
        topics: dict[str, TopicInfo] = {}
        errors: dict[str, int] = {}
        for t in response.get("topics", ()):
            name = t["name"]
            if name is None:
                continue
            if t["error_code"] != ErrorCode.NONE:
                errors[name] = t["error_code"]
                continue
            # A leader missing from the broker list (brokers leave it while down) is as good as unknown: nobody
            # could connect to it, and "unknown" is what makes the sender ask for metadata again.
            parts = sorted(
                (
                    PartitionInfo(
                        p["partition_index"],
                        p["leader_id"] if p["leader_id"] in brokers else -1,
                        p.get("leader_epoch", -1),
                        p["error_code"],
                    )
                    for p in t["partitions"]
                ),
                key=lambda p: p.partition,
            )
            topic_id = t.get("topic_id")
            topic_id = topic_id if isinstance(topic_id, uuid.UUID) and topic_id.int else None
            topics[name] = TopicInfo(name, tuple(parts), _available(parts, brokers), topic_id=topic_id)
        return cls(brokers, topics, errors, response.get("cluster_id"), response.get("controller_id", -1))

    def merge(self, newer: ClusterMetadata, requested: Iterable[str]) -> ClusterMetadata:
        """Fold a response for `requested` topics into this snapshot; topics not asked about keep their layout."""
        asked = set(requested)
        brokers = newer.brokers or self.brokers
        topics = {name: info for name, info in self.topics.items() if name not in asked}
        for name, info in newer.topics.items():
            known = self.topics.get(name)
            topics[name] = info if known is None else _newest_leaders(known, info, brokers)
        errors = {name: code for name, code in self.topic_errors.items() if name not in asked}
        errors.update(newer.topic_errors)
        return ClusterMetadata(brokers, topics, errors, newer.cluster_id, newer.controller_id)

    def with_leader(self, topic: str, partition: int, leader: int, leader_epoch: int) -> ClusterMetadata:
        """Apply a leader hint (KIP-951) when it is newer than what we know."""
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < info.num_partitions or leader not in self.brokers:
            return self
        current = info.partitions[partition]
        if leader_epoch < current.leader_epoch or (leader_epoch == current.leader_epoch and current.leader == leader):
            return self
        parts = list(info.partitions)
        parts[partition] = PartitionInfo(partition, leader, leader_epoch)
        topics = dict(self.topics)
        topics[topic] = TopicInfo(topic, tuple(parts), _available(parts, self.brokers), topic_id=info.topic_id)
        return ClusterMetadata(self.brokers, topics, self.topic_errors, self.cluster_id, self.controller_id)

    def topic_error(self, topic: str) -> KafkaError | None:
        """A topic error that should fail waiting senders now (not a transient one such as auto-creation)."""
        code = self.topic_errors.get(topic)
        if code is None or code in _TRANSIENT_TOPIC_ERRORS:
            return None
        return kafka_error(code, f"metadata for topic {topic!r}: error {code}")


def _available(parts: Iterable[PartitionInfo], brokers: Mapping[int, BrokerInfo]) -> tuple[int, ...]:
    return tuple(p.partition for p in parts if p.leader >= 0 and p.leader in brokers)


def _newest_leaders(known: TopicInfo, answer: TopicInfo, brokers: Mapping[int, BrokerInfo]) -> TopicInfo:
    """The answer's layout, except for partitions we know under a newer leader epoch (Java's
    Metadata.updateLatestMetadata, KIP-320): brokers' metadata caches lag, so a Metadata answer may be older than
    what we hold, e.g. a KIP-951 leader hint. Equal epochs take the answer; an answer without epochs (before
    Metadata v7) is taken as it is; so is a topic whose id changed (deleted and created again: epochs restart)."""
    if known.topic_id is not None and answer.topic_id is not None and known.topic_id != answer.topic_id:
        return answer
    parts = list(answer.partitions)
    kept = False
    for held in known.partitions[: len(parts)]:
        fresh = parts[held.partition]
        if fresh.leader_epoch >= 0 and held.leader_epoch > fresh.leader_epoch:
            # A kept leader that left the broker list is as good as unknown (see from_response).
            leader = held.leader if held.leader in brokers else -1
            parts[held.partition] = PartitionInfo(held.partition, leader, held.leader_epoch, held.error_code)
            kept = True
    if not kept:
        return answer
    return TopicInfo(answer.name, tuple(parts), _available(parts, brokers), answer.error_code, answer.topic_id)


class MetadataState:
    """Which topics the producer needs, and when the next Metadata request is due.

    Mirrors Java's ProducerMetadata: a topic is kept while used (`metadata_max_idle_ms`), the whole view is
    refreshed every `metadata_max_age_ms`, and at once (after `retry_backoff_ms`) when asked to.
    """

    def __init__(self, *, max_age_ms: int, max_idle_ms: int, retry_backoff_ms: int) -> None:
        self.cluster = ClusterMetadata()
        self._max_age_ms = max_age_ms
        self._max_idle_ms = max_idle_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._last_used_ms: dict[str, int] = {}
        self._new_topics: set[str] = set()
        self._last_refresh_ms: int | None = None
        self._last_attempt_ms = -(1 << 62)
        self._update_requested = True
        # Java's Metadata.requestVersion: bumped by every ask for an update, so that a response to a request sent
        # before the latest ask does not clear it (that topic or error would otherwise wait for max_age).
        self._update_version = 0
        self._attempt_version = 0

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._last_used_ms)

    def add_topic(self, topic: str, now_ms: int) -> None:
        """Start tracking a topic; a topic not known yet asks for an update at once."""
        if topic not in self._last_used_ms:
            self._new_topics.add(topic)
            self.request_update()
        self._last_used_ms[topic] = now_ms

    def touch(self, topic: str, now_ms: int) -> None:
        """The topic is in use at `now_ms` (the appender calls this once per new batch, Java's ProducerMetadata.add
        once per send): it stays in refreshes until unused for `metadata_max_idle_ms`."""
        self._last_used_ms[topic] = now_ms

    def request_update(self) -> None:
        self._update_requested = True
        self._update_version += 1

    def next_update_delay_ms(self, now_ms: int) -> int:
        """0 when a Metadata request should go out now, else how long until one is due."""
        backoff_left = self._last_attempt_ms + self._retry_backoff_ms - now_ms
        if self._update_requested or self._last_refresh_ms is None:
            return max(0, backoff_left)
        return max(0, backoff_left, self._last_refresh_ms + self._max_age_ms - now_ms)

    def topics_to_request(self, now_ms: int, in_use: Iterable[str] = ()) -> list[str]:
        """Topics for the next request, after dropping those idle for longer than `metadata_max_idle_ms`. Topics
        `in_use` (records of theirs are not delivered yet) count as used now: records waiting for a leader that
        moved must see the new one, however long since their topic last started a batch."""
        for topic in in_use:
            if topic in self._last_used_ms:
                self._last_used_ms[topic] = now_ms
        idle = [t for t, used in self._last_used_ms.items() if now_ms - used > self._max_idle_ms]
        for topic in idle:
            del self._last_used_ms[topic]
            self._new_topics.discard(topic)
        return sorted(self._last_used_ms)

    def on_attempt(self, now_ms: int) -> None:
        self._last_attempt_ms = now_ms
        self._attempt_version = self._update_version

    def on_response(self, response: ClusterMetadata, requested: Iterable[str], now_ms: int) -> None:
        requested = list(requested)
        self.cluster = self.cluster.merge(response, requested)
        self._last_refresh_ms = now_ms
        self._update_requested = self._update_version != self._attempt_version or any(
            t not in self.cluster.topics or not self.cluster.topics[t].available_partitions
            for t in requested
            if self.cluster.topic_error(t) is None
        )
        self._new_topics.difference_update(requested)

    def on_failure(self, now_ms: int) -> None:
        self._last_attempt_ms = now_ms
        self._update_requested = True

    def pick_broker(
        self, rng: random.Random, usable: Callable[[int], bool] = lambda node_id: True
    ) -> BrokerInfo | None:
        """A known broker to ask for metadata, of those `usable` (not backing off); None means go back to the
        bootstrap list (re-bootstrap)."""
        brokers = [broker for broker in self.cluster.brokers.values() if usable(broker.node_id)]
        return rng.choice(brokers) if brokers else None
