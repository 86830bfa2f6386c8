"""One broker connection: socket, TLS, SASL (with KIP-368 re-authentication), framing, correlation ids → futures.

Built on an asyncio Protocol so bytes go straight from the transport into the sans-I/O frame decoder. OS and TLS
errors are mapped here, once; nothing above sees a socket or ssl exception.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from . import __version__
from .errors import (
    AioProducerError,
    ConnectionClosedError,
    ConnectionFailedError,
    ProtocolError,
    TransportError,
)
from .protocol import (
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
from .security.exchange import authenticate
from .security.sasl import SaslCredentials
from .security.tls import tls_failure

__all__ = ["BrokerConnection", "RequestTimedOutError"]

log = logging.getLogger("aioproducer.connection")

_UNSUPPORTED_VERSION = 35
_NEGOTIATED_APIS = (ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.INIT_PRODUCER_ID)
_OPTIONAL_APIS = (ApiKey.CREATE_TOPICS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
_SASL_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
# Java's SaslClientAuthenticator re-authenticates at 85% of the session lifetime plus up to 10% jitter: the margin
# covers latency and clock drift, the jitter keeps many connections from re-authenticating at once (KIP-368).
_REAUTH_WINDOW = (0.85, 0.95)

Decoder = Callable[[bytes], dict[str, Any]]


class RequestTimedOutError(TransportError):
    """A request got no response within `request_timeout_ms`; the connection was closed (as Java does)."""


class _Pending:
    __slots__ = ("decoder", "future", "timer")

    def __init__(self, future: asyncio.Future[dict[str, Any]], decoder: Decoder, timer: asyncio.TimerHandle) -> None:
        self.future = future
        self.decoder = decoder
        self.timer = timer


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
        self._loop = asyncio.get_running_loop()
        # Event-loop time of the last byte sent or received (connections_max_idle_ms closes idle connections).
        self.last_active = self._loop.time()
        self._transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder()
        self._pending: dict[int, _Pending] = {}
        self._next_correlation_id = 0
        self._closed_error: TransportError | None = None
        self._write_paused = False
        self._sasl = sasl
        self._held: list[tuple[int, bytes]] | None = None  # (correlation id or -1, frame) written after re-auth
        # Correlation ids of written requests that await an answer, in wire order: Kafka answers in that order.
        self._written: deque[int] = deque()
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
        except ssl.SSLError as exc:
            raise tls_failure(exc, f"{host}:{port}") from None
        except (OSError, asyncio.TimeoutError) as exc:
            raise ConnectionFailedError(f"cannot connect to broker {host}:{port}: {str(exc) or 'timed out'}") from exc
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
            pending.timer.cancel()
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

    def send(
        self,
        api_key: ApiKey,
        body: Mapping[str, Any],
        *,
        version: int | None = None,
        expect_response: bool = True,
        decoder: Decoder | None = None,
    ) -> asyncio.Future[dict[str, Any]] | None:
        """Write one request now. Returns a future of the decoded response, or None when none is expected."""
        if self._closed_error is not None or self._transport is None:
            raise self._closed_error or ConnectionClosedError(f"connection to {self.host}:{self.port} is closed")
        api_version = self.versions[api_key] if version is None else version
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(api_key, api_version, correlation_id, self.client_id, body)
        future: asyncio.Future[dict[str, Any]] | None = None
        if expect_response:
            future = self._loop.create_future()
            timer = self._loop.call_later(self.request_timeout_s, self._on_timeout, correlation_id)
            self._pending[correlation_id] = _Pending(future, decoder or _response_decoder(api_key, api_version), timer)
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

    async def request(self, api_key: ApiKey, body: Mapping[str, Any], *, version: int | None = None) -> dict[str, Any]:
        future = self.send(api_key, body, version=version)
        if future is None:  # pragma: no cover - expect_response defaults to True
            raise RuntimeError("no response expected")
        return await future

    def close(self) -> None:
        """Close now; requests in flight fail with ConnectionClosedError."""
        self._abort(ConnectionClosedError(f"connection to {self.host}:{self.port} closed by the producer"))

    # -- internals ----------------------------------------------------------------------------------------------
    def _on_timeout(self, correlation_id: int) -> None:
        if correlation_id in self._pending:
            self._abort(
                RequestTimedOutError(
                    f"no response from broker {self.host}:{self.port} within {self.request_timeout_s * 1000:.0f} ms"
                )
            )

    def _abort(self, error: TransportError) -> None:
        self._stop_reauthentication()
        if self._closed_error is None:
            self._closed_error = error
        self._fail_all(self._closed_error)
        if self._transport is not None and not self._transport.is_closing():
            self._transport.abort()

    def _fail_all(self, error: AioProducerError) -> None:
        pending, self._pending = self._pending, {}
        for entry in pending.values():
            entry.timer.cancel()
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
            if response["error_code"] == _UNSUPPORTED_VERSION:
                version = response["fallback_version"]
                continue
            if response["error_code"] != 0:
                from .kafka_errors import kafka_error

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

    def _stop_reauthentication(self) -> None:
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        task, self._reauth_task = self._reauth_task, None
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()


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
    if code == _UNSUPPORTED_VERSION:
        fallback = api_versions_fallback_version(payload, tried_version=api_version)
        return {"error_code": code, "fallback_version": fallback}
    return decode_response(ApiKey.API_VERSIONS, api_version, payload)
