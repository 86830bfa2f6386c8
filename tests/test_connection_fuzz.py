"""A hostile broker: it answers ApiVersions, Metadata and InitProducerId correctly, but answers Produce requests with
garbage, truncated frames, wrong correlation ids, undecodable bodies or absurd values, as hypothesis chooses.

The producer must survive all of it: drop and re-open the connection, retry or fail each record with a typed error,
log no error, and close cleanly. The broker behaves once its script is used up, so every fault is hit.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from fault_helpers import close_writer, frame, read_frame
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import AioProducerError
from aioproducer.protocol import ApiKey, decode_request, encode_response

NODE_ID = 7
PRODUCER_ID = 4242
# (min, max) versions the fake broker offers; the producer picks its highest common one.
OFFERED = {
    ApiKey.PRODUCE: (3, 11),
    ApiKey.METADATA: (1, 12),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
}
DUPLICATE_SEQUENCE_NUMBER = ErrorCode.DUPLICATE_SEQUENCE_NUMBER
# Faults that leave the connection unusable: the producer must open a new one to get any further.
BREAKING = {"garbage", "truncated", "stall", "wrong_correlation", "bad_body", "close"}


@dataclass(frozen=True)
class Hostile:
    """One misbehaviour, used on one Produce request. `data` and `number` feed it (bytes, a cut, a code...)."""

    kind: str
    data: bytes = b""
    number: int = 0


def produce_success(
    body: Mapping[str, Any], error_code: int = 0, base_offset: int = 0, shift: int = 0
) -> dict[str, Any]:
    """A Produce response body for `body`'s partitions; `shift` renames partitions to ones that were not asked."""
    return {
        "responses": [
            {
                "name": topic["name"],
                "partition_responses": [
                    {"index": part["index"] + shift, "error_code": error_code, "base_offset": base_offset}
                    for part in topic["partition_data"]
                ],
            }
            for topic in body["topic_data"]
        ]
    }


