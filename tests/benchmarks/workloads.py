"""The benchmark's workloads beyond the peer rows (latency, event-loop lag, memory, the cost of observing, ways of
waiting), the clients, their batching settings and the payloads: what each run does and how big it is; pure data.

Owns the definitions shared by the orchestrator and the workers; it must not start processes or touch a broker.
The throughput rows against every peer are `rows.py`'s.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from aioproducer.testing.kafka_jars import DEFAULT_KAFKA_VERSION
from tests.benchmarks.rows import MATCHED_BATCH_BYTES, MATCHED_LINGER_MS

__all__ = [
    "ASYNC_CLIENTS",
    "BROKERS",
    "BROKER_LABELS",
    "CLIENTS",
    "CLIENT_LABELS",
    "LINGER_MS",
    "PYTHON_CLIENTS",
    "RunSpec",
    "Workload",
    "batching_of",
    "key_pool",
    "plan",
    "value_pool",
]

Mode = Literal[
    "loop",
    "nowait",
    "bulk",
    "bulk_overlap",
    "bulk_stream",
    "bulk_overlap_stream",
    "rate",
    "idle",
    "lag",
    "memory",
    "idiom",
    "callback",
    "callback_nowait",
    "table",
]

PYTHON_CLIENTS = ("aioproducer", "aiokafka", "confluent_aio", "confluent_sync", "kafka_python")
# The Java producer (kafka-clients, the reference implementation) runs the throughput loops only.
CLIENTS = (*PYTHON_CLIENTS, "java")
WITH_JAVA = CLIENTS
ASYNC_CLIENTS = ("aioproducer", "aiokafka", "confluent_aio")
CLIENT_LABELS = {
    "aioproducer": "aioproducer",
    "aiokafka": "aiokafka",
    "confluent_aio": "confluent-kafka AIOProducer",
    "confluent_sync": "confluent-kafka Producer (sync)",
    "kafka_python": "kafka-python",
    "java": "Java producer (kafka-clients)",
    "perf_test": "kafka-producer-perf-test",
}
# Apache Kafka: one real single-node cluster for the whole bench (a fresh topic per work), the judge of every claim.
# Tansu (an embedded broker, fresh per run) runs the workloads below only when asked (`--brokers tansu,kafka`).
BROKERS = ("tansu", "kafka")
DEFAULT_BROKERS = ("kafka",)
BROKER_LABELS = {"tansu": "Tansu (embedded)", "kafka": f"Apache Kafka {DEFAULT_KAFKA_VERSION} (one node)"}
BOTH_BROKERS = BROKERS
# The workloads below run every client with the same linger (librdkafka's and Java's default; aiokafka and
# kafka-python default to 0) and its own batch size: batching "linger".
LINGER_MS = 5
DISTINCT_KEYS = 10_000
BULK_CHUNK = 10_000
# enqueue_many's idiom: how many calls' results may be outstanding before the caller awaits the oldest.
OVERLAP_CALLS = 2
_POOL = 1024  # distinct payloads cycled through: enough that no client can cache one value


@dataclass(frozen=True)
class Workload:
    """One benchmark scenario. `full`/`quick` are record counts (or samples for `idle`, seconds x rate for `rate`)."""

    name: str
    title: str
    mode: Mode
    full: int
    quick: int
    value_size: int = 100
    keyed: bool = False
    compression: str = "none"
    idempotent: bool = True  # acks=all + idempotence, aioproducer's default and Java's, for every client
    rate: int = 0
    buffer_memory: int = 0
    via_bulk: bool = False  # for "lag": produce with send_many-style chunks instead of an enqueue loop
    clients: tuple[str, ...] = PYTHON_CLIENTS
    brokers: tuple[str, ...] = BOTH_BROKERS
    # aioproducer only: "off" skips the observer's per-batch work (the baseline), "otel" adds the OpenTelemetry hook
    # with every span sampled and no exporter; "" is the default producer (metrics on, no hooks).
    observe: str = ""
    # mode "idiom": how the caller waits for its records (see IDIOMS)
    idiom: str = ""


@dataclass(frozen=True)
class RunSpec:
    """Everything a worker process needs for one run, passed as JSON on its command line."""

    client: str
    workload: str
    mode: Mode
    bootstrap: str
    topic: str
    count: int
    value_size: int
    keyed: bool
    compression: str
    idempotent: bool
    rate: int
    buffer_memory: int
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSpec:
        return cls(**data)


WORKLOADS: tuple[Workload, ...] = (
    # The throughput comparison against every peer is `rows.py`'s (run by `run.py` before these). What follows
    # measures the clients' behaviour beyond throughput: latency, event-loop lag, memory, the cost of observing, and
    # the ways of waiting for every record's outcome.
    # Latency at a fixed rate: count = records sent at `rate` per second (5 s full, 2 s quick).
    Workload(
        "latency_20k", "enqueue-to-ack latency at 20 k records/s", "rate", full=100_000, quick=40_000, rate=20_000
    ),
    # A single `send` on an idle producer: count = samples, spaced well beyond linger.ms.
    Workload("idle_send", "single send on an idle producer", "idle", full=100, quick=30),
    Workload(
        "loop_lag_zstd_1KB",
        "event-loop lag, zstd 1 KB, enqueue loop",
        "lag",
        full=150_000,
        quick=15_000,
        value_size=1000,
        compression="zstd",
        clients=ASYNC_CLIENTS,
    ),
    Workload(
        "loop_lag_zstd_1KB_bulk",
        "event-loop lag, zstd 1 KB, send_many",
        "lag",
        full=150_000,
        quick=15_000,
        value_size=1000,
        compression="zstd",
        via_bulk=True,
        clients=ASYNC_CLIENTS,
    ),
    # buffer_memory bound: the same flood through a small and a 4x larger buffer, for 1 KB and for 100 B records;
    # RSS growth must track the buffer (slope ~1) for the bound "buffer_memory + constant" to hold.
    *(
        Workload(
            f"memory_{size}B_{mb}MB",
            f"RSS growth, {size} B flat out, buffer_memory={mb} MB",
            "memory",
            full=count,
            quick=count // 5,
            value_size=size,
            buffer_memory=mb << 20,
            clients=("aioproducer",),
        )
        for size, count in ((1000, 300_000), (100, 1_000_000))
        for mb in (8, 32)
    ),
    # The cost of observing: the same keyless 100 B workloads with the observer off, with metrics only (the
    # default), and with OpenTelemetry at full sampling, run in the same rounds so the three compare fairly.
    *(
        Workload(
            f"observe_{observe}_{mode}_100B",
            f"keyless 100 B, {'enqueue loop' if mode == 'loop' else 'send_many'}, {label}",
            mode,
            # OpenTelemetry's SDK costs ~100 µs a span: fewer records keep its rows to seconds (CPU is per million).
            full=60_000 if observe == "otel" else 300_000,
            quick=6_000 if observe == "otel" else 30_000,
            clients=("aioproducer",),
            observe=observe,
        )
        for mode in ("loop", "bulk")
        for observe, label in (
            ("off", "observer off (baseline)"),
            ("metrics", "metrics only (default)"),
            ("otel", "OpenTelemetry, full sampling"),
        )
    ),
)


# The ways users wait for each record's outcome beyond the peer rows' done-callback (100 B, keyless), each run by
# every client that has the idiom.
IDIOM_TASKS = 1000
IDIOMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "gather": ("gather over every record's future", ("aioproducer", "aiokafka", "confluent_aio")),
    # confluent-kafka's AIOProducer is left out: each of its awaited sends waits for its 1 s buffer timeout, so
    # this row ran at ~1 k records/s (200 s a run) in a quick trial.
    "tasks": (f"send awaited in {IDIOM_TASKS} concurrent tasks", ("aioproducer", "aiokafka")),
    "wait": ("enqueue loop, then producer.wait(deliveries)", ("aioproducer",)),
}
IDIOM_WORKLOADS: tuple[Workload, ...] = tuple(
    Workload(
        f"idiom_{idiom}_100B",
        f"idiom: {title}",
        "idiom",
        full=200_000,
        quick=20_000,
        clients=clients,
        brokers=BOTH_BROKERS,
        idiom=idiom,
    )
    for idiom, (title, clients) in IDIOMS.items()
)
# Event-loop lag while a caller keeps every record's handle and waits for them all (the cyclic collector walks
# whatever stays alive), and a single send on an idle producer on real Kafka (the target: p99 <= linger_ms + 2 ms).
KEPT_HANDLES_WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "loop_lag_gather_100B",
        "event-loop lag, 100 B, gather over every record's future",
        "lag",
        full=300_000,
        quick=30_000,
        clients=ASYNC_CLIENTS,
        idiom="gather",
    ),
    Workload(
        "loop_lag_wait_100B",
        "event-loop lag, 100 B, enqueue loop then producer.wait",
        "lag",
        full=300_000,
        quick=30_000,
        clients=("aioproducer",),
        idiom="wait",
    ),
    # send_many of 100 B records in 10 k chunks: the caller's chunk of records is what survived into the old
    # generation and set off a full collection every ~70 k records.
    Workload(
        "loop_lag_send_many_100B",
        "event-loop lag, 100 B, send_many (10 k chunks)",
        "lag",
        full=300_000,
        quick=30_000,
        clients=("aioproducer", "aiokafka"),
        idiom="send_many",
    ),
)
WORKLOADS = WORKLOADS + IDIOM_WORKLOADS + KEPT_HANDLES_WORKLOADS


def plan(only: tuple[str, ...] = (), clients: tuple[str, ...] = (), broker: str = "kafka") -> list[Workload]:
    """The workloads to run on `broker`, in order, optionally narrowed to some names and clients."""
    chosen = [w for w in WORKLOADS if (not only or w.name in only) and broker in w.brokers]
    if clients:
        chosen = [_narrow(w, clients) for w in chosen]
    return [w for w in chosen if w.clients]


def _narrow(workload: Workload, clients: tuple[str, ...]) -> Workload:
    kept = tuple(c for c in workload.clients if c in clients)
    return Workload(**{**asdict(workload), "clients": kept})


def batching_of(batching: str) -> tuple[int | None, int | None]:
    """(linger.ms, batch.size) a client is given under `batching`; None leaves that setting at the client's default.

    "defaults": each client as it ships; "matched": everyone at the same linger and batch size (aioproducer's batches
    also held there: batch_max_size = batch_size); "linger": the same linger only (the workloads of this module).
    """
    if batching == "defaults":
        return None, None
    if batching == "matched":
        return MATCHED_LINGER_MS, MATCHED_BATCH_BYTES
    if batching == "linger":
        return LINGER_MS, None
    raise ValueError(f"no such batching: {batching!r}")


# Random text over 64 symbols: the uncompressed rows' values are printable ASCII without a newline, so that
# kafka-producer-perf-test (which reads its payloads from a UTF-8 text file, one per line) sends the same bytes.
_ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"


def value_pool(size: int, compressible: bool, seed: int = 7) -> list[bytes]:
    """`_POOL` distinct values of `size` bytes of printable ASCII (no newline): random text over 64 symbols (for the
    uncompressed rows), or word salad that compresses about 3-4x (for the compressed ones)."""
    rng = random.Random(seed)
    if not compressible:
        return [bytes(rng.choices(_ALPHABET, k=size)) for _ in range(_POOL)]
    words = [bytes(rng.choices(b"abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 9))) for _ in range(400)]
    pool = []
    for n in range(_POOL):
        text = b'{"seq": %d, "body": "' % n
        while len(text) < size:
            text += rng.choice(words) + b" "
        pool.append(text[:size])
    return pool


def key_pool() -> list[bytes]:
    return [b"key-%05d" % i for i in range(DISTINCT_KEYS)]


def records_for(count: int, pool: list[bytes]) -> list[bytes]:
    """`count` references cycling through `pool`: the hot loops then iterate one prepared list, alike for all."""
    return [pool[i % len(pool)] for i in range(count)]
