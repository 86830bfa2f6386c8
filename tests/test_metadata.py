"""The pure cluster model: snapshots from Metadata responses, refresh timing, idle topics, leader hints."""

from __future__ import annotations

from typing import Any

from aioproducer.error_codes import ErrorCode
from aioproducer.network.metadata import ClusterMetadata, MetadataState


def response(partitions: int = 3, *, leader: int = 1, topic_error: int = 0, name: str = "t") -> dict[str, Any]:
    return {
        "brokers": [
            {"node_id": 1, "host": "h1", "port": 9092, "rack": None},
            {"node_id": 2, "host": "h2", "port": 9092},
        ],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [
            {
                "name": name,
                "error_code": topic_error,
                "partitions": [
                    {"partition_index": p, "leader_id": leader if p != 1 else -1, "leader_epoch": 3, "error_code": 0}
                    for p in reversed(range(partitions))
                ],
            }
        ],
    }


def test_snapshot_sorts_partitions_and_lists_available_ones() -> None:
    cluster = ClusterMetadata.from_response(response(3))
    info = cluster.topics["t"]
    assert info.num_partitions == 3
    assert [p.partition for p in info.partitions] == [0, 1, 2]
    assert info.available_partitions == (0, 2)
    assert info.leader(0) == 1 and info.leader(1) == -1 and info.leader(7) == -1


def test_transient_topic_errors_are_not_failures_but_authorization_is() -> None:
    transient = ClusterMetadata.from_response(response(topic_error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    assert "t" not in transient.topics and transient.topic_error("t") is None
    denied = ClusterMetadata.from_response(response(topic_error=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    error = denied.topic_error("t")
    assert error is not None and error.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_merge_keeps_topics_not_asked_about() -> None:
    first = ClusterMetadata.from_response(response(name="a"))
    second = first.merge(ClusterMetadata.from_response(response(name="b")), ["b"])
    assert set(second.topics) == {"a", "b"}


def test_leader_hint_moves_partition_only_when_newer() -> None:
    cluster = ClusterMetadata.from_response(response(3, leader=1))
    moved = cluster.with_leader("t", 0, 2, 4)
    assert moved.topics["t"].leader(0) == 2
    assert moved.with_leader("t", 0, 1, 3).topics["t"].leader(0) == 2  # older epoch ignored
    assert cluster.with_leader("t", 0, 99, 9) is cluster  # unknown broker ignored


def test_refresh_timing_new_topics_age_and_backoff() -> None:
    state = MetadataState(max_age_ms=1000, max_idle_ms=5000, retry_backoff_ms=100)
    assert state.next_update_delay_ms(0) == 0
    state.add_topic("t", 0)
    state.on_attempt(0)
    # The topic is still being created: ask again soon (after the retry backoff), not after max_age.
    state.on_response(ClusterMetadata.from_response(response(topic_error=5)), ["t"], 10)
    assert state.next_update_delay_ms(10) == 90
    state.on_attempt(100)
    state.on_response(ClusterMetadata.from_response(response(2, leader=1)), ["t"], 110)
    assert state.next_update_delay_ms(110) == 1000
    assert state.next_update_delay_ms(1110) == 0
    state.request_update()
    assert state.next_update_delay_ms(150) == 50  # backoff since the last attempt at 100


def test_idle_topics_are_dropped_from_refreshes() -> None:
    state = MetadataState(max_age_ms=1000, max_idle_ms=5000, retry_backoff_ms=100)
    state.add_topic("old", 0)
    state.add_topic("new", 4000)
    assert state.topics_to_request(6000) == ["new"]
    assert state.topics == {"new"}


def test_an_update_asked_for_while_a_request_is_in_flight_is_not_lost() -> None:
    """A topic first used (or an update asked for) while a Metadata request was in flight was forgotten when that
    older request's answer arrived: the topic then waited metadata_max_age_ms (5 minutes), and the record failed
    with MetadataTimeoutError after max_block_ms. Seen with the first record sent a moment after start()."""
    state = MetadataState(max_age_ms=300_000, max_idle_ms=300_000, retry_backoff_ms=100)
    state.on_attempt(0)
    requested = state.topics_to_request(0)  # the producer's first request: no topics yet
    state.add_topic("t", 5)  # the first record arrives while it is in flight
    state.on_response(ClusterMetadata.from_response(response(name="other")), requested, 10)
    assert state.next_update_delay_ms(100) == 0
    state.on_attempt(100)
    state.request_update()  # e.g. NOT_LEADER_OR_FOLLOWER while this one is in flight
    state.on_response(ClusterMetadata.from_response(response(name="t")), state.topics_to_request(100), 110)
    assert state.next_update_delay_ms(200) == 0
    state.on_attempt(200)
    state.on_response(ClusterMetadata.from_response(response(name="t")), ["t"], 210)
    assert state.next_update_delay_ms(300) == 300_000 - 90
