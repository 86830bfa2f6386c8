"""TLS and SASL settings: Java keys, the rules between settings, secrets kept out of reprs and error messages, and
the client SSL context built from PEM files (certificates made here with trustme)."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from aioproducer import ProducerConfig
from aioproducer.errors import ConfigError, FeatureNotAvailableError
from aioproducer.security import build_ssl_context
from aioproducer.security.tls import client_context

SECRET = "hunter2-Secret"
PLAIN_JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="KEY" password="{SECRET}";'


async def token() -> str:
    return "tok"


def build(config: dict[str, Any] | None = None, /, **settings: Any) -> ProducerConfig:
    return ProducerConfig.build({"bootstrap.servers": "h:9092", **(config or {})}, **settings)


def sasl(**settings: Any) -> ProducerConfig:
    base = {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"}
    base |= {"sasl_plain_username": "u", "sasl_plain_password": SECRET}
    return build(**(base | settings))


def test_confluent_cloud_style_java_config() -> None:
    cfg = build({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN_JAAS})
    assert (cfg.sasl_plain_username, cfg.sasl_plain_password) == ("KEY", SECRET)
    assert cfg.ssl_check_hostname is True and cfg.ssl_context is None
    assert SECRET not in repr(cfg) and "sasl_plain_password='***'" in repr(cfg)


def test_scram_jaas_with_single_quotes_and_escapes() -> None:
    jaas = r"org.apache.kafka.common.security.scram.ScramLoginModule required username='a\'b' password=bare;"
    cfg = build({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas})
    assert (cfg.sasl_plain_username, cfg.sasl_plain_password) == ("a'b", "bare")
    assert cfg.sasl_mechanism == "SCRAM-SHA-512"


def test_java_tls_keys_map_to_pem_settings() -> None:
    cfg = build(
        {
            "security.protocol": "SSL",
            "ssl.truststore.location": "/ca.pem",
            "ssl.truststore.type": "PEM",
            "ssl.keystore.location": "/client.pem",
            "ssl.keystore.type": "pem",
            "ssl.key.password": SECRET,
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert (cfg.ssl_cafile, cfg.ssl_certfile, cfg.ssl_password) == ("/ca.pem", "/client.pem", SECRET)
    assert cfg.ssl_check_hostname is False
    assert SECRET not in repr(cfg)


@pytest.mark.parametrize(
    ("config", "error", "match"),
    [
        ({"ssl.truststore.type": "JKS"}, FeatureNotAvailableError, "reads PEM files only"),
        ({"ssl.truststore.password": "x"}, FeatureNotAvailableError, "not supported by aioproducer yet"),
        ({"sasl.mechanism": "GSSAPI"}, FeatureNotAvailableError, "'GSSAPI' is not supported"),
        ({"sasl.mechanism": "CRAM"}, ConfigError, "sasl_mechanism must be one of"),
        ({"sasl.jaas.config": "com.example.Custom required;"}, FeatureNotAvailableError, "login module"),
        ({"sasl.jaas.config": "nonsense"}, ConfigError, "is not '<LoginModule class> required"),
    ],
)
def test_unsupported_or_invalid_java_security_keys(config: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        build(config)


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"ssl_cafile": "/ca.pem"}, r"ssl_cafile set, but security_protocol='PLAINTEXT' does not use TLS"),
        ({"ssl_check_hostname": False}, "ssl_check_hostname=False set, but"),
        ({"sasl_mechanism": "PLAIN"}, r"sasl_mechanism set, but security_protocol='PLAINTEXT' does not use SASL"),
        ({"security_protocol": "SASL_SSL"}, "needs sasl_mechanism"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"}, "needs sasl_plain_username and sasl_plain"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"}, "needs sasl_oauth_token_provider"),
        (
            {"security_protocol": "SSL", "ssl_context": ssl.create_default_context(), "ssl_cafile": "/x"},
            "ssl_context already holds the TLS settings: configure ssl_cafile on the context",
        ),
        ({"security_protocol": "SSL", "ssl_keyfile": "/k.pem"}, "set ssl_certfile too"),
        (
            {"security_protocol": "SSL", "ssl_context": ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)},
            "server-side context",
        ),
        ({"security_protocol": "SSL", "ssl_context": "yes"}, "must be an ssl.SSLContext"),
    ],
)
def test_contradicting_security_settings(settings: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build(**settings)


def test_oauthbearer_takes_a_provider_and_no_password() -> None:
    cfg = build(security_protocol="SASL_SSL", sasl_mechanism="oauthbearer", sasl_oauth_token_provider=token)
    assert cfg.sasl_mechanism == "OAUTHBEARER" and cfg.sasl_oauth_token_provider is token
    with pytest.raises(ConfigError, match="sasl_plain_password not used by sasl_mechanism='OAUTHBEARER'"):
        sasl(sasl_mechanism="OAUTHBEARER", sasl_plain_username=None, sasl_oauth_token_provider=token)


def test_secrets_never_appear_in_error_messages() -> None:
    messages = []
    attempts: list[Callable[[], object]] = [
        lambda: sasl(sasl_plain_password=1234567),  # wrong type: the value may still be the secret
        lambda: sasl(sasl_jaas_config=PLAIN_JAAS.replace(SECRET, "other")),  # conflicting duplicates
        lambda: build({"sasl.jaas.config": PLAIN_JAAS.replace("required", "mandatory")}),
        lambda: build(security_protocol="SSL", ssl_certfile="/c.pem", ssl_password=["hunter2-Secret"]),
        lambda: build(ssl_certfile="/c.pem", ssl_password=SECRET),
    ]
    for attempt in attempts:
        with pytest.raises(ConfigError) as caught:
            attempt()
        messages.append(str(caught.value))
    assert not [m for m in messages if SECRET in m or "1234567" in m or "other" in m], messages


# ---- the SSL context ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    path = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    client = ca.issue_cert("producer@example.com")
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(SECRET.encode()),
    )
    files = {"ca": path / "ca.pem", "cert": path / "client.pem", "key": path / "key.pem", "enc": path / "enc.pem"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    client.cert_chain_pems[0].write_to_path(str(files["cert"]))
    client.private_key_pem.write_to_path(str(files["key"]))
    files["enc"].write_bytes(encrypted)
    return files


def test_context_verifies_brokers_and_loads_the_client_certificate(pki: dict[str, Path]) -> None:
    context = build_ssl_context(
        cafile=str(pki["ca"]), certfile=str(pki["cert"]), keyfile=str(pki["enc"]), password=SECRET
    )
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname is True
    assert len(context.get_ca_certs()) == 1
    assert build_ssl_context(cafile=str(pki["ca"]), check_hostname=False).check_hostname is False


def test_an_encrypted_key_without_password_fails_instead_of_prompting(pki: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match="encrypted key needs the right ssl_password"):
        build_ssl_context(cafile=str(pki["ca"]), certfile=str(pki["cert"]), keyfile=str(pki["enc"]))


def test_a_wrong_key_password_is_a_config_error_that_does_not_echo_it(pki: dict[str, Path]) -> None:
    with pytest.raises(ConfigError) as caught:
        build_ssl_context(certfile=str(pki["cert"]), keyfile=str(pki["enc"]), password="wrong-" + SECRET)
    assert SECRET not in str(caught.value) and "client.pem" in str(caught.value)


def test_a_missing_cafile_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot load ssl_cafile '.*nope.pem'"):
        build_ssl_context(cafile=str(tmp_path / "nope.pem"))


def test_client_context_is_built_once_per_config(pki: dict[str, Path]) -> None:
    cfg = build(security_protocol="SSL", ssl_cafile=pki["ca"])
    assert cfg.ssl_cafile == str(pki["ca"])  # os.PathLike accepted
    first = client_context(cfg)
    assert first is not None and client_context(cfg) is first
    assert client_context(build()) is None
    own = ssl.create_default_context()
    assert client_context(build(security_protocol="SASL_SSL", ssl_context=own, **SASL_PLAIN)) is own


SASL_PLAIN = {"sasl_mechanism": "PLAIN", "sasl_plain_username": "u", "sasl_plain_password": "p"}
