"""Where a producing caller lets the event loop run, seen from another task, at each of the producer's yield points:
`await enqueue` (the plain producer's fast path, and the method's own path that producers with serializers, record
hooks or a transaction take), `enqueue_nowait`'s WouldBlockError (then `await enqueue`), and `send_many`.

The rule itself (`Appender.yield_due`) is tested on both twins in test_yield_rule.py; these tests pin that each call
site follows it: another task runs at least once per YIELD_AFTER_BYTES_MAX buffered; at every YIELD_AFTER_BYTES once
the caller's own buffering takes longer than YIELD_AFTER_S; and not at every YIELD_AFTER_BYTES when it is quick.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, overload

import pytest

from aioproducer import Producer, ProducerRecord
from aioproducer.append.appender import YIELD_AFTER_BYTES, YIELD_AFTER_BYTES_MAX, YIELD_AFTER_S
from aioproducer.errors import WouldBlockError
from aioproducer.producer_bulk import STREAM_FIRST_CHUNK
from aioproducer.testing import MockCluster
from aioproducer.validation import record_size

# Large records: 64 KiB is 9 of them, a few tens of microseconds of buffering even on the pure-Python twin, far
# inside the half-millisecond interval (which the quick-caller tests rely on).
VALUE = b"v" * 8000
RECORD_BYTES = record_size(None, VALUE, ())  # what one record adds to the bytes the rule counts
COUNT = 400  # 3.2 MB: well within the default buffer_memory, so no call waits for memory and yields that way
AT_YIELD_AFTER_BYTES = math.ceil(YIELD_AFTER_BYTES / RECORD_BYTES)  # records buffered to reach 64 KiB
AT_THE_CAP = math.ceil(YIELD_AFTER_BYTES_MAX / RECORD_BYTES)


class Progress:
    """How many records the caller has handed over so far."""

    def __init__(self) -> None:
        self.taken = 0
        self.refusals = 0  # enqueue_nowait's WouldBlockErrors


def busy_for(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def slowly() -> None:
    """Make the caller's own work per record long enough that YIELD_AFTER_BYTES take 1.3 times YIELD_AFTER_S."""
    busy_for(YIELD_AFTER_S * 1.3 / AT_YIELD_AFTER_BYTES)


def quickly() -> None:
    pass


class PacedRecords(Sequence[ProducerRecord]):
    """send_many's records, each taking `pace` when the producer reads it, which `progress` counts."""

    def __init__(self, topic: str, pace: Callable[[], None], progress: Progress) -> None:
        self._record = ProducerRecord(topic, VALUE)
        self._pace = pace
        self._progress = progress

    def __len__(self) -> int:
        return COUNT

    @overload
    def __getitem__(self, index: int) -> ProducerRecord: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[ProducerRecord]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            raise NotImplementedError("send_many reads its records one by one")
        if not 0 <= index < COUNT:
            raise IndexError(index)
        self._pace()
        self._progress.taken = max(self._progress.taken, index + 1)
        return self._record

    def __iter__(self) -> Iterator[ProducerRecord]:
        return (self[index] for index in range(COUNT))


async def through_enqueue(producer: Producer, topic: str, pace: Callable[[], None], progress: Progress) -> None:
    enqueue = producer.enqueue
    for _ in range(COUNT):
        pace()
        await enqueue(topic, VALUE)
        progress.taken += 1
    await producer.flush()


async def through_the_general_enqueue(
    producer: Producer, topic: str, pace: Callable[[], None], progress: Progress
) -> None:
    for _ in range(COUNT):
        pace()
        await Producer.enqueue(producer, topic, VALUE)  # the method, not the plain producer's fast path
        progress.taken += 1
    await producer.flush()


async def through_enqueue_nowait(producer: Producer, topic: str, pace: Callable[[], None], progress: Progress) -> None:
    nowait, enqueue = producer.enqueue_nowait, producer.enqueue
    for _ in range(COUNT):
        pace()
        try:
            nowait(topic, VALUE)
        except WouldBlockError:
            progress.refusals += 1
            await enqueue(topic, VALUE)
        progress.taken += 1
    await producer.flush()


async def through_send_many(producer: Producer, topic: str, pace: Callable[[], None], progress: Progress) -> None:
    results = await producer.send_many(PacedRecords(topic, pace, progress))
    assert len(results) == COUNT and not [r for r in results if isinstance(r, BaseException)]


async def through_send_many_over_an_iterator(
    producer: Producer, topic: str, pace: Callable[[], None], progress: Progress
) -> None:
    results = await producer.send_many(iter(PacedRecords(topic, pace, progress)))  # read as the call goes
    assert len(results) == COUNT and not [r for r in results if isinstance(r, BaseException)]


