"""Partitioners: murmur2 bit-exact with Java, keyed placement over all partitions, uniform sticky switching
(KIP-794) and round-robin, with seeded randomness."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from kafka_reference import MURMUR2_PARTITION_COUNTS, murmur2_vectors

from aioproducer import Producer
from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.deliveries.delivery import BatchOutcome
from aioproducer.errors import ConfigError, InvalidRecordError, UnknownPartitionError
from aioproducer.partitioner import (
    DefaultPartitioner,
    Partitioner,
    PureDefaultPartitioner,
    RoundRobinPartitioner,
    TopicPartitions,
    load_stats,
    murmur2,
    next_partition,
    partition_for_key,
)
from aioproducer.records.compression import CompressionType
from aioproducer.testing import MockCluster


@pytest.fixture(scope="module")
def java_vectors() -> list[dict]:
    """Kafka's own `Utils.murmur2` and `BuiltInPartitioner.partitionForKey` for a fixed set of keys."""
    return murmur2_vectors()


@dataclass
class Topic:
    """A stand-in for a metadata object: `TopicPartitions` by structure."""

    num_partitions: int
    available_partitions: Sequence[int] = field(default=())

    @classmethod
    def healthy(cls, n: int) -> Topic:
        return cls(n, tuple(range(n)))


def _keyless_run(partitioner: Partitioner, topic: TopicPartitions, calls: int, size: int = 100) -> list[int]:
    return [partitioner.partition("t", None, size, topic) for _ in range(calls)]


def _runs(partitions: list[int]) -> list[tuple[int, int]]:
    """(partition, length) of each run of equal consecutive values."""
    runs: list[tuple[int, int]] = []
    for p in partitions:
        if runs and runs[-1][0] == p:
            runs[-1] = (p, runs[-1][1] + 1)
        else:
            runs.append((p, 1))
    return runs


def test_murmur2_matches_java(java_vectors: list[dict]) -> None:
    mismatches = []
    for vector in java_vectors:
        key = bytes.fromhex(vector["key_hex"])
        partitions = {str(n): partition_for_key(key, n) for n in MURMUR2_PARTITION_COUNTS}
        ours = {"murmur2": murmur2(key), "partition": partitions}
        if ours != {"murmur2": vector["murmur2"], "partition": vector["partition"]}:
            mismatches.append(f"{vector['key_hex'][:40]}: ours {ours}, Java {vector}")
    assert len(java_vectors) > 80 and not mismatches, "\n".join(mismatches)


def test_partition_for_key_needs_partitions() -> None:
    with pytest.raises(UnknownPartitionError):
        partition_for_key(b"k", 0)


def test_partition_for_key_rejects_text_keys() -> None:
    with pytest.raises(InvalidRecordError):
        partition_for_key("text", 3)  # type: ignore[arg-type]


def test_keyed_records_hash_over_all_partitions_even_unavailable_ones(java_vectors: list[dict]) -> None:
    partitioner = DefaultPartitioner()
    degraded = Topic(12, (0, 1))  # leaders of 2..11 unknown: a key must not move (Java's partitionForKey)
    for vector in java_vectors:
        key = bytes.fromhex(vector["key_hex"])
        expected = vector["partition"]["12"]
        assert partitioner.partition("t", key, 100, degraded) == expected
        assert partitioner.partition("t", key, 100, degraded) == expected  # second call: from the cache


def test_keyed_placement_follows_the_partition_count(java_vectors: list[dict]) -> None:
    partitioner = DefaultPartitioner()
    vector = java_vectors[3]
    key = bytes.fromhex(vector["key_hex"])
    for n in (count for count in MURMUR2_PARTITION_COUNTS if count <= 1009):  # a layout per partition: small ones
        assert partitioner.partition("t", key, 10, Topic.healthy(n)) == vector["partition"][str(n)]


def test_hash_cache_stays_bounded_and_correct_past_its_size() -> None:
    partitioner = PureDefaultPartitioner()  # the compiled twin keeps no cache: it hashes in C
    topic = Topic.healthy(100)
    keys = [b"user-%d" % i for i in range(40_000)]
    assert [partitioner.partition("t", k, 1, topic) for k in keys[:50]] == [
        partition_for_key(k, 100) for k in keys[:50]
    ]
    for key in keys:
        partitioner.partition("t", key, 1, topic)
    assert len(partitioner._hashes) <= 16384  # white-box: the memory bound is the point of this test
    assert [partitioner.partition("t", k, 1, topic) for k in keys[:50]] == [
        partition_for_key(k, 100) for k in keys[:50]
    ]


