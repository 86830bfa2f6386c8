"""`ProducerRecord` takes the topic and the value by position, everything else by name: Java's argument order
(`ProducerRecord(topic, key, value)`) is a TypeError, never a silent swap; on the compiled path and the pure one."""

from __future__ import annotations

import copy
import pickle

import pytest

from aioproducer import ProducerRecord
from aioproducer.testing import MockProducer


def test_javas_argument_order_is_refused_not_swapped() -> None:
    """Bug: a Java user's `ProducerRecord(topic, key, value)` was accepted with key and value silently swapped (ours
    was topic, value, key, ...): the key became the payload and the value the partitioning key."""
    with pytest.raises(TypeError):
        ProducerRecord("orders", b"customer-7", b'{"total": 3}')  # type: ignore[misc]
    with pytest.raises(TypeError):
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
