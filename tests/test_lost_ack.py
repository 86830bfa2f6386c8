"""Lost acknowledgements and injected Produce errors against brokers that enforce idempotent sequences — real Kafka
(the session's node) and Tansu: a proxy in the test forwards every request but now and then kills the connection
after the broker answered a Produce request (the batch is written, the producer never hears), answers an error
instead of forwarding, or takes the broker down for a while. Every record must end up in the log exactly once and
in order per key.

The two brokers answer a resent batch differently: Tansu refuses it with DUPLICATE_SEQUENCE_NUMBER (no offset),
while Kafka answers success with the offset the first copy got, from its cache of each producer's last five
batches (ProducerStateManager). On Kafka every acknowledged offset must therefore be the record's real one."""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fault_helpers import (
    close_writer,
    correlation_id_of,
    frame,
    judge,
    read_back_async,
    read_frame,
    running_producer,
    settle,
    workload,
)

from aioproducer import RecordMetadata
from aioproducer.error_codes import ErrorCode
from aioproducer.kafka_errors import BrokerInvalidRecordError
from aioproducer.protocol import ApiKey, decode_request, decode_request_header, decode_response, encode_response
from aioproducer.testing import KafkaCluster, TansuBroker, create_topic

NOT_LEADER_OR_FOLLOWER = ErrorCode.NOT_LEADER_OR_FOLLOWER
REQUEST_TIMED_OUT = ErrorCode.REQUEST_TIMED_OUT
NOT_ENOUGH_REPLICAS = ErrorCode.NOT_ENOUGH_REPLICAS
SETTINGS = {
    "linger_ms": 1,
    # Many small batches, so that the faults below hit many requests: fixed at batch_size, as Java's are.
    "batch_size": 512,
    "batch_max_size": 512,
    "request_timeout_ms": 3000,
    "retry_backoff_ms": 20,
    "retry_backoff_max_ms": 100,
    "reconnect_backoff_ms": 20,
    "reconnect_backoff_max_ms": 100,
}


class Act(enum.Enum):
    FORWARD = "forward"
    LOSE_ACK = "lose the acknowledgement"  # forward, then drop the connection once the broker has answered
    FAIL_BEFORE = "fail before the broker"  # answer an error without forwarding: nothing written
    FAIL_BEFORE_SLOW = "fail before the broker, slowly"  # the same, answered only after SLOW_S
    FAIL_AFTER = "fail after the broker"  # forward, then replace the broker's success with an error


Plan = Callable[[int], tuple[Act, int]]  # n-th Produce request (over all connections) -> (act, error code)
SLOW_S = 0.3  # long enough for the producer to send the requests behind a slowly refused one


