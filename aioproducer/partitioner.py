"""Choosing a record's partition: Java-compatible murmur2 key hashing, adaptive sticky (KIP-794) and round-robin
partitioners.

Pure: no I/O, no asyncio, no clock; randomness comes from an injectable `random.Random`. Reads topic state only
through the `TopicPartitions` protocol, never from metadata internals.
"""

from __future__ import annotations

import bisect
import random
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from aioproducer.accelerated import compiled_twin
from aioproducer.errors import (
    AioProducerError,
    ConfigError,
    InvalidRecordError,
    PartitionerError,
    UnknownPartitionError,
)

__all__ = [
    "DefaultPartitioner",
    "PartitionLoadStats",
    "Partitioner",
    "RoundRobinPartitioner",
    "TopicPartitions",
    "PureDefaultPartitioner",
    "candidates",
    "choose_partition",
    "key_bytes",
    "load_stats",
    "murmur2",
    "next_partition",
    "partition_for_key",
    "pick_other",
    "still_usable",
]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_POSITIVE = 0x7FFFFFFF

_WORD_READERS: dict[int, Callable[[bytes], tuple[int, ...]]] = {}


def murmur2(data: bytes) -> int:
    """MurmurHash2 exactly as Java's Utils.murmur2 computes it (seed 0x9747b28c), as a signed int32."""
    if type(data) is not bytes:
        data = key_bytes(data)
    length = len(data)
    h = _SEED ^ length
    words = length >> 2
    if words:
        # One struct call yields every little-endian 4-byte block; the loop then only does arithmetic.
        read_words = _WORD_READERS.get(words)
        if read_words is None:
            read_words = _WORD_READERS.setdefault(words, struct.Struct(f"<{words}I").unpack_from)
        m = _M
        mask = _MASK
        for k in read_words(data):
            k = (k * m) & mask
            # The low 32 bits of an xor are the xor of the low 32 bits, so one mask serves both products.
            h = ((h * m) ^ ((k ^ (k >> 24)) * m)) & mask
    tail = length & 3
    if tail:
        i = length - tail
        if tail == 3:
            h ^= data[i + 2] << 16 | data[i + 1] << 8 | data[i]
        elif tail == 2:
            h ^= data[i + 1] << 8 | data[i]
        else:
            h ^= data[i]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Java's BuiltInPartitioner.partitionForKey picks: over all partitions, available or not."""
    if num_partitions <= 0:
        raise UnknownPartitionError(f"a topic needs at least one partition, got {num_partitions}")
    return (murmur2(key_bytes(key)) & _POSITIVE) % num_partitions


class TopicPartitions(Protocol):
    """What a partitioner may look at about a topic; metadata objects satisfy it.

    A layout is an immutable snapshot: when the cluster changes, the partitioner is handed a new object.
    """

    @property
    def num_partitions(self) -> int:
        """Every partition of the topic."""
        ...

    @property
    def available_partitions(self) -> Sequence[int]:
        """The partitions whose leader is known."""
        ...


class Partitioner(Protocol):
    """Picks the partition of a record that names none. `record_size` is its size in the batch, in bytes."""

    def partition(self, topic: str, key: bytes | None, record_size: int, partitions: TopicPartitions) -> int: ...


