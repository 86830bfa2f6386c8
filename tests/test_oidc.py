"""OAUTHBEARER from string settings: the built-in client-credentials login (KIP-768 / KIP-1139 names) against a
local OAuth 2 token endpoint (http.server, independent of the client), then through the SASL proxy to Tansu, and from
Spark-style options with `${env:}` / `${file:}` placeholders."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
import trustme
from security_proxies import KafkaProxy, SaslServer

from aioproducer import Producer, ProducerConfig
from aioproducer.errors import AuthenticationError, ConfigError, FeatureNotAvailableError
from aioproducer.security import oidc
from aioproducer.security.oidc import (
    ClientCredentialsTokenProvider,
    OidcLogin,
    login_from_settings,
    parse_token_response,
    refresh_at_ms,
    token_request,
)
from aioproducer.spark.options import parse_options, resolve_placeholders
from aioproducer.spark.task import TaskPlan, run_task
from aioproducer.testing import ConsumedRecord, KafkaCluster, read_back

CLIENT_ID, SECRET = "spark-job", "s3cr:et/ü+"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
NO_RETRIES = {"sasl.login.retry.backoff.ms": "0", "sasl.login.retry.backoff.max.ms": "0"}


def jwt(claims: dict[str, Any]) -> str:
    """An unsigned JWS (alg none), as Kafka's unsecured validator accepts."""

    def part(document: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


class TokenEndpoint:
    """An RFC 6749 §4.4 token endpoint on 127.0.0.1: checks the Basic credentials and the form, issues unsigned JWTs
    with `lifetime_s`, answers `fail_with` status codes first. `requests` holds (headers, form) of each call."""

    def __init__(self, *, lifetime_s: int = 3600, context: ssl.SSLContext | None = None) -> None:
        self.lifetime_s = lifetime_s
        self.fail_with: deque[int] = deque()
        self.answer: Callable[[], bytes] | None = None  # replaces the token answer when set
        self.requests: list[tuple[dict[str, str], dict[str, list[str]]]] = []
        self.issued: list[str] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                form = urllib.parse.parse_qs(body)
                endpoint.requests.append((dict(self.headers), form))
                status, answer = endpoint.respond(self.headers.get("Authorization", ""), form)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if context is not None:
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if context is not None else "http"
        self.url = f"{scheme}://localhost:{self.server.server_address[1]}/oauth2/token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def respond(self, authorization: str, form: dict[str, list[str]]) -> tuple[int, bytes]:
        if self.fail_with:
            return self.fail_with.popleft(), b'{"error":"temporarily_unavailable","error_description":"try later"}'
        scheme, _, encoded = authorization.partition(" ")
        client, _, secret = base64.b64decode(encoded).decode().partition(":") if scheme == "Basic" else ("", "", "")
        if (client, secret) != (CLIENT_ID, SECRET) or form.get("grant_type") != ["client_credentials"]:
            return 401, b'{"error":"invalid_client","error_description":"bad credentials"}'
        if self.answer is not None:
            return 200, self.answer()
        now = int(time.time())
        claims = {
            "sub": client,
            "iat": now,
            "exp": now + self.lifetime_s,
            **({"scope": form["scope"][0]} if "scope" in form else {}),
        }
        token = jwt(claims)
        self.issued.append(token)
        return 200, json.dumps({"access_token": token, "token_type": "Bearer", "expires_in": self.lifetime_s}).encode()

    def __enter__(self) -> TokenEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def endpoint() -> Iterator[TokenEndpoint]:
    with TokenEndpoint() as running:
        yield running


def login_settings(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "sasl.login.callback.handler.class": HANDLER,
        "sasl.oauthbearer.token.endpoint.url": url,
        "sasl.oauthbearer.client.credentials.client.id": CLIENT_ID,
        "sasl.oauthbearer.client.credentials.client.secret": SECRET,
        **extra,
    }


def login_of(url: str = "http://idp.example/token", **extra: Any) -> OidcLogin:
    login = login_from_settings(login_settings(url, **extra), {})
    assert login is not None
    return login


# ---- settings -------------------------------------------------------------------------------------------------


def test_the_kip_1139_settings_and_the_kip_768_jaas_options_describe_the_same_login() -> None:
    from_settings = login_of(**{"sasl.oauthbearer.scope": " kafka ", "sasl.login.retry.backoff.max.ms": "2000"})
    from_jaas = login_from_settings(
        {"sasl.oauthbearer.token.endpoint.url": "http://idp.example/token", "sasl.login.retry.backoff.max.ms": 2000},
        {"clientId": CLIENT_ID, "clientSecret": SECRET, "scope": "kafka", "extension_logicalCluster": "lkc-1"},
    )
    assert from_jaas is not None
    assert (from_settings.client_id, from_settings.client_secret, from_settings.scope) == (CLIENT_ID, SECRET, "kafka")
    assert (from_jaas.client_id, from_jaas.client_secret, from_jaas.scope) == (CLIENT_ID, SECRET, "kafka")
    assert from_settings.retry_backoff_max_ms == from_jaas.retry_backoff_max_ms == 2000
    assert dict(from_jaas.extensions) == {"logicalCluster": "lkc-1"}
    # The settings win over the deprecated JAAS options (Java's ConfigOrJaas).
    both = login_from_settings(login_settings("http://idp.example/t"), {"clientId": "other", "clientSecret": "x"})
    assert both is not None and (both.client_id, both.client_secret) == (CLIENT_ID, SECRET)
    assert login_from_settings({}, {}) is None


@pytest.mark.parametrize(
    ("settings", "jaas", "error", "message"),
    [
        ({"sasl.oauthbearer.scope": "x"}, {}, ConfigError, "given without sasl.oauthbearer.token.endpoint.url"),
        ({}, {"clientId": "a", "clientSecret": "b"}, ConfigError, "the JAAS option clientId"),
        (login_settings("ftp://idp/t"), {}, ConfigError, "must be an http:// or https:// URL"),
        (
            login_settings("http://idp/t", **{"sasl.oauthbearer.client.credentials.client.secret": "  "}),
            {},
            ConfigError,
            "needs sasl.oauthbearer.client.credentials.client.id and",
        ),
        (
            {**login_settings("http://idp/t"), "sasl.login.callback.handler.class": "com.x.H"},
            {},
            FeatureNotAvailableError,
            "com.x.H' is not supported",
        ),
        (
            login_settings("http://idp/t"),
            {"unsecuredLoginStringClaim_sub": "a"},
            FeatureNotAvailableError,
            r"\['unsecuredLoginStringClaim_sub'\] are not supported",
        ),
        (
            login_settings("http://idp/t", **{"sasl.login.refresh.window.factor": "0.3"}),
            {},
            ConfigError,
            r"window.factor must be in \[0.5, 1.0\]",
        ),
        (login_settings("http://idp/t", **{"sasl.login.read.timeout.ms": "soon"}), {}, ConfigError, "must be a number"),
        (
            login_settings(
                "http://idp/t", **{"sasl.login.retry.backoff.ms": "500", "sasl.login.retry.backoff.max.ms": "100"}
            ),
            {},
            ConfigError,
            "at least",
        ),
    ],
)
def test_bad_login_settings_raise_typed_errors_that_never_show_the_secret(
    settings: dict[str, Any], jaas: dict[str, str], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as caught:
        login_from_settings(settings, jaas)
    assert SECRET not in str(caught.value)


def test_producer_config_builds_the_token_provider_from_java_settings() -> None:
    jaas = f'{MODULE} required clientId="{CLIENT_ID}" clientSecret="{SECRET}" extension_pool="p1";'
    config = ProducerConfig.build(
        {
            "bootstrap.servers": "b:9092",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": jaas,
            "sasl.login.callback.handler.class": HANDLER,
            "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        }
    )
    provider = config.sasl_oauth_token_provider
    assert isinstance(provider, ClientCredentialsTokenProvider)
    assert (provider.login.client_id, dict(provider.login.extensions)) == (CLIENT_ID, {"pool": "p1"})
    assert SECRET not in repr(config) and SECRET not in repr(provider)

    async def elsewhere() -> str:
        return "t"

    with pytest.raises(
        ConfigError, match=r"sasl_oauth_token_provider and sasl\.oauthbearer\.token\.endpoint\.url both"
    ):
        ProducerConfig.build(
            login_settings("http://idp/t", **{"bootstrap.servers": "b:1"}), sasl_oauth_token_provider=elsewhere
        )
    # A login for a mechanism that does not use it is a contradiction, as a provider would be.
    with pytest.raises(ConfigError, match="not used by sasl_mechanism='PLAIN'"):
        ProducerConfig.build(
            login_settings("http://idp/t", **{"bootstrap.servers": "b:1", "security.protocol": "SASL_PLAINTEXT"}),
            sasl_mechanism="PLAIN",
            sasl_plain_username="u",
            sasl_plain_password="p",
        )


# ---- the exchange, pure ---------------------------------------------------------------------------------------


def test_the_token_request_is_kafkas() -> None:
    headers, body = token_request(login_of(**{"sasl.oauthbearer.scope": "kafka write"}))
    # RFC 7617: standard base64 of "id:secret", the secret as given (Java urlencodes only on request, KIP-1025).
    assert headers["Authorization"] == "Basic " + base64.b64encode(f"{CLIENT_ID}:{SECRET}".encode()).decode()
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert urllib.parse.parse_qs(body.decode()) == {"grant_type": ["client_credentials"], "scope": ["kafka write"]}
    encoded, _ = token_request(login_of(**{"sasl.oauthbearer.header.urlencode": "true"}))
    decoded = base64.b64decode(encoded["Authorization"].split()[1]).decode()
    assert decoded == f"{CLIENT_ID}:{urllib.parse.quote_plus(SECRET)}"
    assert token_request(login_of())[1] == b"grant_type=client_credentials"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"<html>", "not JSON"),
        (b'{"token_type":"Bearer"}', "has no access_token"),
        (json.dumps({"access_token": "opaque-token"}).encode(), "is not a JWT"),
        (json.dumps({"access_token": "a.!!!.c"}).encode(), "not base64url-encoded JSON"),
        (json.dumps({"access_token": jwt({"sub": "a"})}).encode(), "no valid 'exp' claim"),
        (json.dumps({"access_token": jwt({"exp": 10, "sub": " "})}).encode(), "no valid 'sub' claim"),
        (json.dumps({"access_token": jwt({"exp": 10, "sub": "a", "iat": "x"})}).encode(), "'iat' claim"),
        (json.dumps({"access_token": jwt({"exp": 10, "sub": "a", "scope": ["ok", ""]})}).encode(), "blank scope"),
    ],
)
def test_answers_that_are_not_a_valid_jwt_are_authentication_errors(answer: bytes, message: str) -> None:
    with pytest.raises(AuthenticationError, match=message):
        parse_token_response(answer, login_of())


