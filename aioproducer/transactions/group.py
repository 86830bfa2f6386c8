"""What `send_offsets_to_transaction` takes: consumer-group metadata (KIP-447) and the offsets to commit; pure.

Owns `ConsumerGroupMetadata` and turning what callers have at hand into it: a group id string, this class, the
opaque value of confluent-kafka's `Consumer.consumer_group_metadata()`, or an aiokafka consumer; and the offsets as a
mapping of (topic, partition) to an offset (or an object with `.offset`), or confluent-kafka's list of
`TopicPartition` from `Consumer.position()`. Offsets are the *next* offset to consume, as every Kafka client commits.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aioproducer.errors import InvalidOffsetsError

__all__ = ["CommittedOffset", "ConsumerGroupMetadata", "group_metadata", "offsets_to_commit"]

_CGMD_MAGIC = b"CGMDv2:"
_INT32 = struct.Struct("=i")  # librdkafka writes the generation id in the host's byte order
_NO_GENERATION = -1


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """A consumer's group membership, sent with the offsets so the group coordinator fences a zombie consumer
    (KIP-447, Java's ConsumerGroupMetadata). With only a group id (generation -1, no member id) the coordinator
    checks nothing: the fencing is then the transactional id's alone, as before Kafka 2.5."""

    group_id: str
    generation_id: int = _NO_GENERATION
    member_id: str = ""
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.group_id, str) or not self.group_id:
            raise InvalidOffsetsError(f"the consumer group id must be a non-empty str, got {self.group_id!r}")
        if not isinstance(self.generation_id, int) or isinstance(self.generation_id, bool):
            raise InvalidOffsetsError(f"generation_id must be an int, got {self.generation_id!r}")
        if not isinstance(self.member_id, str):
            raise InvalidOffsetsError(f"member_id must be a str, got {self.member_id!r}")
        if self.group_instance_id is not None and not isinstance(self.group_instance_id, str):
            raise InvalidOffsetsError(f"group_instance_id must be None or a str, got {self.group_instance_id!r}")


@dataclass(frozen=True)
class CommittedOffset:
    """One partition's offset to commit with the transaction."""

    topic: str
    partition: int
    offset: int
    metadata: str | None = None
    leader_epoch: int = -1


def group_metadata(value: Any) -> ConsumerGroupMetadata:
    """`value` as ConsumerGroupMetadata: the class itself, a group id, confluent-kafka's serialized metadata (bytes
    from `consumer_group_metadata()`), or an aiokafka `AIOKafkaConsumer` (its current group membership)."""
    if isinstance(value, ConsumerGroupMetadata):
        return value
    if isinstance(value, str):
        return ConsumerGroupMetadata(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _from_librdkafka(bytes(value))
    coordinator = getattr(value, "_coordinator", None)
    group_id = getattr(value, "_group_id", None)
    if isinstance(group_id, str) and hasattr(value, "getmany"):
        # aiokafka keeps the membership in its group coordinator (no public accessor); before the first join it has
        # none, and the group id alone is sent.
        generation = getattr(coordinator, "generation", _NO_GENERATION)
        member_id = getattr(coordinator, "member_id", "")
        return ConsumerGroupMetadata(
            group_id,
            generation if isinstance(generation, int) else _NO_GENERATION,
            member_id if isinstance(member_id, str) else "",
            getattr(value, "_group_instance_id", None),
        )
    raise InvalidOffsetsError(
        f"cannot read consumer group metadata from {type(value).__name__}: pass a group id (str), "
        "ConsumerGroupMetadata, confluent-kafka's consumer.consumer_group_metadata(), or an aiokafka consumer"
    )


def _from_librdkafka(blob: bytes) -> ConsumerGroupMetadata:
    """librdkafka's rd_kafka_consumer_group_metadata_write format: "CGMDv2:", the generation id (int32, host order),
    the group id and the member id (each NUL-terminated), a byte that is 1 when there is no group instance id, else
    0 followed by the NUL-terminated instance id."""
    if not blob.startswith(_CGMD_MAGIC) or len(blob) < len(_CGMD_MAGIC) + _INT32.size + 3:
        raise InvalidOffsetsError("not confluent-kafka consumer group metadata (expected bytes starting CGMDv2:)")
    position = len(_CGMD_MAGIC)
    (generation,) = _INT32.unpack_from(blob, position)
    position += _INT32.size
    try:
        group_id, position = _c_string(blob, position)
        member_id, position = _c_string(blob, position)
        no_instance = blob[position]
        position += 1
        instance = None
        if not no_instance:
            instance, position = _c_string(blob, position)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise InvalidOffsetsError(f"truncated or corrupt confluent-kafka consumer group metadata: {exc}") from None
    if position != len(blob):
        raise InvalidOffsetsError("confluent-kafka consumer group metadata has trailing bytes")
    return ConsumerGroupMetadata(group_id, generation, member_id, instance)


def _c_string(blob: bytes, position: int) -> tuple[str, int]:
    end = blob.index(0, position)
    return blob[position:end].decode(), end + 1


def offsets_to_commit(offsets: Any) -> list[CommittedOffset]:
    """Normalise the offsets a caller passes; each partition at most once, offsets >= 0."""
    if isinstance(offsets, Mapping):
        items: Iterable[tuple[Any, Any]] = offsets.items()
    elif isinstance(offsets, Iterable) and not isinstance(offsets, (str, bytes)):
        items = [(entry, entry) for entry in offsets]
    else:
        raise InvalidOffsetsError(
            f"offsets must be a mapping of (topic, partition) to offset, or a list of TopicPartition with offsets; "
            f"got {type(offsets).__name__}"
        )
    result: dict[tuple[str, int], CommittedOffset] = {}
    for key, value in items:
        topic, partition = _topic_partition(key)
        offset, metadata, leader_epoch = _offset(value)
        if (topic, partition) in result:
            raise InvalidOffsetsError(f"offsets name {topic}-{partition} twice")
        result[(topic, partition)] = CommittedOffset(topic, partition, offset, metadata, leader_epoch)
    return list(result.values())


def _topic_partition(key: Any) -> tuple[str, int]:
    if isinstance(key, tuple) and len(key) == 2:
        topic, partition = key
    else:
        topic, partition = getattr(key, "topic", None), getattr(key, "partition", None)
    if not isinstance(topic, str) or not topic:
        raise InvalidOffsetsError(f"an offsets key must name a topic (str): {key!r}")
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise InvalidOffsetsError(f"an offsets key must name a partition (int >= 0): {key!r}")
    return topic, partition


def _offset(value: Any) -> tuple[int, str | None, int]:
    offset: Any = value
    metadata: Any = None
    leader_epoch: Any = None
    if isinstance(value, int) and not isinstance(value, bool):
        pass
    elif isinstance(value, tuple) and value and not hasattr(value, "offset"):
        offset, metadata = value[0], value[1] if len(value) > 1 else None
    else:
        offset = getattr(value, "offset", None)
        metadata = getattr(value, "metadata", None)
        leader_epoch = getattr(value, "leader_epoch", None)
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise InvalidOffsetsError(
            f"an offset to commit must be an int >= 0 (the next offset to consume), got {offset!r} in {value!r}"
        )
    if metadata is not None and not isinstance(metadata, str):
        raise InvalidOffsetsError(f"offset metadata must be None or a str, got {metadata!r}")
    if not isinstance(leader_epoch, int) or isinstance(leader_epoch, bool) or leader_epoch < 0:
        leader_epoch = -1
    return offset, metadata, leader_epoch
