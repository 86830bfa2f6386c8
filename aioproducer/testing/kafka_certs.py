"""Credentials for one test cluster: a throw-away CA, the brokers' certificate and a client certificate as PEM files,
and unsigned OAUTHBEARER tokens that Kafka's unsecured validator accepts.

Owns only the files it writes. The brokers' key is PKCS#8 (`BEGIN PRIVATE KEY`): Kafka's PEM keystore reads no
other format, while trustme writes keys in the traditional one.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ClusterCertificates", "unsecured_oauth_token", "write_certificates"]

_EXTRA_HINT = "KafkaCluster's TLS listeners need trustme and cryptography: `pip install aioproducer[testing]`"


@dataclass(frozen=True)
class ClusterCertificates:
    """PEM files of one cluster. `ca_file` signed every certificate here: clients trust it, and so does the MTLS
    listener when it checks a client's certificate. `broker_keystore` is Kafka's PEM keystore (key + chain)."""

    ca_file: Path
    broker_keystore: Path
    client_cert_file: Path
    client_key_file: Path


def _pkcs8(private_key_pem: bytes) -> bytes:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(private_key_pem, password=None)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _trustme() -> Any:
    try:
        import cryptography  # noqa: F401 - checked here so the error names the extra
        import trustme
    except ImportError as exc:
        raise ImportError(_EXTRA_HINT) from exc
    return trustme


def write_certificates(directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> ClusterCertificates:
    """Make a new CA, a broker certificate for `hosts` and a client certificate, and write them into `directory`."""
    trustme = _trustme()
    ca = trustme.CA(organization_name="aioproducer test cluster")
    broker = ca.issue_cert(*hosts)
    client = ca.issue_cert("producer@aioproducer.test", common_name="producer")
    directory.mkdir(parents=True, exist_ok=True)
    certificates = ClusterCertificates(
        ca_file=directory / "ca.pem",
        broker_keystore=directory / "broker-keystore.pem",
        client_cert_file=directory / "client.pem",
        client_key_file=directory / "client.key",
    )
    certificates.ca_file.write_bytes(ca.cert_pem.bytes())
    chain = b"".join(pem.bytes() for pem in broker.cert_chain_pems)
    certificates.broker_keystore.write_bytes(_pkcs8(broker.private_key_pem.bytes()) + chain)
    certificates.client_cert_file.write_bytes(b"".join(pem.bytes() for pem in client.cert_chain_pems))
    certificates.client_key_file.write_bytes(_pkcs8(client.private_key_pem.bytes()))
    for path in (certificates.broker_keystore, certificates.client_key_file):
        path.chmod(0o600)
    return certificates


def _base64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unsecured_oauth_token(subject: str = "producer", lifetime_s: float = 3600.0, now_s: float | None = None) -> str:
    """An unsigned JWT (`alg: none`) for `subject`, expiring `lifetime_s` from `now_s` (default: the wall clock).

    What Kafka's OAuthBearerUnsecuredValidatorCallbackHandler accepts: header, claims with `sub`, `iat` and `exp`
    (seconds since the epoch), and an empty signature. The broker ends the session when the token expires (KIP-368),
    so a short lifetime forces the client to re-authenticate.
    """
    issued = time.time() if now_s is None else now_s
    header = _base64url(json.dumps({"alg": "none"}).encode())
    # `iat` in whole seconds, rounded down: Kafka rejects a token issued after its own clock's current millisecond
    # (OAuthBearerValidationUtils.validateIssuedAt, no clock skew allowed by default), and on loopback the broker can
    # check a fractional `iat` within the millisecond it was written in.
    claims = _base64url(json.dumps({"sub": subject, "iat": int(issued), "exp": issued + lifetime_s}).encode())
    return f"{header}.{claims}."