def test_the_subject_claim_name_is_configurable() -> None:
    token = jwt({"exp": 1_700_000_000, "client_id": "svc", "iat": 1_699_999_000})
    access = parse_token_response(
        json.dumps({"access_token": token}).encode(), login_of(**{"sasl.oauthbearer.sub.claim.name": "client_id"})
    )
    assert (access.subject, access.expires_ms, access.issued_ms) == ("svc", 1_700_000_000_000, 1_699_999_000_000)
    assert token not in repr(access)


@pytest.mark.parametrize(
    ("issued_s", "lifetime_s", "draw", "refresh_after_s"),
    [
        (0, 3600, 0.0, 2880),  # 80 % of an hour
        (0, 3600, 1.0, 3060),  # plus the whole 5 % jitter
        (-1800, 1800, 0.0, 1080),  # the window counts from the token's iat
        (None, 3600, 0.0, 2880),  # or from now, without one
        (0, 1000, 1.0, 700),  # no later than the 300 s buffer before expiry
        (0, 400, 0.0, 100),
        (-3000, 600, 0.0, 60),  # no sooner than the 60 s minimum period
        (0, 300, 0.0, 240),  # too short for the period and the buffer: 80 % of what is left
        (0, 0, 0.0, 10),  # expired on arrival: again in 10 s
    ],
)
def test_the_refresh_time_follows_javas_refreshing_login(
    issued_s: int | None, lifetime_s: int, draw: float, refresh_after_s: int
) -> None:
    now = 1_000_000
    issued = None if issued_s is None else now + issued_s * 1000
    refresh = refresh_at_ms(now, issued, now + lifetime_s * 1000, login_of(), draw)
    assert refresh == now + refresh_after_s * 1000


