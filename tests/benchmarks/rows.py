"""The peer comparison's rows: which records each row sends, which idioms of which clients send them, and the two
batchings every row runs under; pure data, shared by the orchestrator, the workers and the report.

A row pits one of aioproducer's idioms against every peer idiom that does the same work (the same records, acks=all
+ idempotence for everyone, the same topic layout); the report names the fastest peer idiom per row and gives our
ratio against that one. Runs are shared between rows that do the same work: the 100 B keyless peers serve the
`enqueue`, `send_many` and done-callback rows alike. Adding a row is one entry in ROWS (and, for a new kind of
records, one `Work`). It must not start processes or touch a broker.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BATCHINGS",
    "IDIOMS",
    "MATCHED_BATCH_BYTES",
    "MATCHED_LINGER_MS",
    "PARTITIONS",
    "ROWS",
    "Idiom",
    "Row",
    "Work",
    "rows_named",
    "runs_of",
]

# The outside harness's topic layout: one topic of 6 partitions per work, on one real Kafka node.
PARTITIONS = 6
# "defaults": every client with its own batching defaults; "matched": everyone at the same linger and batch size
# (Java's defaults: 5 ms, 16 KiB; aioproducer's batches are then held at 16 KiB too, with batch_max_size).
BATCHINGS = ("defaults", "matched")
MATCHED_LINGER_MS = 5
MATCHED_BATCH_BYTES = 16384


@dataclass(frozen=True)
class Work:
    """The records of a comparison: every idiom that runs this work sends exactly these (fixed seeds, same bytes)."""

    name: str
    title: str
    full: int  # records per run in a full bench
    quick: int  # records per run with --quick
    value_size: int = 100
    keyed: bool = False
    compression: str = "none"

    def count(self, quick: bool) -> int:
        return self.quick if quick else self.full


@dataclass(frozen=True)
class Idiom:
    """One client driven one way. `client` picks the adapter, `style` how it is driven:

    - "loop": the client's own call in a flat-out loop, then flush (confluent-kafka: `produce()` with `poll(0)` every
      `POLL_EVERY` records and no callback; aioproducer: `await enqueue(...)`; aiokafka: `await send(...)`);
    - "nowait": aioproducer's `enqueue_nowait(...)`, with `await enqueue(...)` when it raises WouldBlockError;
    - "callback": the same loop with a done-callback per record that checks the outcome;
    - "callback_nowait": the "nowait" loop with a done-callback per record that checks the outcome;
    - "send_many": aioproducer's `send_many` over chunks of 10 k records, as plain 6-tuples in `ProducerRecord`'s field
      order (the caller's cheapest list);
    - "send_many_stream": aioproducer's `send_many` over the same chunks, each given as a generator of 6-tuples (read
      as the call goes, never a list);
    - "enqueue_many": aioproducer's `enqueue_many` over the same chunks, awaiting a call's results once two later
      calls are outstanding (the wait for one chunk overlaps the next chunks), then flush;
    - "enqueue_many_stream": the same, each chunk given as a generator of 6-tuples;
    - "table:pyarrow" / "table:polars": aioproducer's `send_table` over a whole table;
    - "warm" / "cold": the Java producer's send loop (a callback per record) after an untimed pass of the same size
      in the same JVM, or in a fresh JVM;
    - "perf_test": `kafka-producer-perf-test` (org.apache.kafka.tools.ProducerPerformance), run as Java users run it.
    """

    name: str
    client: str
    style: str
    label: str
    ours: bool = False
    # A Producer attribute the idiom needs: where this build lacks it, its runs are left out and the report says so.
    needs: str = ""


IDIOMS: dict[str, Idiom] = {
    idiom.name: idiom
    for idiom in (
        Idiom("aioproducer.enqueue", "aioproducer", "loop", "aioproducer `enqueue` loop", ours=True),
        Idiom(
            "aioproducer.enqueue_nowait",
            "aioproducer",
            "nowait",
            "aioproducer `enqueue_nowait` loop (`await enqueue` on WouldBlockError)",
            ours=True,
            needs="enqueue_nowait",
        ),
        Idiom(
            "aioproducer.send_many",
            "aioproducer",
            "send_many",
            "aioproducer `send_many` (10 k chunks of 6-tuples)",
            ours=True,
        ),
        Idiom(
            "aioproducer.send_many_stream",
            "aioproducer",
            "send_many_stream",
            "aioproducer `send_many` (10 k chunks, each a generator of 6-tuples)",
            ours=True,
        ),
        Idiom(
            "aioproducer.enqueue_many",
            "aioproducer",
            "enqueue_many",
            "aioproducer `enqueue_many` (10 k chunks of 6-tuples, two calls' results outstanding)",
            ours=True,
            needs="enqueue_many",
        ),
        Idiom(
            "aioproducer.enqueue_many_stream",
            "aioproducer",
            "enqueue_many_stream",
            "aioproducer `enqueue_many` (10 k chunks, each a generator of 6-tuples, two calls' results outstanding)",
            ours=True,
            needs="enqueue_many",
        ),
        Idiom("aioproducer.callback", "aioproducer", "callback", "aioproducer `enqueue` + done-callback", ours=True),
        Idiom(
            "aioproducer.callback_nowait",
            "aioproducer",
            "callback_nowait",
            "aioproducer `enqueue_nowait` + done-callback",
            ours=True,
            needs="enqueue_nowait",
        ),
        Idiom(
            "aioproducer.table_pyarrow",
            "aioproducer",
            "table:pyarrow",
            "aioproducer `send_table` (pyarrow Table)",
            ours=True,
            needs="send_table",
        ),
        Idiom(
            "aioproducer.table_polars",
            "aioproducer",
            "table:polars",
            "aioproducer `send_table` (polars DataFrame)",
            ours=True,
            needs="send_table",
        ),
        Idiom("confluent_sync.produce", "confluent_sync", "loop", "confluent-kafka `produce` loop, no callback"),
        Idiom("confluent_sync.callback", "confluent_sync", "callback", "confluent-kafka `produce` + callback"),
        Idiom("confluent_aio.produce", "confluent_aio", "loop", "confluent-kafka AIOProducer `produce` loop"),
        Idiom("confluent_aio.callback", "confluent_aio", "callback", "confluent-kafka AIOProducer + done-callback"),
        Idiom("aiokafka.send", "aiokafka", "loop", "aiokafka `send` loop"),
        Idiom("aiokafka.callback", "aiokafka", "callback", "aiokafka `send` + done-callback"),
        Idiom("kafka_python.send", "kafka_python", "loop", "kafka-python `send` loop"),
        Idiom("java.warm", "java", "warm", "Java producer, warm (send + callback)"),
        Idiom("java.cold", "java", "cold", "Java producer, cold JVM (send + callback)"),
        Idiom("java.perf_test", "perf_test", "perf_test", "kafka-producer-perf-test (cold JVM)"),
    )
}


@dataclass(frozen=True)
class Row:
    """One line of the peer tables: our idiom `ours` against the fastest of `peers`, all on `work`.

    `also` names other idioms of ours the row is compared with too (the columnar rows against `send_many`).
    """

    name: str
    title: str
    work: Work
    ours: str
    peers: tuple[str, ...]
    also: tuple[str, ...] = ()

    def idioms(self) -> tuple[str, ...]:
        return (self.ours, *self.also, *self.peers)


KEYLESS_100B = Work("100B", "100 B keyless", full=500_000, quick=50_000)
KEYED_100B = Work("100B_keyed", "100 B keyed (10 k distinct keys)", full=500_000, quick=50_000, keyed=True)
CODECS = ("lz4", "zstd", "snappy", "gzip")
COMPRESSED_1KB = {
    codec: Work(f"1KB_{codec}", f"1 KB {codec}", full=150_000, quick=15_000, value_size=1000, compression=codec)
    for codec in CODECS
}
TABLE_100B = Work("1M_100B", "1 M rows of 100 B keyless", full=1_000_000, quick=100_000)

# Every peer idiom that produces plain records; keyed records leave out perf-test (it sends no keys).
_PEERS = (
    "confluent_sync.produce",
    "confluent_sync.callback",
    "confluent_aio.produce",
    "aiokafka.send",
    "kafka_python.send",
    "java.warm",
    "java.cold",
    "java.perf_test",
)
# The peers that, like the done-callback idiom, learn each record's outcome (the Java loop always has a callback).
_PEERS_PER_RECORD = ("confluent_sync.callback", "confluent_aio.callback", "aiokafka.callback", "java.warm", "java.cold")
# Compressed rows: the 100 B rows already show what confluent-kafka's callback costs.
_COMPRESSED_PEERS = tuple(p for p in _PEERS if p != "confluent_sync.callback")

ROWS: tuple[Row, ...] = (
    Row("enqueue_100B", "100 B keyless, `enqueue` loop", KEYLESS_100B, "aioproducer.enqueue", _PEERS),
    Row(
        "keyed_100B",
        "100 B keyed, `enqueue` loop",
        KEYED_100B,
        "aioproducer.enqueue",
        tuple(p for p in _PEERS if p != "java.perf_test"),
    ),
    Row(
        "nowait_100B",
        "100 B keyless, `enqueue_nowait` loop",
        KEYLESS_100B,
        "aioproducer.enqueue_nowait",
        _PEERS,
    ),
    Row(
        "nowait_keyed_100B",
        "100 B keyed, `enqueue_nowait` loop",
        KEYED_100B,
        "aioproducer.enqueue_nowait",
        tuple(p for p in _PEERS if p != "java.perf_test"),
    ),
    Row("send_many_100B", "100 B keyless, `send_many`", KEYLESS_100B, "aioproducer.send_many", _PEERS),
    Row(
        "send_many_stream_100B",
        "100 B keyless, `send_many` over a generator",
        KEYLESS_100B,
        "aioproducer.send_many_stream",
        _PEERS,
    ),
    Row("enqueue_many_100B", "100 B keyless, `enqueue_many`", KEYLESS_100B, "aioproducer.enqueue_many", _PEERS),
    Row(
        "enqueue_many_stream_100B",
        "100 B keyless, `enqueue_many` over generators",
        KEYLESS_100B,
        "aioproducer.enqueue_many_stream",
        _PEERS,
    ),
    Row(
        "callback_100B",
        "100 B keyless, done-callback per record",
        KEYLESS_100B,
        "aioproducer.callback",
        _PEERS_PER_RECORD,
    ),
    Row(
        "callback_nowait_100B",
        "100 B keyless, `enqueue_nowait` + done-callback per record",
        KEYLESS_100B,
        "aioproducer.callback_nowait",
        _PEERS_PER_RECORD,
    ),
    *(
        Row(f"{codec}_1KB", f"1 KB {codec}, `enqueue` loop", work, "aioproducer.enqueue", _COMPRESSED_PEERS)
        for codec, work in COMPRESSED_1KB.items()
    ),
    *(
        Row(
            f"{codec}_1KB_nowait",
            f"1 KB {codec}, `enqueue_nowait` loop",
            work,
            "aioproducer.enqueue_nowait",
            _COMPRESSED_PEERS,
        )
        for codec, work in COMPRESSED_1KB.items()
        if codec != "gzip"
    ),
    # Columnar publishing: against confluent-kafka's fastest loop (its records already Python bytes, untimed) and
    # against our own send_many on the same records.
    *(
        Row(
            f"table_{source}_100B",
            f"1 M x 100 B from a {label}, `send_table`",
            TABLE_100B,
            f"aioproducer.table_{source}",
            ("confluent_sync.produce",),
            also=("aioproducer.send_many",),
        )
        for source, label in (("pyarrow", "pyarrow Table"), ("polars", "polars DataFrame"))
    ),
)


def rows_named(names: tuple[str, ...] = ()) -> list[Row]:
    """The rows to run, in order, optionally narrowed to some names."""
    unknown = set(names) - {row.name for row in ROWS}
    if unknown:
        raise ValueError(f"no such row: {', '.join(sorted(unknown))} (rows: {', '.join(r.name for r in ROWS)})")
    return [row for row in ROWS if not names or row.name in names]


def runs_of(
    rows: list[Row], clients: tuple[str, ...] = (), available: frozenset[str] = frozenset()
) -> list[tuple[Work, list[Idiom]]]:
    """Each work the rows need, in order, with the idioms that run it (each once, however many rows share it).

    `clients` narrows to some adapters; `available` is what this build of aioproducer offers (an idiom whose
    `needs` is missing is left out, and so is a row whose own idiom is).
    """
    works: dict[str, tuple[Work, list[Idiom]]] = {}
    for row in rows:
        needs = IDIOMS[row.ours].needs
        if needs and needs not in available:
            continue  # without our idiom the row compares nothing: its peers are not run for it either
        _, idioms = works.setdefault(row.work.name, (row.work, []))
        for name in row.idioms():
            idiom = IDIOMS[name]
            if clients and idiom.client not in clients:
                continue
            if idiom.needs and idiom.needs not in available:
                continue
            if idiom not in idioms:
                idioms.append(idiom)
    return [(work, idioms) for work, idioms in works.values() if idioms]
