"""TLS end to end: the producer through a TLS-terminating proxy in front of Tansu (whose own TLS is unusable),
with certificates made by trustme. Covers trust, SNI, hostname verification, mTLS and fast, clear failures."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trustme
from security_proxies import AlertingTlsServer, KafkaProxy

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.errors import AuthenticationError
from aioproducer.testing import ConsumedRecord


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


async def test_ssl_delivers_records_that_read_back(
    tls_proxy: KafkaProxy,
    pki: Pki,
    topic_factory: Callable[..., str],
    read_back_records: Callable[..., list[ConsumedRecord]],
) -> None:
    topic = topic_factory(2)
    records = [ProducerRecord(topic, b"v%d" % i, key=b"k%d" % i) for i in range(30)]
    async with Producer(tls_proxy.bootstrap, security_protocol="SSL", ssl_cafile=pki.cafile, linger_ms=2) as producer:
        results = await producer.send_many(records)
    assert all(isinstance(r, RecordMetadata) for r in results), results
    assert Counter(r.value for r in read_back_records(topic)) == Counter(r.value for r in records)
    assert tls_proxy.connections >= 1


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


async def test_mutual_tls_with_client_certificate(bootstrap: str, pki: Pki) -> None:
    context = pki.server_context(pki.ca, "127.0.0.1", client_ca=pki.client_ca)
    async with KafkaProxy(bootstrap, ssl_context=context) as proxy:
        settings = {"ssl_cafile": pki.cafile, "ssl_certfile": pki.client_cert, "ssl_keyfile": pki.client_key}
        async with Producer(proxy.bootstrap, security_protocol="SSL", **settings) as producer:
            assert (await producer.send("mtls-topic", b"x")).offset >= 0
    assert proxy.connections >= 2


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