def choose_partition(
    partitioner: Partitioner, topic: str, key: bytes | None, record_size: int, partitions: TopicPartitions
) -> int:
    """Ask `partitioner` for a record's partition and check the answer: the one rule for every partitioner.

    The answer must be an `int` in `[0, partitions.num_partitions)`, else PartitionerError at the call. Java checks
    only for a negative number (IllegalArgumentException) and lets a partition beyond the topic sit in the buffer
    until `delivery_timeout_ms`; here any answer the topic cannot take fails at once, as the partitioner was shown
    the layout it answered for. The type is `int` exactly: a `bool` is refused (Python counts it as an int; Java's
    partitioner returns a primitive int, so no Java partitioner can answer `true`), and so are other int subclasses
    (an IntEnum) and numpy integers: `int(...)` them. An exception from the partitioner becomes a
    PartitionerError with it as the cause (an aioproducer error passes through as it is).
    """
    try:
        chosen = partitioner.partition(topic, key, record_size, partitions)
    except AioProducerError:
        raise
    except Exception as exc:
        raise PartitionerError(f"partitioner {partitioner!r} failed for topic {topic!r}: {exc!r}") from exc
    if type(chosen) is int and 0 <= chosen < partitions.num_partitions:
        return chosen
    count = partitions.num_partitions
    if type(chosen) is not int:
        what = "a bool" if isinstance(chosen, bool) else type(chosen).__name__
        raise PartitionerError(
            f"partitioner {partitioner!r} returned {repr(chosen)[:80]} ({what}) for topic {topic!r}: it must return "
            f"an int partition from 0 to {count - 1}"
        )
    raise PartitionerError(
        f"partitioner {partitioner!r} returned partition {chosen} for topic {topic!r}, which has partitions "
        f"0..{count - 1}"
    )


class _Sticky:
    __slots__ = ("checked_layout", "partition", "produced", "switch_at")

    def __init__(self, partition: int, switch_at: int) -> None:
        self.partition = partition
        self.produced = 0
        self.switch_at = switch_at  # the tally from which a switch is considered (see `_switch_due`)
        # The layout the partition was last checked against: layouts are immutable snapshots, so while the same
        # one is passed in, the partition stays usable and the check can be skipped.
        self.checked_layout: object = None


# Keys repeat in real workloads (user ids, order ids); hashing one costs about a microsecond in pure Python.
# Clearing a full cache is the simplest eviction that keeps memory bounded and costs nothing per hit.
_HASH_CACHE_SIZE = 16384


class PartitionLoadStats:
    """A topic's partitions weighted by how little waits for them (Java's BuiltInPartitioner.PartitionLoadStats):
    `cumulative[i]` is the running sum of the weights of `partition_ids[:i + 1]`; `queues` is how many of the topic's
    partitions the accumulator holds a queue for (the weights mean something only once it holds one for each)."""

    __slots__ = ("cumulative", "partition_ids", "queues")

    def __init__(self, cumulative: list[int], partition_ids: list[int], queues: int) -> None:
        self.cumulative = cumulative
        self.partition_ids = partition_ids
        self.queues = queues

    def __repr__(self) -> str:
        return f"PartitionLoadStats(cumulative={self.cumulative}, partition_ids={self.partition_ids})"


def load_stats(queue_sizes: Sequence[int], partition_ids: Sequence[int], queues: int) -> PartitionLoadStats | None:
    """Java's BuiltInPartitioner.updatePartitionLoadStats: from the queue sizes (batches waiting) of a topic's
    partitions that may take records (leader known, and not left out by partitioner_availability_timeout_ms), a
    cumulative frequency table in which a partition weighs (largest queue + 1 - its queue): an empty queue the most,
    the longest queue 1. None (uniform sticky) when nothing is to be gained: fewer than two partitions in all, none
    available, or every queue the same length with none left out."""
    length = len(queue_sizes)
    if queues < 2 or length < 1:
        return None
    most = max(queue_sizes) + 1
    if length == queues and min(queue_sizes) + 1 == most:
        return None
    cumulative: list[int] = []
    running = 0
    for size in queue_sizes:
        running += most - size
        cumulative.append(running)
    return PartitionLoadStats(cumulative, list(partition_ids), queues)