class HostileBroker:
    """A one-node cluster on loopback following `script` for its first Produce requests."""

    def __init__(self, script: list[Hostile], produce_max_version: int = 11) -> None:
        self.script = deque(script)
        self.offered = {**OFFERED, ApiKey.PRODUCE: (3, produce_max_version)}
        self.connections = 0
        self.produce_versions: set[int] = set()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._next_offset = 0
        self._held: tuple[int, Mapping[str, Any]] | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port: int = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            await close_writer(writer)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            while (request := await read_frame(reader)) is not None:
                header, body = decode_request(request)
                if header.api_key == ApiKey.PRODUCE:
                    self.produce_versions.add(header.api_version)
                if header.api_key == ApiKey.PRODUCE and self.script:
                    if not self._misbehave(
                        self.script.popleft(), header.api_version, header.correlation_id, body, writer
                    ):
                        break
                    continue
                writer.write(self._answer(header.api_key, header.api_version, header.correlation_id, body))
                await writer.drain()
        finally:
            self._writers.discard(writer)
            await close_writer(writer)

    def _answer(self, api_key: int, version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes:
        if api_key == ApiKey.API_VERSIONS:
            keys = [{"api_key": int(k), "min_version": lo, "max_version": hi} for k, (lo, hi) in self.offered.items()]
            reply: dict[str, Any] = {"error_code": 0, "api_keys": keys}
        elif api_key == ApiKey.METADATA:
            reply = self._metadata(body)
        elif api_key == ApiKey.INIT_PRODUCER_ID:
            reply = {"error_code": 0, "producer_id": PRODUCER_ID, "producer_epoch": 0}
        else:
            reply = produce_success(body, base_offset=self._take_offset())
        return encode_response(ApiKey(api_key), version, correlation_id, reply)

    def _take_offset(self) -> int:
        """Each answered Produce request gets its own offsets, a thousand apart, so answers cannot be confused."""
        self._next_offset += 1000
        return self._next_offset

    def _metadata(self, body: Mapping[str, Any]) -> dict[str, Any]:
        partition = {"partition_index": 0, "leader_id": NODE_ID, "leader_epoch": 0, "replica_nodes": [NODE_ID]}
        topics = [
            {"error_code": 0, "name": t["name"], "partitions": [{**partition, "isr_nodes": [NODE_ID]}]}
            for t in body["topics"] or ()
        ]
        broker = {"node_id": NODE_ID, "host": "127.0.0.1", "port": self.port, "rack": None}
        return {"brokers": [broker], "cluster_id": "hostile", "controller_id": NODE_ID, "topics": topics}

    def _misbehave(
        self, hostile: Hostile, version: int, correlation_id: int, body: Mapping[str, Any], writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one Produce request badly; False when the connection is to be closed."""
        good = encode_response(ApiKey.PRODUCE, version, correlation_id, produce_success(body))
        kind = hostile.kind
        if kind == "garbage":
            writer.write(hostile.data)
        elif kind in ("truncated", "stall"):
            writer.write(good[: hostile.number % len(good)])
        elif kind == "wrong_correlation":
            writer.write(
                encode_response(ApiKey.PRODUCE, version, correlation_id + hostile.number, produce_success(body))
            )
        elif kind == "bad_body":
            writer.write(frame(correlation_id.to_bytes(4, "big", signed=True) + hostile.data))
        elif kind == "hold":  # answered later, under the wrong correlation id, by "misdirect"
            self._held = (self._take_offset(), body)
        elif kind == "misdirect" and self._held is not None:
            held_offset, held_body = self._held
            writer.write(
                encode_response(
                    ApiKey.PRODUCE, version, correlation_id, produce_success(held_body, base_offset=held_offset)
                )
            )
            writer.write(
                encode_response(
                    ApiKey.PRODUCE, version, correlation_id, produce_success(body, base_offset=self._take_offset())
                )
            )
        elif kind == "weird":
            shift = 1 if hostile.data[:1] == b"x" else 0
            reply = produce_success(body, error_code=hostile.number, base_offset=-(2**63), shift=shift)
            writer.write(encode_response(ApiKey.PRODUCE, version, correlation_id, reply))
        return kind not in ("truncated", "close")


hostile_actions = st.one_of(
    st.builds(Hostile, st.just("garbage"), st.binary(min_size=1, max_size=64)),
    st.builds(Hostile, st.sampled_from(["truncated", "stall"]), number=st.integers(1, 10_000)),
    st.builds(Hostile, st.just("wrong_correlation"), number=st.sampled_from([-2, -1, 1, 2, 1 << 20])),
    st.builds(Hostile, st.just("bad_body"), st.binary(max_size=48)),
    st.builds(Hostile, st.just("close")),
    st.builds(
        Hostile,
        st.just("weird"),
        st.sampled_from([b"", b"x"]),
        st.integers(-(2**15), 2**15 - 1).filter(lambda code: code not in (0, DUPLICATE_SEQUENCE_NUMBER)),
    ),
)


class ErrorLog(logging.Handler):
    """Collects every ERROR logged anywhere (asyncio's "exception was never retrieved", a crashed sender...)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()}")


@pytest.fixture
def error_log() -> Iterator[ErrorLog]:
    handler = ErrorLog()
    logging.getLogger().addHandler(handler)
    try:
        yield handler
    finally:
        logging.getLogger().removeHandler(handler)


FAST = {
    "linger_ms": 0,
    "request_timeout_ms": 150,
    "delivery_timeout_ms": 5000,
    "retry_backoff_ms": 5,
    "retry_backoff_max_ms": 40,
    "reconnect_backoff_ms": 5,
    "reconnect_backoff_max_ms": 40,
}


async def survive(
    script: list[Hostile], produce_max_version: int = 11
) -> tuple[list[object], RecordMetadata, HostileBroker]:
    """Send records until the hostile script is used up (results: metadata or error), then one more that must be
    delivered by the now well-behaved broker; the producer must close within 5 s whatever happened."""
    broker = HostileBroker(script, produce_max_version)
    await broker.start()
    producer = Producer(f"127.0.0.1:{broker.port}", **FAST)
    await producer.start()
    try:
        records = [ProducerRecord("fuzz", b"v%d" % i) for i in range(3)]
        results: list[object] = list(await asyncio.wait_for(producer.send_many(records), 10))
        for attempt in range(len(script)):  # a record failed for good leaves faults for the next ones
            if not broker.script:
                break
            try:
                results.append(await asyncio.wait_for(producer.send("fuzz", b"more-%d" % attempt), 10))
            except AioProducerError as exc:
                results.append(exc)
        after = await asyncio.wait_for(producer.send("fuzz", b"after"), 10)
    finally:
        await asyncio.wait_for(producer.close(), 5)
        await broker.close()
    return results, after, broker


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# Produce v8 is the last version before flexible framing (KIP-482), v11 the newest the producer speaks.
@given(script=st.lists(hostile_actions, min_size=1, max_size=4), produce_max_version=st.sampled_from([8, 11]))
def test_hostile_produce_responses_never_crash_the_producer(
    script: list[Hostile], produce_max_version: int, error_log: ErrorLog
) -> None:
    error_log.messages.clear()
    results, after, broker = asyncio.run(survive(script, produce_max_version))
    gc.collect()  # an exception nobody retrieved is logged when its future is collected
    assert error_log.messages == []
    assert all(isinstance(r, RecordMetadata | AioProducerError) for r in results), results
    assert isinstance(after, RecordMetadata)
    assert broker.produce_versions == {produce_max_version}
    assert not broker.script, "the producer stopped sending before every fault was used"
    breaking = sum(1 for h in script if h.kind in BREAKING)
    assert broker.connections >= 1 + breaking, "a broken connection was not replaced by a new one"


@pytest.mark.parametrize(
    "hostile",
    [
        Hostile("garbage", b"\xff" * 8),  # a negative frame size
        Hostile("garbage", b"\x00\x00\x00\x08" + b"\x00" * 8),  # a well-framed reply nobody asked for
        Hostile("truncated", number=9),
        Hostile("stall", number=9),
        Hostile("wrong_correlation", number=1),
        Hostile("close"),
        Hostile("weird", b"x", 3),  # an answer for a partition that was not in the request
    ],
    ids=lambda h: f"{h.kind}-{h.data[:4].hex()}-{h.number}",
)
def test_each_kind_of_hostile_answer_is_survived(hostile: Hostile, error_log: ErrorLog) -> None:
    results, after, broker = asyncio.run(survive([hostile, hostile]))
    gc.collect()
    assert error_log.messages == []
    assert all(isinstance(r, RecordMetadata) for r in results), results
    assert isinstance(after, RecordMetadata) and not broker.script


def test_an_undecodable_produce_response_is_retried_not_failed(error_log: ErrorLog) -> None:
    """Regression: a Produce response whose body does not decode failed its records with ProtocolError, though the
    broker may well have written them (the request reached it; only the answer is unreadable). The connection is
    dropped as for any broken stream, and an idempotent retry is safe, so the records must be retried: reporting a
    record whose outcome is unknown as failed invites the application to send it twice."""
    results, _, broker = asyncio.run(survive([Hostile("bad_body", b"\x01")]))
    gc.collect()
    assert error_log.messages == []
    assert all(isinstance(r, RecordMetadata) for r in results), results
    assert broker.connections >= 2


async def misdirected_answer() -> tuple[RecordMetadata, RecordMetadata]:
    broker = HostileBroker([Hostile("hold"), Hostile("misdirect")])
    await broker.start()
    producer = Producer(f"127.0.0.1:{broker.port}", **FAST)
    await producer.start()
    try:
        first = await producer.enqueue("fuzz", b"first")
        await asyncio.sleep(0.02)  # in flight, held by the broker
        second = await producer.enqueue("fuzz", b"second")
        done = await asyncio.wait_for(asyncio.gather(first, second), 5)
    finally:
        await asyncio.wait_for(producer.close(), 5)
        await broker.close()
    return done[0], done[1]


def test_an_answer_under_a_later_correlation_id_settles_nothing(error_log: ErrorLog) -> None:
    """Regression: a broker answering the first of two Produce requests in flight under the second's correlation id
    got the second record settled with the first request's offsets. Kafka answers in request order on a connection,
    so an answer for a later request while an earlier one is pending means a broken peer: Java's NetworkClient
    drops the connection (correlation id mismatch), and both requests are retried."""
    first, second = asyncio.run(misdirected_answer())
    gc.collect()
    assert error_log.messages == []
    assert first.offset < second.offset, f"second record settled from the first one's answer: {first} / {second}"
