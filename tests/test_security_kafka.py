"""TLS and SASL directly on real Apache Kafka's listeners (target: `kafka_cluster`, the session's single node).

Kafka's own server side judges our client here: its TLS stack (PEM keystore, client-certificate checks), its PLAIN
and SCRAM authenticators (SCRAM users created at format time) and its unsecured OAUTHBEARER validator. The
terminating proxies of test_security_tls.py / test_security_sasl.py stay for what only they can inject (hostname
mismatches, certificate rotation, token revocation, re-authentication counts).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trustme

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.errors import AuthenticationError, KafkaError
from aioproducer.testing import KafkaCluster, read_back, unsecured_oauth_token

SASL_LISTENERS = [
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SASL_SSL", "PLAIN"),
    ("SASL_SSL", "SCRAM-SHA-256"),
    ("SASL_SSL", "SCRAM-SHA-512"),
]


async def start_fails(producer: Producer, within_s: float = 10.0) -> AuthenticationError:
    """start() raises AuthenticationError promptly (not after max_block_ms, 60 s by default)."""
    began = time.monotonic()
    try:
        with pytest.raises(AuthenticationError) as caught:
            await producer.start()
    finally:
        await producer.close()
    assert time.monotonic() - began < within_s
    return caught.value


async def deliver_and_read_back(cluster: KafkaCluster, settings: dict[str, Any], tag: str) -> None:
    topic = await asyncio.to_thread(cluster.create_topic, f"secure-{tag}", 2)
    records = [ProducerRecord(topic, b"%s-%d" % (tag.encode(), i), key=b"k%d" % (i % 5)) for i in range(40)]
    async with Producer(**settings, linger_ms=2) as producer:
        results = await producer.send_many(records)
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    stored = await asyncio.to_thread(read_back, cluster.bootstrap_servers, topic)
    assert Counter(r.value for r in stored) == Counter(r.value for r in records)


@pytest.mark.parametrize("listener", ["SSL", "MTLS"])
async def test_tls_listeners_deliver_records_that_read_back(kafka_cluster: KafkaCluster, listener: str) -> None:
    await deliver_and_read_back(kafka_cluster, kafka_cluster.client_config(listener), listener.lower())


@pytest.mark.parametrize(("listener", "mechanism"), SASL_LISTENERS)
async def test_sasl_listeners_deliver_records_that_read_back(
    kafka_cluster: KafkaCluster, listener: str, mechanism: str
) -> None:
    tag = f"{listener}-{mechanism}".lower()
    await deliver_and_read_back(kafka_cluster, kafka_cluster.client_config(listener, mechanism), tag)


async def test_a_pasted_java_sasl_ssl_config_works_on_the_broker(kafka_cluster: KafkaCluster) -> None:
    credentials = kafka_cluster.credentials
    config = {
        "bootstrap.servers": kafka_cluster.bootstrap("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{credentials.username}" password="{credentials.password}";',
        "ssl.truststore.location": kafka_cluster.ca_file,
        "ssl.truststore.type": "PEM",
    }
    async with Producer(config=config) as producer:
        assert (await producer.send("java-config", b"x")).offset >= 0


async def test_oauthbearer_with_an_unsigned_token_is_accepted(kafka_cluster: KafkaCluster) -> None:
    async def provider() -> str:
        return unsecured_oauth_token("alice", lifetime_s=600)

    settings = kafka_cluster.client_config("SASL_PLAINTEXT", "OAUTHBEARER")
    await deliver_and_read_back(kafka_cluster, {**settings, "sasl_oauth_token_provider": provider}, "oauth")


def test_an_unsigned_token_is_never_issued_after_the_clock_reading_it() -> None:
    """A token's fractional `iat` (time.time()) could lie up to a millisecond after the broker's clock when the broker
    checked it within that millisecond, and Kafka refused it as issued in the future ("invalid_token")."""
    for now_s in (1_700_000_000.9999, 1_700_000_000.0001, time.time()):
        claims_part = unsecured_oauth_token("alice", lifetime_s=3, now_s=now_s).split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(claims_part + "=" * (-len(claims_part) % 4)))
        broker_now_ms = int(now_s * 1000)  # Java's System.currentTimeMillis() at the very same instant
        assert 1000 * claims["iat"] <= broker_now_ms
        assert claims["exp"] == pytest.approx(now_s + 3)


async def test_short_lived_tokens_are_renewed_before_the_broker_ends_the_session(kafka_cluster: KafkaCluster) -> None:
    # Kafka ends a session when its token expires (KIP-368): without re-authentication every connection would be
    # closed after 3 s, and sends would fail or stall while the producer reconnects.
    issued: list[float] = []

    async def provider() -> str:
        issued.append(time.monotonic())
        return unsecured_oauth_token("alice", lifetime_s=3)

    settings = kafka_cluster.client_config("SASL_PLAINTEXT", "OAUTHBEARER")
    topic = await asyncio.to_thread(kafka_cluster.create_topic, "oauth-renewal", 1)
    sent = 0
    async with Producer(**settings, sasl_oauth_token_provider=provider, linger_ms=0) as producer:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            metadata = await asyncio.wait_for(producer.send(topic, b"%d" % sent), 5)
            assert metadata.offset == sent
            sent += 1
            await asyncio.sleep(0.05)
    # Two connections (bootstrap, then the leader's), each renewed at least twice in 8 s.
    assert len(issued) >= 4, issued
    stored = await asyncio.to_thread(read_back, kafka_cluster.bootstrap_servers, topic)
    assert [r.value for r in stored] == [b"%d" % i for i in range(sent)]


@pytest.mark.parametrize(("listener", "mechanism"), SASL_LISTENERS)
async def test_a_wrong_password_fails_start_and_leaks_nothing(
    kafka_cluster: KafkaCluster, listener: str, mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-" + kafka_cluster.credentials.password
    producer = Producer(**{**kafka_cluster.client_config(listener, mechanism), "sasl_plain_password": wrong})
    error = await start_fails(producer)
    assert f"SASL {mechanism} authentication with broker {kafka_cluster.bootstrap(listener)} failed" in str(error)
    assert not isinstance(error, KafkaError)
    for text in (str(error), repr(error), repr(producer), repr(producer.config), caplog.text):
        assert wrong not in text and kafka_cluster.credentials.password not in text


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_an_unknown_user_fails_start(kafka_cluster: KafkaCluster, mechanism: str) -> None:
    settings = {**kafka_cluster.client_config("SASL_PLAINTEXT", mechanism), "sasl_plain_username": "mallory"}
    error = await start_fails(Producer(**settings))
    assert f"SASL {mechanism} authentication with broker {kafka_cluster.bootstrap('SASL_PLAINTEXT')} failed" in str(
        error
    )
    # The broker's own reason is kept.
    assert "Invalid username or password" in str(error) or "invalid credentials" in str(error)


async def test_a_mechanism_the_listener_does_not_enable_is_named_with_what_it_offers(
    kafka_cluster: KafkaCluster,
) -> None:
    async def provider() -> str:
        return unsecured_oauth_token()

    settings = {**kafka_cluster.client_config("SASL_SSL", "OAUTHBEARER"), "sasl_oauth_token_provider": provider}
    error = await start_fails(Producer(**settings))
    refusal = f"broker {kafka_cluster.bootstrap('SASL_SSL')} does not enable SASL mechanism OAUTHBEARER; it offers: "
    assert str(error).startswith(refusal)
    # In the broker's own order (a set inside Kafka).
    assert set(str(error)[len(refusal) :].split(", ")) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}


async def test_sasl_against_a_plaintext_listener_fails_start(kafka_cluster: KafkaCluster) -> None:
    # Kafka answers SaslHandshake on a listener without SASL with ILLEGAL_SASL_STATE (34).
    settings = kafka_cluster.client_config("SASL_PLAINTEXT", "PLAIN")
    settings["bootstrap_servers"] = kafka_cluster.bootstrap("PLAINTEXT")
    error = await start_fails(Producer(**settings))
    assert f"SaslHandshake with broker {kafka_cluster.bootstrap()} failed" in str(error)


async def test_an_untrusted_broker_certificate_fails_start(kafka_cluster: KafkaCluster, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger.pem"
    trustme.CA().cert_pem.write_to_path(str(stranger))
    settings = {**kafka_cluster.client_config("SSL"), "ssl_cafile": str(stranger)}
    error = await start_fails(Producer(**settings))
    assert f"broker {kafka_cluster.bootstrap('SSL')}'s certificate was rejected" in str(error)


async def test_the_broker_certificate_names_localhost_too(kafka_cluster: KafkaCluster) -> None:
    port = kafka_cluster.bootstrap("SSL").rsplit(":", 1)[1]
    context = ssl.create_default_context(cafile=kafka_cluster.ca_file)
    # The broker advertises 127.0.0.1: the bootstrap connection checks "localhost", the leader's "127.0.0.1".
    async with Producer(f"localhost:{port}", security_protocol="SSL", ssl_context=context) as producer:
        assert (await producer.send("tls-localhost", b"x")).offset >= 0


@pytest.mark.parametrize(
    ("certificate", "hint"),
    [
        ("none", "the broker rejected the client certificate, or requires one: set ssl_certfile"),
        ("stranger", "the broker does not trust the client certificate"),
    ],
)
async def test_the_mtls_listener_refuses_a_missing_or_unknown_client_certificate(
    kafka_cluster: KafkaCluster, certificate: str, hint: str
) -> None:
    """Java's TLS stack answers with other alerts than OpenSSL (bad_certificate for a missing certificate,
    certificate_unknown for an untrusted one): the producer gave no hint for the second."""
    context = ssl.create_default_context(cafile=kafka_cluster.ca_file)
    if certificate == "stranger":
        trustme.CA().issue_cert("intruder@example.com").configure_cert(context)
    producer = Producer(kafka_cluster.bootstrap("MTLS"), security_protocol="SSL", ssl_context=context)
    error = await start_fails(producer)
    assert f"TLS handshake with broker {kafka_cluster.bootstrap('MTLS')} failed" in str(error)
    assert hint in str(error)
