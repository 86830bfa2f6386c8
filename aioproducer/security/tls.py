"""The client `ssl.SSLContext` of SSL and SASL_SSL connections, and what a TLS failure means for the user.

Reads certificate files (once per config, when the first connection opens); never opens a socket.
"""

from __future__ import annotations

import ssl
import weakref
from typing import TYPE_CHECKING

from aioproducer.errors import AioProducerError, AuthenticationError, ConfigError, ConnectionFailedError
from aioproducer.security.settings import TLS_PROTOCOLS

if TYPE_CHECKING:
    from aioproducer.config import ProducerConfig

__all__ = ["build_ssl_context", "client_context", "tls_failure"]

# Ends of the stream rather than verdicts: the peer went away mid-handshake, which a retry may cure.
_TRANSPORT_FAILURES = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)
_HINTS = {
    "WRONG_VERSION_NUMBER": "the broker's port does not speak TLS (is it a PLAINTEXT or SASL_PLAINTEXT listener?)",
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "the broker requires a client certificate: set ssl_certfile (and ssl_keyfile)",
    "SSLV3_ALERT_HANDSHAKE_FAILURE": "the broker refused the handshake (client certificate or protocol versions)",
    # Kafka's (Java's) TLS stack answers a missing client certificate with bad_certificate, not TLS 1.3's
    # certificate_required, and an untrusted one with certificate_unknown, not unknown_ca as OpenSSL does.
    "SSLV3_ALERT_BAD_CERTIFICATE": (
        "the broker rejected the client certificate, or requires one: set ssl_certfile (and ssl_keyfile)"
    ),
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "the broker does not trust the client certificate (or its CA)",
    "TLSV1_ALERT_UNKNOWN_CA": "the broker does not trust the client certificate's CA",
}

_CONTEXTS: dict[int, ssl.SSLContext] = {}


def build_ssl_context(
    *,
    cafile: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: str | None = None,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """A client context: brokers verified against `cafile` (else the system's CAs), optional client certificate.

    Raises ConfigError when a file cannot be loaded; the message never contains `password`.
    """
    try:
        context = ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"cannot load ssl_cafile {cafile!r}: {_reason(exc)} (a PEM file of CA certificates)"
        ) from None
    # Java's default ssl.endpoint.identification.algorithm=https (KIP-294); turning it off still verifies the chain.
    context.check_hostname = check_hostname
    if certfile is not None:
        try:
            # An empty password rather than None: with None, OpenSSL would prompt on the terminal for an encrypted key.
            context.load_cert_chain(certfile, keyfile, password if password is not None else "")
        except (OSError, ssl.SSLError) as exc:
            key = f" / ssl_keyfile {keyfile!r}" if keyfile else ""
            raise ConfigError(
                f"cannot load the client certificate ssl_certfile {certfile!r}{key}: {_reason(exc)} (PEM files; an "
                "encrypted key needs the right ssl_password)"
            ) from None
    return context


def client_context(config: ProducerConfig) -> ssl.SSLContext | None:
    """The context for `config`'s connections (built from its files once), or None when it does not use TLS."""
    if config.security_protocol not in TLS_PROTOCOLS:
        return None
    if config.ssl_context is not None:
        return config.ssl_context
    key = id(config)
    context = _CONTEXTS.get(key)
    if context is None:
        context = build_ssl_context(
            cafile=config.ssl_cafile,
            certfile=config.ssl_certfile,
            keyfile=config.ssl_keyfile,
            password=None if config.ssl_password is None else config.ssl_password.reveal(),
            check_hostname=config.ssl_check_hostname,
        )
        # Keyed by identity, since a config may hold unhashable objects; the entry goes when the config does.
        _CONTEXTS[key] = context
        weakref.finalize(config, _CONTEXTS.pop, key, None)
    return context


def tls_failure(exc: ssl.SSLError, broker: str) -> AioProducerError:
    """The error for a TLS failure with `broker`: AuthenticationError for a verdict (certificate, alert), as Java's
    SslAuthenticationException; ConnectionFailedError when the stream merely ended, which a retry may cure."""
    if isinstance(exc, _TRANSPORT_FAILURES):
        return ConnectionFailedError(f"TLS connection to broker {broker} ended during the handshake: {_reason(exc)}")
    if isinstance(exc, ssl.SSLCertVerificationError):
        message = (exc.verify_message or _reason(exc)).rstrip(".")
        if "mismatch" in message.lower() or "hostname" in message.lower():
            hint = "connect by a name the certificate lists, or (unsafe) set ssl_check_hostname=False"
        else:
            hint = "set ssl_cafile to the CA that signed the broker's certificate"
        return AuthenticationError(f"TLS: broker {broker}'s certificate was rejected: {message}; {hint}")
    hint = _HINTS.get(exc.reason or "", "")
    return AuthenticationError(
        f"TLS handshake with broker {broker} failed: {_reason(exc)}{'; ' + hint if hint else ''}"
    )


def _reason(exc: OSError) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    return exc.strerror or str(exc) or type(exc).__name__
