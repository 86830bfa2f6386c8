"""Checks on what callers hand to `send`: topic names, headers, partitions, timestamps, and a record's size; pure.

Each check raises a typed `InvalidRecordError` with a message a user can act on, at the call. These functions are
the rules: the compiled appender may accept the common case inline, and calls them for anything else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aioproducer.errors import InvalidRecordError, UnknownPartitionError
from aioproducer.records.layout import INT64_MAX, MAX_RECORD_OVERHEAD

__all__ = [
    "HEADER_OVERHEAD_BYTES",
    "INT64_MAX",
    "check_headers",
    "check_partition",
    "check_timestamp",
    "check_topic",
    "header_pairs",
    "not_a_record",
    "read_records",
    "record_size",
]


# A header's share of a record's size bound: its two length varints at their widest (the key counts 4 bytes per
# character, the most UTF-8 can take).
HEADER_OVERHEAD_BYTES = 10
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def check_topic(topic: object) -> None:
    """Kafka's topic rules (Java's Topic.validate): 1 to 249 of [a-zA-Z0-9._-], not '.' or '..'."""
    if not isinstance(topic, str):
        raise InvalidRecordError(f"topic must be a str, got {type(topic).__name__}")
    if topic in (".", "..") or not _TOPIC_NAME.fullmatch(topic):
        raise InvalidRecordError(
            f"invalid topic name {topic!r}: use 1 to 249 characters from a-z, A-Z, 0-9, '.', '_' and '-' "
            "(and not '.' or '..')"
        )


def check_partition(partition: object) -> int:
    """An explicit partition: an `int` of at least 0 (Java's ProducerRecord: "Partition number should always be
    non-negative or null"), exactly an `int`: a `bool` is refused although Python counts it as an int
    (`partition=True` is a bug, not partition 1), as are other int subclasses. Whether the topic has that
    partition is checked against its metadata, later."""
    if type(partition) is not int:
        raise UnknownPartitionError(f"partition must be an int or None, got {type(partition).__name__} {partition!r}")
    if partition < 0:
        raise UnknownPartitionError(f"invalid partition {partition}: a partition number is never negative")
    return partition


def check_timestamp(timestamp_ms: object) -> int:
    """A record timestamp in milliseconds since the epoch: an `int` (not a `bool`) from 0 to 2**63 - 1. Java's
    ProducerRecord rejects negative timestamps ("Timestamp should always be non-negative or null"); brokers read
    -1 as "no timestamp"."""
    if type(timestamp_ms) is not int:
        raise InvalidRecordError(
            f"record timestamp must be an int of milliseconds or None, got {type(timestamp_ms).__name__} "
            f"{timestamp_ms!r}"
        )
    if not 0 <= timestamp_ms <= INT64_MAX:
        raise InvalidRecordError(
            f"invalid record timestamp {timestamp_ms}: it must be from 0 to 2**63 - 1 milliseconds since the epoch"
        )
    return timestamp_ms


def header_pairs(headers: Any) -> Any:
    """A mapping of headers as a new list of its (key, value) pairs; anything else as it is (pairs already, or what
    `check_headers` refuses). The one place a mapping becomes pairs: serializers and hooks see pairs, as Java's
    `Headers` is a list that may repeat a key."""
    if type(headers) is dict:
        return list(headers.items())
    if isinstance(headers, (list, tuple)) or not isinstance(headers, Mapping):
        return headers
    return list(headers.items())


def check_headers(headers: object) -> tuple[tuple[str, bytes | None], ...]:
    """Headers as a tuple of (str key, bytes-or-None value) pairs."""
    if type(headers) is not list and type(headers) is not tuple:
        headers = header_pairs(headers)
    if not isinstance(headers, Sequence) or isinstance(headers, (str, bytes)):
        raise InvalidRecordError(f"headers must be a list of (str, bytes) pairs, got {type(headers).__name__}")
    checked: list[tuple[str, bytes | None]] = []
    for item in headers:
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidRecordError(f"each header must be a (str, bytes) pair, got {item!r}")
        key, value = item
        if not isinstance(key, str):
            raise InvalidRecordError(f"header key must be a str, got {type(key).__name__} ({key!r})")
        if value is not None and not isinstance(value, bytes):
            if isinstance(value, (bytearray, memoryview)):
                value = bytes(value)
            else:
                raise InvalidRecordError(
                    f"header {key!r} value must be bytes or None, got {type(value).__name__}; encode it first"
                )
        checked.append((key, value))
    return tuple(checked)


def record_size(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> int:
    """An upper bound of the record's bytes inside a batch (what `buffer_memory` counts)."""
    size = MAX_RECORD_OVERHEAD
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    for header_key, header_value in headers:
        size += HEADER_OVERHEAD_BYTES + len(header_key) * 4 + (len(header_value) if header_value else 0)
    return size


def not_a_record(record: object) -> InvalidRecordError:
    """What a `send_many` or `enqueue_many` item that is not a ProducerRecord (or another 6-tuple) fails with."""
    return InvalidRecordError(
        f"send_many takes ProducerRecords (or 6-tuples: topic, value, key, headers, partition, timestamp_ms), got "
        f"{type(record).__name__} {repr(record)[:80]}"
    )


def read_records(records: Iterable[Any]) -> tuple[Sequence[Any], Exception | None]:
    """A `send_many` or `enqueue_many` argument read whole: a sequence as it is (read in place by the call), any other
    iterable into a list of its own (a set or a dict's values could change while the call waits). Should reading it
    raise, what it yielded before and the error (the caller decides what is sent of it); InvalidRecordError for an
    argument that is not iterable."""
    if isinstance(records, Sequence):
        return records, None
    try:
        iterator = iter(records)
    except TypeError:
        raise InvalidRecordError(
            f"send_many and enqueue_many take an iterable of ProducerRecords, got {type(records).__name__}"
        ) from None
    except Exception as exc:  # an __iter__ of the caller's that raised
        return [], exc
    taken: list[Any] = []
    try:
        taken.extend(iterator)  # extend keeps what it read should the iterator raise
    except Exception as exc:
        return taken, exc
    return taken, None
