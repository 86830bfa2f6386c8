"""The sender's routing and request order, with its shortcuts: each partition's leader and leader epoch read once per
metadata snapshot, and a request whose batches closed at once written straight away when nothing waits for its
connection. It must route, stamp and order requests as if it read the metadata afresh per batch and queued every
request. The real sender, accumulator, sequence rules and cluster state run against fake connections (and a fake
pipeline that keeps chosen batches "on its worker"), with no broker."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.config import ProducerConfig
from aioproducer.deliveries.delivery import BatchOutcome
from aioproducer.idempotence.sequences import IdempotenceState
from aioproducer.network.cluster import Cluster, monotonic_ms
from aioproducer.network.metadata import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
from aioproducer.observability.observer import new_observer
from aioproducer.records.compression import CompressionType
from aioproducer.send.sender import Sender


class FakeConn:
    def __init__(self, node_id: int, log: list[tuple[int, list[tuple[str, int, int]]]]) -> None:
        self.node_id = node_id
        self.closed = False
        self.writable = True
        self.last_active = time.monotonic()
        self.pending: list[asyncio.Future[Any]] = []
        self._log = log

    @property
    def in_flight(self) -> int:
        return sum(not f.done() for f in self.pending)

    def send(self, api: Any, body: dict[str, Any], version: Any = None) -> asyncio.Future[Any]:
        self._log.append(
            (
                self.node_id,
                [
                    (t["name"], p["index"], int.from_bytes(bytes(p["records"])[53:57], "big", signed=True))
                    for t in body["topic_data"]
                    for p in t["partition_data"]
                ],
            )
        )
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        return future


class HoldingPipeline:
    """Closes batches at once, but keeps those of `hold` (by topic-partition) "on the worker" until `release`."""

    off_loop = True

    def __init__(self) -> None:
        self.hold: set[tuple[str, int]] = set()
        self._held: list[tuple[Any, bytes]] = []
        self._done: list[tuple[Any, bytes]] = []

    def fileno(self) -> int:
        return -1

    def submit(self, batch: Any, producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool) -> Any:
        encoded = batch.close().encode(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            transactional=transactional,
        )
        if batch.tp in self.hold:
            self._held.append((batch, encoded))
            return None
        return encoded

    def release(self) -> None:
        self._done += self._held
        self._held = []

    def completed(self) -> list[tuple[Any, bytes]]:
        done, self._done = self._done, []
        return done

    def shutdown(self) -> None:
        pass


def layout(topic: str, leaders: list[tuple[int, int]]) -> TopicInfo:
    parts = tuple(PartitionInfo(i, leader, epoch) for i, (leader, epoch) in enumerate(leaders))
    return TopicInfo(topic, parts, tuple(range(len(parts))))


def make(**options: Any) -> tuple[Sender, RecordAccumulator, Cluster, dict[int, FakeConn], list[Any]]:
    cfg = ProducerConfig(bootstrap_servers=("h:1",), linger_ms=0, **options)
    loop = asyncio.get_running_loop()
    acc = RecordAccumulator(
        batch_size=cfg.batch_size,
        linger_ms=cfg.linger_ms,
        buffer_memory=cfg.buffer_memory,
        compression=CompressionType.from_name(cfg.compression_type),
        compression_level=None,
        new_outcome=lambda tp: BatchOutcome(tp[0], tp[1], loop),
        guarantee_order=cfg.max_in_flight_requests_per_connection == 1,
    )
    cluster = Cluster(cfg, lambda: None)
    brokers = {n: BrokerInfo(n, "h", n) for n in (1, 2)}
    cluster.state.cluster = ClusterMetadata(brokers, {"t": layout("t", [(1, 5), (1, 5)])})
    written: list[Any] = []
    conns = {n: FakeConn(n, written) for n in (1, 2)}
    cluster._connections.update(conns)  # type: ignore[arg-type]
    idem = IdempotenceState(cfg.idempotence, retries=cfg.retries, delivery_timeout_ms=cfg.delivery_timeout_ms)
    if cfg.idempotence:
        idem.set_producer_id(7, 0)
    observer = new_observer(cfg, (), {}, monotonic_ms, 0)
    sender = Sender(cfg, acc, cluster, idem, cfg.acks, observer)
    return sender, acc, cluster, conns, written


def append(acc: RecordAccumulator, tp: tuple[str, int], value: bytes = b"v") -> Any:
    batch, _, _ = acc.append(tp, 0, None, value, (), 10, monotonic_ms)
    return batch


def answer(conn: FakeConn, index: int, parts: list[dict[str, Any]]) -> None:
    for part in parts:
        part["index"] = part.pop("partition_index")
    conn.pending[index].set_result({"responses": [{"name": "t", "partition_responses": parts}]})


async def test_a_leader_hint_moves_the_partition_and_its_epoch_at_the_next_pass() -> None:
    """The leader cache must follow a KIP-951 hint at once: a retried batch whose partition's leader moved by a hint
    skips its backoff and goes to the new leader, stamped with the hint's epoch (as with a fresh read per batch)."""
    sender, acc, cluster, conns, written = make(
        enable_idempotence=False, retry_backoff_ms=60_000, retry_backoff_max_ms=60_000
    )
    batch = append(acc, ("t", 0))
    sender._send_ready(monotonic_ms())
    assert written == [(1, [("t", 0, -1)])]
    assert (batch.leader_id, batch.leader_epoch) == (1, 5)
    # NOT_LEADER_OR_FOLLOWER with the new leader (node 2, epoch 6) in the answer.
    answer(
        conns[1],
        0,
        [
            {
                "partition_index": 0,
                "error_code": 6,
                "base_offset": -1,
                "current_leader": {"leader_id": 2, "leader_epoch": 6},
            }
        ],
    )
    await asyncio.sleep(0)
    assert cluster.state.cluster.topics["t"].partitions[0] == PartitionInfo(0, 2, 6)
    assert batch.attempts == 1 and batch.retry_at_ms > monotonic_ms() + 1000  # backing off...
    sender._send_ready(monotonic_ms())  # ...but its leader changed: it goes now, to node 2
    assert written[1] == (2, [("t", 0, -1)])
    assert (batch.leader_id, batch.leader_epoch) == (2, 6)
    # A metadata answer replaces the snapshot again: an older epoch is not taken, a newer one is.
    cluster.state.on_response(
        ClusterMetadata(cluster.state.cluster.brokers, {"t": layout("t", [(1, 7), (1, 5)])}), ["t"], monotonic_ms()
    )
    answer(conns[2], 0, [{"partition_index": 0, "error_code": 6, "base_offset": -1}])
    await asyncio.sleep(0)
    assert batch.attempts == 2
    sender._send_ready(monotonic_ms())  # the refreshed leader (node 1, epoch 7): at once again
    assert written[2] == (1, [("t", 0, -1)])
    assert (batch.leader_id, batch.leader_epoch) == (1, 7)