def test_bytes_like_keys_hash_like_bytes() -> None:
    partitioner = DefaultPartitioner()
    topic = Topic.healthy(100)
    key = b"some-key"
    expected = partition_for_key(key, 100)
    assert partitioner.partition("t", bytearray(key), 1, topic) == expected
    assert partitioner.partition("t", memoryview(key), 1, topic) == expected


@pytest.mark.parametrize("key", ["text", 12345])
def test_non_bytes_keys_raise_invalid_record(key: object) -> None:
    with pytest.raises(InvalidRecordError):
        DefaultPartitioner().partition("t", key, 1, Topic.healthy(3))  # type: ignore[arg-type]


def test_keyed_record_for_a_topic_without_partitions_raises() -> None:
    with pytest.raises(UnknownPartitionError):
        DefaultPartitioner().partition("t", b"k", 1, Topic(0))


def test_keyless_records_stick_until_batch_size_bytes_then_switch() -> None:
    partitioner = DefaultPartitioner(batch_size=1000, rng=random.Random(7))
    partitions = _keyless_run(partitioner, Topic.healthy(6), 400, size=100)
    runs = _runs(partitions)
    assert all(length == 10 for _, length in runs)  # 10 records of 100 bytes reach batch_size
    assert len(runs) == 40  # each switch really moves: consecutive runs never share a partition


def test_a_record_larger_than_batch_size_still_goes_somewhere_and_forces_a_switch() -> None:
    partitioner = DefaultPartitioner(batch_size=1000, rng=random.Random(1))
    partitions = _keyless_run(partitioner, Topic.healthy(4), 20, size=5000)
    assert all(length == 1 for _, length in _runs(partitions))


def test_sticky_switching_is_roughly_uniform() -> None:
    partitioner = DefaultPartitioner(batch_size=100, rng=random.Random(3))
    counts = Counter(_keyless_run(partitioner, Topic.healthy(5), 6000, size=100))
    assert set(counts) == set(range(5))
    assert max(counts.values()) - min(counts.values()) < 0.15 * 6000 / 5


def test_keyless_records_use_only_available_partitions() -> None:
    partitioner = DefaultPartitioner(batch_size=100, rng=random.Random(11))
    partitions = _keyless_run(partitioner, Topic(10, (2, 5, 7)), 500)
    assert set(partitions) == {2, 5, 7}


def test_keyless_records_use_any_partition_when_none_is_available() -> None:
    partitioner = DefaultPartitioner(batch_size=100, rng=random.Random(5))
    assert set(_keyless_run(partitioner, Topic(4, ()), 400)) == {0, 1, 2, 3}


def test_sticky_partition_moves_when_its_leader_goes_away() -> None:
    partitioner = DefaultPartitioner(batch_size=10**9, rng=random.Random(2))
    topic = Topic.healthy(4)
    current = partitioner.partition("t", None, 1, topic)
    assert _keyless_run(partitioner, topic, 20) == [current] * 20
    # Layouts are immutable snapshots: a leader change arrives as a new layout object.
    topic = Topic(4, tuple(p for p in range(4) if p != current))
    moved = partitioner.partition("t", None, 1, topic)
    assert moved != current and moved in topic.available_partitions
    assert _keyless_run(partitioner, topic, 20) == [moved] * 20


def test_single_available_partition_is_reused_after_a_switch() -> None:
    partitioner = DefaultPartitioner(batch_size=100, rng=random.Random(9))
    assert set(_keyless_run(partitioner, Topic(3, (1,)), 50)) == {1}


def test_topics_stick_independently() -> None:
    partitioner = DefaultPartitioner(batch_size=1000, rng=random.Random(4))
    topic = Topic.healthy(50)
    a = partitioner.partition("a", None, 100, topic)
    for _ in range(5):
        partitioner.partition("b", None, 900, topic)  # b switches several times
    assert [partitioner.partition("a", None, 100, topic) for _ in range(9)] == [a] * 9


def test_ignore_keys_makes_keyed_records_sticky() -> None:
    partitioner = DefaultPartitioner(batch_size=1000, ignore_keys=True, rng=random.Random(6))
    topic = Topic.healthy(8)
    partitions = [partitioner.partition("t", b"key-%d" % i, 100, topic) for i in range(100)]
    assert all(length == 10 for _, length in _runs(partitions))


