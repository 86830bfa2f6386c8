"""Kafka proxies for the security tests: asyncio servers on 127.0.0.1 terminating TLS and/or SASL in front of Tansu.

They rewrite Metadata so clients come back through them; the SASL side is independent of aioproducer's client.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import ssl
import struct
import threading
from collections import deque
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import scramp  # type: ignore[import-untyped]

from aioproducer.error_codes import ErrorCode
from aioproducer.protocol import ApiKey, decode_request, decode_request_header, decode_response, encode_response

_SASL_APIS = {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
# What the proxy adds to the upstream's ApiVersions answer: SaslHandshake v0-1, SaslAuthenticate v0-2.
_SASL_VERSIONS = {ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.SASL_AUTHENTICATE: (0, 2)}
_AUTH_FAILED = ErrorCode.SASL_AUTHENTICATION_FAILED
_UNSUPPORTED_MECHANISM = ErrorCode.UNSUPPORTED_SASL_MECHANISM
_ILLEGAL_SASL_STATE = ErrorCode.ILLEGAL_SASL_STATE


@dataclass
class SaslServer:
    """The broker side of SASL. `tokens`: valid OAuth tokens → how long a session on each may last (ms)."""

    mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
    users: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    session_lifetime_ms: int = 0  # connections.max.reauth.ms; 0: sessions never expire
    # What happened, for the tests to assert on.
    authentications: list[tuple[int, str, str]] = field(default_factory=list)  # (connection, mechanism, principal)
    failures: list[str] = field(default_factory=list)
    extensions: list[dict[str, str]] = field(default_factory=list)


@dataclass
class _Session:
    """One client connection's SASL state."""

    number: int
    mechanism: str | None = None
    exchange: Any = None  # the mechanism's server-side state
    authenticated: bool = False
    reauthenticating: bool = False
    expires_at: float | None = None


