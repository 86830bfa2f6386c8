"""Leader epochs (KIP-320) decide which of two views of a partition is newer: a Metadata response from a broker whose
cache lags must not undo a newer leader, whether that came from an earlier refresh or from a KIP-951 hint."""

from __future__ import annotations

import uuid
from typing import Any

from aioproducer.network.metadata import ClusterMetadata, MetadataState

TOPIC_ID = uuid.UUID(int=0xABC)
BROKERS = [{"node_id": n, "host": "127.0.0.1", "port": 9000 + n, "rack": None} for n in (1, 2, 3)]


def response(
    leaders: list[tuple[int, int]], *, topic_id: uuid.UUID | None = TOPIC_ID, brokers: list[int] | None = None
) -> ClusterMetadata:
    """A decoded Metadata response for topic "t" with (leader, leader_epoch) per partition."""
    topic: dict[str, Any] = {
        "name": "t",
        "error_code": 0,
        "partitions": [
            {"partition_index": i, "leader_id": leader, "leader_epoch": epoch, "error_code": 0}
            for i, (leader, epoch) in enumerate(leaders)
        ],
    }
    if topic_id is not None:
        topic["topic_id"] = topic_id
    listed = [b for b in BROKERS if brokers is None or b["node_id"] in brokers]
    return ClusterMetadata.from_response({"brokers": listed, "topics": [topic]})


def leaders(cluster: ClusterMetadata) -> list[tuple[int, int]]:
    return [(p.leader, p.leader_epoch) for p in cluster.topics["t"].partitions]


def state_after(*responses: ClusterMetadata) -> MetadataState:
    state = MetadataState(max_age_ms=300_000, max_idle_ms=300_000, retry_backoff_ms=100)
    state.add_topic("t", 0)
    for now, answer in enumerate(responses):
        state.on_response(answer, ["t"], now)
    return state


def test_a_lagging_brokers_answer_does_not_undo_a_leader_hint() -> None:
    """Metadata carried no leader-epoch comparison: after a KIP-951 hint moved partition 0 to node 2 (epoch 6), an
    answer from a broker whose cache still said node 1 (epoch 5) moved it back, and the batches went to the old
    leader again."""
    state = state_after(response([(1, 5), (3, 4)]))
    state.cluster = state.cluster.with_leader("t", 0, 2, 6)
    state.on_response(response([(1, 5), (3, 4)]), ["t"], 10)
    assert leaders(state.cluster) == [(2, 6), (3, 4)]


def test_an_older_refresh_does_not_undo_a_newer_one() -> None:
    state = state_after(response([(2, 7), (3, 4)]), response([(1, 5), (3, 4)]))
    assert leaders(state.cluster) == [(2, 7), (3, 4)]
    assert state.cluster.topics["t"].available_partitions == (0, 1)


def test_a_newer_or_equal_epoch_wins() -> None:
    state = state_after(response([(1, 5), (3, 4)]), response([(2, 6), (3, 4)]))
    assert leaders(state.cluster) == [(2, 6), (3, 4)]
    # Same epoch: the answer is taken, as Java's Metadata.updateLatestMetadata does (newEpoch >= currentEpoch).
    state.on_response(response([(2, 6), (1, 4)]), ["t"], 10)
    assert leaders(state.cluster) == [(2, 6), (1, 4)]


def test_an_answer_without_epochs_is_taken_as_it_is() -> None:
    """Brokers before Metadata v7 send no leader epoch: nothing to compare, the answer wins (as in Java)."""
    state = state_after(response([(1, 5), (3, 4)]), response([(2, -1), (3, -1)]))
    assert leaders(state.cluster) == [(2, -1), (3, -1)]


def test_a_recreated_topic_starts_its_epochs_over() -> None:
    """A topic deleted and created again under the same name has a new topic id: its epochs restart, so the lower
    epoch is the current one (Java resets its last seen epochs when the topic id changes)."""
    state = state_after(response([(1, 9), (3, 9)]), response([(2, 0), (3, 0), (1, 0)], topic_id=uuid.UUID(int=7)))
    assert leaders(state.cluster) == [(2, 0), (3, 0), (1, 0)]


def test_new_partitions_are_added_and_kept_leaders_must_still_be_brokers() -> None:
    # The topic grew, and the lagging answer lists partition 0 with an old epoch while its newer leader, node 2,
    # has left the broker list: the newer epoch is kept, with its leader unknown until a refresh names it.
    state = state_after(response([(2, 7), (3, 4)]))
    state.on_response(response([(1, 5), (3, 4), (1, 0)], brokers=[1, 3]), ["t"], 10)
    assert leaders(state.cluster) == [(-1, 7), (3, 4), (1, 0)]
    assert state.cluster.topics["t"].available_partitions == (1, 2)


def test_a_hint_keeps_the_topic_id() -> None:
    cluster = response([(1, 5)]).with_leader("t", 0, 2, 6)
    assert cluster.topics["t"].topic_id == TOPIC_ID
