"""Runs one SASL authentication on a connection: SaslHandshake, then SaslAuthenticate rounds (KIP-43, KIP-152).

Used when a connection opens and for each KIP-368 re-authentication. Requests go through the `request` callback
it is given; it never touches a socket and never imports asyncio.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import AuthenticationError, UnsupportedVersionError
from aioproducer.kafka_errors import kafka_error
from aioproducer.protocol import ApiKey
from aioproducer.security.sasl import SaslCredentials

__all__ = ["Request", "authenticate"]

Request = Callable[[ApiKey, Mapping[str, Any], int], Awaitable[dict[str, Any]]]


async def authenticate(
    request: Request, versions: Mapping[ApiKey, int], credentials: SaslCredentials, broker: str
) -> int:
    """Authenticate with `credentials`; returns the session lifetime the broker granted, in ms (0: unlimited).

    Failures raise AuthenticationError (never a KafkaError subclass: callers retry those) naming `broker`, with
    the broker's own error as `__cause__`. A broker without SaslAuthenticate raises UnsupportedVersionError.
    """
    handshake_version = versions.get(ApiKey.SASL_HANDSHAKE)
    authenticate_version = versions.get(ApiKey.SASL_AUTHENTICATE)
    # SaslHandshake v0 meant raw, unframed tokens (pre-KIP-152); Kafka 4.0 dropped it (KIP-896), and so do we.
    if not handshake_version or authenticate_version is None:
        raise UnsupportedVersionError(
            f"broker {broker} does not offer SaslHandshake v1+ and SaslAuthenticate: is its listener SASL at all?"
        )
    mechanism = credentials.mechanism
    response = await request(ApiKey.SASL_HANDSHAKE, {"mechanism": mechanism}, handshake_version)
    _check_handshake(response, mechanism, broker)
    client = await credentials.new_client()
    message: bytes | None = client.first_message()
    lifetime_ms = 0
    while message is not None:
        response = await request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": message}, authenticate_version)
        code = response["error_code"]
        if code != ErrorCode.NONE:
            detail = response["error_message"] or kafka_error(code)
            server_error = getattr(client, "server_error", None)
            status = f" (server status: {server_error})" if server_error else ""
            raise AuthenticationError(
                f"SASL {mechanism} authentication with broker {broker} failed: {detail}{status}"
            ) from kafka_error(code, response["error_message"])
        lifetime_ms = response["session_lifetime_ms"]
        try:
            message = client.receive(response["auth_bytes"] or b"")
        except AuthenticationError as exc:
            raise AuthenticationError(f"SASL {mechanism} authentication with broker {broker} failed: {exc}") from exc
    return int(lifetime_ms)


def _check_handshake(response: Mapping[str, Any], mechanism: str, broker: str) -> None:
    code = response["error_code"]
    if code == ErrorCode.NONE:
        return
    if code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
        offered = ", ".join(response["mechanisms"]) or "none"
        raise AuthenticationError(
            f"broker {broker} does not enable SASL mechanism {mechanism}; it offers: {offered}"
        ) from kafka_error(code)
    raise AuthenticationError(f"SaslHandshake with broker {broker} failed: {kafka_error(code)}") from kafka_error(code)
