"""The compiled appender and its pure-Python original agree on hostile input, not only on valid records: a
partitioner answering anything at all (or raising), serializers failing or returning odd types, odd keys, values,
headers, partitions and timestamps. Same outcome per call (result, or error type, message and cause), same batches,
same memory accounting, same topics marked in use.

Needs the compiled twins: like test_speedups.py it runs in the compiled session only."""

from __future__ import annotations

import enum
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer import partitioner
from aioproducer.append import appender
from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.deliveries import bulk as bulk_deliveries
from aioproducer.deliveries import delivery
from aioproducer.deliveries.delivery import BatchOutcome, resolve
from aioproducer.errors import UnknownPartitionError
from aioproducer.network.metadata import BrokerInfo, ClusterMetadata, MetadataState, PartitionInfo, TopicInfo
from aioproducer.records.compression import CompressionType
from aioproducer.serializers import resolve_serializer
from tests.twins import use_twin

NOW_MS = 1_000_000


class Stop(BaseException):
    """Not an Exception: must pass through both paths untouched, as KeyboardInterrupt would."""


class MyInt(int):
    pass


class Color(enum.IntEnum):
    RED = 2


class Answers:
    """A partitioner giving its scripted answers in call order (raising those that are exceptions)."""

    def __init__(self, answers: list[Any]) -> None:
        self._answers = list(answers)
        self.calls = 0

    def partition(self, topic: str, key: bytes | None, record_size: int, partitions: Any) -> Any:
        answer = self._answers[self.calls % len(self._answers)]
        self.calls += 1
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def __repr__(self) -> str:
        return "Answers()"


def failing_serializer(value: Any) -> bytes:
    raise ValueError(f"cannot serialize {value!r}")


def odd_serializer(value: Any) -> Any:
    """Returns whatever it is given (str, int, bytearray, memoryview, None, a list, ...)."""
    return value


SERIALIZERS = {
    "bytes": "bytes",
    "str": "str",
    "json": "json",
    "failing": failing_serializer,
    "odd": odd_serializer,
}


def layout(count: int) -> TopicInfo:
    return TopicInfo("t", tuple(PartitionInfo(p, 1) for p in range(count)), tuple(range(count)))


def new_accumulator() -> RecordAccumulator:
    return RecordAccumulator(
        batch_size=300,
        linger_ms=5,
        buffer_memory=20_000,
        compression=CompressionType.NONE,
        compression_level=None,
        new_outcome=lambda tp: BatchOutcome(tp[0], tp[1], None),
    )