# ---- the provider against the local endpoint -------------------------------------------------------------------


async def test_one_token_serves_every_connection_until_its_refresh_time(endpoint: TokenEndpoint) -> None:
    now = [int(time.time() * 1000)]
    provider = ClientCredentialsTokenProvider(login_of(endpoint.url), clock_ms=lambda: now[0])

    tokens = await asyncio.gather(*(provider() for _ in range(10)))

    assert len(endpoint.requests) == 1 and {t.token for t in tokens} == {endpoint.issued[0]}
    headers, form = endpoint.requests[0]
    assert form == {"grant_type": ["client_credentials"]} and headers["Cache-Control"] == "no-cache"
    now[0] += 2_879_000  # still before 80 % of the hour
    assert (await provider()).token == endpoint.issued[0] and len(endpoint.requests) == 1
    now[0] += 300_000  # past the latest refresh time (85 %)
    assert (await provider()).token == endpoint.issued[1] and len(endpoint.requests) == 2


async def test_transient_failures_are_retried_with_backoff_and_client_errors_are_not(endpoint: TokenEndpoint) -> None:
    provider = ClientCredentialsTokenProvider(login_of(endpoint.url, **{"sasl.login.retry.backoff.ms": "10"}))
    endpoint.fail_with.extend([503, 500])
    assert (await provider()).token == endpoint.issued[0]
    assert len(endpoint.requests) == 3

    refused = ClientCredentialsTokenProvider(
        login_of(endpoint.url, **{"sasl.oauthbearer.client.credentials.client.secret": "wrong"})
    )
    with pytest.raises(AuthenticationError, match=r"after 1 attempt\(s\): HTTP 401 .*: invalid_client bad cred"):
        await refused()
    assert len(endpoint.requests) == 4


