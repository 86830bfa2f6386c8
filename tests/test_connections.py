"""Connection lifecycles: reconnect backoff on every path that connects, an exponential connection setup timeout
(KIP-601) and the closing of idle connections (`connections_max_idle_ms`). The rules are pure (`node_states`) and
tested without I/O; the producer is then watched from the other end of its sockets."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import ssl
import struct
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trustme

from aioproducer import Producer
from aioproducer.config import ProducerConfig
from aioproducer.errors import ConnectionClosedError, ConnectionFailedError, ResponseTimeoutError
from aioproducer.network import connection as connection_module
from aioproducer.network.cluster import Cluster
from aioproducer.network.metadata import BrokerInfo, ClusterMetadata
from aioproducer.network.node_states import ExponentialBackoff, NodeLatency, NodeStates, idle_expiry
from aioproducer.protocol import ApiKey
from aioproducer.testing import MockCluster


# -- the rules, without I/O -------------------------------------------------------------------------------------
def test_exponential_backoff_doubles_with_jitter_up_to_its_maximum() -> None:
    backoff = ExponentialBackoff(100, 1000)
    rng = random.Random(1)
    for attempts, term in [(0, 100), (1, 200), (2, 400), (3, 800), (4, 1000), (9, 1000), (60, 1000)]:
        values = [backoff.value(attempts, rng) for _ in range(200)]
        assert term * 0.8 <= min(values) and max(values) < term * 1.2, (attempts, min(values), max(values))
    assert {ExponentialBackoff(50, 50).value(n, rng) for n in range(5)} <= set(range(40, 61))
    assert ExponentialBackoff(0, 0).value(3, rng) == 0


def test_node_states_back_off_and_lengthen_the_setup_timeout_per_failure_then_reset() -> None:
    nodes = NodeStates(
        reconnect_backoff_ms=100,
        reconnect_backoff_max_ms=1000,
        setup_timeout_ms=1000,
        setup_timeout_max_ms=8000,
        rng=random.Random(2),
    )
    assert nodes.can_connect(1, 0) and nodes.next_attempt_delay_ms(0) is None
    assert 800 <= nodes.setup_timeout_ms(1) < 1200
    nodes.failed(1, 0)
    assert not nodes.can_connect(1, 79) and nodes.can_connect(1, 120)  # backing off ~100 ms
    assert nodes.can_connect(2, 0)  # other nodes are not affected
    assert 80 <= (nodes.next_attempt_delay_ms(0) or 0) < 120
    assert 1600 <= nodes.setup_timeout_ms(1) < 2400
    for _ in range(5):
        nodes.failed(1, 10_000)
    assert 6400 <= nodes.setup_timeout_ms(1) < 9600  # capped at 8000 (with jitter)
    assert not nodes.can_connect(1, 10_000 + 799) and nodes.can_connect(1, 10_000 + 1200)
    nodes.connected(1)
    assert nodes.can_connect(1, 10_000) and 800 <= nodes.setup_timeout_ms(1) < 1200


def test_a_node_whose_ready_batches_wait_past_the_availability_timeout_is_unavailable() -> None:
    """KIP-794 (Java's NodeLatencyStats): ready batches a node does not take make it unavailable to keyless records
    once they waited longer than partitioner_availability_timeout_ms; taking batches again makes it available."""
    latency = NodeLatency()
    latency.ready(1, 1000, drained=True)
    latency.ready(2, 1000, drained=False)  # first seen not taking batches: counted from now
    latency.ready(1, 1500, drained=True)
    latency.ready(2, 1500, drained=False)
    assert latency.unavailable(500) == set() and latency.unavailable(499) == {2}
    latency.ready(2, 1600, drained=True)
    assert latency.unavailable(1) == set()


def test_idle_expiry_closes_what_was_quiet_for_max_idle_and_never_a_busy_connection() -> None:
    connections = [("quiet", 0.0, 0), ("recent", 8.0, 0), ("busy", 0.0, 2)]
    assert idle_expiry(connections, now=10.0, max_idle=9.0) == (["quiet"], 7.0)
    assert idle_expiry(connections, now=5.0, max_idle=9.0) == ([], 4.0)
    assert idle_expiry([], now=5.0, max_idle=9.0) == ([], None)


# -- the producer, seen from the other end of its sockets ---------------------------------------------------------
class Recorded(list[tuple[float, float]]):
    """(accepted, closed) times of a server's connections; `changed` is set at each new one."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    async def at_least(self, count: int) -> None:
        while len(self) < count:
            self.changed.clear()
            await self.changed.wait()


@asynccontextmanager
async def server_recording(*, close_at_once: bool) -> AsyncIterator[tuple[int, Recorded]]:
    """A TCP server recording (accepted, closed) times of each connection; it closes each at once, or never answers
    (a TLS handshake with it then never ends)."""
    seen: Recorded = Recorded()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted = time.monotonic()
        try:
            if not close_at_once:
                while await reader.read(4096):
                    pass
        except ConnectionError:
            pass
        writer.close()
        seen.append((accepted, time.monotonic()))
        seen.changed.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], seen
    finally:
        server.close()
        await server.wait_closed()