class _InOrder:
    """Writes answers in request order, as a Kafka broker does, whether the proxy answered (SASL) or the upstream
    broker did: an answer that overtook an earlier request's would rightly make the client drop the connection."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self._order: deque[int] = deque()
        self._ready: dict[int, bytes] = {}

    def expect(self, correlation_id: int) -> None:
        self._order.append(correlation_id)

    def answer(self, correlation_id: int, frame: bytes) -> None:
        if correlation_id not in self._order:
            self.writer.write(frame)  # nobody asked (a reply to acks=0): pass it on as the broker sent it
            return
        self._ready[correlation_id] = frame
        while self._order and self._order[0] in self._ready:
            self.writer.write(self._ready.pop(self._order.popleft()))


class KafkaProxy:
    """Terminates TLS (`ssl_context`, a server context) and/or SASL (`sasl`) in front of `upstream` ("host:port").

    Counters: `connections`, `sni` (server names clients sent), `expired_closes` (requests after the session
    expired, answered by closing as Java's broker does), `violations` (non-SASL requests mid-authentication).
    """

    def __init__(
        self,
        upstream: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslServer | None = None,
        advertised_host: str = "127.0.0.1",
    ) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host.strip("[]"), int(port))
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.advertised_host = advertised_host
        self.connections = 0
        self.sni: list[str | None] = []
        self.expired_closes = 0
        self.violations: list[str] = []
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._numbers = itertools.count(1)
        if ssl_context is not None:
            ssl_context.sni_callback = self._on_sni

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("proxy not started")
        return self._port

    @property
    def bootstrap(self) -> str:
        return f"{self.advertised_host}:{self.port}"

    async def start(self) -> KafkaProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        self._port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.drop_connections()
        # Not cancelled: asyncio's stream server reports a cancelled handler as an error (CPython 3.11); aborting
        # the transports ends each handler on its own.
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def drop_connections(self) -> None:
        """Cut every client connection now (a broker restart, as clients see it)."""
        for writer in list(self._writers):
            writer.transport.abort()

    def use_certificate(self, context: ssl.SSLContext) -> None:
        """Serve `context`'s certificate to new connections (a certificate rotation)."""
        context.sni_callback = self._on_sni
        self._next_context = context

    async def __aenter__(self) -> KafkaProxy:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- plumbing -----------------------------------------------------------------------------------------------
    def _on_sni(self, ssl_object: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> None:
        self.sni.append(server_name)
        replacement = getattr(self, "_next_context", None)
        if replacement is not None:
            ssl_object.context = replacement

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self.connections += 1
        self._writers.add(writer)
        session = _Session(next(self._numbers))
        pending: dict[int, tuple[ApiKey, int]] = {}
        up_writer: asyncio.StreamWriter | None = None
        pump: asyncio.Task[None] | None = None
        answers = _InOrder(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            pump = asyncio.create_task(self._pump(up_reader, answers, pending))
            while (frame := await _read_frame(reader)) is not None:
                header, _ = decode_request_header(frame)
                if not self._admit(session, ApiKey(header.api_key)):
                    break
                answers.expect(header.correlation_id)
                if header.api_key in _SASL_APIS and self.sasl is not None:
                    answers.answer(header.correlation_id, self._answer_sasl(session, frame))
                    continue
                pending[header.correlation_id] = (ApiKey(header.api_key), header.api_version)
                up_writer.write(struct.pack(">i", len(frame)) + frame)
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            if pump is not None:
                pump.cancel()
                await asyncio.gather(pump, return_exceptions=True)
            for w in (writer, up_writer):
                if w is not None:
                    w.transport.abort()
            if task is not None:
                self._tasks.discard(task)

    def _admit(self, session: _Session, api_key: ApiKey) -> bool:
        """Java's SaslServerAuthenticator rules: before (and during re-)authentication only SASL and ApiVersions."""
        if self.sasl is None or api_key in _SASL_APIS:
            return True
        if api_key == ApiKey.API_VERSIONS and not session.authenticated:
            return True
        if not session.authenticated or session.reauthenticating:
            self.violations.append(f"{api_key.name} on connection {session.number} before authentication")
            return False
        loop = asyncio.get_running_loop()
        if session.expires_at is not None and loop.time() > session.expires_at:
            self.expired_closes += 1  # KIP-368: the broker closes a connection whose session expired
            return False
        return True

    async def _pump(
        self, up_reader: asyncio.StreamReader, answers: _InOrder, pending: dict[int, tuple[ApiKey, int]]
    ) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while (frame := await _read_frame(up_reader)) is not None:
                correlation_id = struct.unpack_from(">i", frame)[0]
                api = pending.pop(correlation_id, None)
                if api is not None:
                    frame = self._rewrite(api, correlation_id, frame)
                answers.answer(correlation_id, struct.pack(">i", len(frame)) + frame)
        answers.writer.transport.abort()

    def _rewrite(self, api: tuple[ApiKey, int], correlation_id: int, frame: bytes) -> bytes:
        api_key, version = api
        if api_key == ApiKey.METADATA:
            body = decode_response(api_key, version, frame[4:])
            for broker in body["brokers"]:
                broker["host"], broker["port"] = self.advertised_host, self.port
            return encode_response(api_key, version, correlation_id, body)[4:]
        if api_key == ApiKey.API_VERSIONS and self.sasl is not None:
            body = decode_response(api_key, version, frame[4:])
            if body["error_code"] != 0:
                return frame
            keys = [k for k in body["api_keys"] if k["api_key"] not in _SASL_VERSIONS]
            keys += [
                {"api_key": int(k), "min_version": lo, "max_version": hi} for k, (lo, hi) in _SASL_VERSIONS.items()
            ]
            body["api_keys"] = keys
            return encode_response(api_key, version, correlation_id, body)[4:]
        return frame

    # -- SASL, the broker's side --------------------------------------------------------------------------------
    def _answer_sasl(self, session: _Session, frame: bytes) -> bytes:
        header, body = decode_request(frame)
        api_key, version = ApiKey(header.api_key), header.api_version
        if api_key == ApiKey.SASL_HANDSHAKE:
            response = self._handshake(session, body["mechanism"])
        else:
            response = self._authenticate(session, body["auth_bytes"])
        return encode_response(api_key, version, header.correlation_id, response)

    def _handshake(self, session: _Session, mechanism: str) -> dict[str, Any]:
        sasl = self.sasl
        assert sasl is not None
        offered = list(sasl.mechanisms)
        if mechanism not in offered:
            sasl.failures.append(f"unsupported mechanism {mechanism}")
            return {"error_code": _UNSUPPORTED_MECHANISM, "mechanisms": offered}
        if session.authenticated and mechanism != session.mechanism:  # KIP-368: same mechanism on re-auth
            return {"error_code": _ILLEGAL_SASL_STATE, "mechanisms": offered}
        session.reauthenticating = session.authenticated
        session.mechanism, session.exchange = mechanism, None
        return {"error_code": 0, "mechanisms": offered}

    def _authenticate(self, session: _Session, auth_bytes: bytes) -> dict[str, Any]:
        sasl = self.sasl
        assert sasl is not None and session.mechanism is not None
        try:
            challenge, principal, lifetime_ms = self._step(session, auth_bytes)
        except _AuthFailed as exc:
            sasl.failures.append(str(exc))
            session.exchange = None
            return {"error_code": _AUTH_FAILED, "error_message": str(exc), "auth_bytes": b""}
        if principal is None:
            return {"error_code": 0, "auth_bytes": challenge, "session_lifetime_ms": 0}
        loop = asyncio.get_running_loop()
        session.authenticated, session.reauthenticating, session.exchange = True, False, None
        session.expires_at = loop.time() + lifetime_ms / 1000 if lifetime_ms else None
        sasl.authentications.append((session.number, session.mechanism, principal))
        return {"error_code": 0, "auth_bytes": challenge, "session_lifetime_ms": lifetime_ms}

    def _step(self, session: _Session, auth_bytes: bytes) -> tuple[bytes, str | None, int]:
        """(bytes for the client, the principal once authenticated, session lifetime ms)."""
        mechanism = session.mechanism
        if mechanism == "PLAIN":
            return self._plain(auth_bytes)
        if mechanism == "OAUTHBEARER":
            return self._oauthbearer(session, auth_bytes)
        return self._scram(session, auth_bytes)

    def _plain(self, auth_bytes: bytes) -> tuple[bytes, str | None, int]:
        parts = auth_bytes.split(b"\0")  # RFC 4616: [authzid] NUL authcid NUL passwd
        if len(parts) != 3:
            raise _AuthFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = (part.decode() for part in parts)
        assert self.sasl is not None
        if self.sasl.users.get(user) != password or authzid not in ("", user):
            raise _AuthFailed("Authentication failed: Invalid username or password")
        return b"", user, self.sasl.session_lifetime_ms

    def _scram(self, session: _Session, auth_bytes: bytes) -> tuple[bytes, str | None, int]:
        sasl = self.sasl
        assert sasl is not None and session.mechanism is not None
        try:
            if session.exchange is None:
                mechanism = scramp.ScramMechanism(session.mechanism)

                def auth_info(username: str) -> Any:
                    if username not in sasl.users:
                        raise scramp.ScramException("unknown user")
                    return mechanism.make_auth_info(sasl.users[username], iteration_count=4096)

                server = mechanism.make_server(auth_info)
                server.set_client_first(auth_bytes.decode())
                session.exchange = server
                return server.get_server_first().encode(), None, 0
            server = session.exchange
            server.set_client_final(auth_bytes.decode())
            final = server.get_server_final().encode()
        except scramp.ScramException:
            raise _AuthFailed(
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                f"{session.mechanism}"
            ) from None
        return final, str(server.client_first_bare.split(",")[0][2:]), sasl.session_lifetime_ms

    def _oauthbearer(self, session: _Session, auth_bytes: bytes) -> tuple[bytes, str | None, int]:
        sasl = self.sasl
        assert sasl is not None
        if session.exchange == "error sent":  # RFC 7628 §3.2.3: the client's 0x01 ends a failed exchange
            raise _AuthFailed("Authentication failed: invalid token")
        text = auth_bytes.decode()
        gs2, _, rest = text.partition("\x01")
        pairs = dict(item.split("=", 1) for item in rest.split("\x01") if item)
        if not gs2.startswith("n,") or not rest.endswith("\x01\x01") or "auth" not in pairs:
            raise _AuthFailed("Invalid OAUTHBEARER client response")
        scheme, _, token = pairs.pop("auth").partition(" ")
        lifetime = sasl.tokens.get(token) if scheme == "Bearer" else None
        if lifetime is None:
            session.exchange = "error sent"
            return b'{"status":"invalid_token"}', None, 0
        sasl.extensions.append(pairs)
        if sasl.session_lifetime_ms:
            lifetime = min(lifetime, sasl.session_lifetime_ms)
        return b"", f"token:{token[:4]}", lifetime


class _AuthFailed(Exception):
    pass


class AlertingTlsServer:
    """A TLS endpoint on blocking sockets that sends the TLS alert of a failed handshake before closing, as Java's
    broker does. (asyncio's server side aborts without flushing the alert, so clients would see a bare reset.)"""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.context = context
        self.handshake_errors: list[str] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.bootstrap = f"127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> AlertingTlsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self._listener.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                raw, _ = self._listener.accept()
            except TimeoutError:
                continue
            raw.settimeout(5)
            tls = self.context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
            try:
                tls.do_handshake()
                tls.recv(1)  # TLS 1.3 checks the client certificate here, after the client's Finished
            except (ssl.SSLError, OSError) as exc:
                self.handshake_errors.append(str(exc))
                _close_after_peer(tls)
            finally:
                tls.close()


def _close_after_peer(sock: socket.socket) -> None:
    """Half-close, then discard what the client still sends until it hangs up. Closing with its unread bytes (its
    first request) still buffered makes the kernel send a reset, which can reach the client before the alert does."""
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(2)
        while sock.recv(65536):
            pass
    except OSError:
        pass


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
    except asyncio.IncompleteReadError:
        return None
    return await reader.readexactly(size)
