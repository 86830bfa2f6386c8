"""SASL through a SASL-terminating proxy in front of the session's broker, whose server side is independent of our
client (scramp's SCRAM server; PLAIN and OAUTHBEARER parsed per their RFCs): what only a proxy can count or inject —
one authentication attempt per failure, OAUTHBEARER extensions and server status, re-authentication per
connection, a token revoked under a running producer — and Tansu's own refusal. PLAIN, SCRAM and OAUTHBEARER on
real Kafka's SASL listeners are in test_security_kafka.py."""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from security_proxies import KafkaProxy, SaslServer

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.errors import AuthenticationError, KafkaError
from aioproducer.security import OAuthBearerToken

PASSWORD = "s3cret-Pa55word"


@pytest.fixture
async def proxy(bootstrap: str) -> AsyncIterator[KafkaProxy]:
    async with KafkaProxy(bootstrap, sasl=SaslServer(users={"alice": PASSWORD})) as running:
        yield running


def sasl_of(proxy: KafkaProxy) -> SaslServer:
    assert proxy.sasl is not None
    return proxy.sasl


def producer(proxy: KafkaProxy, mechanism: str, **settings: Any) -> Producer:
    if mechanism != "OAUTHBEARER":
        settings = {"sasl_plain_username": "alice", "sasl_plain_password": PASSWORD} | settings
    return Producer(proxy.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism, **settings)


async def start_fails(candidate: Producer) -> AuthenticationError:
    """start() raises AuthenticationError promptly, not after max_block_ms (60 s by default)."""
    began = time.monotonic()
    try:
        with pytest.raises(AuthenticationError) as caught:
            await candidate.start()
    finally:
        await candidate.close()
    assert time.monotonic() - began < 5
    return caught.value


async def test_oauthbearer_sends_token_and_extensions(proxy: KafkaProxy) -> None:
    sasl_of(proxy).tokens["eyJ.tok.1"] = 60_000

    async def provider() -> OAuthBearerToken:
        return OAuthBearerToken("eyJ.tok.1", {"logicalCluster": "lkc-42"})

    async with producer(proxy, "OAUTHBEARER", sasl_oauth_token_provider=provider) as running:
        assert (await running.send("oauth-topic", b"x")).offset >= 0
    assert sasl_of(proxy).extensions and all(e == {"logicalCluster": "lkc-42"} for e in sasl_of(proxy).extensions)
    assert {m for _n, m, _p in sasl_of(proxy).authentications} == {"OAUTHBEARER"}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
async def test_wrong_password_fails_start_once_and_leaks_nothing(
    proxy: KafkaProxy, mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    candidate = producer(proxy, mechanism, sasl_plain_password="wrong-" + PASSWORD)
    error = await start_fails(candidate)
    assert f"SASL {mechanism} authentication with broker {proxy.bootstrap} failed" in str(error)
    assert not isinstance(error, KafkaError)
    assert len(sasl_of(proxy).failures) == 1 and sasl_of(proxy).authentications == []
    for text in (str(error), repr(error), repr(candidate), repr(candidate.config), caplog.text):
        assert PASSWORD not in text


async def test_unknown_user_fails_like_a_wrong_password(proxy: KafkaProxy) -> None:
    error = await start_fails(producer(proxy, "SCRAM-SHA-512", sasl_plain_username="mallory"))
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in str(error)


async def test_a_rejected_token_reports_the_server_status(proxy: KafkaProxy) -> None:
    async def provider() -> str:
        return "expired-token"

    error = await start_fails(producer(proxy, "OAUTHBEARER", sasl_oauth_token_provider=provider))
    assert 'server status: {"status":"invalid_token"}' in str(error)
    assert "expired-token" not in str(error)


async def test_sessions_are_reauthenticated_before_the_token_expires(proxy: KafkaProxy) -> None:
    sasl = sasl_of(proxy)
    counter = itertools.count(1)

    async def provider() -> str:
        await asyncio.sleep(0.02)  # a slow identity provider widens the window in which requests must wait
        token = f"tok-{next(counter)}"
        sasl.tokens[token] = 400  # each token's session lasts 400 ms
        return token

    async with producer(proxy, "OAUTHBEARER", sasl_oauth_token_provider=provider, linger_ms=0) as running:
        deadline = time.monotonic() + 1.3
        sent = 0
        while time.monotonic() < deadline:
            results = await running.send_many([ProducerRecord("reauth-topic", b"%d" % i) for i in range(5)])
            assert all(isinstance(r, RecordMetadata) for r in results), results
            sent += len(results)
            await asyncio.sleep(0.01)
    per_connection = [n for n, _m, _p in sasl.authentications]
    # Two connections (bootstrap and broker), each re-authenticated every ~350 ms: never expired, never closed.
    assert proxy.connections == 2
    assert max(per_connection.count(n) for n in set(per_connection)) >= 3
    assert proxy.expired_closes == 0 and proxy.violations == [] and sasl.failures == []
    assert next(counter) - 1 == len(sasl.authentications)  # a fresh token for every (re-)authentication
    assert sent >= 20


async def test_a_failed_reauthentication_surfaces_on_the_next_send(proxy: KafkaProxy) -> None:
    sasl = sasl_of(proxy)
    sasl.tokens["first"] = 300
    tokens = iter(["first", "first"])

    async def provider() -> str:
        return next(tokens, "revoked")

    async with producer(proxy, "OAUTHBEARER", sasl_oauth_token_provider=provider) as running:
        await running.send("before-revocation", b"x")
        await asyncio.sleep(0.5)  # both connections tried to re-authenticate with the revoked token
        began = time.monotonic()
        with pytest.raises(AuthenticationError, match="invalid_token"):
            await asyncio.wait_for(running.send("after-revocation", b"x"), 10)
        assert time.monotonic() - began < 3
    assert proxy.expired_closes == 0 and proxy.violations == []


async def test_an_unreachable_secured_cluster_does_not_fail_start() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    candidate = Producer(
        f"127.0.0.1:{port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="u",
        sasl_plain_password="p",
    )
    await candidate.start()  # transport errors stay retriable, as without security
    await candidate.close()


async def test_tansus_refusal_of_the_mechanism(tansu_bootstrap: str) -> None:
    # Tansu's memory engine answers SaslHandshake(PLAIN) with UNSUPPORTED_SASL_MECHANISM (33); real Kafka's refusals
    # are in test_security_kafka.py.
    candidate = Producer(
        tansu_bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="u",
        sasl_plain_password=PASSWORD,
    )
    error = await start_fails(candidate)
    assert f"broker {tansu_bootstrap} does not enable SASL mechanism PLAIN" in str(error)