def run(kind: str, make_partitioner: Any, calls: list[tuple[Any, ...]], serializers: tuple[str, str]) -> Any:
    """Every call's outcome, the batches' bytes, the memory and the topics in use after `calls`, on the `kind`
    twins (`make_partitioner` is called once they are in place)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_twin(monkeypatch, kind)
        acc = new_accumulator()
        state = MetadataState(max_age_ms=300_000, max_idle_ms=300_000, retry_backoff_ms=100)
        state.cluster = ClusterMetadata({1: BrokerInfo(1, "h", 1)}, {"t": layout(4)})
        key_spec, value_spec = (SERIALIZERS[name] for name in serializers)
        subject = appender.Appender(
            accumulator=acc,
            pool=acc.pool,
            cluster_state=state,
            partitioner=make_partitioner(),
            key_serializer=resolve_serializer(key_spec, role="key"),  # type: ignore[arg-type]
            value_serializer=resolve_serializer(value_spec),  # type: ignore[arg-type]
            plain_bytes_keys=key_spec == "bytes",
            plain_bytes_values=value_spec == "bytes",
            max_record_bytes=4000,
            size_limit_message="too large",
            clock_ms=lambda: NOW_MS,
            wake_sender=lambda: None,
        )
        seen = [outcome(subject, call) for call in calls]
        batches = [batch.close().encode() for queue in acc.queues.values() for batch in queue]
        return seen, batches, acc.used_bytes, subject.unyielded_bytes, sorted(state.topics)


def outcome(subject: Any, call: tuple[Any, ...]) -> tuple[Any, ...]:
    try:
        result = subject.append_now(*call)
    except BaseException as exc:
        cause = exc.__cause__
        return ("raised", type(exc), str(exc), type(cause), str(cause))
    if isinstance(result, delivery.Delivery):
        return ("buffered", result._outcome.partition, result._index, result._key_size, result._value_size)
    return ("must wait", result.partition, result.key, result.value, result.headers, result.size, result.timestamp_ms)


def both(partitioner_answers: list[Any], calls: list[tuple[Any, ...]], serializers: tuple[str, str]) -> Any:
    pure = run("pure", lambda: Answers(partitioner_answers), calls, serializers)
    twin = run("compiled", lambda: Answers(partitioner_answers), calls, serializers)
    assert pure == twin
    return pure


BAD_ANSWERS = [
    -1,
    4,
    2**31,
    2**40,
    2**63,
    2**70,
    -(2**70),
    None,
    "1",
    1.0,
    True,
    False,
    MyInt(1),
    Color.RED,
    ZeroDivisionError("boom"),
]


@pytest.mark.parametrize("answer", BAD_ANSWERS, ids=repr)
def test_twins_refuse_an_invalid_partitioner_answer_alike(answer: Any) -> None:
    """A partitioner answering -1 crashed the compiled path (a segmentation fault) and 2**40 made it allocate a
    slot per partition number; the pure path buffered out-of-range and non-int answers and crashed later."""
    calls = [("t", b"v", None, None, None, NOW_MS)]
    seen, batches, used, _, _ = both([answer], calls, ("bytes", "bytes"))
    kind, error, message, *_ = seen[0]
    assert (kind, error.__name__) == ("raised", "PartitionerError"), seen[0]
    assert "Answers()" in message and (batches, used) == ([], 0)


def test_twins_pass_errors_of_ours_and_base_exceptions_through_alike() -> None:
    calls = [("t", b"v", None, None, None, NOW_MS)]
    seen, *_ = both([UnknownPartitionError("mine")], calls, ("bytes", "bytes"))
    assert seen[0][:3] == ("raised", UnknownPartitionError, "mine")
    seen, *_ = both([Stop("halt")], calls, ("bytes", "bytes"))
    assert seen[0][:4] == ("raised", Stop, "halt", type(None))


def test_twins_take_the_default_partitioner_through_the_same_check() -> None:
    """The compiled path trusts its own DefaultPartitioner; the pure path checks its answers: they agree."""
    calls = [("t", b"v%d" % i, b"k%d" % (i % 7) if i % 3 else None, None, None, NOW_MS + i) for i in range(80)]

    def default() -> Any:
        return partitioner.DefaultPartitioner(300, rng=random.Random(5))

    pure = run("pure", default, calls, ("bytes", "bytes"))
    twin = run("compiled", default, calls, ("bytes", "bytes"))
    assert pure == twin and all(kind == "buffered" for kind, *_ in pure[0])


ODD_OBJECTS = [
    None,
    b"",
    b"bytes",
    bytearray(b"ba"),
    memoryview(b"mv"),
    "text",
    "\ud800",  # a lone surrogate: not encodable as UTF-8
    7,
    1.5,
    float("nan"),
    True,
    [1, "a"],
    {"k": [1, 2]},
    object(),
]
HEADERS = [
    None,
    [],
    [("h", b"x")],
    [("h", None)],
    {"h": b"x", "g": None},
    [("h", bytearray(b"x"))],
    [("h", memoryview(b"x"))],
    [("h", "text")],
    [("h",)],
    [["h", b"x"]],
    [(1, b"x")],
    "abc",
    b"abc",
    7,
    (("ü", b"x"),),
]
PARTITIONS = [None, 0, 3, 4, 2**70, -1, True, "0", 1.0, MyInt(1)]
TIMESTAMPS = [NOW_MS, 0, 2**63 - 1, 2**63, -1, -(2**63), True, 1.5, "1", MyInt(5)]
ANSWERS = [0, 1, 3, -1, 4, None, "1", True, ZeroDivisionError("x")]


@settings(max_examples=300, deadline=None)
@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from(["t", "unknown", "bad topic!", ""]),
            st.sampled_from(ODD_OBJECTS),
            st.sampled_from(ODD_OBJECTS),
            st.sampled_from(HEADERS),
            st.sampled_from(PARTITIONS),
            st.sampled_from(TIMESTAMPS),
        ),
        min_size=1,
        max_size=12,
    ),
    answers=st.lists(st.sampled_from(ANSWERS), min_size=1, max_size=5),
    serializers=st.tuples(st.sampled_from(sorted(SERIALIZERS)), st.sampled_from(sorted(SERIALIZERS))),
)
def test_twins_agree_on_any_mix_of_hostile_input(
    calls: list[tuple[Any, ...]], answers: list[Any], serializers: tuple[str, str]
) -> None:
    both(answers, calls, serializers)


@pytest.mark.parametrize("serializers", [("bytes", "bytes"), ("failing", "odd"), ("odd", "failing"), ("json", "str")])
def test_twins_agree_on_every_odd_key_and_value(serializers: tuple[str, str]) -> None:
    calls = [("t", value, key, None, 0, NOW_MS) for key in ODD_OBJECTS for value in ODD_OBJECTS]
    seen, *_ = both([0], calls, serializers)
    kinds = {kind for kind, *_ in seen}
    assert kinds == ({"raised"} if "failing" in serializers else {"raised", "buffered"})


def test_twins_agree_on_every_odd_header_partition_and_timestamp() -> None:
    calls = [
        ("t", b"v", None, headers, partition, timestamp)
        for headers in HEADERS
        for partition in PARTITIONS
        for timestamp in TIMESTAMPS
    ]
    seen, *_ = both([1], calls, ("bytes", "bytes"))
    kinds = {kind for kind, *_ in seen}
    assert kinds == {"raised", "buffered", "must wait"}  # partitions 4 and 2**70 wait for metadata to grow


def run_many(kind: str, records: list[Any]) -> list[Any]:
    """What send_many's append_many made of `records`: each record's result once its batch succeeded."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_twin(monkeypatch, kind)
        acc = new_accumulator()
        state = MetadataState(max_age_ms=300_000, max_idle_ms=300_000, retry_backoff_ms=100)
        state.cluster = ClusterMetadata({1: BrokerInfo(1, "h", 1)}, {"t": layout(4)})
        subject = appender.Appender(
            accumulator=acc,
            pool=acc.pool,
            cluster_state=state,
            partitioner=Answers([1]),
            key_serializer=resolve_serializer("bytes", role="key"),
            value_serializer=resolve_serializer("bytes"),
            plain_bytes_keys=True,
            plain_bytes_values=True,
            max_record_bytes=4000,
            size_limit_message="too large",
            clock_ms=lambda: NOW_MS,
            wake_sender=lambda: None,
        )
        bulk = bulk_deliveries.BulkDeliveries()
        index, waiting = subject.append_many(records, 0, NOW_MS, bulk, 1 << 40)
        assert (index, waiting) == (len(records), None)
        for outcome in bulk.outcomes():
            outcome.succeed(100, -1)
        return [
            (type(r).__name__, str(r)) if isinstance(r, BaseException) else ("ok", r.partition, r.offset)
            for r in bulk.results(resolve)
        ]


SHAPES = [
    ("t", b"v"),
    ("t", b"v", None, None, None, NOW_MS, "extra"),
    None,
    7,
    "t",
    b"bytes",
    {"topic": "t"},
    iter(()),
]


@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_twins_fail_a_send_many_item_that_is_not_a_record_alone(shape: Any) -> None:
    """An item of send_many that was not a 6-tuple raised a bare ValueError or TypeError out of the whole call
    (records before it were buffered, their results lost) on both paths: now it fails alone, InvalidRecordError."""
    records = [("t", b"before", None, None, None, NOW_MS), shape, ["t", b"after", None, None, None, NOW_MS]]
    pure = run_many("pure", records)
    twin = run_many("compiled", records)
    assert pure == twin
    assert pure[0] == ("ok", 1, 100) and pure[2] == ("ok", 1, 101), pure
    assert pure[1][0] == "InvalidRecordError" and "send_many takes ProducerRecords" in pure[1][1]