async def test_retries_stop_once_the_backoff_maximum_has_passed(
    endpoint: TokenEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backoff is counted on a clock that moves only while the provider sleeps: this test counted attempts on
    the wall clock, and on a loaded machine the slow requests themselves used up the 300 ms (3 attempts, not 4-6)."""
    slept: list[float] = []
    clock = [1000.0]

    def sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))
        clock[0] += seconds

    monkeypatch.setattr(oidc, "time", SimpleNamespace(monotonic=lambda: clock[0], sleep=sleep, time=time.time))
    endpoint.fail_with.extend([503] * 50)
    settings = {"sasl.login.retry.backoff.ms": "20", "sasl.login.retry.backoff.max.ms": "300"}
    provider = ClientCredentialsTokenProvider(login_of(endpoint.url, **settings))
    with pytest.raises(AuthenticationError, match=r"after 5 attempt.*HTTP 503 from the token endpoint: temporarily_"):
        await provider()
    # 20, 40, 80 and 160 ms of backoff make the 300 ms; the sixth attempt's wait would pass it, so the attempts stop.
    assert slept == [0.02, 0.04, 0.08, 0.16]
    assert len(endpoint.requests) == 5


async def test_an_unreachable_endpoint_and_a_bad_answer_fail_with_authentication_errors(
    endpoint: TokenEndpoint,
) -> None:
    unreachable = login_of("http://127.0.0.1:1/token", **NO_RETRIES)
    with pytest.raises(AuthenticationError, match="token endpoint is unreachable"):
        await ClientCredentialsTokenProvider(unreachable)()
    endpoint.answer = lambda: b'{"access_token": "not-a-jwt"}'
    with pytest.raises(AuthenticationError, match="is not a JWT"):
        await ClientCredentialsTokenProvider(login_of(endpoint.url))()
    assert len(endpoint.requests) == 1  # an invalid token is not retried: the endpoint would answer the same


async def test_an_https_endpoint_is_trusted_through_the_jaas_truststore_option(tmp_path: Path) -> None:
    authority = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost").configure_cert(server)
    cafile = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(cafile))
    with TokenEndpoint(context=server) as secure:
        jaas = {"clientId": CLIENT_ID, "clientSecret": SECRET, "ssl.truststore.location": str(cafile)}
        login = login_from_settings({"sasl.oauthbearer.token.endpoint.url": secure.url}, jaas)
        assert login is not None
        assert (await ClientCredentialsTokenProvider(login)()).token == secure.issued[0]
        untrusted = login_from_settings(
            {"sasl.oauthbearer.token.endpoint.url": secure.url, **NO_RETRIES},
            {"clientId": CLIENT_ID, "clientSecret": SECRET},
        )
        assert untrusted is not None
        with pytest.raises(AuthenticationError, match="CERTIFICATE_VERIFY_FAILED"):
            await ClientCredentialsTokenProvider(untrusted)()


# ---- end to end: the SASL proxy in front of Tansu checks the endpoint's tokens -----------------------------------


@pytest.fixture
async def proxy(bootstrap: str) -> AsyncIterator[KafkaProxy]:
    async with KafkaProxy(bootstrap, sasl=SaslServer(mechanisms=("OAUTHBEARER",))) as running:
        yield running


class TrustedTokens(dict[str, int]):
    """The proxy's valid tokens: whatever the endpoint issued, each valid for a minute."""

    def __init__(self, endpoint: TokenEndpoint) -> None:
        super().__init__()
        self.endpoint = endpoint

    def get(self, token: str, default: Any = None) -> Any:  # type: ignore[override]
        return 60_000 if token in self.endpoint.issued else default


async def test_a_producer_configured_from_strings_authenticates_with_the_endpoints_token(
    proxy: KafkaProxy,
    endpoint: TokenEndpoint,
    topic_factory: Callable[..., str],
    read_back_records: Callable[..., list[ConsumedRecord]],
) -> None:
    assert proxy.sasl is not None
    proxy.sasl.tokens = TrustedTokens(endpoint)
    topic = topic_factory(1)
    jaas = f'{MODULE} required clientId="{CLIENT_ID}" clientSecret="{SECRET}" scope="produce" extension_pool="p1";'
    config = {
        "bootstrap.servers": proxy.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": jaas,
        "sasl.login.callback.handler.class": HANDLER,
        "sasl.oauthbearer.token.endpoint.url": endpoint.url,
    }
    async with Producer(config=config) as producer:
        assert (await producer.send(topic, b"hello")).offset == 0

    assert [r.value for r in read_back_records(topic)] == [b"hello"]
    # One token fetch for every connection (bootstrap, then the broker's), each authenticated with it.
    assert len(endpoint.requests) == 1 and endpoint.requests[0][1]["scope"] == ["produce"]
    assert len(proxy.sasl.authentications) == proxy.connections >= 1
    assert proxy.sasl.extensions == [{"pool": "p1"}] * proxy.connections and proxy.sasl.failures == []


async def test_wrong_client_credentials_fail_start_with_the_endpoints_reason(
    proxy: KafkaProxy, endpoint: TokenEndpoint
) -> None:
    config = {
        **login_settings(endpoint.url, **{"sasl.oauthbearer.client.credentials.client.secret": "nope"}),
        "bootstrap.servers": proxy.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
    }
    producer = Producer(config=config)
    try:
        with pytest.raises(AuthenticationError, match="HTTP 401 from the token endpoint: invalid_client"):
            await producer.start()
    finally:
        await producer.close()


async def test_spark_options_carry_the_login_with_placeholder_secrets(
    proxy: KafkaProxy,
    endpoint: TokenEndpoint,
    topic_factory: Callable[..., str],
    read_back_records: Callable[..., list[ConsumedRecord]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert proxy.sasl is not None
    proxy.sasl.tokens = TrustedTokens(endpoint)
    topic = topic_factory(1)
    secret_file = tmp_path / "client-secret"
    secret_file.write_text(SECRET + "\n")
    monkeypatch.setenv("AIOPRODUCER_TEST_CLIENT_ID", CLIENT_ID)
    jaas = f'{MODULE} required clientId="${{env:AIOPRODUCER_TEST_CLIENT_ID}}" clientSecret="${{file:{secret_file}}}";'
    options = {
        "kafka.bootstrap.servers": proxy.bootstrap,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.jaas.config": jaas,
        "kafka.sasl.login.callback.handler.class": HANDLER,
        "kafka.sasl.oauthbearer.token.endpoint.url": endpoint.url,
    }
    settings = parse_options(options, topic)
    assert SECRET not in repr(settings) and "${file:" in settings.producer_config["sasl.jaas.config"]
    # Resolved where the producer runs, inside the JAAS string too.
    resolved = resolve_placeholders(settings.producer_config, strict=True)
    assert f'clientSecret="{SECRET}"' in resolved["sasl.jaas.config"]

    batch = pa.RecordBatch.from_arrays([pa.array([b"a", b"b"])], ["value"])
    # In a thread, as in a Spark task: this event loop keeps serving the proxy meanwhile.
    report = await asyncio.to_thread(run_task, [batch], TaskPlan.from_options(settings))

    assert (report.delivered, report.failed) == (2, 0)
    assert sorted(r.value or b"" for r in read_back_records(topic)) == [b"a", b"b"]
    assert len(endpoint.requests) == 1


def test_an_unresolvable_placeholder_in_the_jaas_string_waits_for_the_executors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AIOPRODUCER_TEST_UNSET", raising=False)
    jaas = f'{MODULE} required clientId="svc" clientSecret="${{env:AIOPRODUCER_TEST_UNSET}}";'
    options = {
        "kafka.bootstrap.servers": "b:9092",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.jaas.config": jaas,
        "kafka.sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
    }
    parse_options(options, "t")  # the driver cannot resolve it, and still checks the rest
    with pytest.raises(ConfigError, match="environment variable 'AIOPRODUCER_TEST_UNSET' is not available"):
        resolve_placeholders(parse_options(options, "t").producer_config, strict=True)
    with pytest.raises(ConfigError, match="must be an http:// or https:// URL"):
        parse_options({**options, "kafka.sasl.oauthbearer.token.endpoint.url": "idp.example"}, "t")


# ---- real Kafka's OAUTHBEARER listener (its unsecured validator accepts the endpoint's unsigned JWTs) ------------


async def test_real_kafka_accepts_the_endpoints_tokens_and_short_sessions_are_renewed_from_it(
    kafka_cluster: KafkaCluster, endpoint: TokenEndpoint
) -> None:
    # Kafka ends a session when its token expires (KIP-368): with 4-second tokens, the login must fetch fresh ones
    # before the producer's connections re-authenticate, or sends stall while connections are re-opened.
    endpoint.lifetime_s = 4
    config = {
        **login_settings(endpoint.url),
        "bootstrap.servers": kafka_cluster.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "linger.ms": "0",
    }
    topic = await asyncio.to_thread(kafka_cluster.create_topic, "oidc-renewal", 1)
    sent = 0
    async with Producer(config=config) as producer:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            metadata = await asyncio.wait_for(producer.send(topic, b"%d" % sent), 5)
            assert metadata.offset == sent
            sent += 1
            await asyncio.sleep(0.05)
    assert len(endpoint.issued) >= 2, endpoint.issued  # renewed, by the login itself
    assert len(endpoint.requests) == len(endpoint.issued)  # and never asked twice for one renewal
    stored = await asyncio.to_thread(read_back, kafka_cluster.bootstrap_servers, topic)
    assert [r.value for r in stored] == [b"%d" % i for i in range(sent)]
