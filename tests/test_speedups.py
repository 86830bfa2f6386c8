"""The compiled extension is built and in use, and each compiled twin behaves exactly as its pure-Python original:
the same batch bytes, hashes, partitions, errors and deliveries for the same inputs."""

from __future__ import annotations

import asyncio
import gc
import os
import random
import subprocess
import sys
import textwrap
from typing import Any

import crc32c
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_reference import murmur2_vectors

from aioproducer import partitioner
from aioproducer.accelerated import COMPILED, EXTENSIONS_DISABLED, compiled_twin
from aioproducer.append import appender
from aioproducer.buffer import batch
from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.deliveries import delivery
from aioproducer.deliveries.bulk import PureBulkDeliveries
from aioproducer.deliveries.delivery import BatchOutcome, resolve
from aioproducer.errors import AioProducerError
from aioproducer.network.metadata import BrokerInfo, ClusterMetadata, MetadataState, PartitionInfo, TopicInfo
from aioproducer.partitioner import PureDefaultPartitioner, pure_murmur2
from aioproducer.records import builder
from aioproducer.records.builder import PureBatchBuilder
from aioproducer.records.compression import CompressionType
from tests.table_twins import run_table
from tests.test_pipeline import filled_batch, read, records_of, wait_completed
from tests.twins import TWINNED, pure_name, use_twin

# Needs the compiled twins: like test_speedups_hostile.py it runs in the compiled session only.
compiled_builder: Any = compiled_twin("aioproducer.records._builder")
compiled_partitioner: Any = compiled_twin("aioproducer._partitioner")
compiled_appender: Any = compiled_twin("aioproducer.append._appender")
TS = 1_700_000_000_000
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
BYTES = st.one_of(st.none(), st.binary(max_size=300))
HEADERS = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3)
RECORD = st.tuples(
    st.one_of(st.integers(min_value=1_700_000_000_000, max_value=1_700_000_100_000), INT64), BYTES, BYTES, HEADERS
)


def test_the_twins_are_in_use_unless_disabled() -> None:
    """Each twinned module's public names are its compiled twin's when built (else the compiled session would
    silently run the pure code and prove nothing about the twins), and its own with AIOPRODUCER_NO_EXTENSIONS."""
    disabled = bool(os.environ.get("AIOPRODUCER_NO_EXTENSIONS"))
    assert EXTENSIONS_DISABLED is disabled and COMPILED is not disabled
    for module, twin_name, names in TWINNED:
        twin = compiled_twin(twin_name)
        assert (twin is None) is disabled, twin_name
        for name in names:
            active, pure = getattr(module, name), getattr(module, pure_name(name))
            assert active is (pure if twin is None else getattr(twin, name)), f"{module.__name__}.{name}"


def public_surface(cls: type) -> set[str]:
    """The attributes a user or another module may touch: public names and the protocol methods."""
    names = {name for name in dir(cls) if not name.startswith("_")}
    return names | {name for name in ("__await__", "__iter__", "__len__", "__repr__") if name in vars(cls)}


def test_each_compiled_twin_exposes_what_its_original_does() -> None:
    """A twin missing a method (or adding one the original lacks) would pass every test that does not happen to
    call it, and fail only in the other build."""
    for module, twin_name, names in TWINNED:
        twin = compiled_twin(twin_name)
        for name in names:
            pure = getattr(module, pure_name(name))
            compiled = getattr(twin, name)
            if isinstance(pure, type):
                assert public_surface(pure) == public_surface(compiled), f"{module.__name__}.{name}"
            else:
                assert callable(compiled), f"{module.__name__}.{name}"


