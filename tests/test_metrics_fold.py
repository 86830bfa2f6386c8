"""The observer keeps only raw facts per request and folds them into the metrics later, many requests at once: the
folded numbers must be exactly those of counting each request as it happens (retries, compression, several topics
and nodes, throttling, failed answers, and a fold forced by the pending bound in the middle)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from aioproducer.hooks import HookChain
from aioproducer.observability.metrics import LATENCY_BUCKETS_MS, Gauges, Histogram, ProducerMetrics
from aioproducer.observability.metrics_fold import PENDING_BOUND
from aioproducer.observability.observer import Observer
from aioproducer.records.layout import BATCH_HEADER_SIZE

OVERHEAD = 70


@given(st.lists(st.integers(min_value=0, max_value=200_000) | st.sampled_from(LATENCY_BUCKETS_MS), max_size=300))
def test_a_histogram_counts_many_values_at_once_as_one_by_one(values: list[float]) -> None:
    one_by_one, at_once = Histogram(LATENCY_BUCKETS_MS), Histogram(LATENCY_BUCKETS_MS)
    for value in values:
        one_by_one.observe(value)
    at_once.observe_all(values)
    assert at_once.snapshot() == one_by_one.snapshot()


@dataclass
class _Closed:
    record_count: int
    records_section: bytes
    compression: int


@dataclass
class _Outcome:
    done: bool = False
    error: BaseException | None = None


@dataclass
class _Batch:
    topic: str
    partition: int
    closed: _Closed
    reserved_bytes: int
    attempts: int
    created_ms: int
    producer_id: int = -1
    producer_epoch: int = -1
    outcome: _Outcome = field(default_factory=_Outcome)


@dataclass
class _Conn:
    node_id: int
    last_active: float
    host: str = "localhost"
    port: int = 9092
    versions: dict[int, int] = field(default_factory=dict)


def _counted_as_it_happens(
    expected: ProducerMetrics, conn: _Conn, batches: list[_Batch], answer: tuple[int, Any] | None
) -> None:
    """The reference: each request counted when sent and answered, batch by batch."""
    now = int(conn.last_active * 1000)
    sizes, waits, records, request_bytes, sized_records, sized_bytes = [], [], 0, 0, 0, 0
    for batch in batches:
        count, wire = batch.closed.record_count, BATCH_HEADER_SIZE + len(batch.closed.records_section)
        record_bytes = batch.reserved_bytes - count * OVERHEAD
        records += count
        request_bytes += wire
        sizes.append(wire)
        stats = expected.topic_stats(batch.topic)
        stats.records += count
        stats.bytes += wire
        stats.uncompressed += max(record_bytes, wire) if batch.closed.compression else wire
        if not batch.attempts:
            waits.append(now - batch.created_ms)
            sized_records += count
            sized_bytes += record_bytes
    expected.request_written(conn.node_id, records, request_bytes, sizes, waits, sized_records, sized_bytes)
    if answer is not None and answer[1] is not None:
        answered_ms, response = answer
        delivered = [answered_ms - b.created_ms for b in batches if b.outcome.done and b.outcome.error is None]
        expected.delivery_latency.observe_all(delivered)
        expected.response_received(conn.node_id, answered_ms - now, response["throttle_time_ms"])


def test_folded_metrics_equal_those_counted_request_by_request() -> None:
    async def main() -> None:
        rng = random.Random(7)
        loop = asyncio.get_running_loop()
        observer = Observer(ProducerMetrics(1 << 30), HookChain([], lambda: None), lambda: 0, OVERHEAD)
        expected = ProducerMetrics(1 << 30)
        conns = [_Conn(1, 0.0), _Conn(2, 0.0)]
        for request in range(3 * PENDING_BOUND + 5):
            conn = conns[rng.randrange(2)]
            conn.last_active = 10 + request * 0.0037
            sent_ms = int(conn.last_active * 1000)
            batches = [
                _Batch(
                    topic=rng.choice(("a", "b")) if request % 3 else "a",
                    partition=rng.randrange(4),
                    closed=_Closed(count := rng.randint(1, 200), b"x" * rng.randint(10, 30_000), rng.choice((0, 0, 3))),
                    reserved_bytes=count * OVERHEAD + rng.randint(count, 40_000),
                    attempts=rng.choice((0, 0, 0, 1, 2)),
                    created_ms=sent_ms - rng.randint(0, 300),
                )
                for _ in range(rng.randint(0, 7))
            ]
            future: asyncio.Future[Any] = loop.create_future()
            observed = observer.produce_sent(conn, cast(Any, batches), future)
            assert observed is not None
            fate = rng.random()
            answered_ms = sent_ms + rng.randint(0, 2000)
            if fate < 0.1:
                future.set_exception(ConnectionError("lost"))
                response = None
            else:
                response = {"throttle_time_ms": rng.choice((0, 0, 0, 5, 250))}
                future.set_result(response)
                for batch in batches:  # as the sender settles them: most delivered, some retried, some failed
                    roll = rng.random()
                    batch.outcome = _Outcome(done=roll < 0.9, error=KeyError("x") if roll < 0.1 else None)
            # Counted before the observer reads it: a retry bumps `attempts` after the answer, and the observer
            # must keep what the request carried.
            _counted_as_it_happens(expected, conn, batches, (answered_ms, response))
            observed(future, answered_ms)
            for batch in batches:
                batch.attempts += 1
                batch.reserved_bytes = 0  # released: the observer read it when the request went out
        got = observer.snapshot(_Acc(), [], None, 0)
        want = expected.snapshot(Gauges(buffer_available_bytes=1 << 30))
        assert got == want
        assert got.producer["request-total"] == 3 * PENDING_BOUND + 5
        assert set(got.topics) == {"a", "b"} and set(got.nodes) == {"node-1", "node-2"}
        assert got.producer["produce-throttle-time-max"] == 250

    asyncio.run(main())


def test_pending_facts_stay_bounded_and_a_snapshot_folds_them() -> None:
    observer = Observer(ProducerMetrics(1000), HookChain([], lambda: None), lambda: 0, OVERHEAD)
    conn = _Conn(1, 1.0)
    batch = _Batch("t", 0, _Closed(3, b"xyz", 0), 3 * OVERHEAD + 30, 0, 990)
    for _ in range(5 * PENDING_BOUND):
        observer.produce_sent(conn, cast(Any, [batch]), None)
        assert len(observer._sent) < PENDING_BOUND
    assert observer.snapshot(_Acc(), [], None, 0).producer["record-send-total"] == 15 * PENDING_BOUND
    assert len(observer._sent) == 0


class _Acc:
    buffer_memory = 1 << 30
    used_bytes = 0