def test_injected_rng_makes_choices_reproducible() -> None:
    topic = Topic.healthy(16)
    first = _keyless_run(DefaultPartitioner(batch_size=300, rng=random.Random(42)), topic, 300)
    second = _keyless_run(DefaultPartitioner(batch_size=300, rng=random.Random(42)), topic, 300)
    assert first == second
    assert len(set(first)) > 4


def test_keyless_records_for_a_topic_without_partitions_raise() -> None:
    with pytest.raises(UnknownPartitionError):
        DefaultPartitioner().partition("t", None, 1, Topic(0))


@pytest.mark.parametrize("batch_size", [0, -5, True, 1.5])
def test_bad_batch_size_raises_config_error(batch_size: object) -> None:
    with pytest.raises(ConfigError):
        DefaultPartitioner(batch_size)  # type: ignore[arg-type]


def test_round_robin_cycles_over_available_partitions_per_topic() -> None:
    partitioner = RoundRobinPartitioner()
    topic = Topic(6, (1, 3, 4))
    assert [partitioner.partition("a", b"same-key", 10, topic) for _ in range(7)] == [1, 3, 4, 1, 3, 4, 1]
    assert [partitioner.partition("b", None, 10, Topic(3, ())) for _ in range(4)] == [0, 1, 2, 0]
    assert partitioner.partition("a", None, 10, topic) == 3  # topic a kept its place


def test_round_robin_on_a_topic_without_partitions_raises() -> None:
    with pytest.raises(UnknownPartitionError):
        RoundRobinPartitioner().partition("t", None, 1, Topic(0))


def test_both_partitioners_satisfy_the_protocol() -> None:
    partitioners: list[Partitioner] = [DefaultPartitioner(), RoundRobinPartitioner()]
    topic: TopicPartitions = Topic.healthy(3)
    assert all(0 <= p.partition("t", None, 1, topic) < 3 for p in partitioners)


# -- adaptive partitioning (KIP-794) ---------------------------------------------------------------------------------


def test_load_stats_invert_queue_sizes_into_a_cumulative_frequency_table_as_java_does() -> None:
    # Java's BuiltInPartitioner.updatePartitionLoadStats comment: queue sizes 0 3 1 -> weights 4 1 3 -> 4 5 8.
    stats = load_stats([0, 3, 1], [0, 1, 2], 3)
    assert stats is not None and (stats.cumulative, stats.partition_ids) == ([4, 5, 8], [0, 1, 2])
    assert load_stats([2, 2, 2], [0, 1, 2], 3) is None, "equal queues: nothing to gain, uniform sticky"
    left_out = load_stats([2, 2], [0, 2], 3)  # partition 1's broker is unavailable: equal, but one left out
    assert left_out is not None and left_out.partition_ids == [0, 2]
    assert load_stats([0], [0], 1) is None, "a topic of one partition"
    assert load_stats([], [], 3) is None, "every partition left out: uniform over the available ones"


def test_a_switch_draws_partitions_by_their_weight_and_never_one_left_out() -> None:
    rng = random.Random(17)
    stats = load_stats([0, 9, 4], [0, 1, 2], 3)
    drawn = Counter(next_partition(range(3), -1, rng, stats, 3) for _ in range(20_000))
    # weights 10, 1, 6 of 17
    assert abs(drawn[0] / 20_000 - 10 / 17) < 0.02 and abs(drawn[1] / 20_000 - 1 / 17) < 0.01
    assert abs(drawn[2] / 20_000 - 6 / 17) < 0.02
    skipping = load_stats([3, 3], [0, 2], 3)
    assert {next_partition(range(3), 0, rng, skipping, 3) for _ in range(500)} == {0, 2}
    # Until the accumulator holds a queue for every partition the weights say nothing about the others: uniform.
    partial = load_stats([0, 5], [0, 1], 2)
    assert {next_partition(range(4), 0, rng, partial, 4) for _ in range(500)} == {1, 2, 3}


