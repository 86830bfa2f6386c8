"""Serializers that see the record's context (`serialize(topic, headers, value)`, as Java's Serializer) or are async:
run key then value before the record is buffered, awaited only when async; the plain path is left as it was.
Judged on a real broker (read back independently) and on MockProducer, which must behave the same."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from aioproducer import Producer, ProducerRecord, errors
from aioproducer.serializers import RecordSerializer
from aioproducer.testing import ConsumedRecord, MockProducer


class Tagged:
    """Serializes dicts as JSON and records what it saw; adds a header naming the topic it wrote for."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[tuple[str, str, list[tuple[str, bytes | None]]]] = []

    def serialize(self, topic: str, headers: list[tuple[str, bytes | None]], value: Any) -> bytes | None:
        self.calls.append((self.name, topic, list(headers)))
        if value is None:
            return None
        headers.append((f"{self.name}-for", topic.encode()))
        return json.dumps(value).encode()


class AsyncTagged(Tagged):
    async def serialize(self, topic: str, headers: list[tuple[str, bytes | None]], value: Any) -> bytes | None:  # type: ignore[override]
        await asyncio.sleep(0)  # as a schema registry lookup would
        return super().serialize(topic, headers, value)


@pytest.mark.parametrize("kind", [Tagged, AsyncTagged])
async def test_context_serializers_see_topic_and_headers_and_may_add_headers(
    kind: type[Tagged],
    bootstrap: str,
    topic_factory: Callable[..., str],
    read_back_records: Callable[..., list[ConsumedRecord]],
) -> None:
    topic = topic_factory(2)
    keys, values = kind("key"), kind("value")
    async with Producer(bootstrap, key_serializer=keys, value_serializer=values) as producer:
        one = await producer.send(topic, {"n": 1}, key={"id": 1}, headers=[("trace", b"t1")])
        many = await producer.send_many(
            [
                ProducerRecord(topic, {"n": 2}, key={"id": 2}),
                ProducerRecord(topic, None, key={"id": 3}, headers={"h": b"x"}),
            ]
        )
    assert one.serialized_value_size == len(b'{"n": 1}') and not any(isinstance(r, Exception) for r in many)
    # Key first, then value, each seeing the headers as they stand (Java's KafkaProducer.doSend).
    assert [(k[1], k[2]) for k in keys.calls] == [(topic, [("trace", b"t1")]), (topic, []), (topic, [("h", b"x")])]
    assert values.calls[0][2] == [("trace", b"t1"), ("key-for", topic.encode())]
    records = {json.loads(r.key or b"")["id"]: r for r in read_back_records(topic)}
    assert records[1].value == b'{"n": 1}'
    assert records[1].headers == (("trace", b"t1"), ("key-for", topic.encode()), ("value-for", topic.encode()))
    assert records[3].value is None and records[3].headers == (("h", b"x"), ("key-for", topic.encode()))


async def test_async_plain_callables_are_awaited() -> None:
    async def encode(value: str) -> bytes:
        await asyncio.sleep(0)
        return value.upper().encode()

    async with MockProducer(value_serializer=encode) as mock:
        await mock.send("t", "hello")
        results = await mock.send_many([ProducerRecord("t", "a"), ProducerRecord("t", "b")])
    assert [r.value for r in mock.records("t")] == [b"HELLO", b"A", b"B"]
    assert [r.offset for r in results] == [1, 2]  # type: ignore[union-attr]


class Picky:
    """Refuses odd numbers: a failing record must fail alone, in its place."""

    async def serialize(self, topic: str, headers: list[tuple[str, bytes | None]], value: int) -> bytes:
        if value % 2:
            raise ValueError(f"odd: {value}")
        return str(value).encode()


@pytest.mark.parametrize("producer_kind", ["broker", "mock"])
async def test_a_failing_serializer_fails_only_its_record_in_send_many(producer_kind: str, bootstrap: str) -> None:
    producer: Any = (
        Producer(bootstrap, value_serializer=Picky())
        if producer_kind == "broker"
        else MockProducer(value_serializer=Picky())
    )
    records = [ProducerRecord("context-serializers", n) for n in range(6)] + [ProducerRecord("bad topic!", 8)]
    async with producer:
        results = await producer.send_many(records)
        with pytest.raises(errors.InvalidRecordError, match="odd: 1"):
            await producer.send("context-serializers", 1)
    assert [type(r).__name__ for r in results] == [
        "RecordMetadata", "InvalidRecordError", "RecordMetadata", "InvalidRecordError", "RecordMetadata",
        "InvalidRecordError", "InvalidRecordError",
    ]  # fmt: skip
    assert "value_serializer" in str(results[1]) and "odd: 1" in str(results[1])
    assert "invalid topic name" in str(results[6])  # the topic is checked before any serializer runs


async def test_wrong_results_are_refused_with_a_clear_message() -> None:
    class ReturnsText:
        def serialize(self, topic: str, headers: object, value: object) -> str:
            return "text"

    class ForgotAsync:
        def serialize(self, topic: str, headers: object, value: object) -> Any:
            return asyncio.sleep(0)  # a coroutine from a plain method: never awaited, and closed

    async with MockProducer(value_serializer=ReturnsText()) as mock:
        with pytest.raises(errors.InvalidRecordError, match="returned str: it must return bytes or None"):
            await mock.send("t", 1)
    async with MockProducer(value_serializer=ForgotAsync()) as mock:
        with pytest.raises(errors.InvalidRecordError, match="declare it `async def`"):
            await mock.send("t", 1)
    assert mock.history() == []


async def test_cancelling_enqueue_while_an_async_serializer_runs_sends_nothing() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    class Slow:
        async def serialize(self, topic: str, headers: object, value: bytes) -> bytes:
            started.set()
            await release.wait()
            return value

    async with MockProducer(value_serializer=Slow()) as mock:
        waiting = asyncio.ensure_future(mock.enqueue("t", b"v"))
        await started.wait()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    assert mock.history() == [] and mock.records() == []


async def test_closing_while_an_async_serializer_runs_refuses_the_record(bootstrap: str) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    class Slow:
        async def serialize(self, topic: str, headers: object, value: bytes) -> bytes:
            started.set()
            await release.wait()
            return value

    producer = Producer(bootstrap, value_serializer=Slow())
    await producer.start()
    waiting = asyncio.ensure_future(producer.enqueue("context-serializers", b"v"))
    await started.wait()
    await producer.close()
    release.set()
    with pytest.raises(errors.ProducerClosedError):
        await waiting


def test_plain_serializers_need_no_record_serializer() -> None:
    """The common path stays as it was: only a context-aware or async serializer adds the extra step."""
    assert RecordSerializer.for_settings(None, "json") is None
    assert RecordSerializer.for_settings("str", json.dumps) is None
    step = RecordSerializer.for_settings(None, Tagged("v"))
    assert step is not None and not step.is_async
    step = RecordSerializer.for_settings(AsyncTagged("k"), None)
    assert step is not None and step.is_async
    assert RecordSerializer.merge([1, 2], {1: ValueError()})[0] == 1
