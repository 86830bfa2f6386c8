"""The Produce request's own framer (protocol.produce_requests) against the generic codec, the one encoder built from
Kafka's message JSON: the same bytes for every body it frames, a hand-over (None) for every shape or value it does not
cover, the generic codec's ProtocolError for bodies that cannot be encoded, and the layout it assumes held to the
schema."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schema_layout import layout

import aioproducer.protocol.wire as wire
from aioproducer.errors import ProtocolError
from aioproducer.protocol import SUPPORTED_VERSIONS, ApiKey, decode_request, encode_request
from aioproducer.protocol.messages import REQUESTS
from aioproducer.protocol.produce_requests import FAST_VERSIONS, frame_produce_request
from aioproducer.records.builder import BatchBuilder

INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
# Names under 127 bytes take a one-byte length; longer ones two; over 32767 bytes of UTF-8 no Kafka string holds.
TEXT = st.one_of(st.text(max_size=12), st.text(min_size=120, max_size=140), st.just("é" * 64))
# Record sets around every length the framer treats apart: one-, two- and three-byte varints (a length + 1 of 0x80 and
# 0x4000: 16383 bytes is the default batch size's neighbour), and the by-reference threshold.
RECORD_SIZES = st.sampled_from([0, 1, 125, 126, 127, 128, 510, 511, 512, 513, 16382, 16383, 16384, 40000])
_PATTERN = bytes(range(256)) * 160


def records() -> st.SearchStrategy[Any]:
    # Large sizes are sliced from a pattern: drawn byte by byte they overran hypothesis's buffer and were never tried.
    as_bytes = st.one_of(RECORD_SIZES.map(lambda size: _PATTERN[:size]), st.binary(max_size=40))
    # Other types the generic codec takes (or refuses) go to it: null, a bytearray, a memoryview, text.
    others = st.one_of(
        st.none(),
        st.binary(max_size=600).map(bytearray),
        st.binary(max_size=600).map(memoryview),
        st.just("not bytes"),
    )
    return st.one_of(as_bytes, as_bytes, as_bytes, others)


def bodies() -> st.SearchStrategy[dict[str, Any]]:
    partition = st.fixed_dictionaries({"index": INT32, "records": records()})
    # 127 partitions and more take a two-byte count; built, not drawn, for the same reason as large record sets.
    many = st.integers(126, 129).map(lambda count: [{"index": i, "records": b"r" * (i % 3)} for i in range(count)])
    topic = st.fixed_dictionaries({"name": TEXT, "partition_data": st.one_of(st.lists(partition, max_size=6), many)})
    return st.fixed_dictionaries(
        {
            "transactional_id": st.one_of(st.none(), TEXT),
            "acks": st.one_of(st.sampled_from([-1, 0, 1]), INT16),
            "timeout_ms": INT32,
            "topic_data": st.lists(topic, max_size=3),
        },
        optional={"unknown_field": st.integers()},  # keys a version lacks are ignored by both
    )


@contextmanager
def generic_codec_only() -> Iterator[None]:
    """encode_request as it is without the Produce framer: the oracle."""
    original = wire.frame_produce_request
    wire.frame_produce_request = lambda *args: None
    try:
        yield
    finally:
        wire.frame_produce_request = original


def generic(version: int, correlation_id: int, client_id: str | None, body: Any) -> bytes:
    with generic_codec_only():
        return encode_request(ApiKey.PRODUCE, version, correlation_id, client_id, body)


def assert_framed_as_the_generic_codec(version: int, correlation_id: int, client_id: str | None, body: Any) -> None:
    try:
        expected = generic(version, correlation_id, client_id, body)
    except ProtocolError:
        assert frame_produce_request(version, correlation_id, client_id, body) is None
        with pytest.raises(ProtocolError):
            encode_request(ApiKey.PRODUCE, version, correlation_id, client_id, body)
        return
    assert encode_request(ApiKey.PRODUCE, version, correlation_id, client_id, body) == expected
    mine = frame_produce_request(version, correlation_id, client_id, body)
    assert mine is None or mine == expected


def test_the_framer_covers_the_flexible_versions_we_send() -> None:
    low, high = SUPPORTED_VERSIONS[ApiKey.PRODUCE]
    assert set(FAST_VERSIONS) == set(range(max(low, 9), high + 1))


@settings(max_examples=300, deadline=None)
@given(
    version=st.sampled_from(list(FAST_VERSIONS)),
    correlation_id=INT32,
    client_id=st.one_of(st.none(), TEXT),
    body=bodies(),
)
def test_every_request_is_framed_as_the_generic_codec_frames_it(
    version: int, correlation_id: int, client_id: str | None, body: dict[str, Any]
) -> None:
    assert_framed_as_the_generic_codec(version, correlation_id, client_id, body)


def test_the_senders_request_is_framed_here_and_decodes_to_its_body() -> None:
    """The body the sender builds, with batches as the builder encodes them, takes this framer (a silent hand-over
    would leave it unused), and a broker's decoder reads back what was framed."""
    batches = []
    for index in range(3):
        builder = BatchBuilder(size_limit=1 << 20)
        for offset in range(50 * index + 1):
            assert builder.try_append(1_700_000_000_000 + offset, b"key", b"v" * 100) is not None
        batches.append(builder.close().encode(producer_id=7, producer_epoch=0, base_sequence=index))
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [
            {"name": "orders", "partition_data": [{"index": i, "records": b} for i, b in enumerate(batches)]}
        ],
    }
    for version in FAST_VERSIONS:
        frame = frame_produce_request(version, 42, "aioproducer-1", body)
        assert frame is not None
        assert frame == generic(version, 42, "aioproducer-1", body)
        header, decoded = decode_request(frame[4:])
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
            ApiKey.PRODUCE,
            version,
            42,
            "aioproducer-1",
        )
        assert decoded["topic_data"][0]["partition_data"] == body["topic_data"][0]["partition_data"]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda b: b.update(acks=True), "a bool where an int16 goes: the generic codec's coercion"),
        (lambda b: b.update(acks=2**15), "acks out of int16's range: the generic codec's ProtocolError"),
        (lambda b: b.update(timeout_ms=2**31), "a timeout out of int32's range"),
        (lambda b: b.update(topic_data=tuple(b["topic_data"])), "a tuple of topics"),
        (lambda b: b.pop("transactional_id"), "a missing key takes the field's default"),
        (lambda b: b.update(transactional_id=7), "a transactional id that is not text"),
        (lambda b: b.update(transactional_id="t" * 40_000), "a transactional id over 32767 bytes"),
        (lambda b: b["topic_data"][0].update(name="é" * 20_000), "a topic name over 32767 bytes of UTF-8"),
        (lambda b: b["topic_data"][0].update(name="\ud800"), "a name UTF-8 cannot encode"),
        (lambda b: b["topic_data"][0].update(name=None), "a null topic name"),
        (lambda b: b["topic_data"][0]["partition_data"][0].update(index=2**31), "an index out of int32's range"),
        (lambda b: b["topic_data"][0]["partition_data"][0].update(index=1.0), "a float index"),
        (lambda b: b["topic_data"][0]["partition_data"][0].update(records=None), "a null record set"),
        (lambda b: b["topic_data"][0]["partition_data"][0].update(records=[1, 2]), "a list for records"),
        (lambda b: b["topic_data"][0]["partition_data"].append("partition"), "a partition that is not a mapping"),
        (lambda b: b["topic_data"].append({"name": "t"}), "a topic without its partitions"),
    ],
)
def test_a_body_out_of_the_usual_shape_goes_to_the_generic_codec(change: Any, why: str) -> None:
    body = {
        "transactional_id": "txn",
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": b"r" * 600}]}],
    }
    change(body)
    assert frame_produce_request(12, 1, "c", body) is None, why
    assert_framed_as_the_generic_codec(12, 1, "c", body)