class FaultyProxy:
    """A TCP proxy for a single-broker cluster that rewrites Metadata so clients keep coming through it."""

    def __init__(self, upstream: str, plan: Plan) -> None:
        host, _, port = upstream.rpartition(":")
        self._upstream = (host, int(port))
        self._plan = plan
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.down = False
        self.produce_requests = 0
        self.faults: dict[Act, int] = dict.fromkeys(Act, 0)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port: int = self._server.sockets[0].getsockname()[1]

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self.drop_connections()
        if self._server is not None:
            await self._server.wait_closed()

    async def drop_connections(self) -> None:
        for writer in list(self._writers):
            await close_writer(writer)

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self.down:  # a broker that is down: the connection is accepted, then closed at once
            await close_writer(client_writer)
            return
        upstream_reader, upstream_writer = await asyncio.open_connection(*self._upstream)
        self._writers.update((client_writer, upstream_writer))
        replies: asyncio.Queue[asyncio.Future[bytes | None]] = asyncio.Queue()  # one per request, in order
        forwarded: deque[tuple[asyncio.Future[bytes | None], Callable[[bytes], bytes | None]]] = deque()
        tasks = [
            asyncio.ensure_future(self._requests(client_reader, upstream_writer, replies, forwarded)),
            asyncio.ensure_future(self._responses(upstream_reader, forwarded)),
            asyncio.ensure_future(self._relay(replies, client_writer)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for writer in (client_writer, upstream_writer):
                self._writers.discard(writer)
                await close_writer(writer)

    async def _requests(
        self,
        client: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
        replies: asyncio.Queue[asyncio.Future[bytes | None]],
        forwarded: deque[tuple[asyncio.Future[bytes | None], Callable[[bytes], bytes | None]]],
    ) -> None:
        while (request := await read_frame(client)) is not None:
            header, _ = decode_request_header(request)
            reply: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
            await replies.put(reply)
            act, code = Act.FORWARD, 0
            if header.api_key == ApiKey.PRODUCE:
                act, code = self._plan(self.produce_requests)
                self.produce_requests += 1
                self.faults[act] += 1
            if act is Act.FAIL_BEFORE:
                reply.set_result(_produce_error(request, code))
                continue
            if act is Act.FAIL_BEFORE_SLOW:
                asyncio.get_running_loop().call_later(SLOW_S, reply.set_result, _produce_error(request, code))
                continue
            forwarded.append((reply, self._transform(header.api_key, header.api_version, act, request, code)))
            upstream.write(frame(request))

    def _transform(
        self, api_key: int, version: int, act: Act, request: bytes, code: int
    ) -> Callable[[bytes], bytes | None]:
        """What to send the client for the broker's response: it as is, rewritten, an error, or None (drop)."""
        if act is Act.LOSE_ACK:
            return lambda response: None
        if act is Act.FAIL_AFTER:
            return lambda response: _produce_error(request, code)
        if api_key == ApiKey.METADATA:
            return lambda response: self._rewrite_metadata(version, response)
        return frame

    def _rewrite_metadata(self, version: int, response: bytes) -> bytes:
        body = decode_response(ApiKey.METADATA, version, response[4:])
        for broker in body["brokers"]:
            broker["host"], broker["port"] = "127.0.0.1", self.port
        return encode_response(ApiKey.METADATA, version, correlation_id_of(response), body)

    async def _responses(
        self,
        upstream: asyncio.StreamReader,
        forwarded: deque[tuple[asyncio.Future[bytes | None], Callable[[bytes], bytes | None]]],
    ) -> None:
        while (response := await read_frame(upstream)) is not None:
            reply, transform = forwarded.popleft()
            reply.set_result(transform(response))

    async def _relay(self, replies: asyncio.Queue[asyncio.Future[bytes | None]], client: asyncio.StreamWriter) -> None:
        while True:
            reply = await (await replies.get())
            if reply is None:
                return  # the acknowledgement is lost with the connection
            client.write(reply)
            await client.drain()


class RetryLostTwiceProxy(FaultyProxy):
    """Answers REQUEST_TIMED_OUT — after the broker wrote it — to the first two requests carrying one batch (the
    first of partition 0 from sequence 100 on): its first attempt and its first retry."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream, lambda n: (Act.FORWARD, 0))
        self.target: int | None = None
        self.hits = 0

    def _transform(
        self, api_key: int, version: int, act: Act, request: bytes, code: int
    ) -> Callable[[bytes], bytes | None]:
        if api_key == ApiKey.PRODUCE and self.hits < 2:
            sequence = _base_sequence(request, partition=0)
            if self.target is None and sequence is not None and sequence >= 100:
                self.target = sequence
            if sequence is not None and sequence == self.target:
                self.hits += 1
                self.faults[Act.FAIL_AFTER] += 1
                act, code = Act.FAIL_AFTER, REQUEST_TIMED_OUT
        return super()._transform(api_key, version, act, request, code)


def _base_sequence(request: bytes, partition: int) -> int | None:
    """The base sequence of the batch `request` carries for `partition` (RecordBatch v2: byte 53), if any."""
    _header, body = decode_request(request)
    for topic in body["topic_data"]:
        for part in topic["partition_data"]:
            if part["index"] == partition and part["records"]:
                return int.from_bytes(part["records"][53:57], "big", signed=True)
    return None


def _produce_error(request: bytes, code: int) -> bytes:
    """A Produce response failing every partition of `request` with `code`."""
    header, body = decode_request(request)
    responses = [
        {
            "name": topic["name"],
            "partition_responses": [
                {"index": part["index"], "error_code": code, "base_offset": -1} for part in topic["partition_data"]
            ],
        }
        for topic in body["topic_data"]
    ]
    return encode_response(ApiKey.PRODUCE, header.api_version, header.correlation_id, {"responses": responses})


def every(period: int, first: int, act: Act, codes: tuple[int, ...] = (0,), limit: int = 8) -> Plan:
    """Apply `act` to Produce requests first, first+period, ... (at most `limit` times), cycling through `codes`."""

    def plan(n: int) -> tuple[Act, int]:
        k, rest = divmod(n - first, period)
        if n >= first and rest == 0 and k < limit:
            return act, codes[k % len(codes)]
        return Act.FORWARD, 0

    return plan


class Script:
    """A plan that forwards everything until armed, then applies its faults to the next Produce requests in turn."""

    def __init__(self, *faults: tuple[Act, int]) -> None:
        self._faults = deque(faults)
        self.armed = False

    def __call__(self, n: int) -> tuple[Act, int]:
        if self.armed and self._faults:
            return self._faults.popleft()
        return Act.FORWARD, 0

    @property
    def done(self) -> bool:
        return not self._faults


@dataclass(frozen=True)
class Target:
    name: str
    bootstrap_servers: str


@pytest.fixture(scope="module", params=["kafka", "tansu"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    """A single broker that checks sequences, whatever AIOPRODUCER_BOOTSTRAP points at: the session's real Kafka
    node, or a Tansu of our own."""
    if request.param == "kafka":
        cluster: KafkaCluster = request.getfixturevalue("kafka_session_cluster")
        yield Target("kafka", cluster.bootstrap_servers)
        return
    with TansuBroker() as broker:
        yield Target("tansu", broker.bootstrap_servers)


def assert_offsets_are_real(target: Target, results: list[object], records: list[Any], stored: list[Any]) -> None:
    """Each acknowledged offset holds the very record acknowledged; on Kafka every offset is known (a resent batch
    it already has is answered with the first copy's offset), Tansu gives -1 for the duplicates it refuses."""
    where = {(r.partition, r.offset): r.value for r in stored}
    for result, record in zip(results, records, strict=True):
        if isinstance(result, RecordMetadata) and (target.name == "kafka" or result.offset >= 0):
            assert where.get((result.partition, result.offset)) == record.value, (result, record.value)


def refused_duplicates(results: list[object]) -> int:
    return sum(1 for r in results if isinstance(r, RecordMetadata) and r.offset == -1)


async def run_through_proxy(
    target: Target, topic: str, plan: Plan, count: int, **settings: Any
) -> tuple[FaultyProxy, list[object]]:
    """Produce `count` keyed records through a proxy following `plan`; returns the proxy and each record's result."""
    await asyncio.to_thread(create_topic, target.bootstrap_servers, topic, 3)
    proxy = FaultyProxy(target.bootstrap_servers, plan)
    await proxy.start()
    records = workload(topic, count, keys=12, topic=topic)
    try:
        async with running_producer(proxy.bootstrap_servers, **{**SETTINGS, **settings}) as producer:
            futures = [await producer.enqueue(r.topic, r.value, key=r.key) for r in records]
            results = await settle(futures, 15)
    finally:
        await proxy.close()
    stored = await read_back_async(target.bootstrap_servers, topic)
    verdict = judge(stored, records)
    assert verdict.ok, str(verdict)
    assert_offsets_are_real(target, results, records, stored)
    return proxy, results


def failures(results: list[object]) -> list[object]:
    return [r for r in results if not isinstance(r, RecordMetadata)][:3]


@pytest.mark.parametrize("in_flight", [1, 5])
async def test_lost_acknowledgements_leave_every_record_exactly_once(target: Target, in_flight: int) -> None:
    plan = every(4, first=3, act=Act.LOSE_ACK, limit=6)
    settings = {"max_in_flight_requests_per_connection": in_flight}
    proxy, results = await run_through_proxy(target, f"lost-ack-{in_flight}", plan, 2000, **settings)
    assert failures(results) == []
    assert proxy.faults[Act.LOSE_ACK] == 6, proxy.faults
    if target.name == "tansu":
        # The resent batches Tansu already had come back as DUPLICATE_SEQUENCE_NUMBER: success, offset unknown.
        assert refused_duplicates(results) >= 1


async def test_errors_after_the_write_are_retried_into_duplicates_the_broker_recognises(target: Target) -> None:
    plan = every(4, first=2, act=Act.FAIL_AFTER, codes=(REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS), limit=6)
    proxy, results = await run_through_proxy(target, "fail-after", plan, 2000)
    assert failures(results) == []
    assert proxy.faults[Act.FAIL_AFTER] == 6, proxy.faults
    if target.name == "tansu":
        assert refused_duplicates(results) >= 6


async def test_errors_before_the_write_keep_order_with_five_in_flight(target: Target) -> None:
    # Requests behind a refused one reach the broker with a sequence gap (45): they must be retried after it.
    codes = (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS)
    plan = every(3, first=1, act=Act.FAIL_BEFORE, codes=codes, limit=9)
    proxy, results = await run_through_proxy(target, "fail-before", plan, 2000)
    assert failures(results) == []
    assert proxy.faults[Act.FAIL_BEFORE] == 9, proxy.faults


async def test_a_refused_first_batch_is_not_overtaken_by_the_next_ones(target: Target) -> None:
    """Regression: a partition's first batch refused with a retriable error (NOT_LEADER_OR_FOLLOWER, which real Kafka
    answers for a partition created a moment ago) while later batches were in flight. Since KIP-360 Kafka takes any
    sequence as a new producer's first on a partition, so the later batches were written ahead of it; its retry then
    drew OUT_OF_ORDER_SEQUENCE_NUMBER, the epoch bump resent batches, and records were reordered and duplicated.
    Tansu insists on sequence 0 first (45), which hid it. A stream now has one batch in flight until its first is
    acknowledged (idempotence.R5)."""
    plan = every(10**9, first=0, act=Act.FAIL_BEFORE, codes=(NOT_LEADER_OR_FOLLOWER,), limit=1)
    proxy, results = await run_through_proxy(target, "first-refused", plan, 2000)
    assert failures(results) == []
    assert proxy.faults[Act.FAIL_BEFORE] == 1, proxy.faults


async def test_a_retry_whose_answer_is_lost_again_is_not_overtaken_by_newer_batches(target: Target) -> None:
    """Regression: a batch was written but answered with an error, then its retry too. While the retry was in
    flight the producer sent newer batches of the partition behind it, and Kafka wrote them; it remembers only a
    producer's last five batches per partition, so the second retry was no longer recognised as a duplicate but
    refused as OUT_OF_ORDER_SEQUENCE_NUMBER. The producer then either wrote it again after an epoch bump (records
    duplicated and out of order) or failed records that are in the log. Yet Kafka accepted the newer batches only
    because this one was written before them: a retry refused as out of order while a later sequence of the same
    epoch is acknowledged is a duplicate. Tansu checks duplicates against its whole log and hid all this."""
    topic = f"retry-lost-twice-{target.name}"
    await asyncio.to_thread(create_topic, target.bootstrap_servers, topic, 1)
    proxy = RetryLostTwiceProxy(target.bootstrap_servers)
    await proxy.start()
    records = workload(topic, 3000, keys=6, topic=topic)
    try:
        async with running_producer(proxy.bootstrap_servers, **SETTINGS) as producer:
            futures = [await producer.enqueue(r.topic, r.value, key=r.key) for r in records]
            results = await settle(futures, 30)
    finally:
        await proxy.close()
    assert proxy.hits == 2, "the batch was not retried twice"
    assert failures(results) == []
    stored = await read_back_async(target.bootstrap_servers, topic)
    verdict = judge(stored, records)
    assert verdict.ok, str(verdict)


async def test_a_broker_outage_mid_stream_leaves_every_record_exactly_once(target: Target) -> None:
    topic = f"outage-{target.name}"
    await asyncio.to_thread(create_topic, target.bootstrap_servers, topic, 3)
    proxy = FaultyProxy(target.bootstrap_servers, lambda n: (Act.FORWARD, 0))
    await proxy.start()
    records = workload("outage", 3000, keys=12, topic=topic)
    try:
        async with running_producer(proxy.bootstrap_servers, **SETTINGS) as producer:
            futures = []
            for index, r in enumerate(records):
                futures.append(await producer.enqueue(r.topic, r.value, key=r.key))
                if index in (1000, 2000):  # down for a while, in the middle of the stream
                    proxy.down = True
                    await proxy.drop_connections()
                    await asyncio.sleep(0.15)
                    proxy.down = False
            results = await settle(futures, 15)
    finally:
        await proxy.close()
    assert failures(results) == []
    verdict = judge(await read_back_async(target.bootstrap_servers, topic), records)
    assert verdict.ok, str(verdict)


MESSAGE_TOO_LARGE, INVALID_RECORD = ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.INVALID_RECORD


async def test_a_split_batch_keeps_its_place_ahead_of_the_batches_behind_it(target: Target) -> None:
    """Regression: with idempotence, a batch split after MESSAGE_TOO_LARGE went back to its queue without sequence
    numbers, while the batches behind it, in flight, came back with OUT_OF_ORDER_SEQUENCE_NUMBER and were queued
    ahead of its halves: one split of a 40-record stream stored 8..39 before 0..7, and every record was reported
    delivered. The halves must inherit the batch's sequences and its place (Java's splitAndReenqueue)."""
    topic = f"split-order-{target.name}"
    await asyncio.to_thread(create_topic, target.bootstrap_servers, topic, 1)
    script = Script((Act.FAIL_BEFORE_SLOW, MESSAGE_TOO_LARGE))
    proxy = FaultyProxy(target.bootstrap_servers, script)
    await proxy.start()
    records = workload("split", 40, keys=1, topic=topic)
    settings = {**SETTINGS, "batch_size": 120, "batch_max_size": 120, "linger_ms": 0}
    try:
        async with running_producer(proxy.bootstrap_servers, **settings) as producer:
            await producer.send(topic, b"warm-up", key=b"key-0")
            script.armed = True
            futures = [await producer.enqueue(r.topic, r.value, key=r.key) for r in records]
            results = await settle(futures, 15)
    finally:
        await proxy.close()
    assert script.done and proxy.produce_requests > 3, "the batches behind the split one were not in flight"
    assert failures(results) == []
    stored = [r for r in await read_back_async(target.bootstrap_servers, topic) if r.value != b"warm-up"]
    verdict = judge(stored, records)
    assert verdict.ok, str(verdict)
    assert_offsets_are_real(target, results, records, stored)


async def test_a_retry_that_may_have_been_written_is_not_renumbered_when_another_batch_fails(target: Target) -> None:
    """Regression: when any batch failed for good (or was split), every queued batch was renumbered under a new
    producer epoch, including a retry whose first attempt the broker had written but whose acknowledgement was
    lost: the broker took it again under its new sequence, and the record was stored twice. A batch with a
    sequence never changes it (Java's ProducerBatch.hasSequence)."""
    topic = f"no-renumber-{target.name}"
    await asyncio.to_thread(create_topic, target.bootstrap_servers, topic, 2)
    # Request 1 (partition 0) is refused, slowly: meanwhile request 2 (partition 1) is written, and its answer is
    # lost with the connection.
    script = Script((Act.FAIL_BEFORE_SLOW, INVALID_RECORD), (Act.LOSE_ACK, 0))
    proxy = FaultyProxy(target.bootstrap_servers, script)
    await proxy.start()
    try:
        async with running_producer(proxy.bootstrap_servers, **{**SETTINGS, "linger_ms": 0}) as producer:
            await producer.send(topic, b"warm-0", partition=0)
            await producer.send(topic, b"warm-1", partition=1)
            script.armed = True
            refused = await producer.enqueue(topic, b"refused", partition=0)
            await asyncio.sleep(SLOW_S / 3)
            lost_ack = await producer.enqueue(topic, b"lost-ack", partition=1)
            after = await producer.enqueue(topic, b"after", partition=1)
            results = await settle([refused, lost_ack, after], 15)
    finally:
        await proxy.close()
    assert script.done
    assert type(results[0]) is BrokerInvalidRecordError and isinstance(results[1], RecordMetadata)
    stored = [r.value for r in await read_back_async(target.bootstrap_servers, topic) if r.partition == 1]
    assert stored == [b"warm-1", b"lost-ack", b"after"]