def test_keyless_records_go_less_to_a_partition_that_falls_behind_and_keyed_ones_do_not_move() -> None:
    partitioner = DefaultPartitioner(batch_size=100, rng=random.Random(8))
    topic = Topic.healthy(3)
    partitioner.update_load_stats("t", [0, 12, 0], [0, 1, 2], 3)
    keyless = Counter(_keyless_run(partitioner, topic, 3000))
    assert keyless[1] < keyless[0] / 5 and keyless[1] < keyless[2] / 5
    keyed = [partitioner.partition("t", b"user-%d" % i, 100, topic) for i in range(50)]
    assert keyed == [partition_for_key(b"user-%d" % i, 3) for i in range(50)]
    partitioner.update_load_stats("t", [1, 1, 1], [0, 1, 2], 3)  # caught up: uniform again
    assert min(Counter(_keyless_run(partitioner, topic, 3000)).values()) > 800


class Batches:
    """The accumulator's side of `follow_batches`: each partition's newest batch fills at `ratio` of the size the
    partitioner tallies (record sizes are estimates above the bytes a record takes in its batch)."""

    def __init__(self, batch_size: int, ratio: float = 0.9, full: bool | None = None) -> None:
        self.batch_size, self.ratio, self.full = batch_size, ratio, full
        self.bytes: Counter[int] = Counter()
        self.looks = 0

    def record(self, partition: int, size: int) -> None:
        self.bytes[partition] += int(size * self.ratio)

    def missing_bytes(self, topic: str, partition: int) -> int:
        self.looks += 1
        if self.full is not None:
            return 0 if self.full else 1
        return max(self.batch_size - self.bytes[partition], 0)


def _followed_run(kind: type[DefaultPartitioner], batches: Batches, calls: int, size: int = 100) -> list[int]:
    partitioner = kind(batch_size=batches.batch_size, rng=random.Random(7))
    partitioner.follow_batches(batches.missing_bytes)
    chosen = []
    for _ in range(calls):
        partition = partitioner.partition("t", None, size, Topic.healthy(6))
        batches.record(partition, size)
        chosen.append(partition)
        if len(chosen) > 1 and chosen[-2] != partition:
            batches.bytes[chosen[-2]] = 0  # the batch left behind is sent: the partition starts a new one
    return chosen


@pytest.mark.parametrize("kind", [DefaultPartitioner, PureDefaultPartitioner])
def test_a_sticky_partition_following_its_batches_moves_on_only_once_its_newest_batch_is_full(
    kind: type[DefaultPartitioner],
) -> None:
    """The sticky partitioner moved on once its tally of record sizes reached batch_size, while the batch it left
    held about 9 % less (the sizes are estimates above the bytes in the batch): the batch was not full, so it waited
    for linger_ms rather than going out at once. Java moves on only once the batch is full (KIP-794's
    `allBatchesFull`): 12 records of 90 bytes fill 1000, where 10 would reach the tally."""
    batches = Batches(1000)
    runs = _runs(_followed_run(kind, batches, 120))
    assert [length for _, length in runs[:-1]] == [12] * (len(runs) - 1)
    assert batches.looks <= 3 * len(runs)  # the batch is looked at a few times per stint, not at every record


@pytest.mark.parametrize("kind", [DefaultPartitioner, PureDefaultPartitioner])
def test_a_sticky_partition_moves_on_at_twice_batch_size_whatever_its_batch_holds(
    kind: type[DefaultPartitioner],
) -> None:
    """Java's cap (BuiltInPartitioner.updatePartitionInfo): a batch that never fills (keyed records started a new
    one meanwhile, say) holds the partition for at most twice batch_size bytes."""
    runs = _runs(_followed_run(kind, Batches(1000, full=False), 100))
    assert [length for _, length in runs[:-1]] == [20] * (len(runs) - 1)


@pytest.mark.parametrize("kind", [DefaultPartitioner, PureDefaultPartitioner])
def test_a_sticky_partition_whose_batch_is_full_moves_on_at_batch_size(kind: type[DefaultPartitioner]) -> None:
    runs = _runs(_followed_run(kind, Batches(1000, full=True), 100))
    assert [length for _, length in runs[:-1]] == [10] * (len(runs) - 1)