def outcome_of(action: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """What a call did: its result, or the type of what it raised (the twins must raise the same types)."""
    try:
        return "ok", action(*args, **kwargs)
    except Exception as exc:
        return "raised", type(exc)


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(RECORD, min_size=1, max_size=25),
    size_limit=st.integers(min_value=62, max_value=4000),
    codec=st.sampled_from([CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD]),
)
def test_builders_append_and_encode_the_same_bytes(records: list[Any], size_limit: int, codec: CompressionType) -> None:
    pure = PureBatchBuilder(compression=codec, size_limit=size_limit)
    twin = compiled_builder.BatchBuilder(compression=codec, size_limit=size_limit)
    for timestamp, key, value, headers in records:
        record = (timestamp, key, value, headers)
        assert outcome_of(pure.try_append, *record) == outcome_of(twin.try_append, *record)
        assert (pure.record_count, pure.estimated_size) == (twin.record_count, twin.estimated_size)
    closed_pure, closed_twin = pure.close(), twin.close()
    assert closed_pure == closed_twin
    assert closed_pure.encode(producer_id=7, producer_epoch=1, base_sequence=3) == closed_twin.encode(
        producer_id=7, producer_epoch=1, base_sequence=3
    )
    assert outcome_of(pure.try_append, 1, None, b"x") == outcome_of(twin.try_append, 1, None, b"x")


@pytest.mark.parametrize(
    "bad",
    [
        ("ts", None, b"v", ()),
        (True, None, b"v", ()),
        (2**63, None, b"v", ()),
        (1.5, None, b"v", ()),
        (1, 5, b"v", ()),
        (1, None, "text", ()),
        (1, None, b"v", (("k", 5),)),
        (1, None, b"v", ((5, b"x"),)),
        (1, bytearray(b"k"), memoryview(b"v"), (("k", b"x"),)),
    ],
    ids=repr,
)
@pytest.mark.parametrize("first", [True, False], ids=["first record", "later record"])
def test_builders_treat_bad_and_unusual_input_alike(bad: tuple[Any, ...], first: bool) -> None:
    builders = [PureBatchBuilder(), compiled_builder.BatchBuilder()]
    if not first:
        for builder in builders:
            builder.try_append(1_700_000_000_000, None, b"first")
    pure, twin = (outcome_of(b.try_append, *bad) for b in builders)
    assert pure == twin
    assert builders[0].close() == builders[1].close()


def test_builders_reject_bad_settings_alike() -> None:
    for kwargs in ({"size_limit": 0}, {"size_limit": True}, {"compression": 9}, {"compression_level": 99}):
        settings_ = {"compression": CompressionType.GZIP, **kwargs} if "compression_level" in kwargs else kwargs
        pure, twin = outcome_of(PureBatchBuilder, **settings_), outcome_of(compiled_builder.BatchBuilder, **settings_)
        assert pure[1] is twin[1]


def test_compiled_murmur2_matches_java() -> None:
    vectors = murmur2_vectors()
    wrong = [v["key_hex"] for v in vectors if compiled_partitioner.murmur2(bytes.fromhex(v["key_hex"])) != v["murmur2"]]
    assert len(vectors) > 80 and not wrong


@given(st.binary(max_size=200))
def test_murmur2_twins_agree(data: bytes) -> None:
    assert compiled_partitioner.murmur2(data) == pure_murmur2(data)


def layout(count: int, available: tuple[int, ...] | None = None) -> TopicInfo:
    parts = tuple(PartitionInfo(p, 1 if available is None or p in available else -1) for p in range(count))
    return TopicInfo("t", parts, tuple(range(count)) if available is None else available)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**32),
    calls=st.lists(
        st.tuples(st.one_of(st.none(), st.binary(max_size=12)), st.integers(1, 3000), st.integers(0, 3)),
        max_size=80,
    ),
    ignore_keys=st.booleans(),
    loads=st.lists(st.tuples(st.lists(st.integers(0, 9), max_size=6), st.integers(0, 9)), max_size=4),
)
def test_default_partitioner_twins_pick_the_same(
    seed: int, calls: list[Any], ignore_keys: bool, loads: list[tuple[list[int], int]]
) -> None:
    layouts = [layout(6), layout(6, (1, 4)), layout(9), layout(3, ())]
    pure = PureDefaultPartitioner(1000, ignore_keys=ignore_keys, rng=random.Random(seed))
    twin = compiled_partitioner.DefaultPartitioner(1000, ignore_keys=ignore_keys, rng=random.Random(seed))
    for position, (key, size, which) in enumerate(calls):
        info = layouts[which]
        if loads and position % 7 == 0:  # the accumulator's adaptive load stats, now and then (KIP-794)
            sizes, queues = loads[position % len(loads)]
            ids = list(range(len(sizes)))
            pure.update_load_stats("t", sizes, ids, queues)
            twin.update_load_stats("t", sizes, ids, queues)
        assert pure.partition("t", key, size, info) == twin.partition("t", key, size, info)
    empty = layout(0, ())
    assert outcome_of(pure.partition, "t", b"k", 1, empty) == outcome_of(twin.partition, "t", b"k", 1, empty)


