"""A seeded, randomized fault campaign: several idempotent producers write while faults hit the cluster, then an
independent read_committed consumer judges what reached the log. Holds the campaign and its judge; the short
versions in the test suite live in test_chaos.py, and `nox -s chaos` runs this module for minutes:

    python tests/chaos_campaign.py --target kafka --seeds 10 --duration 60
    python tests/chaos_campaign.py --target mock --seeds 10 --duration 30

Every producer talks to the brokers through the fault proxy (fault_proxy.py). Four producers are idempotent with
acks=all; a fifth has acks=1 (no idempotence), a sixth acks=0. Faults on both targets: slow readers (a broker's proxy
stops reading for a while, so the producers' sockets fill and their transports push back) and bursts larger than
the socket buffers (a producer enqueues megabytes at once).

On real Kafka (3 combined nodes, replication 3, min.insync.replicas=2): kill -9, SIGSTOP/SIGCONT and controlled
shutdown of partition leaders and of the active controller, restarts, lost acknowledgements (the proxy cuts a
connection right after forwarding a Produce request, so the batch is written and its answer lost), MESSAGE_TOO_LARGE
splits (one topic's `max.message.bytes` is smaller than the producers' batches), a topic whose `max.message.bytes`
is above batch_size but below grown batches (the acks=0 and acks=1 producers write there), and partition growth
mid-run (CreatePartitions). One node is down at a time, so acks=all can always be met once leaders move, and
`delivery_timeout_ms` is far longer than any fault.

On librdkafka's mock cluster: leader moves, brokers down and up, latency, and injected Produce errors
(NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS, OUT_OF_ORDER_SEQUENCE_NUMBER, MESSAGE_TOO_LARGE);
the proxy enforces the small topic's `max.message.bytes` as an acks=0 broker would (the mock has no such limit).
The mock checks no sequence for a non-transactional producer, so a batch resent after a lost answer is stored
again: later copies in the same partition are dropped before judging (fault_helpers.without_resends); and it stores
a batch sent behind a refused one before the refused one's retry, so order is judged there only for producers with
one request in flight.

The judge, per producer: nothing may hang (every record settles within delivery_timeout_ms) or fail (but what an
injected fault forces). acks=all with idempotence: every acknowledged record is in the log exactly once, each stream
(producer, key) in send order within a partition. acks=1: acknowledged records may be lost when a leader dies before
its followers copied them, and resent ones duplicated (counted, not judged). acks=0: every record reported delivered
reached the broker's socket (the proxy read it).

Each record's value embeds its producer, key and per-key sequence number: `p<producer>|k<key>|s<seq>|<padding>`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fault_helpers import without_resends
from fault_proxy import FaultProxy

from aioproducer import Producer, RecordMetadata
from aioproducer.error_codes import ErrorCode
from aioproducer.testing import ConsumedRecord, KafkaCluster, MockCluster, read_back

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
DELIVERY_TIMEOUT_MS = 120_000  # far longer than any fault: nothing may fail
SPLIT_TOPIC_MAX_BYTES = 2048  # the split topic's max.message.bytes, well under the producers' batch_size
SMALL_TOPIC_MAX_BYTES = 20_000  # above batch_size (16 KiB), below a grown batch (256 KiB)
BURST_BYTES = (4 << 20, 12 << 20)  # a burst's size, more than a loopback socket's buffers hold
BURST_VALUE_BYTES = 1000
PRODUCE, METADATA = 0, 3
NOT_LEADER_OR_FOLLOWER = ErrorCode.NOT_LEADER_OR_FOLLOWER
REQUEST_TIMED_OUT = ErrorCode.REQUEST_TIMED_OUT
MESSAGE_TOO_LARGE = ErrorCode.MESSAGE_TOO_LARGE
NOT_ENOUGH_REPLICAS = ErrorCode.NOT_ENOUGH_REPLICAS
OUT_OF_ORDER_SEQUENCE_NUMBER = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
_VALUE = re.compile(rb"^p(\d+)\|k(-|\d+)\|s(\d+)\|")


# -- producers and their records ---------------------------------------------------------------------------------
@dataclass
class ProducerPlan:
    """One producer of the campaign: its settings and what it sent."""

    index: int
    keyed: bool
    compression: str
    in_flight: int
    topics: tuple[str, ...]
    grows: bool = False  # batches may grow past batch_size while they wait (batch_max_size), or stay fixed as Java's
    acks: int = -1  # -1 (all, idempotent), 1 (no idempotence) or 0
    sent: list[tuple[str, bytes, bytes | None]] = field(default_factory=list)  # (topic, value, key) in send order
    futures: list[asyncio.Future[RecordMetadata]] = field(default_factory=list)
    appended_at: list[float] = field(default_factory=list)
    done_at: dict[int, float] = field(default_factory=dict)
    bursts: list[int] = field(default_factory=list)  # records to enqueue at once, asked by the fault schedule

    def settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "acks": self.acks,
            "compression_type": self.compression,
            "max_in_flight_requests_per_connection": self.in_flight,
            "linger_ms": 10,
            "batch_size": 16384,
            "delivery_timeout_ms": DELIVERY_TIMEOUT_MS,
            "request_timeout_ms": 8000,
            "retry_backoff_ms": 50,
            "retry_backoff_max_ms": 500,
            "reconnect_backoff_ms": 50,
            "reconnect_backoff_max_ms": 500,
        }
        if self.acks != 0:  # acks=0 keeps its default: batches stay at batch_size
            settings["batch_max_size"] = 256 * 1024 if self.grows else 16384
        return settings

    def describe(self) -> str:
        kind = "keyed" if self.keyed else "keyless"
        growth = "grown" if self.grows else "fixed"
        acks = {-1: "all", 1: "1", 0: "0"}[self.acks]
        return f"p{self.index}:acks={acks}/{kind}/{self.compression}/inflight={self.in_flight}/{growth}"


def plan_producers(
    rng: random.Random, count: int, topics: Sequence[str], loose_topics: Sequence[str] = ()
) -> list[ProducerPlan]:
    """`count` producers: keyed and keyless alternate, in-flight 5 for the first pair, 1 for the next pair; the
    middle two of each four let their batches grow, the others keep Java's fixed batches. A fifth has acks=1 and a
    sixth acks=0 (both keyless, growing as they may): they write to `loose_topics` when given."""
    codecs = list(COMPRESSIONS)
    rng.shuffle(codecs)
    plans = []
    for i in range(count):
        acks = -1 if i < 4 else (1, 0)[i % 2]
        plans.append(
            ProducerPlan(
                i,
                keyed=i % 2 == 0 and acks == -1,
                compression=codecs[i % len(codecs)],
                in_flight=(5, 1)[(i // 2) % 2],
                topics=tuple(loose_topics) if acks != -1 and loose_topics else tuple(topics),
                grows=i % 4 in (1, 2) or acks == 1,
                acks=acks,
            )
        )
    return plans


async def run_producer(
    plan: ProducerPlan, bootstrap: str, rate: float, stop: asyncio.Event, rng: random.Random
) -> None:
    """Send paced records until `stop`, remembering each record's append time and when its future settled.

    Keyed records use 8 keys; each key goes to one topic (a key's order is judged within a partition). Values
    carry incompressible padding so batches to the split topic really exceed its limit whatever the codec."""
    producer = Producer(bootstrap, **plan.settings())
    await producer.start()
    sequences: Counter[str] = Counter()
    try:
        began = time.monotonic()
        n = 0
        while not stop.is_set():
            if plan.bursts:
                await _burst(producer, plan, plan.bursts.pop(), sequences, rng)
            key_index = rng.randrange(8) if plan.keyed else -1
            key_name = "-" if key_index < 0 else str(key_index)
            topic = plan.topics[key_index % len(plan.topics)] if plan.keyed else rng.choice(plan.topics)
            seq = sequences[key_name]
            sequences[key_name] += 1
            value = b"p%d|k%s|s%d|" % (plan.index, key_name.encode(), seq) + rng.randbytes(rng.randrange(40, 160))
            key = b"key-%d" % key_index if plan.keyed else None
            future = await producer.enqueue(topic, value, key=key)
            position = len(plan.sent)
            plan.sent.append((topic, value, key))
            plan.futures.append(future)
            plan.appended_at.append(time.monotonic())
            future.add_done_callback(lambda f, i=position: _settled(plan, i, f))
            n += 1
            ahead = began + n / rate - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)
            elif n % 20 == 0:
                await asyncio.sleep(0)
        # Every future must settle within delivery_timeout_ms (+1 s, checked by the judge) of its append.
        pending = [f for f in plan.futures if not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=DELIVERY_TIMEOUT_MS / 1000 + 5)
    finally:
        await producer.close(timeout=10)


async def _burst(
    producer: Producer, plan: ProducerPlan, count: int, sequences: Counter[str], rng: random.Random
) -> None:
    """`count` records of BURST_VALUE_BYTES enqueued at once (no pacing): more than the sockets hold."""
    for _ in range(count):
        key_index = rng.randrange(0, 8, len(plan.topics)) if plan.keyed else -1  # keys of the first topic
        key_name = "-" if key_index < 0 else str(key_index)
        topic = plan.topics[key_index % len(plan.topics)] if plan.keyed else plan.topics[0]
        seq = sequences[key_name]
        sequences[key_name] += 1
        head = b"p%d|k%s|s%d|" % (plan.index, key_name.encode(), seq)
        value = head + rng.randbytes(BURST_VALUE_BYTES - len(head))
        key = b"key-%d" % key_index if plan.keyed else None
        future = await producer.enqueue(topic, value, key=key)
        position = len(plan.sent)
        plan.sent.append((topic, value, key))
        plan.futures.append(future)
        plan.appended_at.append(time.monotonic())
        future.add_done_callback(lambda f, i=position: _settled(plan, i, f))


def _settled(plan: ProducerPlan, position: int, future: asyncio.Future[RecordMetadata]) -> None:
    plan.done_at[position] = time.monotonic()
    if not future.cancelled():
        future.exception()  # seen: the judge reads it


class SplitCounter(logging.Handler):
    """Counts the producer's MESSAGE_TOO_LARGE splits (the sender logs each at INFO), to show they happened."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.splits = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "splitting the batch" in record.getMessage():
            self.splits += 1

    @contextlib.contextmanager
    def attached(self) -> Iterator[SplitCounter]:
        logger = logging.getLogger("aioproducer.sender")
        level = logger.level
        logger.addHandler(self)
        logger.setLevel(logging.INFO)
        try:
            yield self
        finally:
            logger.removeHandler(self)
            logger.setLevel(level)


# -- the judge ---------------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    """One seed's result: the table row and the evidence behind any non-zero count."""

    target: str
    seed: int
    producers: list[str]
    faults: Counter[str]
    sent: int = 0
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    misplaced: int = 0  # acknowledged at an offset that holds another record
    failed: Counter[str] = field(default_factory=Counter)
    unresolved: int = 0
    late: int = 0  # settled later than delivery_timeout_ms + 1 s after their append
    resent_copies: int = 0  # mock only: copies of resent batches dropped before judging
    not_on_socket: int = 0  # acks=0: reported delivered, never read off the producer's socket
    loose_lost: int = 0  # acks=1: acknowledged, not in the log (allowed when a leader dies first)
    loose_duplicated: int = 0  # acks=1 and acks=0: copies of resent records (allowed without idempotence)
    trimmed: int = 0  # mock only: acknowledged below the partition's log start (the mock keeps 5 MB a partition)
    examples: list[str] = field(default_factory=list)
    seconds: float = 0.0
    # Failures the faults force, by reason, at most: an injected MESSAGE_TOO_LARGE that meets a batch of a single
    # record, which cannot be split, fails that record (as in Java). Real Kafka forces none.
    forced: Counter[str] = field(default_factory=Counter)

    @property
    def unforced_failures(self) -> int:
        return sum(max(0, n - self.forced[reason]) for reason, n in self.failed.items())

    @property
    def clean(self) -> bool:
        return not (
            self.lost
            or self.duplicated
            or self.reordered
            or self.misplaced
            or self.unforced_failures
            or self.unresolved
            or self.late
            or self.not_on_socket
        )

    def row(self) -> str:
        faults = ",".join(f"{k}={v}" for k, v in sorted(self.faults.items())) or "-"
        failed = ",".join(f"{k}={v}{' (forced)' if v <= self.forced[k] else ''}" for k, v in self.failed.items()) or "0"
        return (
            f"| {self.target} | {self.seed} | {faults} | {self.sent} | {self.acknowledged} | {self.lost} | "
            f"{self.duplicated} | {self.reordered} | {self.misplaced} | {failed} | {self.unresolved} | {self.late} |"
            f" {self.not_on_socket} | {self.loose_lost}/{self.loose_duplicated} | {self.resent_copies} |"
            f" {self.seconds:.0f} s | {'clean' if self.clean else 'FAILED'} |"
        )

    def __str__(self) -> str:
        lines = [TABLE_HEADER, self.row(), "producers: " + " ".join(self.producers)]
        lines += self.examples[:12]
        return "\n".join(lines)


TABLE_HEADER = (
    "| target | seed | faults injected | sent | acknowledged | lost | duplicated | reordered | bad offset | "
    "failed (reason) | unresolved | late | acks=0 not on socket | acks=1 lost/dup (allowed) | "
    "resent copies (mock) | time | verdict |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def judge(
    outcome: Outcome,
    plans: Sequence[ProducerPlan],
    stored: dict[str, list[ConsumedRecord]],
    mock: bool,
    on_socket: set[bytes] | None = None,
    forced: Collection[tuple[int, str]] = (),
) -> None:
    """Fill `outcome` from what was sent and acknowledged against what an independent consumer read, and, for
    acks=0, against `on_socket`: every record value the proxy read off the producers' sockets. `forced`: (acks,
    error class name) of failures the injected faults force on such producers (counted in `outcome.forced`)."""
    limit_s = DELIVERY_TIMEOUT_MS / 1000 + 1
    strict = {str(p.index).encode() for p in plans if p.acks == -1}
    # The mock takes a batch whatever its sequence: with several requests in flight, a batch behind a refused one
    # is stored before the refused one's retry (real Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER). Order is judged
    # there only for producers with one request in flight.
    ordered = {str(p.index).encode() for p in plans if p.acks == -1 and (not mock or p.in_flight == 1)}
    acked: dict[bytes, tuple[str, RecordMetadata]] = {}
    loose: dict[bytes, tuple[str, RecordMetadata]] = {}
    for plan in plans:
        outcome.sent += len(plan.sent)
        for position, ((topic, value, _), future) in enumerate(zip(plan.sent, plan.futures, strict=True)):
            if not future.done():
                outcome.unresolved += 1
                continue
            if plan.done_at.get(position, float("inf")) - plan.appended_at[position] > limit_s:
                outcome.late += 1
            error = None if future.cancelled() else future.exception()
            if future.cancelled() or error is not None:
                reason = "cancelled" if error is None else type(error).__name__
                outcome.failed[reason] += 1
                if (plan.acks, reason) in forced:
                    outcome.forced[reason] += 1
                if len(outcome.examples) < 12:
                    outcome.examples.append(f"failed: {value[:24]!r}: {error}")
                continue
            outcome.acknowledged += 1
            if plan.acks == -1:
                acked[value] = (topic, future.result())
            elif plan.acks == 1:
                loose[value] = (topic, future.result())
            elif on_socket is not None and value not in on_socket:
                outcome.not_on_socket += 1
                outcome.examples.append(f"acks=0: {value[:24]!r} reported delivered, never reached the broker")
    where: dict[tuple[str, int, int], bytes | None] = {}
    counts: Counter[bytes] = Counter()
    for topic, records in stored.items():
        if mock:
            records, dropped = without_resends(records)
            outcome.resent_copies += dropped
        last: dict[tuple[int, bytes, bytes], tuple[int, int]] = {}
        for record in records:
            where[(topic, record.partition, record.offset)] = record.value
            if record.value is None:
                continue
            counts[record.value] += 1
            match = _VALUE.match(record.value)
            if match is None:
                outcome.examples.append(f"unexpected value in {topic}: {record.value[:40]!r}")
                continue
            stream = (record.partition, match[1], match[2])
            seq = int(match[3])
            previous = last.get(stream)
            if previous is not None and seq <= previous[0] and match[1] in ordered:
                outcome.reordered += 1
                outcome.examples.append(
                    f"reordered: {topic}[{record.partition}] p{match[1].decode()} k{match[2].decode()}: "
                    f"s{seq} at offset {record.offset} after s{previous[0]} at offset {previous[1]}"
                )
            last[stream] = (seq, record.offset)
    # librdkafka's mock keeps the last 5 MB of each partition: what it trimmed was stored, not lost.
    log_start = {(topic, r.partition): r.offset for topic, records in stored.items() for r in reversed(records)}

    def trimmed(topic: str, metadata: RecordMetadata) -> bool:
        return mock and 0 <= metadata.offset < log_start.get((topic, metadata.partition), -1)

    for value, (topic, metadata) in acked.items():
        if counts[value] == 0 and trimmed(topic, metadata):
            outcome.trimmed += 1
            continue
        if counts[value] == 0:
            outcome.lost += 1
            outcome.examples.append(
                f"lost: {value[:24]!r} acknowledged at {topic}[{metadata.partition}]@{metadata.offset}"
            )
        elif not mock and where.get((topic, metadata.partition, metadata.offset)) != value:
            outcome.misplaced += 1
            outcome.examples.append(
                f"bad offset: {value[:24]!r} acknowledged at {metadata.partition}@{metadata.offset}"
            )
    outcome.loose_lost = sum(1 for value, (t, m) in loose.items() if counts[value] == 0 and not trimmed(t, m))
    for value, n in counts.items():
        if n <= 1:
            continue
        match = _VALUE.match(value)
        if match is not None and match[1] not in strict:
            outcome.loose_duplicated += n - 1  # without idempotence a resent record may be stored twice
        else:
            outcome.duplicated += n - 1
            outcome.examples.append(f"duplicated x{n}: {value[:24]!r}")


# -- faults on real Kafka ----------------------------------------------------------------------------------------
def active_controller(cluster: KafkaCluster) -> int:
    """The KRaft quorum leader: the newest election any running node recorded in its `quorum-state` file."""
    best = (-1, -1)
    for node_id in cluster.node_ids:
        if not cluster.is_running(node_id):
            continue
        for path in (cluster.workdir / f"node-{node_id}").rglob("quorum-state"):
            with contextlib.suppress(OSError, ValueError):
                state = json.loads(path.read_text())
                best = max(best, (int(state["leaderEpoch"]), int(state["leaderId"])))
    return best[1] if best[1] in cluster.node_ids else random.choice(cluster.node_ids)


def ask_burst(plans: Sequence[ProducerPlan], rng: random.Random) -> str:
    """A random producer enqueues BURST_BYTES worth of records at once, more than its sockets hold."""
    plan = rng.choice(plans)
    count = rng.randint(*BURST_BYTES) // BURST_VALUE_BYTES
    plan.bursts.append(count)
    return f"p{plan.index}: {count} records of {BURST_VALUE_BYTES} B"


async def slow_reader(proxy: FaultProxy, rng: random.Random) -> str:
    """One broker's proxy stops reading producers' bytes for a while."""
    upstream = rng.choice(proxy.upstreams())
    seconds = rng.uniform(0.2, 2.5)
    await proxy.stall(seconds, upstream)
    return f"{upstream[0]}:{upstream[1]} for {seconds:.1f} s"


class KafkaFaults:
    """Random faults on a 3-node cluster, one at a time, each healed before the next."""

    KINDS = (
        "kill-leader",
        "pause-leader",
        "shutdown-leader",
        "kill-controller",
        "pause-controller",
        "restart-controller",
        "lost-ack",
        "lost-ack",
        "slow-reader",
        "slow-reader",
        "burst",
    )

    def __init__(
        self,
        cluster: KafkaCluster,
        proxy: FaultProxy,
        rng: random.Random,
        topics: Sequence[str],
        plans: Sequence[ProducerPlan],
    ) -> None:
        self.cluster, self.proxy, self.rng, self.topics, self.plans = cluster, proxy, rng, topics, plans
        self.injected: Counter[str] = Counter()
        self.log: list[str] = []

    async def run(self, duration_s: float, grow: tuple[str, int] | None) -> None:
        began = time.monotonic()
        grown = grow is None
        while time.monotonic() - began < duration_s or not grown:
            await asyncio.sleep(self.rng.uniform(0.5, 2.0))
            if not grown and (time.monotonic() - began > duration_s / 3 or self.rng.random() < 0.3):
                assert grow is not None
                await asyncio.to_thread(self.cluster.add_partitions, grow[0], grow[1])
                self._note("grow-partitions", f"{grow[0]} -> {grow[1]} partitions")
                grown = True
                continue
            await self.inject(self.rng.choice(self.KINDS))

    def _note(self, kind: str, detail: str) -> None:
        self.injected[kind] += 1
        self.log.append(f"{time.strftime('%H:%M:%S')} {kind}: {detail}")

    async def _leader(self) -> int:
        topic = self.rng.choice(self.topics)
        leader = await asyncio.to_thread(self.cluster.leader_of, topic, 0)
        return leader if leader in self.cluster.node_ids else self.rng.choice(self.cluster.node_ids)

    async def inject(self, kind: str) -> None:
        cluster = self.cluster
        if kind == "lost-ack":
            n = self.rng.randint(1, 3)
            self.proxy.cut(n)
            self._note(kind, f"the next {n} Produce answers")
            return
        if kind == "slow-reader":
            self._note(kind, await slow_reader(self.proxy, self.rng))
            return
        if kind == "burst":
            self._note(kind, ask_burst(self.plans, self.rng))
            return
        node = await (self._leader() if kind.endswith("leader") else asyncio.to_thread(active_controller, cluster))
        action = kind.split("-")[0]
        self._note(kind, f"node {node}")
        if action == "pause":
            await asyncio.to_thread(cluster.pause, node)
            await asyncio.sleep(self.rng.uniform(0.5, 6.0))  # short stalls and ones past the broker session
            await asyncio.to_thread(cluster.resume, node)
        elif action == "kill":
            await asyncio.to_thread(cluster.kill, node)
            await asyncio.sleep(self.rng.uniform(0.5, 3.0))
            await asyncio.to_thread(cluster.start_node, node)
        else:  # controlled shutdown, then start again
            await asyncio.to_thread(cluster.stop, node)
            await asyncio.sleep(self.rng.uniform(0.0, 2.0))
            await asyncio.to_thread(cluster.start_node, node)


async def kafka_seed(
    cluster: KafkaCluster, seed: int, duration_s: float, producers: int = 6, rate: float = 150.0
) -> Outcome:
    """One seed of the campaign on `cluster` (3 nodes, all running); leaves every node running."""
    rng = random.Random(seed)
    began = time.monotonic()
    tag = f"chaos-{seed}-{rng.randrange(16**6):06x}"
    main_topic, split_topic, small_topic = f"{tag}-main", f"{tag}-split", f"{tag}-small"
    await asyncio.to_thread(cluster.create_topic, main_topic, 3)
    await asyncio.to_thread(
        cluster.create_topic, split_topic, 2, config={"max.message.bytes": str(SPLIT_TOPIC_MAX_BYTES)}
    )
    await asyncio.to_thread(
        cluster.create_topic, small_topic, 2, config={"max.message.bytes": str(SMALL_TOPIC_MAX_BYTES)}
    )
    proxy = FaultProxy(observe_records=True)
    plans = plan_producers(rng, producers, (main_topic, split_topic), (main_topic, small_topic))
    outcome = Outcome("kafka", seed, [p.describe() for p in plans], Counter())
    faults = KafkaFaults(cluster, proxy, rng, (main_topic, split_topic), plans)
    splits = SplitCounter()
    with splits.attached():
        await _kafka_run(cluster, plans, proxy, faults, main_topic, seed, rate, duration_s)
    outcome.faults = faults.injected
    outcome.faults["lost-ack-cut"] = proxy.cut_count
    outcome.faults["splits"] = splits.splits
    stored = {}
    for topic in (main_topic, split_topic, small_topic):
        stored[topic] = await asyncio.to_thread(
            read_back, cluster.bootstrap_servers, topic, timeout_s=60, isolation_level="read_committed"
        )
    judge(outcome, plans, stored, mock=False, on_socket=proxy.records_read)
    if not outcome.clean:
        outcome.examples += faults.log
    outcome.seconds = time.monotonic() - began
    return outcome


async def _kafka_run(
    cluster: KafkaCluster,
    plans: Sequence[ProducerPlan],
    proxy: FaultProxy,
    faults: KafkaFaults,
    main_topic: str,
    seed: int,
    rate: float,
    duration_s: float,
) -> None:
    try:
        bootstrap = ",".join([await proxy.front(cluster.bootstrap(nodes=[n])) for n in cluster.node_ids])
        stop = asyncio.Event()
        tasks = [
            asyncio.ensure_future(run_producer(p, bootstrap, rate / len(plans), stop, random.Random(seed * 100 + i)))
            for i, p in enumerate(plans)
        ]
        try:
            await asyncio.sleep(1.0)
            await faults.run(duration_s, (main_topic, 5))
        finally:
            stop.set()
            proxy.resume_reading()
            await asyncio.to_thread(cluster.heal)
            await asyncio.gather(*tasks)
            await proxy.idle(60)  # what the producers' sockets still held reaches the brokers
    finally:
        await proxy.close()


# -- the same on librdkafka's mock cluster -----------------------------------------------------------------------
async def mock_seed(seed: int, duration_s: float, producers: int = 6, rate: float = 400.0) -> Outcome:
    """One seed on a fresh 3-broker mock cluster: leader moves, brokers down and up, latency, injected errors, slow
    readers and bursts."""
    rng = random.Random(seed)
    began = time.monotonic()
    topics = ("mock-a", "mock-b")
    small_topic = "mock-small"
    injected: Counter[str] = Counter()
    splits = SplitCounter()
    proxy = FaultProxy(observe_records=True)
    proxy.max_message_bytes[small_topic] = SMALL_TOPIC_MAX_BYTES
    with MockCluster(3) as cluster, splits.attached():
        cluster.create_topic(topics[0], 4)
        cluster.create_topic(topics[1], 2)
        cluster.create_topic(small_topic, 2)
        plans = plan_producers(rng, producers, topics, (topics[0], small_topic))
        bootstrap = await proxy.bootstrap(cluster.bootstrap_servers)
        stop = asyncio.Event()
        tasks = [
            asyncio.ensure_future(run_producer(p, bootstrap, rate / producers, stop, random.Random(seed * 100 + i)))
            for i, p in enumerate(plans)
        ]
        try:
            await asyncio.sleep(0.5)
            end = time.monotonic() + duration_s
            while time.monotonic() < end:
                await asyncio.sleep(rng.uniform(0.1, 0.6))
                kind = rng.choice(
                    ("leader-move", "broker-down", "latency", "errors", "errors", "too-large", "slow-reader", "burst")
                )
                injected[kind] += 1
                broker = rng.randint(1, 3)
                if kind == "leader-move":
                    topic = rng.choice(topics)
                    await asyncio.to_thread(cluster.set_partition_leader, topic, rng.randrange(2), broker)
                elif kind == "broker-down":
                    await asyncio.to_thread(cluster.set_broker_down, broker)
                    await asyncio.sleep(rng.uniform(0.1, 1.5))
                    await asyncio.to_thread(cluster.set_broker_up, broker)
                elif kind == "latency":
                    await asyncio.to_thread(cluster.set_broker_rtt, broker, rng.randint(50, 1500))
                    await asyncio.sleep(rng.uniform(0.2, 1.5))
                    await asyncio.to_thread(cluster.set_broker_rtt, broker, 0)
                elif kind == "errors":
                    codes = [
                        rng.choice(
                            (
                                NOT_LEADER_OR_FOLLOWER,
                                REQUEST_TIMED_OUT,
                                NOT_ENOUGH_REPLICAS,
                                OUT_OF_ORDER_SEQUENCE_NUMBER,
                            )
                        )
                        for _ in range(rng.randint(1, 4))
                    ]
                    await asyncio.to_thread(cluster.push_request_errors, PRODUCE, *codes)
                elif kind == "slow-reader":
                    await slow_reader(proxy, rng)
                elif kind == "burst":
                    ask_burst(plans, rng)
                else:
                    await asyncio.to_thread(cluster.push_request_errors, PRODUCE, MESSAGE_TOO_LARGE)
        finally:
            stop.set()
            proxy.resume_reading()
            for broker in (1, 2, 3):
                await asyncio.to_thread(cluster.set_broker_up, broker)
                await asyncio.to_thread(cluster.set_broker_rtt, broker, 0)
            await asyncio.gather(*tasks)
            await proxy.idle(60)
            await proxy.close()
        outcome = Outcome("mock", seed, [p.describe() for p in plans], injected)
        # The mock fails a whole request with an injected code: at most one batch per partition of each topic.
        outcome.forced["MessageTooLargeError"] = injected["too-large"] * 8
        outcome.faults["splits"] = splits.splits
        stored = {}
        for topic in (*topics, small_topic):
            stored[topic] = await asyncio.to_thread(
                read_back, cluster.bootstrap_servers, topic, timeout_s=60, isolation_level="read_committed"
            )
        # Without idempotence an injected OUT_OF_ORDER_SEQUENCE_NUMBER is a final error (as in Java).
        forced = [(1, "OutOfOrderSequenceNumberError")]
        judge(outcome, plans, stored, mock=True, on_socket=proxy.records_read, forced=forced)
    outcome.seconds = time.monotonic() - began
    return outcome


# -- command line ------------------------------------------------------------------------------------------------
async def _main(args: argparse.Namespace) -> int:
    outcomes: list[Outcome] = []
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    if args.target in ("mock", "both"):
        for seed in seeds:
            outcome = await mock_seed(seed, args.duration)
            print(outcome, flush=True)
            outcomes.append(outcome)
    if args.target in ("kafka", "both"):
        with KafkaCluster(nodes=3) as cluster:
            for seed in seeds:
                outcome = await kafka_seed(cluster, seed, args.duration)
                print(outcome, flush=True)
                outcomes.append(outcome)
    print("\n" + TABLE_HEADER)
    for outcome in outcomes:
        print(outcome.row())
    return 0 if all(o.clean for o in outcomes) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=("kafka", "mock", "both"), default="both")
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds (default 3)")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults per seed (default 60)")
    return asyncio.run(_main(parser.parse_args(argv)))


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
