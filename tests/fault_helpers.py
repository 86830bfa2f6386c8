"""Shared pieces of the fault-injection tests: uniquely identified workloads, the exactly-once / in-order judge, and
Kafka frame I/O for the in-test proxy and fake broker. Holds no scenario and never reaches into the producer."""

from __future__ import annotations

import asyncio
import struct
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from aioproducer import ProducerRecord
from aioproducer.testing import ConsumedRecord, read_back

_SIZE = struct.Struct(">i")


def workload(tag: str, count: int, *, keys: int = 0, topic: str) -> list[ProducerRecord]:
    """`count` records whose values are unique ids `tag-00000`...; keyed over `keys` keys (0: keyless)."""
    return [
        ProducerRecord(topic, b"%s-%05d" % (tag.encode(), i), key=(b"key-%d" % (i % keys)) if keys else None)
        for i in range(count)
    ]


@dataclass(frozen=True)
class Verdict:
    """What the read-back shows against what was sent; `ok` only when every record is there exactly once and each
    key's records are in send order within a single partition."""

    missing: list[bytes] = field(default_factory=list)
    duplicated: dict[bytes, int] = field(default_factory=dict)
    unexpected: list[bytes] = field(default_factory=list)
    out_of_order: dict[bytes, list[bytes]] = field(default_factory=dict)
    split_keys: dict[bytes, list[int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.unexpected or self.out_of_order or self.split_keys)

    def __str__(self) -> str:
        if self.ok:
            return "every record exactly once, in order per key"
        parts = [
            f"{name}: {_preview(value)}"
            for name, value in vars(self).items()
            if value  # only the problems
        ]
        return "; ".join(parts)


def _preview(value: object) -> str:
    items = list(value.items()) if isinstance(value, dict) else list(value)  # type: ignore[call-overload]
    shown = ", ".join(repr(item) for item in items[:8])
    return f"{len(items)} [{shown}{', ...' if len(items) > 8 else ''}]"


def judge(consumed: Sequence[ConsumedRecord], sent: Sequence[ProducerRecord]) -> Verdict:
    """Compare records read back (ordered by partition, offset) with the records sent, in send order."""
    position = {record.value: index for index, record in enumerate(sent)}
    counts = Counter(record.value for record in consumed)
    missing = [record.value for record in sent if record.value not in counts]
    duplicated = {value: n for value, n in counts.items() if n > 1 and value is not None}
    unexpected = [value for value in counts if value not in position and value is not None]
    order: dict[bytes, list[int]] = defaultdict(list)
    partitions: dict[bytes, set[int]] = defaultdict(set)
    for record in consumed:
        if record.key is not None and record.value in position:
            order[record.key].append(position[record.value])
            partitions[record.key].add(record.partition)
    out_of_order = {
        key: [sent[i].value for i in indices]
        for key, indices in order.items()
        if any(later < earlier for earlier, later in zip(indices, indices[1:]))
    }
    split = {key: sorted(parts) for key, parts in partitions.items() if len(parts) > 1}
    return Verdict(missing, duplicated, unexpected, out_of_order, split)


async def read_back_async(bootstrap_servers: str, topic: str, timeout_s: float = 15.0) -> list[ConsumedRecord]:
    """`read_back` off the event loop, so brokers or proxies served by this loop keep answering meanwhile."""
    return await asyncio.to_thread(read_back, bootstrap_servers, topic, timeout_s=timeout_s)


# -- Kafka framing for the in-test proxy and fake broker -----------------------------------------------------------
async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One size-prefixed frame without its prefix, or None when the peer closed the stream (even mid-frame)."""
    try:
        prefix = await reader.readexactly(_SIZE.size)
        return await reader.readexactly(_SIZE.unpack(prefix)[0])
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


def frame(payload: bytes) -> bytes:
    """Prefix `payload` with its int32 size."""
    return _SIZE.pack(len(payload)) + payload


def correlation_id_of(response_frame_without_size: bytes) -> int:
    """The correlation id every response frame starts with (response header v0 and v1 alike)."""
    value: int = _SIZE.unpack_from(response_frame_without_size)[0]
    return value


async def close_writer(writer: asyncio.StreamWriter) -> None:
    """Close a stream and wait for it, ignoring a peer that already went away."""
    writer.close()
    try:
        await writer.wait_closed()
    except (ConnectionError, OSError):
        pass
