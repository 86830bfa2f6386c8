"""TLS through a TLS-terminating proxy in front of the session's broker, with certificates made by trustme: what
only a proxy can show or inject — SNI as sent, one handshake per failure, hostname mismatches, OpenSSL's alerts,
a certificate rotated under a running producer. Delivery over TLS and mTLS on real Kafka's own listeners is in
test_security_kafka.py."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from security_proxies import AlertingTlsServer, KafkaProxy

from aioproducer import Producer
from aioproducer.errors import AuthenticationError


class Pki:
    """A broker CA (trusted by the producer), an unrelated CA, and a client CA for mTLS."""

    def __init__(self, directory: Path) -> None:
        self.ca, self.stranger, self.client_ca = trustme.CA(), trustme.CA(), trustme.CA()
        self.cafile = str(directory / "ca.pem")
        self.ca.cert_pem.write_to_path(self.cafile)
        client = self.client_ca.issue_cert("producer@example.com")
        self.client_cert, self.client_key = str(directory / "client.pem"), str(directory / "client.key")
        client.cert_chain_pems[0].write_to_path(self.client_cert)
        client.private_key_pem.write_to_path(self.client_key)

    def server_context(self, ca: trustme.CA, *names: str, client_ca: trustme.CA | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(*names).configure_cert(context)
        if client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            client_ca.configure_trust(context)
        return context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("tls"))


@pytest.fixture
async def tls_proxy(bootstrap: str, pki: Pki) -> AsyncIterator[KafkaProxy]:
    async with KafkaProxy(bootstrap, ssl_context=pki.server_context(pki.ca, "localhost", "127.0.0.1")) as proxy:
        yield proxy


async def start_fails(bootstrap: str, **settings: Any) -> AuthenticationError:
    """start() must raise AuthenticationError promptly (not after max_block_ms, 60 s by default)."""
    producer = Producer(bootstrap, security_protocol="SSL", **settings)
    began = time.monotonic()
    try:
        with pytest.raises(AuthenticationError) as caught:
            await producer.start()
    finally:
        await producer.close()
    assert time.monotonic() - began < 5
    return caught.value


async def test_sni_and_hostname_check_use_the_broker_name(bootstrap: str, pki: Pki) -> None:
    context = pki.server_context(pki.ca, "localhost")
    async with KafkaProxy(bootstrap, ssl_context=context, advertised_host="localhost") as proxy:
        own = ssl.create_default_context(cafile=pki.cafile)
        async with Producer(proxy.bootstrap, security_protocol="SSL", ssl_context=own) as producer:
            await producer.send("sni-topic", b"x")
    # The bootstrap connection and the broker's (named by the rewritten metadata) both sent SNI.
    assert len(proxy.sni) >= 2 and set(proxy.sni) == {"localhost"}


async def test_untrusted_certificate_fails_start_naming_the_broker(bootstrap: str, pki: Pki) -> None:
    context = pki.server_context(pki.stranger, "127.0.0.1")
    async with KafkaProxy(bootstrap, ssl_context=context) as proxy:
        error = await start_fails(proxy.bootstrap, ssl_cafile=pki.cafile)
    assert f"broker {proxy.bootstrap}'s certificate was rejected" in str(error)
    assert "unable to get local issuer certificate" in str(error) and "ssl_cafile" in str(error)
    assert len(proxy.sni) == 1  # one handshake, no retry loop


async def test_hostname_mismatch_fails_unless_the_check_is_off(bootstrap: str, pki: Pki) -> None:
    context = pki.server_context(pki.ca, "kafka.example.com")
    async with KafkaProxy(bootstrap, ssl_context=context) as proxy:
        error = await start_fails(proxy.bootstrap, ssl_cafile=pki.cafile)
        assert "address mismatch, certificate is not valid for '127.0.0.1'" in str(
            error
        ) and "ssl_check_hostname" in str(error)
        async with Producer(
            proxy.bootstrap, security_protocol="SSL", ssl_cafile=pki.cafile, ssl_check_hostname=False
        ) as producer:
            assert (await producer.send("mismatch-ok", b"x")).offset >= 0


@pytest.mark.parametrize(
    ("client_ca", "match"),
    [(None, "the broker requires a client certificate"), ("stranger", "does not trust the client certificate")],
)
async def test_a_rejected_client_certificate_fails_start(pki: Pki, client_ca: str | None, match: str) -> None:
    # TLS 1.3 servers judge the client certificate after the client's handshake: the alert comes on the first read.
    settings: dict[str, Any] = {"ssl_cafile": pki.cafile}
    if client_ca is not None:
        leaf = pki.stranger.issue_cert("intruder@example.com")
        settings["ssl_context"] = ssl.create_default_context(cafile=settings.pop("ssl_cafile"))
        leaf.configure_cert(settings["ssl_context"])
    context = pki.server_context(pki.ca, "127.0.0.1", client_ca=pki.client_ca)
    with AlertingTlsServer(context) as server:
        error = await start_fails(server.bootstrap, **settings)
    assert f"TLS handshake with broker {server.bootstrap} failed" in str(error)
    assert match in str(error)
    assert len(server.handshake_errors) == 1


async def test_send_fails_promptly_when_the_certificate_turns_untrusted(tls_proxy: KafkaProxy, pki: Pki) -> None:
    async with Producer(tls_proxy.bootstrap, security_protocol="SSL", ssl_cafile=pki.cafile) as producer:
        await producer.send("before-rotation", b"x")
        tls_proxy.use_certificate(pki.server_context(pki.stranger, "127.0.0.1"))
        tls_proxy.drop_connections()
        began = time.monotonic()
        with pytest.raises(AuthenticationError, match="certificate was rejected"):
            await asyncio.wait_for(producer.send("after-rotation", b"x"), 10)
        assert time.monotonic() - began < 3