@pytest.mark.parametrize("size", [0x1FFFFE, 0x1FFFFF, 0x200000, 0x300000])
def test_record_sets_around_the_three_byte_length_are_framed_as_the_generic_codec_frames_them(size: int) -> None:
    """A length + 1 of 2 MiB and more takes a four-byte varint: the framer's general case."""
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 1,
        "topic_data": [{"name": "t", "partition_data": [{"index": 5, "records": bytes(size)}]}],
    }
    assert frame_produce_request(11, 9, None, body) == generic(11, 9, None, body)


def test_versions_outside_the_flexible_range_go_to_the_generic_codec() -> None:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1, "topic_data": []}
    low, _ = SUPPORTED_VERSIONS[ApiKey.PRODUCE]
    for version in range(low, 9):
        assert frame_produce_request(version, 1, "c", body) is None
        assert encode_request(ApiKey.PRODUCE, version, 1, "c", body) == generic(version, 1, "c", body)


@pytest.mark.parametrize("version", list(FAST_VERSIONS))
def test_the_layout_framed_here_is_the_schemas(version: int) -> None:
    """What frame_produce_request writes, field by field; a change to ProduceRequest in a version framed here must
    change the framer too (the schema is itself held to Kafka's JSON by test_spec_drift)."""
    expected = [
        ("transactional_id", "string", None, True, []),
        ("acks", "int16", None, False, []),
        ("timeout_ms", "int32", None, False, []),
        (
            "topic_data",
            "[]TopicProduceData",
            None,
            False,
            [
                ("name", "string", None, False, []),
                (
                    "partition_data",
                    "[]PartitionProduceData",
                    None,
                    False,
                    [("index", "int32", None, False, []), ("records", "records", None, True, [])],
                ),
            ],
        ),
    ]
    assert layout(REQUESTS[ApiKey.PRODUCE].fields, version) == expected
    assert version in REQUESTS[ApiKey.PRODUCE].flexible


