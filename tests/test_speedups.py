"""The compiled extension is built and in use, and each compiled twin behaves exactly as its pure-Python original:
the same batch bytes, hashes, partitions, errors and deliveries for the same inputs."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer import _speedups as compiled  # type: ignore[attr-defined]
from aioproducer import accelerated, appender
from aioproducer.accumulator import RecordAccumulator
from aioproducer.compression import CompressionType
from aioproducer.delivery import Delivery
from aioproducer.errors import AioProducerError
from aioproducer.metadata import BrokerInfo, ClusterMetadata, MetadataState, PartitionInfo, TopicInfo
from aioproducer.models import ProducerRecord
from aioproducer.partitioner import DefaultPartitioner, murmur2
from aioproducer.records.builder import BatchBuilder

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "shared" / "kafka-protocol" / "murmur2-vectors.json").read_text()
)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
BYTES = st.one_of(st.none(), st.binary(max_size=300))
HEADERS = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3)
RECORD = st.tuples(
    st.one_of(st.integers(min_value=1_700_000_000_000, max_value=1_700_000_100_000), INT64), BYTES, BYTES, HEADERS
)


def test_the_extension_is_in_use_unless_disabled() -> None:
    disabled = bool(os.environ.get("AIOPRODUCER_NO_EXTENSIONS"))
    assert accelerated.COMPILED is not disabled
    assert (accelerated.speedups is compiled) is not disabled


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
    pure = BatchBuilder(compression=codec, size_limit=size_limit)
    twin = compiled.BatchBuilder(compression=codec, size_limit=size_limit)
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
    builders = [BatchBuilder(), compiled.BatchBuilder()]
    if not first:
        for builder in builders:
            builder.try_append(1_700_000_000_000, None, b"first")
    pure, twin = (outcome_of(b.try_append, *bad) for b in builders)
    assert pure == twin
    assert builders[0].close() == builders[1].close()


def test_builders_reject_bad_settings_alike() -> None:
    for kwargs in ({"size_limit": 0}, {"size_limit": True}, {"compression": 9}, {"compression_level": 99}):
        settings_ = {"compression": CompressionType.GZIP, **kwargs} if "compression_level" in kwargs else kwargs
        assert outcome_of(BatchBuilder, **settings_)[1] is outcome_of(compiled.BatchBuilder, **settings_)[1]


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda v: f"v{v['id']}")
def test_compiled_murmur2_matches_java(vector: dict[str, Any]) -> None:
    assert compiled.murmur2(bytes.fromhex(vector["key_hex"])) == vector["murmur2"]


@given(st.binary(max_size=200))
def test_murmur2_twins_agree(data: bytes) -> None:
    assert compiled.murmur2(data) == murmur2(data)


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
)
def test_default_partitioner_twins_pick_the_same(seed: int, calls: list[Any], ignore_keys: bool) -> None:
    layouts = [layout(6), layout(6, (1, 4)), layout(9), layout(3, ())]
    pure = DefaultPartitioner(1000, ignore_keys=ignore_keys, rng=random.Random(seed))
    twin = compiled.DefaultPartitioner(1000, ignore_keys=ignore_keys, rng=random.Random(seed))
    for key, size, which in calls:
        info = layouts[which]
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


def run_appends(
    make_appender: Any, partitioner: Any, batch_max_size: int | None = None
) -> tuple[list[Any], dict[Any, bytes], int]:
    acc = RecordAccumulator(
        batch_size=600,
        linger_ms=5,
        buffer_memory=100_000,
        compression=CompressionType.NONE,
        compression_level=None,
        batch_max_size=batch_max_size,
    )
    woken: list[int] = []
    cluster_state = MetadataState(max_age_ms=300_000, max_idle_ms=300_000, retry_backoff_ms=100)
    cluster_state.cluster = ClusterMetadata({1: BrokerInfo(1, "h", 1)}, {"t": layout(4)})

    def refuse_str(value: Any) -> bytes:
        if isinstance(value, str):
            raise AioProducerError("only bytes")
        return value  # type: ignore[no-any-return]

    subject = make_appender(
        accumulator=acc,
        cluster_state=cluster_state,
        partitioner=partitioner,
        key_serializer=refuse_str,
        value_serializer=refuse_str,
        plain_bytes_keys=False,
        plain_bytes_values=False,
        max_record_bytes=4000,
        size_limit_message="too large",
        delivery_type=Delivery,
        clock_ms=lambda: 0,
        wake_sender=lambda: woken.append(1),
    )
    seen: list[Any] = []
    for topic, value, key, headers, partition, timestamp in APPENDS:
        kind, result = outcome_of(subject.append_now, topic, value, key, headers, partition, timestamp)
        if isinstance(result, Delivery):
            stamp = result._timestamp_ms if timestamp is not None else "now"
            result = (result._outcome.partition, result._index, stamp, result._key_size, result._value_size)
        elif isinstance(result, tuple) and len(result) == 5:
            result = ("must wait", *result[:4])
        seen.append((kind, result))
    # The last record carries the wall clock's time, which differs between runs: its batch is left out.
    batches = {
        (tp, n): encoded
        for tp, queue in acc.queues.items()
        for n, batch in enumerate(queue)
        if b"late" not in (encoded := batch.close().encode())
    }
    return seen, batches, acc.used_bytes * 1000 + len(woken)


@pytest.mark.parametrize("batch_max_size", [None, 1500])
def test_appender_twins_buffer_the_same_records(batch_max_size: int | None) -> None:
    pure = run_appends(appender.Appender, DefaultPartitioner(600, rng=random.Random(3)), batch_max_size)
    twin = run_appends(compiled.Appender, compiled.DefaultPartitioner(600, rng=random.Random(3)), batch_max_size)
    assert pure == twin
    kinds = [kind for kind, _ in pure[0]]
    assert kinds.count("raised") == 5 and ("ok", ("must wait", None, b"z", (), 22)) in pure[0]
    assert ("ok", ("must wait", None, b"y", (), 22)) in pure[0]  # partition 7
    assert len(pure[1]) >= (3 if batch_max_size is None else 2)  # batches on several partitions


def test_compiled_producer_record_constructor_matches_the_named_tuple() -> None:
    made = ProducerRecord("t", b"v", key=b"k", partition=1)
    assert type(made) is ProducerRecord and made == ("t", b"v", b"k", None, 1, None)
    assert made._replace(value=None).value is None and ProducerRecord._make(list(made)) == made
    with pytest.raises(TypeError):
        ProducerRecord()  # type: ignore[call-arg]
