"""A Kafka proxy for fault tests: one listening port in front of each broker (Metadata answers are rewritten to point
back here), with faults of its own and a record of what producers wrote.

Faults: a slow reader (stop reading a producer's bytes for a while, so its socket and the proxy's small receive
buffer fill up and the producer's transport pushes back), lost acknowledgements (a Produce request is forwarded and
its connection closed once the broker answered: written, and the producer never hears), a topic's
`max.message.bytes` as a broker enforces it on acks=0 requests (a batch over it closes the connection, nothing
forwarded: librdkafka's mock cluster has no such limit), and latency before each request of one broker (a slow broker).
`records_read` holds the value of every record the proxy read off a producer's socket: the judge of acks=0, whose
records are delivered once they reached the broker's socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

from fault_helpers import close_writer, correlation_id_of, frame, read_frame

from aioproducer.protocol import ApiKey, decode_request, decode_request_header, decode_response, encode_response
from aioproducer.records import read_batches

# The proxy's receive buffer on producer connections: small, so a stalled reader pushes back at once.
SMALL_RECEIVE_BUFFER = 16 * 1024

Upstream = tuple[str, int]


class FaultProxy:
    """Proxies for every broker of one cluster. `await proxy.bootstrap("h:p,h:p")` gives the addresses to give a
    producer; every later connection (to brokers named in Metadata) goes through the proxy as well."""

    def __init__(self, *, observe_records: bool = False, receive_buffer: int | None = SMALL_RECEIVE_BUFFER) -> None:
        self._ports: dict[Upstream, int] = {}
        self._upstream_of_port: dict[int, Upstream] = {}
        self._servers: list[asyncio.Server] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._reading: dict[Upstream, asyncio.Event] = {}
        self._delay_s: dict[Upstream, float] = {}
        self._receive_buffer = receive_buffer
        self._observe = observe_records
        self._to_cut = 0
        self.cut_count = 0
        self.max_message_bytes: dict[str, int] = {}  # topic -> limit (acks=0 broker behaviour: close)
        self.refused_batches = 0
        self.records_read: set[bytes] = set()
        self.produce_requests: dict[Upstream, int] = {}
        self.stalls = 0
        self.unexpected_answers = 0  # answers to acks=0 requests (Tansu and the mock send them)
        self._connections = 0
        self._idle = asyncio.Event()
        self._idle.set()

    # -- addresses ------------------------------------------------------------------------------------------------
    async def bootstrap(self, servers: str) -> str:
        """Proxy addresses for a comma-separated list of broker addresses."""
        return ",".join([await self.front(server.strip()) for server in servers.split(",") if server.strip()])

    async def front(self, upstream: str) -> str:
        """The proxy address for broker `upstream` ("host:port")."""
        host, _, port = upstream.rpartition(":")
        return f"127.0.0.1:{await self._port_for(host, int(port))}"

    def upstreams(self) -> list[Upstream]:
        return list(self._ports)

    async def _port_for(self, host: str, port: int) -> int:
        if (host, port) not in self._ports:
            upstream = (host, port)
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if self._receive_buffer is not None:  # inherited by the accepted connections
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer)
            listener.bind(("127.0.0.1", 0))
            server = await asyncio.start_server(lambda r, w: self._serve(r, w, upstream), sock=listener)
            self._servers.append(server)
            self._ports[upstream] = server.sockets[0].getsockname()[1]
            self._upstream_of_port[self._ports[upstream]] = upstream
            self._reading[upstream] = asyncio.Event()
            self._reading[upstream].set()
        return self._ports[(host, port)]

    def _upstreams(self, upstream: str | Upstream | None) -> list[Upstream]:
        if upstream is None:
            return list(self._reading)
        if isinstance(upstream, str):
            host, _, port = upstream.rpartition(":")
            key = (host, int(port))
            return [self._upstream_of_port.get(key[1], key)] if host == "127.0.0.1" else [key]
        return [upstream]

    # -- faults ---------------------------------------------------------------------------------------------------
    def stop_reading(self, upstream: str | Upstream | None = None) -> None:
        """Stop reading what producers write to (one broker's proxy, or all): a slow reader."""
        for key in self._upstreams(upstream):
            self._reading[key].clear()
        self.stalls += 1

    def resume_reading(self, upstream: str | Upstream | None = None) -> None:
        for key in self._upstreams(upstream):
            self._reading[key].set()

    async def stall(self, seconds: float, upstream: str | Upstream | None = None) -> None:
        """Stop reading for `seconds`, then read again."""
        self.stop_reading(upstream)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.resume_reading(upstream)

    def delay(self, upstream: str | Upstream, seconds: float) -> None:
        """Hold each request to this broker for `seconds` before forwarding it (0: no delay): a slow broker."""
        for key in self._upstreams(upstream):
            self._delay_s[key] = seconds

    def cut(self, requests: int) -> None:
        """The next `requests` Produce requests are forwarded and their connections closed once answered."""
        self._to_cut += requests

    async def idle(self, timeout_s: float) -> bool:
        """Until every producer connection has ended (what their sockets held is read and forwarded); False on
        timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except asyncio.TimeoutError:
            return False
        return True

    async def close(self) -> None:
        for event in self._reading.values():
            event.set()
        for server in self._servers:
            server.close()
        for writer in list(self._writers):
            await close_writer(writer)

    # -- the pumps ------------------------------------------------------------------------------------------------
    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, upstream: Upstream) -> None:
        try:
            upstream_r, upstream_w = await asyncio.open_connection(*upstream)
        except OSError:  # the broker is down: so is its proxy
            await close_writer(client_w)
            return
        self._writers.update((client_w, upstream_w))
        self._connections += 1
        self._idle.clear()
        # By correlation id: (api key, version, cut after the answer). Kafka answers no acks=0 Produce request (Tansu
        # and librdkafka's mock do: those answers are dropped here).
        expected: dict[int, tuple[int, int, bool]] = {}
        reading = self._reading[upstream]
        broker_gone = asyncio.Event()  # the broker's side ended: requests are read and noted, not forwarded

        async def requests() -> bool:
            """Forward the producer's requests; True when it closed its side (end of stream)."""
            while True:
                await reading.wait()
                request = await read_frame(client_r)
                if request is None:
                    return True
                header, _ = decode_request_header(request)
                if broker_gone.is_set():
                    if header.api_key == ApiKey.PRODUCE:
                        self._take_produce(request)
                    continue
                cut, answered = False, True
                if header.api_key == ApiKey.PRODUCE:
                    self.produce_requests[upstream] = self.produce_requests.get(upstream, 0) + 1
                    taken, answered = self._take_produce(request)
                    if not taken:
                        self.refused_batches += 1
                        return False  # as a broker answering an acks=0 request with an error: the connection closes
                    cut = answered and self._to_cut > 0
                    if cut:
                        self._to_cut -= 1
                delay = self._delay_s.get(upstream, 0.0)
                if delay:
                    await asyncio.sleep(delay)
                if answered:
                    expected[header.correlation_id] = (header.api_key, header.api_version, cut)
                upstream_w.write(frame(request))

        async def responses() -> None:
            while (response := await read_frame(upstream_r)) is not None:
                api_key, version, cut = expected.pop(correlation_id_of(response), (-1, 0, False))
                if api_key == -1:
                    # An answer to an acks=0 request: dropped, as Kafka sends none (an answer written to a producer
                    # that closed its socket makes that socket reset the connection, which discards what the proxy
                    # has not read yet).
                    self.unexpected_answers += 1
                    continue
                if cut:
                    self.cut_count += 1
                    return  # the broker wrote the batch; its answer dies with the connection
                if api_key == ApiKey.METADATA:  # encode_response gives a whole frame, size included
                    client_w.write(await self._rewrite_metadata(version, response))
                else:
                    client_w.write(frame(response))

        forward, answer = asyncio.ensure_future(requests()), asyncio.ensure_future(responses())
        try:
            await asyncio.wait([forward, answer], return_when=asyncio.FIRST_COMPLETED)
            if forward.done() and not forward.cancelled() and forward.exception() is None and forward.result():
                # The producer closed its side: the broker reads all it was sent, then closes its own side; reading
                # its answers meanwhile keeps our socket from resetting the connection (which would discard what the
                # broker has not read yet).
                with contextlib.suppress(OSError):
                    upstream_w.write_eof()
                await asyncio.wait([answer], timeout=10)
            elif answer.done() and not forward.done():
                # The broker's side ended (it went down, or an answer was cut): what the producer had already put in
                # its socket reached the broker's socket all the same. Tell the producer (end of stream), and read what
                # it still sends, forwarding nothing, until it closes.
                broker_gone.set()
                with contextlib.suppress(OSError, RuntimeError):
                    client_w.write_eof()
                await asyncio.wait([forward], timeout=10)
        finally:
            for task in (forward, answer):
                task.cancel()
            await asyncio.gather(forward, answer, return_exceptions=True)
            for writer in (client_w, upstream_w):
                self._writers.discard(writer)
                await close_writer(writer)
            self._connections -= 1
            if not self._connections:
                self._idle.set()

    def _take_produce(self, request: bytes) -> tuple[bool, bool]:
        """Note the records of a Produce request: (False when a batch is over its topic's `max_message_bytes`,
        whether the broker answers it: acks != 0)."""
        _, body = decode_request(request)
        answered = body["acks"] != 0
        if not self._observe and not self.max_message_bytes:
            return True, answered
        for topic in body["topic_data"]:
            # Only under acks=0: a broker answers MESSAGE_TOO_LARGE otherwise, which the proxy does not make up.
            limit = self.max_message_bytes.get(topic["name"]) if not answered else None
            for part in topic["partition_data"]:
                records = part["records"] or b""
                if limit is not None and len(records) > limit:
                    return False, answered
                if self._observe:
                    for batch in read_batches(records):
                        self.records_read.update(r.value for r in batch.records if r.value is not None)
        return True, answered

    async def _rewrite_metadata(self, version: int, response: bytes) -> bytes:
        body = decode_response(ApiKey.METADATA, version, response[4:])
        for broker in body["brokers"]:
            broker["port"] = await self._port_for(broker["host"], broker["port"])
            broker["host"] = "127.0.0.1"
        return encode_response(ApiKey.METADATA, version, correlation_id_of(response), body)