Idiom = Callable[[Producer, str, Callable[[], None], Progress], Awaitable[None]]
IDIOMS = [
    pytest.param(through_enqueue, id="enqueue"),
    pytest.param(through_the_general_enqueue, id="general-enqueue"),
    pytest.param(through_enqueue_nowait, id="enqueue_nowait"),
    pytest.param(through_send_many, id="send_many"),
]


async def records_between_other_tasks(
    mock_cluster: MockCluster, idiom: Idiom, pace: Callable[[], None]
) -> tuple[list[int], Progress]:
    """Run `idiom` over COUNT records while another task notes, each time it runs, how many the caller has handed
    over: how many records the caller buffered between two runs of another task, and the caller's progress."""
    mock_cluster.create_topic("t", 1)
    progress = Progress()
    seen: list[int] = []

    async def other_task() -> None:
        while True:
            seen.append(progress.taken)
            await asyncio.sleep(0)

    # Batches of 1 MB that linger a minute: the sender has next to nothing to do while the caller yields, so the time
    # the interval runs from a yield is the caller's own (the interval counts what other tasks do meanwhile too).
    settings = {"batch_size": 1_000_000, "batch_max_size": 1_000_000, "linger_ms": 60_000}
    async with Producer(mock_cluster.bootstrap_servers, **settings) as producer:
        await producer.enqueue("t", b"the topic's metadata first")
        await producer.flush()
        watcher = asyncio.ensure_future(other_task())
        await asyncio.sleep(0)
        try:
            await idiom(producer, "t", pace, progress)
        finally:
            watcher.cancel()
    assert progress.taken == COUNT
    marks = sorted({0, *seen, COUNT})
    return [later - earlier for earlier, later in itertools.pairwise(marks)], progress


@pytest.mark.parametrize("idiom", IDIOMS)
async def test_other_tasks_run_at_least_once_per_yield_after_bytes_max(mock_cluster: MockCluster, idiom: Idiom) -> None:
    gaps, _ = await records_between_other_tasks(mock_cluster, idiom, quickly)
    assert max(gaps) <= AT_THE_CAP, f"{max(gaps)} records ({max(gaps) * RECORD_BYTES} bytes) buffered in one go"


@pytest.mark.parametrize("idiom", IDIOMS)
async def test_a_slow_caller_yields_at_every_yield_after_bytes(mock_cluster: MockCluster, idiom: Idiom) -> None:
    gaps, _ = await records_between_other_tasks(mock_cluster, idiom, slowly)
    assert max(gaps) <= AT_YIELD_AFTER_BYTES, (
        f"{max(gaps)} records buffered in one go, though each {AT_YIELD_AFTER_BYTES} took longer than the interval"
    )


@pytest.mark.parametrize("idiom", IDIOMS)
async def test_a_quick_caller_does_not_yield_at_every_yield_after_bytes(
    mock_cluster: MockCluster, idiom: Idiom
) -> None:
    # Each 64 KiB here (9 records) takes a small part of the interval, so the clock says "not yet" at most marks.
    # One gap past the 64 KiB mark shows the call site asks the rule; failing would take each of ~44 marks in a row
    # to take the whole interval, 9 records in half a millisecond.
    gaps, progress = await records_between_other_tasks(mock_cluster, idiom, quickly)
    assert max(gaps) > AT_YIELD_AFTER_BYTES, f"a yield at every 64 KiB: {sorted(set(gaps))}"
    if idiom is through_enqueue_nowait:
        # It refuses a record only when a yield is due, not at every 64 KiB mark (then `await enqueue` would not
        # yield, and the refusal was for nothing).
        marks = COUNT // AT_YIELD_AFTER_BYTES
        assert progress.refusals < marks, f"{progress.refusals} refusals for {marks} marks of 64 KiB"


async def test_a_slow_iterator_is_read_only_a_few_records_ahead_of_the_yields(mock_cluster: MockCluster) -> None:
    """send_many read an iterator 256 records at a time, whatever its pace: a slow one's 256 records (here 2 MB, 256
    times the caller's own work per record) were read between two yields, however long that took. Its chunks now
    hold what it yields in YIELD_AFTER_S, so the loop runs at every YIELD_AFTER_BYTES, a chunk's read-ahead apart."""
    gaps, _ = await records_between_other_tasks(mock_cluster, through_send_many_over_an_iterator, slowly)
    assert max(gaps) <= 2 * AT_YIELD_AFTER_BYTES + STREAM_FIRST_CHUNK, f"{max(gaps)} records read in one go"