APPENDS: list[tuple[Any, ...]] = [
    # (topic, value, key, headers, partition, timestamp_ms)
    ("t", b"v" * 40, None, None, None, 1_700_000_000_000),
    ("t", b"w" * 40, b"user-1", None, None, 1_700_000_000_001),
    ("t", None, None, [("trace", b"1")], 2, 1_700_000_000_002),
    ("t", b"x", None, {"h": None}, None, 1_700_000_000_003),
    ("t", b"y", None, None, 7, 1_700_000_000_004),  # beyond the known partitions: must wait for metadata
    ("t", b"y", None, None, "0", 1_700_000_000_004),  # not an int
    ("bad topic!", b"z", None, None, None, 1_700_000_000_005),
    ("t", b"z" * 5000, None, None, None, 1_700_000_000_006),  # larger than max_record_bytes
    ("t", b"z", None, [("k", 5)], None, 1_700_000_000_006),  # bad header
    ("t", "not bytes", None, None, None, 1_700_000_000_007),  # the value serializer refuses it
    ("unknown", b"z", None, None, None, 1_700_000_000_008),  # no metadata: must wait
    ("t", b"s" * 300, None, None, None, 1_700_000_000_009),  # fills a batch: a new one starts
    *[("t", b"m%d" % i, b"k%d" % (i % 5), None, None, 1_700_000_000_010 + i) for i in range(30)],
    ("t", b"late", None, None, None, None),  # the wall clock's timestamp
]


