"""One broker connection: socket, TLS, SASL (with KIP-368 re-authentication), framing, correlation ids → futures.

Built on an asyncio Protocol so bytes go straight from the transport into the sans-I/O frame decoder. OS and TLS
errors are mapped here, once; nothing above sees a socket or ssl exception.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import ssl
import sys
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import (
    AioProducerError,
    ConnectionClosedError,
    ConnectionFailedError,
    ProtocolError,
    ResponseTimeoutError,
    TransportError,
)
from aioproducer.kafka_errors import kafka_error
from aioproducer.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    FinalizedFeatures,
    FrameDecoder,
    api_versions_error_code,
    api_versions_fallback_version,
    decode_response,
    encode_request,
    finalized_features,
    negotiate_versions,
)
from aioproducer.security.exchange import authenticate
from aioproducer.security.sasl import SaslCredentials
from aioproducer.security.tls import tls_failure
from aioproducer.version import __version__

__all__ = ["BrokerConnection"]

log = logging.getLogger("aioproducer.connection")

_NEGOTIATED_APIS = (ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.INIT_PRODUCER_ID)
_OPTIONAL_APIS = (ApiKey.CREATE_TOPICS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
_SASL_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
# How long a closing connection waits, at most, for the broker to close its side after ours ended.
_LINGER_S = 2.0
# Java's SaslClientAuthenticator re-authenticates at 85% of the session lifetime plus up to 10% jitter: the margin
# covers latency and clock drift, the jitter keeps many connections from re-authenticating at once (KIP-368).
_REAUTH_WINDOW = (0.85, 0.95)

Decoder = Callable[[bytes], dict[str, Any]]


class _Pending:
    __slots__ = ("deadline", "decoder", "future")

    def __init__(self, future: asyncio.Future[dict[str, Any]], decoder: Decoder, deadline: float) -> None:
        self.future = future
        self.decoder = decoder
        self.deadline = deadline  # event-loop time by which its answer must have come (request_timeout_ms)


class BrokerConnection(asyncio.Protocol):
    """A connection to one broker. Create with `await BrokerConnection.open(...)`."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        *,
        client_id: str,
        request_timeout_ms: int,
        sasl: SaslCredentials | None = None,
    ) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_s = request_timeout_ms / 1000
        self.versions: dict[ApiKey, int] = {}
        # The cluster's finalized feature levels as this broker reported them (e.g. transaction.version, KIP-890).
        self.features = FinalizedFeatures()
        self.on_lost: Callable[[BrokerConnection], None] | None = None
        # Called when the transport has taken all it was given into the socket after it pushed back (the sender
        # sleeps while a connection is not writable: Java's selector wakes on OP_WRITE the same way).
        self.on_writable: Callable[[], None] | None = None
        self._loop = asyncio.get_running_loop()
        # Event-loop time of the last byte sent or received (connections_max_idle_ms closes idle connections).
        self.last_active = self._loop.time()
        self._transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder()
        self._pending: dict[int, _Pending] = {}
        # One timer for every request's deadline, armed at the oldest one's (see _check_deadlines); a timer per
        # request cost 2-3 µs of the loop's time each (arming, cancelling, and the cancelled handle's removal).
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._next_correlation_id = 0
        self._closed_error: TransportError | None = None
        self._write_paused = False
        self._sasl = sasl
        self._held: list[tuple[int, bytes]] | None = None  # (correlation id or -1, frame) written after re-auth
        # Correlation ids of written requests that await an answer, in wire order: Kafka answers in that order.
        self._written: deque[int] = deque()
        # Futures of requests that expect no answer (acks=0 Produce), done once their frame is wholly in the socket.
        self._unflushed: list[asyncio.Future[None]] = []
        self._lost: asyncio.Future[None] | None = None  # done at connection_lost, while drain_and_close waits
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self.bytes_sent = self.bytes_received = 0  # on the wire, for the producer's metrics

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port}>"

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str,
        request_timeout_ms: int,
        connect_timeout_ms: int,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
        cluster_id: str | None = None,
    ) -> BrokerConnection:
        """Connect (TLS when `ssl_context` is given), negotiate API versions, then authenticate when `sasl` is.

        With `cluster_id` (from metadata) and a `node_id`, ApiVersions v5 tells the broker which cluster and node
        we mean to reach (KIP-1242); another broker behind that address answers REBOOTSTRAP_REQUIRED, raised as
        `RebootstrapRequiredError`.

        Raises ConnectionFailedError when the broker cannot be reached, AuthenticationError for a rejected
        certificate or credentials (retrying will not help), or the broker's error.
        """
        loop = asyncio.get_running_loop()
        conn = cls(node_id, host, port, client_id=client_id, request_timeout_ms=request_timeout_ms, sasl=sasl)
        # SNI and hostname verification use the broker's advertised host, as Java's SslFactory does.
        server_hostname = host if ssl_context is not None else None
        connect = loop.create_connection(lambda: conn, host, port, ssl=ssl_context, server_hostname=server_hostname)
        try:
            await asyncio.wait_for(connect, connect_timeout_ms / 1000)
        except BaseException as exc:
            # Before 3.12, asyncio.wait_for can drop a connection that completed just as it timed out or was cancelled
            # (CPython gh-86296): the protocol, `conn`, already holds its transport, which must not stay open.
            conn.close()
            if isinstance(exc, ssl.SSLError):
                raise tls_failure(exc, f"{host}:{port}") from None
            if isinstance(exc, (OSError, asyncio.TimeoutError)):
                raise ConnectionFailedError(
                    f"cannot connect to broker {host}:{port}: {str(exc) or 'timed out'}"
                ) from exc
            raise
        try:
            await conn._negotiate_versions(cluster_id if node_id >= 0 else None)
            if sasl is not None:
                await conn._authenticate()
        except BaseException:
            conn.close()
            raise
        return conn

    # -- asyncio.Protocol ---------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # a stream transport: create_connection made it
        # The transport pushes back (pause_writing) as soon as a frame is not wholly in the socket, and lets go
        # (resume_writing) once everything is: a request is known to be sent when nothing is left in the
        # transport's buffer, and a connection takes the next request only then, as Java's KafkaChannel holds one
        # send at a time. TLS transports since Python 3.11 pause at a size >= their high-water mark (the others at >).
        tls = transport.get_extra_info("sslcontext") is not None and sys.version_info >= (3, 11)
        transport.set_write_buffer_limits(high=1 if tls else 0, low=0)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.last_active = self._loop.time()
        self.bytes_received += len(data)
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as exc:
            self._abort(ConnectionClosedError(f"broker {self.host}:{self.port} sent a malformed frame: {exc}"))
            return
        for correlation_id, payload in frames:
            if correlation_id not in self._pending:
                # A reply nobody waits for: brokers such as Tansu answer acks=0 Produce requests anyway.
                continue
            if not self._written or correlation_id != self._written[0]:
                # Kafka answers in request order on a connection; an answer for a later request while an earlier
                # one waits means a broken peer. As Java's NetworkClient, drop the connection: both are retried.
                self._abort(ConnectionClosedError(f"broker {self.host}:{self.port} answered requests out of order"))
                return
            self._written.popleft()
            pending = self._pending.pop(correlation_id)
            if pending.future.done():
                continue
            try:
                pending.future.set_result(pending.decoder(payload))
            except ProtocolError as exc:
                # As Java's NetworkClient: the connection is unusable and the request's outcome unknown, so it
                # fails as a (retriable) transport error, never as a verdict on the records.
                error = ConnectionClosedError(f"broker {self.host}:{self.port} sent an undecodable response: {exc}")
                error.__cause__ = exc
                pending.future.set_exception(error)
                self._abort(error)
                return

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_reauthentication()
        self._write_paused = False
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)
        reason = f": {exc}" if exc else ""
        error: AioProducerError = ConnectionClosedError(f"connection to {self.host}:{self.port} lost{reason}")
        if isinstance(exc, ssl.SSLError):
            # TLS 1.3 servers verify the client certificate after the client's handshake is done: a rejection
            # arrives as an alert on the first read, here.
            error = tls_failure(exc, f"{self.host}:{self.port}")
        self._fail_all(self._closed_error or error)
        if self.on_lost is not None:
            self.on_lost(self)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._flushed()
        if self.on_writable is not None and self._closed_error is None:
            self.on_writable()

    # -- requests -----------------------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed_error is not None or self._transport is None or self._transport.is_closing()

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def writable(self) -> bool:
        # Frames sent while re-authenticating wait in `_held` and go out right after it, so nobody needs to be
        # woken up then: a re-authenticating connection stays writable.
        return not self._write_paused and not self.closed

    @property
    def unflushed(self) -> int:
        """Requests expecting no answer whose frame is not wholly in the socket yet."""
        return len(self._unflushed)

    def send(
        self,
        api_key: ApiKey,
        body: Mapping[str, Any],
        *,
        version: int | None = None,
        decoder: Decoder | None = None,
    ) -> asyncio.Future[dict[str, Any]]:
        """Write one request now. Returns a future of the decoded response."""
        future: asyncio.Future[dict[str, Any]] = self._send(api_key, body, version, decoder, expect_response=True)
        return future

    def send_unanswered(
        self, api_key: ApiKey, body: Mapping[str, Any], *, version: int | None = None
    ) -> asyncio.Future[None]:
        """Write one request that gets no answer (an acks=0 Produce) now. Returns a future done once the request
        is wholly in the socket (Java completes such a request when its send completes), or failed with
        ConnectionClosedError if the connection ends before."""
        future: asyncio.Future[None] = self._send(api_key, body, version, None, expect_response=False)
        return future

    def _send(
        self,
        api_key: ApiKey,
        body: Mapping[str, Any],
        version: int | None,
        decoder: Decoder | None,
        *,
        expect_response: bool,
    ) -> asyncio.Future[Any]:
        if self._closed_error is not None or self._transport is None:
            raise self._closed_error or ConnectionClosedError(f"connection to {self.host}:{self.port} is closed")
        api_version = self.versions[api_key] if version is None else version
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(api_key, api_version, correlation_id, self.client_id, body)
        future: asyncio.Future[Any] = self._loop.create_future()
        if expect_response:
            deadline = self._loop.time() + self.request_timeout_s
            self._pending[correlation_id] = _Pending(
                future, decoder or _response_decoder(api_key, api_version), deadline
            )
            if self._deadline_timer is None:
                self._deadline_timer = self._loop.call_at(deadline, self._check_deadlines)
        else:
            self._unflushed.append(future)
        if self._held is not None and api_key not in _SASL_APIS:
            # KIP-368: only SASL requests go out while re-authenticating. The request is handed over all the same:
            # stamped as activity, as a written one is (the observer reads the stamp as the request's send time).
            self.last_active = self._loop.time()
            self._held.append((correlation_id if expect_response else -1, frame))
        else:
            self._write(correlation_id if expect_response else -1, frame)
        return future

    def _write(self, correlation_id: int, frame: bytes) -> None:
        if correlation_id >= 0:
            self._written.append(correlation_id)
        self.last_active = self._loop.time()
        self.bytes_sent += len(frame)
        self._transport.write(frame)  # type: ignore[union-attr]  # callers checked the connection is open
        if not self._write_paused:  # the socket took the whole frame (and all before it), unless the send failed
            self._flushed()

    def _flushed(self) -> None:
        """Everything written so far is in the socket: requests expecting no answer are sent. Held frames (KIP-368)
        are not written yet, so their futures wait for their own write. A closed or closing connection sends
        nothing: asyncio closes the transport itself when a send fails (dropping the frame) and when the broker's
        end of stream arrives, and tells connection_lost, which fails these requests, only a turn later. (A TLS
        transport says less: see docs/delivery-semantics.md on acks=0.)"""
        if not self._unflushed or self._held is not None or self.closed:
            return
        unflushed, self._unflushed = self._unflushed, []
        for future in unflushed:
            if not future.done():
                future.set_result(None)

    async def request(self, api_key: ApiKey, body: Mapping[str, Any], *, version: int | None = None) -> dict[str, Any]:
        return await self.send(api_key, body, version=version)

    def close(self) -> None:
        """Close now; requests in flight fail with ConnectionClosedError, bytes not yet in the socket are dropped."""
        self._abort(ConnectionClosedError(f"connection to {self.host}:{self.port} closed by the producer"))

    async def drain_and_close(self, timeout_s: float) -> None:
        """Close once what was written is wholly in the socket (within `timeout_s`), with the socket's normal close:
        our side ends after the last byte (the broker reads everything before it sees the end), then the broker's
        side is awaited, reading what it still sends, so that our socket never resets the connection (a reset makes
        the broker drop what it has not read yet). Past `timeout_s`, drop the rest (`close`). Requests still waiting
        for an answer fail with ConnectionClosedError either way (Java's close: in-flight acks=0 requests are sent in
        full before the socket is closed)."""
        transport = self._transport
        if transport is None or self.closed:
            self.close()
            return
        deadline = self._loop.time() + max(0.0, timeout_s)
        while self._write_paused and not self.closed and self._loop.time() < deadline:
            drained: asyncio.Future[None] = self._loop.create_future()
            previous = self.on_writable
            self.on_writable = functools.partial(_resolve_future, drained)
            try:
                await asyncio.wait_for(asyncio.shield(drained), deadline - self._loop.time())
            except asyncio.TimeoutError:
                break
            finally:
                self.on_writable = previous
        if self._write_paused or self.closed:
            self.close()
            return
        self._stop_reauthentication()
        self._closed_error = self._closed_error or ConnectionClosedError(
            f"connection to {self.host}:{self.port} closed by the producer"
        )
        self._fail_all(self._closed_error)
        lost = self._lost = self._lost or self._loop.create_future()
        if transport.can_write_eof():
            transport.write_eof()
            # The broker closes its side once it has read ours to the end (Kafka does at once); bounded, so that a
            # stopped broker does not hold the producer's close.
            done, _ = await asyncio.wait({lost}, timeout=self._linger_s(deadline))
            if done:
                return
        transport.close()
        # A TLS transport closes with a close_notify exchange that ends later (asyncio's ssl_shutdown_timeout, 30 s):
        # waited for within the same bound, then dropped, so that no socket outlives close() (one left to the
        # collector once the event loop ended, a ResourceWarning in the security tests).
        done, _ = await asyncio.wait({lost}, timeout=self._linger_s(deadline))
        if not done:
            transport.abort()

    def _linger_s(self, deadline: float) -> float:
        return min(_LINGER_S, max(0.0, deadline - self._loop.time()))

    # -- internals ----------------------------------------------------------------------------------------------
    def _check_deadlines(self) -> None:
        """The deadline timer fired: if the oldest request still waiting is past its deadline, the connection is
        dead (Java's NetworkClient.handleTimedOutRequests); if not, wait for that request's deadline. Requests
        share one timeout and are kept in the order sent, so the first one waiting has the earliest deadline."""
        self._deadline_timer = None
        oldest = next(iter(self._pending.values()), None)
        if oldest is None:
            return  # every request was answered: the next one sent arms the timer again
        if self._loop.time() >= oldest.deadline:
            self._abort(
                ResponseTimeoutError(
                    f"no response from broker {self.host}:{self.port} within {self.request_timeout_s * 1000:.0f} ms"
                )
            )
        else:
            self._deadline_timer = self._loop.call_at(oldest.deadline, self._check_deadlines)

    def _abort(self, error: TransportError) -> None:
        self._stop_reauthentication()
        if self._closed_error is None:
            self._closed_error = error
        self._fail_all(self._closed_error)
        if self._transport is not None and not self._transport.is_closing():
            self._transport.abort()

    def _fail_all(self, error: AioProducerError) -> None:
        unflushed, self._unflushed = self._unflushed, []
        for waiter in unflushed:
            if not waiter.done():
                waiter.set_exception(error)
                waiter.exception()  # seen: the sender reads it from its callback
        pending, self._pending = self._pending, {}
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        for entry in pending.values():
            if not entry.future.done():
                entry.future.set_exception(error)
                # Callers may have stopped waiting (e.g. on close): mark it seen so asyncio does not log it.
                entry.future.exception()
        self._closed_error = self._closed_error or (error if isinstance(error, TransportError) else None)

    async def _negotiate_versions(self, cluster_id: str | None = None) -> None:
        """ApiVersions at our highest version, falling back as real clients do (KIP-511). With `cluster_id`, v5 names
        the cluster and node we mean (Java's NetworkClient sends both only when it knows both)."""
        version = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]
        body = {
            "client_software_name": "aioproducer",
            "client_software_version": __version__,
            "cluster_id": cluster_id,
            "node_id": self.node_id if cluster_id is not None else -1,
        }
        for _ in range(4):
            response = await self.request(ApiKey.API_VERSIONS, body, version=version)
            if response["error_code"] == ErrorCode.UNSUPPORTED_VERSION:
                version = response["fallback_version"]
                continue
            if response["error_code"] != ErrorCode.NONE:
                raise kafka_error(response["error_code"], f"ApiVersions failed on {self.host}:{self.port}")
            broker = {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}
            self.versions = negotiate_versions(broker, _NEGOTIATED_APIS)
            self.versions.update(_optional_versions(broker))
            self.features = finalized_features(response)
            return
        raise ProtocolError(f"broker {self.host}:{self.port} kept rejecting ApiVersions")

    # -- SASL ---------------------------------------------------------------------------------------------------
    async def _authenticate(self) -> None:
        if self._sasl is None:  # pragma: no cover - only called with credentials
            return
        lifetime_ms = await authenticate(self._sasl_request, self.versions, self._sasl, f"{self.host}:{self.port}")
        if lifetime_ms > 0 and not self.closed:
            delay_s = lifetime_ms * random.uniform(*_REAUTH_WINDOW) / 1000
            self._reauth_timer = self._loop.call_later(delay_s, self._start_reauthentication)

    async def _sasl_request(self, api_key: ApiKey, body: Mapping[str, Any], version: int) -> dict[str, Any]:
        return await self.request(api_key, body, version=version)

    def _start_reauthentication(self) -> None:
        self._reauth_timer = None
        if not self.closed:
            self._held = []
            self._reauth_task = self._loop.create_task(self._reauthenticate())

    async def _reauthenticate(self) -> None:
        """KIP-368: a fresh SaslHandshake + SaslAuthenticate on this connection; requests wait in `_held`."""
        try:
            await self._authenticate()
        except AioProducerError as exc:
            log.warning("re-authentication with broker %s:%s failed: %s", self.host, self.port, exc)
            # In-flight requests fail as a lost connection (retriable); reconnecting reports the real error.
            self._abort(ConnectionClosedError(f"re-authentication with broker {self.host}:{self.port} failed: {exc}"))
            return
        held, self._held = self._held or [], None
        if self._transport is not None and not self.closed:
            for correlation_id, frame in held:
                self._write(correlation_id, frame)
            if not self._write_paused:
                self._flushed()

    def _stop_reauthentication(self) -> None:
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        task, self._reauth_task = self._reauth_task, None
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()


def _resolve_future(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _optional_versions(broker: Mapping[int, tuple[int, int]]) -> dict[ApiKey, int]:
    found: dict[ApiKey, int] = {}
    for api in _OPTIONAL_APIS:
        if api in broker:
            try:
                found.update(negotiate_versions(broker, (api,)))
            except AioProducerError:
                continue
    return found


def _response_decoder(api_key: ApiKey, api_version: int) -> Decoder:
    if api_key == ApiKey.API_VERSIONS:
        return lambda payload: _decode_api_versions(api_version, payload)
    return lambda payload: decode_response(api_key, api_version, payload)


def _decode_api_versions(api_version: int, payload: bytes) -> dict[str, Any]:
    code = api_versions_error_code(payload)
    if code == ErrorCode.UNSUPPORTED_VERSION:
        fallback = api_versions_fallback_version(payload, tried_version=api_version)
        return {"error_code": code, "fallback_version": fallback}
    return decode_response(ApiKey.API_VERSIONS, api_version, payload)
