"""`ProducerRecord` takes the topic and the value by position, everything else by name: Java's argument order
(`ProducerRecord(topic, key, value)`) is a TypeError, never a silent swap; on both twins of its constructor (the
compiled one also leaves a record of plain fields untracked by the cyclic collector)."""

from __future__ import annotations

import copy
import pickle

import pytest

from aioproducer import ProducerRecord
from aioproducer.testing import MockProducer
from tests.twins import TWINS, use_twin


@pytest.fixture(autouse=True, params=TWINS)
def twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    use_twin(monkeypatch, request.param)
    return request.param  # type: ignore[no-any-return]


def test_javas_argument_order_is_refused_not_swapped() -> None:
    """Bug: a Java user's `ProducerRecord(topic, key, value)` was accepted with key and value silently swapped (ours
    was topic, value, key, ...): the key became the payload and the value the partitioning key. Then the compiled
    constructor's refusal named an internal function (`new_producer_record()`) rather than the class called."""
    with pytest.raises(TypeError, match=r"^ProducerRecord\b.* positional argument"):
        ProducerRecord("orders", b"customer-7", b'{"total": 3}')  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"^ProducerRecord\b"):
        ProducerRecord("orders", 0, b"customer-7", b'{"total": 3}')  # type: ignore[misc]  # Java's (topic, partition, key, value)


def test_topic_and_value_by_position_the_rest_by_name() -> None:
    record = ProducerRecord("orders", b"v", key=b"k", headers=[("h", b"1")], partition=2, timestamp_ms=5)
    assert tuple(record) == ("orders", b"v", b"k", [("h", b"1")], 2, 5)
    assert (record.topic, record.value, record.key, record.partition, record.timestamp_ms) == (
        "orders",
        b"v",
        b"k",
        2,
        5,
    )
    assert ProducerRecord("orders") == ("orders", None, None, None, None, None)
    assert ProducerRecord(topic="orders", value=b"v") == ProducerRecord("orders", b"v")


def test_a_record_from_six_fields_and_its_copies() -> None:
    record = ProducerRecord._make(("orders", b"v", b"k", None, 1, 7))
    assert type(record) is ProducerRecord and record.key == b"k" and record.timestamp_ms == 7
    assert record._replace(key=b"other").key == b"other"
    for clone in (pickle.loads(pickle.dumps(record)), copy.copy(record), copy.deepcopy(record)):
        assert clone == record and type(clone) is ProducerRecord


async def test_send_many_still_takes_records_and_plain_six_tuples() -> None:
    async with MockProducer() as mock:
        results = await mock.send_many([ProducerRecord("t", b"v", key=b"k"), ("t", b"w", b"j", None, None, None)])
    assert not any(isinstance(result, BaseException) for result in results)
    assert [(r.key, r.value) for r in mock.records("t")] == [(b"k", b"v"), (b"j", b"w")]


def test_records_of_plain_fields_are_untracked_and_records_that_could_hold_a_cycle_are_not(twin: str) -> None:
    """A send_many caller's chunk of ProducerRecords survived young collections (CPython untracks plain tuples, not
    a named tuple's subclass) and triggered a full collection every ~70 k records. The compiled constructor untracks a
    record whose fields are all None, bytes, str or int; anything that could refer back to the record stays tracked,
    so a cycle through it is still collected."""
    import gc
    import weakref

    plain = ProducerRecord("t", b"v", key="k", partition=1, timestamp_ms=5)
    assert gc.is_tracked(plain) is (twin == "pure")
    assert gc.is_tracked(ProducerRecord("t", b"v", headers=[("h", b"1")]))
    assert gc.is_tracked(ProducerRecord("t", bytearray(b"v")))

    class Value:
        record: object = None

    value = Value()
    value.record = ProducerRecord("t", value)  # a cycle: record -> value -> record
    watched = weakref.ref(value)
    del value
    gc.collect()
    assert watched() is None


@pytest.mark.parametrize("cls", [list, dict, object, 5])
def test_the_constructor_called_for_a_type_that_is_no_tuple_raises_as_tuple_new_does(cls: object) -> None:
    """Bug: the compiled constructor allocated whatever `cls` it was given as a six-item tuple, so
    `ProducerRecord.__new__(list, "t")` wrote past a list's memory and crashed the interpreter; both twins now raise
    tuple.__new__'s TypeError."""
    with pytest.raises(TypeError) as raised:
        ProducerRecord.__new__(cls, "t")  # type: ignore[arg-type]
    with pytest.raises(TypeError) as expected:
        tuple.__new__(cls, ("t", None, None, None, None, None))  # type: ignore[type-var]
    assert str(raised.value) == str(expected.value)


def test_headers_given_as_a_mapping_are_kept_as_pairs() -> None:
    """A record built with a dict of headers held the dict, though its field is typed as pairs and hooks read it so:
    the constructor keeps a mapping's pairs, in order, and leaves pairs and None as they are."""
    from types import MappingProxyType

    assert ProducerRecord("t", b"v", headers={"a": b"1", "b": None}).headers == [("a", b"1"), ("b", None)]
    assert ProducerRecord("t", headers=MappingProxyType({"c": b"2"})).headers == [("c", b"2")]  # type: ignore[arg-type]
    pairs = (("a", b"1"),)
    assert ProducerRecord("t", headers=pairs).headers is pairs
    assert ProducerRecord("t").headers is None