@pytest.mark.parametrize("size", [16382, 16383, 16384, 16385])
def test_record_sets_around_the_two_byte_length_are_framed_as_the_generic_codec_frames_them(size: int) -> None:
    """A length + 1 of 0x4000 and more takes a three-byte varint; 16384 is the default batch size."""
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 1, "records": _PATTERN[:size]}]}],
    }
    frame = frame_produce_request(12, 3, "c", body)
    assert frame is not None and frame == generic(12, 3, "c", body)


@pytest.mark.parametrize("length", [32766, 32767, 32768])
@pytest.mark.parametrize("where", ["client_id", "transactional_id", "name"])
def test_strings_around_kafkas_longest_are_framed_or_refused_as_by_the_generic_codec(where: str, length: int) -> None:
    """Kafka strings hold at most 32767 bytes of UTF-8: the longest is framed, one byte more is the generic codec's
    ProtocolError (the request header's client id is one too)."""
    text = "x" * length
    body: dict[str, Any] = {
        "transactional_id": text if where == "transactional_id" else None,
        "acks": -1,
        "timeout_ms": 1,
        "topic_data": [{"name": text if where == "name" else "t", "partition_data": [{"index": 0, "records": b"r"}]}],
    }
    client_id = text if where == "client_id" else "c"
    frame = frame_produce_request(10, 1, client_id, body)
    if length <= 32767:
        assert frame is not None and frame == generic(10, 1, client_id, body)
    else:
        assert frame is None
        with pytest.raises(ProtocolError):
            encode_request(ApiKey.PRODUCE, 10, 1, client_id, body)


class _RowLike:
    """Indexable by name like a mapping, without `.get`: a sqlite3.Row, say."""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]


@pytest.mark.parametrize(
    "level",
    ["body", "topic", "partition"],
)
@pytest.mark.parametrize("kind", ["defaultdict", "row-like", "mapping"])
def test_mappings_other_than_plain_dicts_go_to_the_generic_codec_untouched(level: str, kind: str) -> None:
    """Bug: the framer indexed the body where the generic codec calls `.get`, so a defaultdict missing a key was
    framed with the default's value (an empty record set for a null one) and had the key inserted, and an object
    indexable without `.get` was framed where the generic codec refuses it. Anything but a plain dict is now the
    generic codec's, and the body is left as it was."""
    import collections
    import types

    def make(fields: dict[str, Any], at: str) -> Any:
        if at != level:
            return fields
        if kind == "defaultdict":
            missing = {"body": "transactional_id", "topic": "name", "partition": "records"}[at]
            fields.pop(missing)
            return collections.defaultdict(bytes if at == "partition" else str, fields)
        if kind == "row-like":
            return _RowLike(**fields)
        return types.MappingProxyType(fields)

    partition = make({"index": 0, "records": b"r" * 600}, "partition")
    topic = make({"name": "orders", "partition_data": [partition]}, "topic")
    body = make({"transactional_id": None, "acks": -1, "timeout_ms": 1, "topic_data": [topic]}, "body")
    before = repr(body)
    assert frame_produce_request(12, 1, "c", body) is None
    assert repr(body) == before
    assert_framed_as_the_generic_codec(12, 1, "c", body)