async def test_the_connection_setup_timeout_doubles_per_failed_attempt() -> None:
    """socket_connection_setup_timeout_max_ms was accepted but unused: every attempt got the base timeout, so a
    broker that is slow to set up a connection (a TLS handshake under load) was never given longer (KIP-601)."""
    async with server_recording(close_at_once=False) as (port, seen):
        producer = Producer(
            f"127.0.0.1:{port}",
            security_protocol="SSL",
            ssl_context=ssl.create_default_context(),
            socket_connection_setup_timeout_ms=100,
            socket_connection_setup_timeout_max_ms=800,
            reconnect_backoff_ms=10,
            reconnect_backoff_max_ms=10,
            retry_backoff_ms=10,
            max_block_ms=150,
        )
        await producer.start()
        try:
            await asyncio.wait_for(seen.at_least(6), 10)
        finally:
            await producer.close()
    lasted = [closed - accepted for accepted, closed in seen[:6]]
    assert len(lasted) == 6, lasted
    # Each attempt's timeout is the previous one doubled, capped at 800 ms, each with ±20 % jitter (KIP-601):
    # 100, 200, 400, 800, 800, 800 ms. Lower bounds are the rule; upper bounds leave room for a loaded machine's
    # late timers. Neighbouring nominal values differ by 2x, so their jittered ranges never overlap.
    assert lasted[0] < 0.45, lasted  # the base timeout (100 ms, or start()'s max_block_ms)
    for attempt, nominal in ((1, 0.2), (2, 0.4), (3, 0.8), (4, 0.8), (5, 0.8)):
        assert 0.8 * nominal - 0.01 < lasted[attempt] < 1.2 * nominal + 0.6, (attempt, lasted)


async def test_connecting_for_metadata_honours_the_reconnect_backoff() -> None:
    """Cluster._connect (the path metadata refreshes take) started a new attempt on every call, ignoring the
    broker's reconnect backoff: a broker that failed was hit again at every refresh."""
    async with server_recording(close_at_once=True) as (port, seen):
        config = ProducerConfig(
            bootstrap_servers=(f"127.0.0.1:{port}",), reconnect_backoff_ms=200, reconnect_backoff_max_ms=1000
        )
        cluster = Cluster(config, lambda: None)
        cluster.state.cluster = ClusterMetadata({7: BrokerInfo(7, "127.0.0.1", port)}, {})
        started = time.monotonic()
        try:
            while time.monotonic() - started < 1.0:
                with pytest.raises(ConnectionFailedError):
                    await cluster.connect_any()
                await asyncio.sleep(0.01)
        finally:
            await cluster.close()
    # Broker 7 and the bootstrap address each: t=0, ~0.2, ~0.6 s (the next would be at ~1.4 s).
    assert 2 <= len(seen) <= 7, len(seen)


@pytest.mark.parametrize("max_idle_ms", [300, -1])
async def test_idle_connections_are_closed_after_connections_max_idle_ms(
    mock_cluster: MockCluster, max_idle_ms: int
) -> None:
    """connections_max_idle_ms was accepted but unused: idle connections stayed open forever (firewalls and load
    balancers drop them silently, and the next request then waits for its timeout)."""
    mock_cluster.create_topic("t", 3)
    async with Producer(mock_cluster.bootstrap_servers, connections_max_idle_ms=max_idle_ms, linger_ms=1) as producer:
        await producer.send("t", b"before", partition=0)
        cluster = producer._cluster
        opened = [conn for conn in (*cluster._connections.values(), cluster._bootstrap_connection) if conn]
        assert opened and not any(conn.closed for conn in opened)
        if max_idle_ms < 0:
            await asyncio.sleep(1.0)
            assert not any(conn.closed for conn in opened)  # -1: never
        else:
            loop = asyncio.get_running_loop()
            until = loop.time() + 10  # closed about 300 ms after the last byte; a loaded machine's timers are late
            # A connection offers no event for being closed: poll.
            while not all(conn.closed for conn in opened) and loop.time() < until:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            assert all(conn.closed for conn in opened)
        after = await asyncio.wait_for(producer.send("t", b"after", partition=0), 5)  # reconnects as needed
        assert after.partition == 0


