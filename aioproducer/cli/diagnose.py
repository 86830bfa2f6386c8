"""What a failure during `aioproducer check` most likely means, and what to do about it: pure, no I/O.

Each rule reads the step that failed, the error (and the broker error code behind it) and the settings, and returns
one sentence a person can act on. The common mistakes it recognises: a wrong port, TLS spoken to a plaintext
listener (and the reverse), SASL against a listener without it (and the reverse), a mechanism the broker does not
enable, wrong credentials, a topic that does not exist where topics are not created on demand, missing ACLs.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import (
    AioProducerError,
    AuthenticationError,
    ConnectionClosedError,
    ConnectionFailedError,
    KafkaError,
    ProtocolError,
    TransportError,
    UnsupportedVersionError,
)

__all__ = ["Context", "diagnose"]


@dataclass(frozen=True)
class Context:
    """What the rules may look at besides the error."""

    address: str  # host:port the step talked to
    security_protocol: str
    sasl_mechanism: str | None = None
    topic: str | None = None
    allow_auto_create_topics: bool = True


def _code(error: BaseException) -> int | None:
    """The Kafka error code of `error` or of the broker error it wraps."""
    for candidate in (error, error.__cause__):
        if isinstance(candidate, KafkaError):
            return candidate.code
    return None


def _os_error(error: BaseException) -> BaseException | None:
    cause = error.__cause__
    return cause if isinstance(cause, OSError) else None


def diagnose(step: str, error: BaseException, ctx: Context) -> str:
    """A hint for `error` raised by `step` ("tcp", "tls", "kafka", "sasl", "metadata", "broker", "topic",
    "produce"); a generic one when no rule matches."""
    tls = ctx.security_protocol in ("SSL", "SASL_SSL")
    sasl = ctx.security_protocol.startswith("SASL")
    code = _code(error)
    text = str(error)
    os_error = _os_error(error)
    if isinstance(os_error, socket.gaierror) or "Name or service not known" in text:
        where = "advertised by the broker (its advertised.listeners)" if step == "broker" else "given"
        return f"the host name {where} cannot be resolved from this machine: check the name, DNS or /etc/hosts"
    if isinstance(os_error, ConnectionRefusedError) or "Connect call failed" in text or "refused" in text:
        if step == "broker":
            return (
                f"the broker advertises {ctx.address}, where nothing listens from here: fix the broker's "
                "advertised.listeners (a container or internal address?) or the network path"
            )
        return (
            f"nothing listens on {ctx.address}: wrong host or port? (check the broker's `listeners`; each listener "
            "has its own port, and PLAINTEXT, SSL and SASL ports differ)"
        )
    if isinstance(error, ConnectionFailedError) and "timed out" in text:
        return f"no answer from {ctx.address}: a firewall drops the packets, or the host is wrong"
    if step == "tls":
        if "ended during the handshake" in text or "WRONG_VERSION_NUMBER" in text:
            return (
                f"{ctx.address} does not speak TLS (a PLAINTEXT or SASL_PLAINTEXT listener?): use "
                f"security.protocol={'SASL_PLAINTEXT' if sasl else 'PLAINTEXT'}, or the broker's TLS port"
            )
        return "fix the TLS settings as the message says (ssl.truststore.location / --ssl-cafile for the CA)"
    if step == "kafka" and not tls and isinstance(error, TransportError | ProtocolError):
        return (
            f"{ctx.address} accepted the connection but did not answer a Kafka request in plain text: if it is a "
            f"TLS listener, set security.protocol={'SASL_SSL' if sasl else 'SSL'}"
        )
    if step == "sasl":
        if code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            return "set sasl.mechanism (--sasl-mechanism) to one of the mechanisms the broker offers"
        if code == ErrorCode.SASL_AUTHENTICATION_FAILED:
            return (
                f"wrong username or password, or the user has no {ctx.sasl_mechanism} credentials on the broker "
                "(SCRAM credentials exist per mechanism: kafka-configs --alter --add-config "
                f"'{ctx.sasl_mechanism}=[password=...]' --entity-type users --entity-name NAME)"
            )
        if code == ErrorCode.ILLEGAL_SASL_STATE or isinstance(error, UnsupportedVersionError):
            return (
                f"{ctx.address} is not a SASL listener: set security.protocol={'SSL' if tls else 'PLAINTEXT'}, "
                "or use the broker's SASL port"
            )
        return "check the SASL settings: sasl.mechanism, the username and the password"
    if step in ("metadata", "topic", "produce") and not sasl and isinstance(error, ConnectionClosedError):
        return (
            f"the broker closed the connection at the first request after ApiVersions: {ctx.address} probably "
            f"requires SASL; set security.protocol={'SASL_SSL' if tls else 'SASL_PLAINTEXT'}, sasl.mechanism "
            "and the credentials"
        )
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        create = (
            f"create it first (kafka-topics.sh --bootstrap-server {ctx.address} --create --topic {ctx.topic} "
            "--partitions N), or use an existing topic"
        )
        if not ctx.allow_auto_create_topics:
            return f"topic {ctx.topic!r} does not exist, and this client asks not to create it: {create}"
        return (
            f"topic {ctx.topic!r} does not exist and the broker does not create topics on demand "
            f"(auto.create.topics.enable=false): {create}"
        )
    if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
        return f"the principal may not use topic {ctx.topic!r}: grant it Describe and Write ACLs on the topic"
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return (
            "idempotent producing needs the IdempotentWrite ACL on the cluster on older brokers: grant it, or set "
            "enable.idempotence=false"
        )
    if code in (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return (
            "fewer replicas are in sync than the topic's min.insync.replicas: with acks=all nothing is written "
            "until brokers come back (or lower min.insync.replicas, or use acks=1)"
        )
    if isinstance(error, AuthenticationError):
        return "the broker rejected the client's credentials or certificate: see the message"
    if isinstance(error, AioProducerError):
        return "see the message above; run with -X key=value to change settings"
    return "an unexpected error: please report it with this output"