async def test_a_keyless_batch_the_sticky_partitioner_moved_away_from_goes_out_at_once_not_after_linger_ms(
    mock_cluster: MockCluster,
) -> None:
    """The producer's sticky partitioner moved on once its tally of record-size estimates reached batch_size, while
    the batch it left held about 9 % less than batch_size: not full, that batch waited for linger_ms (here 30 s)
    unless the partitioner came back to it. It now moves on only once the batch is full, which is then sent at
    once (Java's `allBatchesFull`, KIP-794)."""
    mock_cluster.create_topic("t", 6)
    async with Producer(
        mock_cluster.bootstrap_servers, linger_ms=30_000, batch_size=16_384, delivery_timeout_ms=60_000
    ) as producer:
        deliveries = [await producer.enqueue("t", bytes(100)) for _ in range(400)]
        await asyncio.wait_for(deliveries[0], 10)
        await producer.flush()


def _accumulator(batch_max_size: int) -> RecordAccumulator:
    """An accumulator of 1000-byte batches that may grow to `batch_max_size` while they wait."""
    return RecordAccumulator(
        batch_size=1000,
        linger_ms=5,
        buffer_memory=100_000,
        compression=CompressionType.NONE,
        compression_level=None,
        new_outcome=lambda tp: BatchOutcome(tp[0], tp[1], asyncio.get_running_loop()),
        batch_max_size=batch_max_size,
    )


async def test_the_accumulator_says_how_many_bytes_a_partitions_newest_batch_lacks() -> None:
    accumulator = _accumulator(batch_max_size=10_000)
    assert accumulator.missing_bytes("t", 0) == 0  # no batch: nothing to wait for
    batch, _, _ = accumulator.append(("t", 0), 0, None, bytes(100), (), 200, lambda: 0)
    assert 0 < accumulator.missing_bytes("t", 0) == 1000 - batch.builder.estimated_size
    for _ in range(9):  # past batch_size: full, and still taking records (it may grow to batch_max_size)
        assert accumulator.append(("t", 0), 0, None, bytes(100), (), 200, lambda: 0)[0] is batch
    assert batch.full and accumulator.missing_bytes("t", 0) == 0
    other, _, _ = accumulator.append(("t", 1), 0, None, bytes(100), (), 200, lambda: 0)
    other.sealed = True  # drained: it takes no more records
    assert accumulator.missing_bytes("t", 1) == 0


def _picks(kind: type[DefaultPartitioner], missing_bytes: Any, records: int = 60) -> list[int | str]:
    """Each keyless record's partition, or the name of the error it raised."""
    partitioner = kind(batch_size=1000, rng=random.Random(3))
    partitioner.follow_batches(missing_bytes)
    picks: list[int | str] = []
    for _ in range(records):
        try:
            picks.append(partitioner.partition("t", None, 100, Topic.healthy(6)))
        except Exception as exc:
            picks.append(type(exc).__name__)
    return picks


@pytest.mark.parametrize("answer", [0.5, 300.0, True, None, "7", 2**70, -(2**70), 2**63 - 1, 10**4])
def test_the_twins_take_any_answer_from_missing_bytes_alike(answer: Any) -> None:
    """The compiled twin read `missing_bytes`' answer into a C integer (a float or bool became a TypeError, an int
    beyond 64 bits an OverflowError, where the original compared them as they came), and added it to its tally
    unchecked (an answer near sys.maxsize wrapped around): both now take only an int, capped at twice batch_size."""
    assert _picks(PureDefaultPartitioner, lambda topic, partition: answer) == _picks(
        DefaultPartitioner, lambda topic, partition: answer
    )


def test_the_twins_pick_alike_after_a_missing_bytes_answer_near_sys_maxsize() -> None:
    def answers() -> Any:
        seen: list[int] = []

        def missing_bytes(topic: str, partition: int) -> int:
            seen.append(partition)
            return 2**63 - 1 if len(seen) == 1 else 0

        return missing_bytes

    assert _picks(PureDefaultPartitioner, answers()) == _picks(DefaultPartitioner, answers())


async def test_where_batches_cannot_grow_the_partitioner_does_not_wait_for_them_to_fill() -> None:
    """A batch that cannot grow past batch_size (acks=0, batch_max_size = batch_size, a topic whose batches were
    split) is sealed before it quite holds batch_size, and the next one is the newest: waiting for that one held a
    keyless stream on its partition for twice batch_size bytes, leaving a part-filled batch all the same."""
    for batch_max_size, fixed in ((1000, False), (10_000, True)):
        accumulator = _accumulator(batch_max_size)
        if fixed:
            accumulator.fixed_size_topics.add("t")
        accumulator.append(("t", 0), 0, None, bytes(100), (), 200, lambda: 0)
        assert accumulator.missing_bytes("t", 0) == 0