@pytest.mark.parametrize("lost_as", ["timed out", "cancelled"])
async def test_a_connection_made_as_its_connect_ended_otherwise_is_closed(
    monkeypatch: pytest.MonkeyPatch, lost_as: str
) -> None:
    """Bug: before Python 3.12, asyncio.wait_for can drop a connection that completed just as its timeout fired or
    its task was cancelled (CPython gh-86296); the connection's transport then stayed open, an unclosed socket per
    lost race (seen as a ResourceWarning in a loaded run of the SASL tests). The race is forced here: the connect
    completes, then the wait ends with the timeout or the cancellation anyway."""
    client_gone = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(4096):
            pass  # ApiVersions is never answered: only the end of the connection matters here
        client_gone.set()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    ended = asyncio.TimeoutError() if lost_as == "timed out" else asyncio.CancelledError()

    async def completes_then_ends_otherwise(awaitable: Any, timeout: float) -> Any:
        await awaitable
        raise ended

    with monkeypatch.context() as patch:
        patch.setattr(connection_module.asyncio, "wait_for", completes_then_ends_otherwise)
        expected = ConnectionFailedError if lost_as == "timed out" else asyncio.CancelledError
        with pytest.raises(expected):
            await connection_module.BrokerConnection.open(
                "127.0.0.1", port, node_id=1, client_id="t", request_timeout_ms=1000, connect_timeout_ms=1000
            )
    await asyncio.wait_for(client_gone.wait(), 10)  # the client's socket was closed, not left to the collector
    server.close()
    await server.wait_closed()