async def test_a_request_complete_at_once_waits_behind_one_still_on_the_pipeline() -> None:
    """A request whose batches closed at once must not overtake an earlier request to the same connection whose
    batches are still on the pipeline's worker (idempotence with 5 in flight: sequence order per partition)."""
    sender, acc, _cluster, conns, written = make(enable_idempotence=True, compression_type="gzip")
    pipeline = HoldingPipeline()
    sender._pipeline = pipeline  # type: ignore[assignment]
    sender._compression_pacer = None
    # Both partitions acknowledged once, so that their broker holds the producer: no probe, 5 in flight.
    append(acc, ("t", 0), b"w")
    append(acc, ("t", 1), b"w")
    sender._send_ready(monotonic_ms())
    answer(
        conns[1],
        0,
        [
            {"partition_index": 0, "error_code": 0, "base_offset": 0},
            {"partition_index": 1, "error_code": 0, "base_offset": 0},
        ],
    )
    await asyncio.sleep(0)
    assert [w[1] for w in written] == [[("t", 0, 0), ("t", 1, 0)]]
    pipeline.hold = {("t", 0)}
    append(acc, ("t", 0), b"a")
    sender._send_ready(monotonic_ms())  # request 2: t-0 seq 1, held on the pipeline
    assert len(written) == 1
    pipeline.hold = set()
    append(acc, ("t", 0), b"b")
    append(acc, ("t", 1), b"c")
    sender._send_ready(monotonic_ms())  # request 3: t-0 seq 2 and t-1 seq 1, complete at once
    assert len(written) == 1  # waits behind request 2
    pipeline.release()
    sender._on_batches_closed()
    assert sorted(written[1][1]) == [("t", 0, 1)]
    assert sorted(written[2][1]) == [("t", 0, 2), ("t", 1, 1)]
    # Nothing waits any more: the next complete request is written at once.
    assert sender._unwritten == {}
    append(acc, ("t", 1), b"d")
    sender._send_ready(monotonic_ms())
    assert written[3] == (1, [("t", 1, 2)])
    assert sender._unwritten == {}


@pytest.mark.parametrize("held_first", [True, False])
async def test_requests_to_two_connections_keep_their_own_order(held_first: bool) -> None:
    """Only a request's own connection orders it: one to another broker is written at once either way."""
    sender, acc, cluster, _conns, written = make(enable_idempotence=True, compression_type="gzip")
    cluster.state.cluster = ClusterMetadata(cluster.state.cluster.brokers, {"t": layout("t", [(1, 5), (2, 5)])})
    pipeline = HoldingPipeline()
    sender._pipeline = pipeline  # type: ignore[assignment]
    sender._compression_pacer = None
    pipeline.hold = {("t", 0)} if held_first else set()
    append(acc, ("t", 0))
    append(acc, ("t", 1))
    sender._send_ready(monotonic_ms())
    # node 1's request waits for its batch only when it is held; node 2's never waits for node 1's
    assert sorted(w[0] for w in written) == ([2] if held_first else [1, 2])
    pipeline.release()
    sender._on_batches_closed()
    assert sorted(w[0] for w in written) == [1, 2]
    assert sender._unwritten == {}