def next_partition(
    choices: Sequence[int],
    previous: int,
    rng: random.Random,
    stats: PartitionLoadStats | None,
    num_partitions: int,
) -> int:
    """The partition a keyless sticky stream moves to (Java's BuiltInPartitioner.nextPartition). With load stats,
    once the accumulator holds a queue for every partition: a partition drawn with its weight, so a broker that
    falls behind gets less (KIP-794), and one left out gets nothing. Otherwise a uniformly random one of `choices`
    other than `previous` (`pick_other`)."""
    if stats is not None and stats.queues >= num_partitions:
        cumulative = stats.cumulative
        drawn = rng.randrange(cumulative[-1])
        return stats.partition_ids[bisect.bisect_right(cumulative, drawn)]
    return pick_other(choices, previous, rng)


class DefaultPartitioner:
    """Java's BuiltInPartitioner (KIP-794).

    Keyed records: murmur2 over all partitions. Keyless records (or every record with `ignore_keys`): sticky,
    staying on one partition until about `batch_size` bytes went to it (and, when it follows the accumulator's
    batches, `follow_batches`, until its newest batch is full), then moving to another (`next_partition`):
    weighted by the partitions' queue sizes when the accumulator reports them (`update_load_stats`, adaptive
    partitioning), else a random available partition other than the last one; with no partition available, any.
    """

    __slots__ = ("_batch_size", "_hashes", "_ignore_keys", "_load", "_missing_bytes", "_rng", "_sticky")

    def __init__(self, batch_size: int = 16384, *, ignore_keys: bool = False, rng: random.Random | None = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ConfigError(f"partitioner batch_size must be a positive int, got {batch_size!r}")
        self._batch_size = batch_size
        self._ignore_keys = ignore_keys
        self._rng = rng if rng is not None else random.Random()
        self._sticky: dict[str, _Sticky] = {}
        self._hashes: dict[bytes, int] = {}
        self._load: dict[str, PartitionLoadStats | None] = {}
        self._missing_bytes: Callable[[str, int], int] | None = None

    def follow_batches(self, missing_bytes: Callable[[str, int], int]) -> None:
        """Move a sticky partition on only once its newest batch is full, as Java's RecordAccumulator lets its
        partitioner (`enableSwitch = allBatchesFull(deque)`, KIP-794): `missing_bytes(topic, partition)` is how many
        bytes that batch lacks to hold `batch_size` (0 when it does, is sealed, or there is none). A partitioner used
        on its own moves on after `batch_size` bytes, whatever the batches hold."""
        self._missing_bytes = missing_bytes

    def update_load_stats(
        self, topic: str, queue_sizes: Sequence[int], partition_ids: Sequence[int], queues: int
    ) -> None:
        """The accumulator's view of `topic` (`load_stats`), for the next switch of its sticky partition."""
        self._load[topic] = load_stats(queue_sizes, partition_ids, queues)

    def partition(self, topic: str, key: bytes | None, record_size: int, partitions: TopicPartitions) -> int:
        """The record's partition; keyless records add `record_size` to the sticky partition's tally."""
        if key is None or self._ignore_keys:
            return self._sticky_partition(topic, record_size, partitions)
        try:
            positive = self._hashes.get(key)
        except TypeError:  # an unhashable bytes-like key (bytearray): hash it without caching
            return partition_for_key(key_bytes(key), partitions.num_partitions)
        if positive is None:
            positive = self._remember(key)
        try:
            return positive % partitions.num_partitions
        except ZeroDivisionError:
            raise UnknownPartitionError(f"topic {topic!r} has no partitions") from None

    def _remember(self, key: bytes) -> int:
        positive = murmur2(key_bytes(key)) & _POSITIVE
        if len(self._hashes) >= _HASH_CACHE_SIZE:
            self._hashes.clear()
        self._hashes[key] = positive
        return positive

    def _sticky_partition(self, topic: str, record_size: int, partitions: TopicPartitions) -> int:
        state = self._sticky.get(topic)
        if state is None or (state.produced >= state.switch_at and self._switch_due(topic, state)):
            state = self._switch(topic, state, partitions)
        elif state.checked_layout is not partitions:
            if not still_usable(state.partition, partitions):
                state = self._switch(topic, state, partitions)
            state.checked_layout = partitions
        state.produced += record_size
        return state.partition

    def _switch_due(self, topic: str, state: _Sticky) -> bool:
        """Whether the sticky partition, `batch_size` bytes or more into its stint, moves on now. Java's
        BuiltInPartitioner.updatePartitionInfo moves once batch.size bytes went to it and its newest batch is full, or
        once twice that went, whatever the batch holds: moving away from a batch not yet full leaves it waiting for
        linger_ms (or for the partitioner's return) rather than ready at once. The tally adds each record's size as
        the appender estimates it, an upper bound of its bytes in the batch (Java adds the bytes appended), so a
        batch still short is looked at again once that many more bytes went to it."""
        cap = 2 * self._batch_size
        missing_bytes = self._missing_bytes
        if missing_bytes is None or state.produced >= cap:
            return True
        missing = missing_bytes(topic, state.partition)
        if type(missing) is not int:
            raise TypeError(f"missing_bytes must return an int, got {type(missing).__name__}")
        if missing <= 0:
            return True
        state.switch_at = min(state.produced + min(missing, cap), cap)
        return False

    def _switch(self, topic: str, old: _Sticky | None, partitions: TopicPartitions) -> _Sticky:
        previous = -1 if old is None else old.partition
        choices = candidates(topic, partitions)
        partition = next_partition(choices, previous, self._rng, self._load.get(topic), partitions.num_partitions)
        state = self._sticky[topic] = _Sticky(partition, self._batch_size)
        return state


class RoundRobinPartitioner:
    """Java's RoundRobinPartitioner: each topic cycles over its available partitions (all, if none is
    available), ignoring keys."""

    __slots__ = ("_counters",)

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, record_size: int, partitions: TopicPartitions) -> int:
        """The next partition in the topic's cycle."""
        counter = self._counters.get(topic, 0)
        self._counters[topic] = (counter + 1) & _POSITIVE
        choices = candidates(topic, partitions)
        return choices[counter % len(choices)]


