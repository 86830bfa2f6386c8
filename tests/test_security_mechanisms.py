"""The SASL mechanisms and the SaslHandshake/SaslAuthenticate exchange, sans I/O, against independent truth:
RFC 7677's SCRAM-SHA-256 example, kafka-python's SCRAM and OAUTHBEARER clients, scramp's SCRAM server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import scramp  # type: ignore[import-untyped]
from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth  # type: ignore[import-untyped]
from kafka.net.sasl.scram import ScramClient as KafkaPythonScram  # type: ignore[import-untyped]

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import AuthenticationError, ConfigError, KafkaError, UnsupportedVersionError
from aioproducer.protocol import ApiKey
from aioproducer.security import OAuthBearerToken
from aioproducer.security.exchange import authenticate
from aioproducer.security.sasl import OAuthBearerClient, PlainClient, SaslCredentials, ScramClient

# RFC 7677 §3: the SCRAM-SHA-256 exchange for user "user", password "pencil".
RFC7677_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC7677_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_plain_sends_rfc4616_message_with_empty_authzid() -> None:
    client = PlainClient("alice", "pa\u00dfword")
    authzid, user, password = client.first_message().split(b"\0")
    assert (authzid, user, password.decode()) == (b"", b"alice", "pa\u00dfword")
    assert client.receive(b"") is None
    assert "pa\u00dfword" not in repr(client)


def test_scram_sha256_matches_rfc7677_example() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677_NONCE)
    assert client.first_message() == RFC7677_CLIENT_FIRST
    assert client.receive(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert client.receive(RFC7677_SERVER_FINAL) is None


def test_scram_sha512_client_final_matches_kafka_python() -> None:
    server = scramp.ScramMechanism("SCRAM-SHA-512").make_server(
        lambda _user: scramp.ScramMechanism("SCRAM-SHA-512").make_auth_info("pencil", iteration_count=4096)
    )
    ours = ScramClient("SCRAM-SHA-512", "user", "pencil", nonce="fyko+d2lbbFgONRv9qkxdawL")
    theirs = KafkaPythonScram("user", "pencil", "SCRAM-SHA-512")
    theirs.nonce = b"fyko+d2lbbFgONRv9qkxdawL"
    first = ours.first_message()
    assert first == theirs.first_message()
    server.set_client_first(first.decode())
    server_first = server.get_server_first().encode()
    final = ours.receive(server_first)
    theirs.process_server_first_message(server_first)
    assert final == theirs.final_message()
    assert final is not None
    server.set_client_final(final.decode())  # scramp's server checks our proof
    assert ours.receive(server.get_server_final().encode()) is None


def test_scram_rejects_a_forged_server_signature() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677_NONCE)
    client.first_message()
    client.receive(RFC7677_SERVER_FIRST)
    with pytest.raises(AuthenticationError, match="server signature doesn't match"):
        client.receive(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_scram_rejects_a_server_nonce_not_extending_ours() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="abc")
    client.first_message()
    with pytest.raises(AuthenticationError, match="SCRAM exchange failed"):
        client.receive(RFC7677_SERVER_FIRST)


def test_oauthbearer_message_matches_kafka_python_with_extensions() -> None:
    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return "eyJhbGciOi.payload.sig"

        def extensions(self) -> dict[str, str]:
            return {"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}

    provider = Provider()
    theirs = SaslMechanismOAuth(sasl_oauth_token_provider=provider).auth_bytes()
    ours = OAuthBearerClient(OAuthBearerToken("eyJhbGciOi.payload.sig", provider.extensions()))
    assert ours.first_message() == theirs
    assert ours.receive(b"") is None


def test_oauthbearer_answers_an_error_status_with_0x01() -> None:
    client = OAuthBearerClient("tok")
    assert client.first_message() == b"n,,\x01auth=Bearer tok\x01\x01"
    assert client.receive(b'{"status":"invalid_token"}') == b"\x01"
    assert client.server_error == '{"status":"invalid_token"}'
    assert client.receive(b"") is None


@pytest.mark.parametrize(
    ("token", "match"),
    [
        (OAuthBearerToken("secret-token", {"auth": "x"}), "invalid OAUTHBEARER extension 'auth'"),
        (OAuthBearerToken("secret-token", {"bad key": "x"}), "invalid OAUTHBEARER extension"),
        ("secret token", "invalid characters"),
        ("", "empty token"),
    ],
)
def test_oauthbearer_rejects_bad_tokens_without_echoing_them(token: Any, match: str) -> None:
    with pytest.raises(AuthenticationError, match=match) as caught:
        OAuthBearerClient(token)
    assert "secret" not in str(caught.value)
    assert "secret-token" not in repr(OAuthBearerToken("secret-token"))


# ---- the exchange -------------------------------------------------------------------------------------------

VERSIONS = {ApiKey.SASL_HANDSHAKE: 1, ApiKey.SASL_AUTHENTICATE: 2}


class FakeBroker:
    """Answers SaslHandshake/SaslAuthenticate from a script and records what the client sent."""

    def __init__(self, handshake: dict[str, Any], *answers: dict[str, Any]) -> None:
        self.handshake = handshake
        self.answers = list(answers)
        self.sent: list[tuple[ApiKey, dict[str, Any], int]] = []

    async def __call__(self, api_key: ApiKey, body: Mapping[str, Any], version: int) -> dict[str, Any]:
        self.sent.append((api_key, dict(body), version))
        if api_key == ApiKey.SASL_HANDSHAKE:
            return self.handshake
        answer = {"error_code": 0, "error_message": None, "auth_bytes": b"", "session_lifetime_ms": 0}
        return answer | self.answers.pop(0)


async def test_plain_exchange_returns_the_session_lifetime() -> None:
    broker = FakeBroker({"error_code": 0, "mechanisms": ["PLAIN"]}, {"session_lifetime_ms": 3_600_000})
    lifetime = await authenticate(broker, VERSIONS, SaslCredentials("PLAIN", "u", "p"), "b:9093")
    assert lifetime == 3_600_000
    assert [(api, version) for api, _body, version in broker.sent] == [
        (ApiKey.SASL_HANDSHAKE, 1),
        (ApiKey.SASL_AUTHENTICATE, 2),
    ]
    assert broker.sent[0][1] == {"mechanism": "PLAIN"}
    assert broker.sent[1][1] == {"auth_bytes": b"\0u\0p"}


async def test_unknown_mechanism_names_what_the_broker_offers() -> None:
    broker = FakeBroker({"error_code": 33, "mechanisms": ["SCRAM-SHA-512", "GSSAPI"]})
    with pytest.raises(AuthenticationError) as caught:
        await authenticate(broker, VERSIONS, SaslCredentials("PLAIN", "u", "p"), "b:9093")
    assert str(caught.value) == "broker b:9093 does not enable SASL mechanism PLAIN; it offers: SCRAM-SHA-512, GSSAPI"


async def test_rejected_credentials_raise_authentication_error_not_a_retriable_kafka_error() -> None:
    broker = FakeBroker(
        {"error_code": 0, "mechanisms": ["PLAIN"]},
        {"error_code": 58, "error_message": "Authentication failed: Invalid username or password"},
    )
    with pytest.raises(AuthenticationError) as caught:
        await authenticate(broker, VERSIONS, SaslCredentials("PLAIN", "u", "hunter2"), "b:9093")
    error = caught.value
    # Cluster._update retries KafkaError: an authentication failure must not look like one.
    assert not isinstance(error, KafkaError)
    assert isinstance(error.__cause__, KafkaError) and error.__cause__.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "b:9093" in str(error) and "Invalid username or password" in str(error)
    assert "hunter2" not in str(error) and "hunter2" not in repr(error)


async def test_oauthbearer_failure_carries_the_server_status() -> None:
    async def provider() -> str:
        return "tok"

    broker = FakeBroker(
        {"error_code": 0, "mechanisms": ["OAUTHBEARER"]},
        {"auth_bytes": b'{"status":"invalid_token"}'},
        {"error_code": 58, "error_message": None},
    )
    with pytest.raises(AuthenticationError, match=r'server status: \{"status":"invalid_token"\}'):
        await authenticate(broker, VERSIONS, SaslCredentials("OAUTHBEARER", token_provider=provider), "b:1")
    assert broker.sent[-1][1] == {"auth_bytes": b"\x01"}


async def test_a_broker_without_sasl_authenticate_is_unsupported() -> None:
    broker = FakeBroker({"error_code": 0, "mechanisms": ["PLAIN"]})
    with pytest.raises(UnsupportedVersionError, match="SaslAuthenticate"):
        await authenticate(broker, {ApiKey.SASL_HANDSHAKE: 1}, SaslCredentials("PLAIN", "u", "p"), "b:1")
    with pytest.raises(UnsupportedVersionError):
        await authenticate(
            broker, {ApiKey.SASL_HANDSHAKE: 0, ApiKey.SASL_AUTHENTICATE: 0}, SaslCredentials("PLAIN"), "b"
        )
    assert broker.sent == []


async def test_a_sync_token_provider_is_a_config_error() -> None:
    credentials = SaslCredentials("OAUTHBEARER", token_provider=lambda: "tok")  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigError, match="must be an async function"):
        await credentials.new_client()


def test_credentials_repr_hides_password_and_token_provider_output() -> None:
    text = repr(SaslCredentials("SCRAM-SHA-256", "alice", "hunter2"))
    assert "hunter2" not in text and "alice" in text
