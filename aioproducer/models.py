"""The values users hand to the producer and get back: `ProducerRecord` and `RecordMetadata`.

Both are named tuples: immutable, cheap to create by the hundred thousand on the bulk path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["Header", "ProducerRecord", "RecordMetadata"]

Header = tuple[str, "bytes | None"]


class ProducerRecord(NamedTuple):
    """One record for `Producer.send_many`. `key` and `value` go through the producer's serializers."""

    topic: str
    value: Any = None
    key: Any = None
    headers: Sequence[Header] | None = None
    partition: int | None = None
    timestamp_ms: int | None = None


class RecordMetadata(NamedTuple):
    """Where a delivered record landed.

    `offset` is -1 when it is unknown: with acks=0, or when the broker reported the batch as an already-written
    duplicate (DUPLICATE_SEQUENCE_NUMBER) without saying where. `timestamp_ms` is the broker's LogAppendTime when
    the topic uses it, else the record's CreateTime. Sizes are -1 for a null key or value.
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    serialized_key_size: int
    serialized_value_size: int