def candidates(topic: str, partitions: TopicPartitions) -> Sequence[int]:
    """The partitions a keyless record may go to: the available ones, or every one when none is available."""
    available = partitions.available_partitions
    if available:
        return available
    count = partitions.num_partitions
    if count <= 0:
        raise UnknownPartitionError(f"topic {topic!r} has no partitions")
    return range(count)


def still_usable(partition: int, partitions: TopicPartitions) -> bool:
    """Whether a sticky partition may stay in use under a new layout: it exists and is available (or none is)."""
    # Cheap when every leader is known (the usual case); a membership scan only while some leader is missing.
    count = partitions.num_partitions
    if partition >= count:
        return False
    available = partitions.available_partitions
    return len(available) == count or not available or partition in available


def pick_other(candidates: Sequence[int], previous: int, rng: random.Random) -> int:
    """A uniformly random candidate, excluding `previous` whenever another one exists (as Java's
    StickyPartitionCache did, so a switch really moves the load)."""
    n = len(candidates)
    if n > 1 and previous in candidates:
        choice = candidates[rng.randrange(n - 1)]
        return candidates[n - 1] if choice == previous else choice
    return candidates[rng.randrange(n)]


def key_bytes(key: bytes) -> bytes:
    """A key as `bytes` (any bytes-like object is accepted); InvalidRecordError for anything else."""
    if isinstance(key, bytes):
        return key
    try:
        return memoryview(key).tobytes()
    except TypeError:
        raise InvalidRecordError(f"record keys must be bytes or None, got {type(key).__name__}") from None


# The compiled twin, when built (see aioproducer.accelerated): the same hashes and the same picks, faster.
PureDefaultPartitioner = DefaultPartitioner
pure_murmur2 = murmur2
_twin = compiled_twin("aioproducer._partitioner")
if not TYPE_CHECKING and _twin is not None:
    murmur2 = _twin.murmur2
    DefaultPartitioner = _twin.DefaultPartitioner
