"""Shared pieces of the fault-injection tests: uniquely identified workloads, the exactly-once / in-order judge, and
Kafka frame I/O for the in-test proxy and fake broker. Holds no scenario and never reaches into the producer."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from aioproducer import Producer, ProducerRecord, RecordMetadata
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


def _preview(value: object, limit: int = 6) -> str:
    items: list[object] = list(value.items()) if isinstance(value, dict) else list(value)  # type: ignore[call-overload]
    shown = ", ".join(_preview(item, 4) if isinstance(item, list) else _short(item) for item in items[:limit])
    return f"{len(items)} [{shown}{', ...' if len(items) > limit else ''}]"


def _short(item: object) -> str:
    if isinstance(item, tuple):
        return "(" + ", ".join(_preview(x, 4) if isinstance(x, list) else repr(x) for x in item) + ")"
    return repr(item)


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
        if any(later < earlier for earlier, later in itertools.pairwise(indices))
    }
    split = {key: sorted(parts) for key, parts in partitions.items() if len(parts) > 1}
    return Verdict(missing, duplicated, unexpected, out_of_order, split)


def without_resends(consumed: Sequence[ConsumedRecord]) -> tuple[list[ConsumedRecord], int]:
    """Drop later copies of a value stored again in the same partition; returns the rest and how many were dropped.

    For librdkafka's mock cluster only: it checks no idempotent sequence (TEST-TARGETS.md), so a batch it wrote
    whose acknowledgement died with a connection is stored again when the producer rightly resends it — a broker
    that enforces sequences answers DUPLICATE_SEQUENCE_NUMBER instead. A copy in another partition is kept, so
    `judge` still reports it.
    """
    seen: set[tuple[int, bytes | None]] = set()
    kept: list[ConsumedRecord] = []
    for record in consumed:
        where = (record.partition, record.value)
        if where in seen:
            continue
        seen.add(where)
        kept.append(record)
    return kept, len(consumed) - len(kept)


@contextlib.asynccontextmanager
async def running_producer(
    bootstrap_servers: str, close_timeout_s: float = 2.0, **settings: Any
) -> AsyncIterator[Producer]:
    """A started producer that is closed with a timeout, so a stalled pipeline fails the test instead of hanging it."""
    producer = Producer(bootstrap_servers, **settings)
    await producer.start()
    try:
        yield producer
    finally:
        await producer.close(timeout=close_timeout_s)


async def produce_until(
    producer: Producer, records: Sequence[ProducerRecord], stop: asyncio.Future[Any], *, every: int = 20
) -> tuple[list[ProducerRecord], list[asyncio.Future[RecordMetadata]]]:
    """Enqueue `records` in order, yielding to the loop every `every` records, until `stop` is done.

    Returns the records actually enqueued and their futures; `stop` (a fault schedule) finishing first means the
    faults happened while records were being produced.
    """
    futures: list[asyncio.Future[RecordMetadata]] = []
    for index, record in enumerate(records):
        if stop.done():
            break
        futures.append(await producer.enqueue(record.topic, record.value, key=record.key))
        if index % every == 0:
            await asyncio.sleep(0.002)
    if not stop.done():
        raise AssertionError(f"the workload of {len(records)} records ended before the faults did: make it longer")
    return list(records[: len(futures)]), futures


async def settle(futures: Sequence[asyncio.Future[RecordMetadata]], timeout_s: float) -> list[object]:
    """Every future's result or exception; fails (naming how many are stuck) if some are not done in time."""
    _, pending = await asyncio.wait(futures, timeout=timeout_s) if futures else (set(), set())
    if pending:
        for future in pending:  # they fail when the producer closes; that outcome is already reported here
            future.add_done_callback(_mark_seen)
        raise AssertionError(f"{len(pending)} of {len(futures)} records neither delivered nor failed in {timeout_s} s")
    return [f.exception() or f.result() for f in futures]


def _mark_seen(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


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
    with contextlib.suppress(ConnectionError, OSError):
        await writer.wait_closed()