def run_appends(kind: str, batch_max_size: int | None = None) -> tuple[list[Any], dict[Any, bytes], int]:
    """Every record of APPENDS through the `kind` twins (appender, partitioner, batches, pool, deliveries)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_twin(monkeypatch, kind)
        acc = RecordAccumulator(
            batch_size=600,
            linger_ms=5,
            buffer_memory=100_000,
            compression=CompressionType.NONE,
            compression_level=None,
            new_outcome=lambda tp: BatchOutcome(tp[0], tp[1], None),
            batch_max_size=batch_max_size,
        )
        woken: list[int] = []
        cluster_state = MetadataState(max_age_ms=300_000, max_idle_ms=300_000, retry_backoff_ms=100)
        cluster_state.cluster = ClusterMetadata({1: BrokerInfo(1, "h", 1)}, {"t": layout(4)})

        def refuse_str(value: Any) -> bytes:
            if isinstance(value, str):
                raise AioProducerError("only bytes")
            return value  # type: ignore[no-any-return]

        subject = appender.Appender(
            accumulator=acc,
            pool=acc.pool,
            cluster_state=cluster_state,
            partitioner=partitioner.DefaultPartitioner(600, rng=random.Random(3)),
            key_serializer=refuse_str,
            value_serializer=refuse_str,
            plain_bytes_keys=False,
            plain_bytes_values=False,
            max_record_bytes=4000,
            size_limit_message="too large",
            clock_ms=lambda: 0,
            wake_sender=lambda: woken.append(1),
        )
        assert type(subject).__module__ == (
            "aioproducer.append._appender" if kind == "compiled" else "aioproducer.append.appender"
        )
        seen: list[Any] = []
        for topic, value, key, headers, partition, timestamp in APPENDS:
            kind_of, result = outcome_of(subject.append_now, topic, value, key, headers, partition, timestamp)
            if isinstance(result, delivery.Delivery):
                stamp = result._timestamp_ms if timestamp is not None else "now"
                result = (result._outcome.partition, result._index, stamp, result._key_size, result._value_size)
            elif isinstance(result, appender.PreparedRecord):
                result = ("must wait", result.partition, result.value, result.headers, result.size)
            seen.append((kind_of, result))
        # The last record carries the wall clock's time, which differs between runs: its batch is left out.
        batches = {
            (tp, n): encoded
            for tp, queue in acc.queues.items()
            for n, batch_ in enumerate(queue)
            if b"late" not in (encoded := batch_.close().encode())
        }
        return seen, batches, acc.used_bytes * 1000 + len(woken)


@pytest.mark.parametrize("batch_max_size", [None, 1500])
def test_appender_twins_buffer_the_same_records(batch_max_size: int | None) -> None:
    pure = run_appends("pure", batch_max_size)
    twin = run_appends("compiled", batch_max_size)
    assert pure == twin
    kinds = [kind for kind, _ in pure[0]]
    assert kinds.count("raised") == 5 and ("ok", ("must wait", None, b"z", (), 22)) in pure[0]
    assert ("ok", ("must wait", 7, b"y", (), 22)) in pure[0]  # partition 7: waits for the topic to grow
    assert len(pure[1]) >= (3 if batch_max_size is None else 2)  # batches on several partitions


# -- the batch pipeline's worker (tests/test_pipeline.py runs what both twins share) -----------------------------
compiled_pipeline: Any = compiled_twin("aioproducer.send._pipeline")


def test_the_worker_gives_batches_back_in_the_order_they_were_submitted() -> None:
    pipeline = compiled_pipeline.BatchPipeline(CompressionType.ZSTD, 19)  # slow on purpose: they pile up on the worker
    batches = [filled_batch(CompressionType.ZSTD, records_of(random.Random(i), 200)) for i in range(12)]
    for n, submitted in enumerate(batches):
        assert pipeline.submit(submitted, 1, 0, n * 200, False) is None
        assert submitted.compressing and submitted.sealed
    done = wait_completed(pipeline, len(batches))
    pipeline.shutdown()
    assert [finished for finished, _ in done] == batches
    assert [read(encoded)[0]["producer"][2] for _, encoded in done] == [n * 200 for n in range(12)]
    assert not any(finished.compressing for finished in batches)


def test_shutdown_finishes_what_was_submitted_and_a_dropped_pipeline_frees_its_worker() -> None:
    """A pipeline stopped (or dropped) with batches on its worker must neither lose them nor let the worker read a
    buffer that was freed."""
    pipeline = compiled_pipeline.BatchPipeline(CompressionType.LZ4, None)
    batches = [filled_batch(CompressionType.LZ4, records_of(random.Random(i), 300)) for i in range(20)]
    for submitted in batches:
        pipeline.submit(submitted, 1, 0, 0, False)
    pipeline.shutdown()
    assert [finished for finished, _ in pipeline.completed()] == batches
    for _ in range(5):  # dropped with work in flight: its worker stops before the buffers go
        dropped = compiled_pipeline.BatchPipeline(CompressionType.ZSTD, 10)
        for pending in [filled_batch(CompressionType.ZSTD, records_of(random.Random(9), 300)) for _ in range(5)]:
            dropped.submit(pending, 1, 0, 0, False)
        del dropped
        gc.collect()


def test_a_pipeline_collected_in_a_reference_cycle_waits_for_its_worker_before_freeing_its_buffers() -> None:
    """Bug: a producer dropped unclosed sits in reference cycles; when the cyclic collector took it while a batch was
    on the worker, clearing the pipeline's queue freed that batch's output (and builder) under the worker, which
    went on writing into unmapped memory: the interpreter crashed. Run in a child process: a crash is its exit."""
    code = textwrap.dedent(
        """
        import gc, random
        from aioproducer.buffer._batch import ProducerBatch
        from aioproducer.records.compression import CompressionType
        from aioproducer.records._builder import BatchBuilder
        from aioproducer.send._pipeline import BatchPipeline

        pipeline = BatchPipeline(CompressionType.GZIP, 9)
        builder = BatchBuilder(compression=CompressionType.GZIP, compression_level=9, size_limit=1 << 40)
        value = random.Random(1).randbytes(1 << 20).translate(bytes(range(16)) * 16)  # slow to deflate at level 9
        for _ in range(24):
            builder.try_append(0, None, value)
        batch = ProducerBatch(("t", 0), builder, 0, pipeline)  # a cycle: pipeline -> its queue -> batch -> pipeline
        assert pipeline.submit(batch, 1, 0, 0, False) is None
        del batch, builder, pipeline
        gc.collect()
        print("collected")
        """
    )
    finished = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (finished.returncode, finished.stdout.strip()) == (0, "collected"), finished.stderr[-2000:]


def test_a_stopped_pipeline_takes_batches_again() -> None:
    """Bug: after `shutdown`, the next submit started a worker that ended once that batch was done; the batch after
    it waited on a worker that was gone, for ever."""
    pipeline = compiled_pipeline.BatchPipeline(CompressionType.GZIP, None)
    pipeline.shutdown()
    batches = [filled_batch(CompressionType.GZIP, records_of(random.Random(i), 50)) for i in range(3)]
    done: list[tuple[Any, Any]] = []
    for submitted in batches:
        assert pipeline.submit(submitted, 1, 0, 0, False) is None
        done += wait_completed(pipeline, 1)  # each one finished before the next is submitted
    pipeline.shutdown()
    assert [finished for finished, _ in done] == batches


def test_an_empty_batch_is_refused() -> None:
    empty = batch.ProducerBatch(("t", 0), builder.BatchBuilder(compression=CompressionType.LZ4), 0, None)
    with pytest.raises(AioProducerError):
        compiled_pipeline.BatchPipeline(CompressionType.LZ4, None).submit(empty, 1, 0, 0, False)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=5000), start=st.integers(0, 9), value=st.integers(0, 2**32 - 1))
def test_the_compiled_crc32c_matches_the_crc32c_package(data: bytes, start: int, value: int) -> None:
    view = memoryview(data)[min(start, len(data)) :]  # unaligned starts too
    assert compiled_pipeline.crc32c(view, value) == crc32c.crc32c(bytes(view), value)


# -- the columnar row path -------------------------------------------------------------------------------------------
def test_a_random_table_gives_the_same_report_on_both_twins() -> None:
    """Differential: random rows with nulls, slices and dictionary keys appended through each twin's row appender
    give the same refusals (class and message), partitions, batch bytes and memory charged."""
    rng = random.Random(11)
    for _ in range(20):
        table = random_table(rng)
        assert run_table("pure", table) == run_table("compiled", table)


def random_table(rng: random.Random) -> pa.Table:
    count = rng.randint(1, 300)

    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.1 else value

    keys = pa.array([maybe(f"k{rng.randint(0, 20)}") for _ in range(count)]).dictionary_encode()
    table = pa.table(
        {
            "topic": pa.array([maybe(rng.choice(["t", "u", "bad topic"])) for _ in range(count)]),
            "key": keys,
            "value": pa.array([maybe(os.urandom(rng.randint(0, 300))) for _ in range(count)], pa.large_binary()),
            "partition": pa.array([maybe(rng.randint(-1, 5)) for _ in range(count)], pa.int16()),
            "timestamp": pa.array([maybe(TS + rng.randint(-10, 10)) for _ in range(count)], pa.int64()),
        }
    )
    start = rng.randint(0, count - 1)
    return table.slice(start, rng.randint(1, count - start))


# -- a call's results, built as its batches settle ---------------------------------------------------------------

compiled_bulk: Any = compiled_twin("aioproducer.deliveries._bulk")


def _settle_plan(outcome: BatchOutcome, state: str, base: int, draw: Any, depth: int = 0) -> None:
    """Settle `outcome` as `state` says: left pending, delivered, failed, or split into halves settled in turn."""
    if state == "ok":
        outcome.succeed(base, -1 if base % 3 else 55)
    elif state == "fail":
        outcome.fail(AioProducerError(f"failed {base}"))
    elif state == "split":
        first, second = BatchOutcome(outcome.topic, outcome.partition, None), BatchOutcome(outcome.topic, 0, None)
        outcome.forward(draw(st.integers(0, 6)), first, second)
        halves = ["pending", "ok", "fail"] + (["split"] if depth < 5 else [])
        _settle_plan(first, draw(st.sampled_from(halves)), base + 1000, draw, depth + 1)
        _settle_plan(second, draw(st.sampled_from(halves)), base + 2000, draw, depth + 1)


def _same(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b and not isinstance(a, BaseException))


@settings(max_examples=1000, deadline=None)
@given(data=st.data())
def test_the_bulk_twins_build_the_same_results_from_any_mix_of_settled_pending_split_and_refused_records(
    data: st.DataObject,
) -> None:
    """`fill_settled`, `results` and `outcomes` of both twins over the same records: refused ones, wait_all's
    placeholders (a cancelled delivery, another awaitable), batches pending, delivered, failed or split (again, a
    half pending), entries already built, and any `start` and `stop` around the records."""

    async def run() -> None:
        outcomes = [BatchOutcome("t", p, None) for p in range(data.draw(st.integers(1, 5)))]
        kinds = st.one_of(st.integers(0, len(outcomes) - 1), st.sampled_from(["refused", "awaitable", "cancelled"]))
        pure, compiled = PureBulkDeliveries(), compiled_bulk.BulkDeliveries()
        counts = [0] * len(outcomes)
        for kind in data.draw(st.lists(kinds, max_size=25)):
            if kind == "refused":
                refused = AioProducerError("refused")
                for bulk in (pure, compiled):
                    bulk.add(refused)
            elif kind == "awaitable":
                future = asyncio.get_running_loop().create_future()
                for bulk in (pure, compiled):
                    bulk.add_waitables([future])
            elif kind == "cancelled":
                cancelled = delivery.new_delivery(outcomes[0], 0, 5, 1, 1)
                cancelled.cancel()
                for bulk in (pure, compiled):
                    bulk.add_waitables([cancelled])
            else:
                item = delivery.new_delivery(outcomes[kind], counts[kind], 1000 + counts[kind], 2, 3)
                counts[kind] += 1
                for bulk in (pure, compiled):
                    bulk.add(item)
        for number, outcome in enumerate(outcomes):
            _settle_plan(
                outcome, data.draw(st.sampled_from(["pending", "ok", "fail", "split"])), 100 * number, data.draw
            )
        unbuilt, kept = object(), object()
        prebuilt = data.draw(st.sets(st.integers(0, 25)))
        start, stop = data.draw(st.integers(-5, 30)), data.draw(st.integers(-5, 30))
        built_pure = [kept if position in prebuilt else unbuilt for position in range(len(pure))]
        built_compiled = list(built_pure)
        assert pure.fill_settled(resolve, built_pure, start, stop, unbuilt) == compiled.fill_settled(
            resolve, built_compiled, start, stop, unbuilt
        )
        assert all(_same(a, b) for a, b in zip(built_pure, built_compiled, strict=True))
        results_stop = data.draw(st.one_of(st.none(), st.integers(-30, 30)))
        pure_results = pure.results(resolve, start, results_stop)
        compiled_results = compiled.results(resolve, start, results_stop)
        assert all(_same(a, b) for a, b in zip(pure_results, compiled_results, strict=True))
        assert pure.outcomes(start, results_stop) == compiled.outcomes(start, results_stop)

    asyncio.run(run())


def test_the_compiled_fill_settled_raises_as_the_pure_twin_when_its_list_shrinks_under_it() -> None:
    """The compiled `fill_settled` wrote its list's entries unchecked after calling `resolve`, the caller's: a
    `resolve` that shrank the list made it write past the list's end (the process died of SIGSEGV), where the pure
    twin raises IndexError."""
    script = textwrap.dedent(
        """
        from aioproducer.accelerated import compiled_twin
        from aioproducer.deliveries import delivery
        from aioproducer.deliveries.delivery import BatchOutcome, resolve
        outcome, first, second = (BatchOutcome("t", 0, None) for _ in range(3))
        bulk = compiled_twin("aioproducer.deliveries._bulk").BulkDeliveries()
        for index in range(4):
            bulk.add(delivery.new_delivery(outcome, index, 1, 1, 1))
        outcome.forward(2, first, second)
        first.succeed(0, -1)
        second.succeed(5, -1)
        unbuilt = object()
        results = [unbuilt] * 4
        def shrinking(outcome, index):
            results.clear()
            return resolve(outcome, index)
        try:
            bulk.fill_settled(shrinking, results, 0, 4, unbuilt)
        except IndexError:
            print("IndexError")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "IndexError"), done.stderr[-500:]