async def test_closing_a_tls_connection_leaves_no_socket_open_when_the_broker_never_answers_the_close() -> None:
    """Bug: closing a TLS connection started the close_notify exchange and returned; asyncio ends that exchange up to
    30 s later (ssl_shutdown_timeout), so a producer closed just before its event loop ended left the socket to the
    garbage collector (a ResourceWarning in the security tests on a loaded machine). A broker that never answers the
    close_notify is the case that makes it last: the socket must be closed when drain_and_close returns."""
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    authority.configure_trust(client_context)
    held: list[asyncio.StreamWriter] = []

    async def never_closes(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # reads nothing and never answers a close_notify

    server = await asyncio.start_server(never_closes, "127.0.0.1", 0, ssl=server_context)
    port = server.sockets[0].getsockname()[1]
    conn = connection_module.BrokerConnection(1, "127.0.0.1", port, client_id="t", request_timeout_ms=1000)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_connection(
        lambda: conn, "127.0.0.1", port, ssl=client_context, server_hostname="127.0.0.1"
    )
    raw_socket = transport.get_extra_info("socket")
    started = loop.time()
    await conn.drain_and_close(0.5)
    assert raw_socket.fileno() == -1, "the TLS connection's socket outlived close"
    assert loop.time() - started < 5  # bounded by the drain timeout, not by asyncio's 30 s TLS shutdown
    for writer in held:
        writer.transport.abort()
    server.close()
    await server.wait_closed()


# -- request deadlines: one timer per connection ------------------------------------------------------------------
class _AnsweringBroker:
    """Reads request frames and answers each one whose number (0, 1, ...) `answer_after_s` gives a delay for; the
    others are never answered."""

    def __init__(self, answer_after_s: Any) -> None:
        self.answer_after_s = answer_after_s
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        number = 0
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                frame = await reader.readexactly(size)
                delay = self.answer_after_s(number)
                number += 1
                if delay is not None:
                    answer = frame[4:8] + b"\x00"  # the correlation id, then a byte the test's decoder ignores
                    loop = asyncio.get_running_loop()
                    loop.call_later(delay, writer.write, len(answer).to_bytes(4, "big") + answer)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    @asynccontextmanager
    async def connection(self, request_timeout_ms: int) -> AsyncIterator[connection_module.BrokerConnection]:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        conn = connection_module.BrokerConnection(
            1, "127.0.0.1", port, client_id="t", request_timeout_ms=request_timeout_ms
        )
        await asyncio.get_running_loop().create_connection(lambda: conn, "127.0.0.1", port)
        try:
            yield conn
        finally:
            conn.close()
            self.server.close()
            for writer in self.writers:  # before Python 3.12 the server leaves its connections open
                writer.close()
                with contextlib.suppress(ConnectionError):
                    await writer.wait_closed()
            await self.server.wait_closed()


def _request(conn: connection_module.BrokerConnection) -> asyncio.Future[dict[str, Any]]:
    body = {"client_software_name": "t", "client_software_version": "1"}
    return conn.send(ApiKey.API_VERSIONS, body, version=3, decoder=lambda payload: {"answered": True})


@pytest.mark.parametrize("gap_s", [0.2, 0.5])
async def test_a_request_times_out_at_its_own_deadline_after_an_answered_one(gap_s: float) -> None:
    """The connection keeps one timer, armed at the oldest waiting request's deadline. Two ways it could go wrong:
    firing at an answered request's deadline and failing a later request early (gap 0.2 s: the timer is still armed
    for the first request when the second is sent), or never firing for a request sent after the timer found nothing
    left to wait for (gap 0.5 s). Either way the unanswered request must fail at its own deadline, 0.3 s after it."""
    broker = _AnsweringBroker(lambda number: 0.0 if number == 0 else None)
    loop = asyncio.get_running_loop()
    async with broker.connection(request_timeout_ms=300) as conn:
        assert await asyncio.wait_for(_request(conn), 5) == {"answered": True}
        await asyncio.sleep(gap_s)
        sent = loop.time()
        with pytest.raises(ResponseTimeoutError):
            await asyncio.wait_for(_request(conn), 5)
        waited = loop.time() - sent
    assert 0.29 <= waited < 1.2, f"the unanswered request failed {waited:.3f} s after it was sent, not at 0.3 s"


async def test_the_oldest_of_several_unanswered_requests_fails_the_connection_at_its_deadline() -> None:
    """Two requests wait unanswered, sent 0.6 s apart with a 1 s timeout: the connection fails at the first one's
    deadline, not at the second's (a timer armed at the newest request, or re-armed past the oldest, would)."""
    broker = _AnsweringBroker(lambda number: None)
    loop = asyncio.get_running_loop()
    async with broker.connection(request_timeout_ms=1000) as conn:
        sent = loop.time()
        first = _request(conn)
        await asyncio.sleep(0.6)
        second = _request(conn)
        for request in (first, second):
            with pytest.raises(ResponseTimeoutError):
                await asyncio.wait_for(request, 5)
        waited = loop.time() - sent
    assert 0.99 <= waited < 1.5, f"the connection failed {waited:.3f} s after its oldest request, not at 1 s"


async def test_requests_answered_within_the_timeout_never_time_out_however_long_the_connection_is_busy() -> None:
    """Requests overlap (one every 50 ms, each answered 100 ms later) for three times the request timeout: there is
    always a request waiting when the timer fires, yet none has waited its 800 ms, so none may fail and the
    connection must stay open. (The timeout leaves 700 ms for a loaded machine to answer late.)"""
    broker = _AnsweringBroker(lambda number: 0.1)
    async with broker.connection(request_timeout_ms=800) as conn:
        futures = []
        for _ in range(48):
            futures.append(_request(conn))
            await asyncio.sleep(0.05)
        results = await asyncio.wait_for(asyncio.gather(*futures), 5)
        assert results == [{"answered": True}] * 48
        assert not conn.closed


# -- a frame written as the connection ends --------------------------------------------------------------------
_EMPTY_PRODUCE = {"transactional_id": None, "acks": 0, "timeout_ms": 1000, "topic_data": []}


@pytest.mark.parametrize("ending", ["reset", "end-of-stream"])
async def test_an_unanswered_request_written_as_the_connection_ends_is_never_reported_sent(ending: str) -> None:
    """An acks=0 request written to a connection asyncio had already closed was reported wholly in the socket, so its
    records counted as delivered though no byte left: asyncio closes the transport itself when a send fails (the
    broker reset the connection) or when the broker's end of stream arrives, drops what is written to it from then
    on without a word, and tells connection_lost only a turn later. The request must fail with ConnectionClosedError
    instead (the sender retries it)."""
    loop = asyncio.get_running_loop()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    conn = connection_module.BrokerConnection(1, "127.0.0.1", port, client_id="t", request_timeout_ms=5000)
    await loop.create_connection(lambda: conn, "127.0.0.1", port)
    broker, _ = listener.accept()  # the connection is established: accept returns at once
    outcome: asyncio.Future[asyncio.Future[None] | BaseException] = loop.create_future()

    def write_one() -> None:
        try:
            outcome.set_result(conn.send_unanswered(ApiKey.PRODUCE, _EMPTY_PRODUCE, version=9))
        except ConnectionClosedError as exc:
            outcome.set_result(exc)

    try:
        if ending == "reset":
            broker.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            broker.close()  # the reset is on our socket before the loop runs again: the send fails
            write_one()
        else:
            # Written in the turn between asyncio's close on the end of stream and connection_lost.
            eof_received = conn.eof_received

            def on_end_of_stream() -> bool | None:
                loop.call_soon(write_one)
                return eof_received()

            conn.eof_received = on_end_of_stream  # type: ignore[method-assign]
            broker.shutdown(socket.SHUT_WR)
        written = await asyncio.wait_for(outcome, 5)
        if isinstance(written, asyncio.Future):
            with pytest.raises(ConnectionClosedError):
                await asyncio.wait_for(written, 5)
        else:
            assert isinstance(written, ConnectionClosedError)
    finally:
        conn.close()
        broker.close()
        listener.close()
