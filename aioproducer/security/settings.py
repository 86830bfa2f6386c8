"""Parsing and cross-field rules of the TLS and SASL settings, for `aioproducer.config.ProducerConfig`.

Pure: reads no files (certificates are loaded when a connection opens, in `tls.py`) and imports only
`aioproducer.errors`. No message raised here ever contains a password, a key password or a JAAS string.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from aioproducer.errors import ConfigError, FeatureNotAvailableError

if TYPE_CHECKING:
    from aioproducer.config_values import Secret

__all__ = [
    "JAAS_KEYS",
    "SASL_MECHANISMS",
    "SASL_PROTOCOLS",
    "STORE_TYPE_KEYS",
    "TLS_PROTOCOLS",
    "SecuritySettings",
    "check_security",
    "check_store_type",
    "jaas_credentials",
    "parse_jaas",
    "parse_check_hostname",
    "parse_mechanism",
    "parse_path",
    "parse_ssl_context",
    "parse_token_provider",
]

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
JAAS_KEYS = ("sasl.jaas.config", "sasl_jaas_config")
STORE_TYPE_KEYS = ("ssl.truststore.type", "ssl.keystore.type")

_PEM_HINT = "aioproducer reads PEM files only: convert JKS/PKCS12 stores with keytool/openssl"
# Java's JaasConfig: `<LoginModule class> <flag> key=value ...;`, values quoted with " or ' (backslash escapes).
_JAAS = re.compile(r"\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)(?P<options>.*?);?\s*")
_JAAS_OPTION = re.compile(
    r"""\s*(?P<key>[\w.-]+)\s*=\s*(?:"(?P<dq>(?:[^"\\]|\\.)*)"|'(?P<sq>(?:[^'\\]|\\.)*)'|(?P<bare>[^\s;"']+))"""
)
_JAAS_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": "OAUTHBEARER",
}


class SecuritySettings(Protocol):
    """The security fields of ProducerConfig that `check_security` reads."""

    @property
    def security_protocol(self) -> str: ...
    @property
    def ssl_context(self) -> ssl.SSLContext | None: ...
    @property
    def ssl_cafile(self) -> str | None: ...
    @property
    def ssl_certfile(self) -> str | None: ...
    @property
    def ssl_keyfile(self) -> str | None: ...
    @property
    def ssl_password(self) -> Secret | None: ...
    @property
    def ssl_check_hostname(self) -> bool: ...
    @property
    def sasl_mechanism(self) -> str | None: ...
    @property
    def sasl_plain_username(self) -> str | None: ...
    @property
    def sasl_plain_password(self) -> Secret | None: ...
    @property
    def sasl_oauth_token_provider(self) -> Callable[[], Any] | None: ...


# ---- parsers: (setting name, value as given) → normalized value, or ConfigError ----------------------------


def parse_ssl_context(name: str, value: Any) -> ssl.SSLContext | None:
    if value is None:
        return None
    if not isinstance(value, ssl.SSLContext):
        raise ConfigError(f"{name} must be an ssl.SSLContext (e.g. ssl.create_default_context()), got {value!r}")
    if value.protocol == ssl.PROTOCOL_TLS_SERVER:
        raise ConfigError(f"{name} is a server-side context: build it with ssl.create_default_context()")
    return value


def parse_path(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name} must be a file path (str or os.PathLike), got {value!r}")
    return value


def parse_check_hostname(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        # Java's ssl.endpoint.identification.algorithm: "https" (the default since Kafka 2.0, KIP-294) verifies
        # the broker's host name, an empty value turns that off.
        spelled = value.strip().lower()
        if spelled in ("https", "true"):
            return True
        if spelled in ("", "none", "false"):
            return False
    raise ConfigError(f"{name} must be True or False (or Java's 'https' / ''), got {value!r}")


def parse_mechanism(name: str, value: Any) -> str | None:
    if value is None:
        return None
    spelled = value.strip().upper() if isinstance(value, str) else value
    if spelled in SASL_MECHANISMS:
        return str(spelled)
    if spelled in ("GSSAPI", "AWS_MSK_IAM"):
        raise FeatureNotAvailableError(
            f"{name}={value!r} is not supported; aioproducer offers {', '.join(SASL_MECHANISMS)}"
        )
    raise ConfigError(f"{name} must be one of {', '.join(map(repr, SASL_MECHANISMS))}, got {value!r}")


def parse_token_provider(name: str, value: Any) -> Callable[[], Any] | None:
    if value is None or (callable(value) and not isinstance(value, type)):
        return value
    raise ConfigError(f"{name} must be an async function taking no arguments and returning the token, got {value!r}")


def check_store_type(key: str, value: Any) -> None:
    """`ssl.truststore.type` / `ssl.keystore.type`: accepted when PEM, the only format Python's ssl module reads."""
    if not isinstance(value, str) or value.strip().upper() != "PEM":
        raise FeatureNotAvailableError(f"{key}={value!r} is not supported: {_PEM_HINT}, then set {key}=PEM")


def parse_jaas(key: str, value: Any) -> tuple[str, dict[str, str]]:
    """The login module of a Java `sasl.jaas.config` string ("PLAIN", "SCRAM" or "OAUTHBEARER") and its options.

    Error messages name the problem, never the string itself (it holds the password).
    """
    if not isinstance(value, str):
        raise ConfigError(f"{key} must be a str, got a {type(value).__name__}")
    match = _JAAS.fullmatch(value)
    if match is None:
        raise ConfigError(f"{key} is not '<LoginModule class> required key=\"value\" ...;'")
    kind = _JAAS_MODULES.get(match["module"])
    if kind is None:
        raise FeatureNotAvailableError(f"{key}: the login module {match['module']!r} is not supported")
    return kind, _jaas_options(key, match["options"])


def jaas_credentials(key: str, kind: str, options: dict[str, str]) -> dict[str, str]:
    """Settings taken from a parsed `sasl.jaas.config`: username and password of the Plain/Scram modules.

    OAuthBearerLoginModule's options describe a token login instead: `oidc.login_from_settings` reads them.
    """
    if kind == "OAUTHBEARER":
        return {}
    if options.get("tokenauth", "false").lower() == "true":
        raise FeatureNotAvailableError(f"{key}: delegation tokens (tokenauth=true) are not supported")
    missing = [option for option in ("username", "password") if option not in options]
    if missing:
        raise ConfigError(f"{key} lacks {' and '.join(missing)}")
    return {"sasl_plain_username": options["username"], "sasl_plain_password": options["password"]}


def _jaas_options(key: str, text: str) -> dict[str, str]:
    options: dict[str, str] = {}
    position = 0
    while text[position:].strip():
        match = _JAAS_OPTION.match(text, position)
        if match is None:
            raise ConfigError(f'{key}: cannot read the options after the login module; quote values with "..."')
        quoted = match["dq"] if match["dq"] is not None else match["sq"]
        options[match["key"]] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else match["bare"]
        position = match.end()
    return options


# ---- rules between settings ----------------------------------------------------------------------------------


def check_security(cfg: SecuritySettings) -> None:
    """Raise ConfigError for TLS or SASL settings that contradict `security_protocol` or each other."""
    _check_tls(cfg)
    _check_sasl(cfg)


def _check_tls(cfg: SecuritySettings) -> None:
    files = {"ssl_cafile": cfg.ssl_cafile, "ssl_certfile": cfg.ssl_certfile, "ssl_keyfile": cfg.ssl_keyfile}
    given = [name for name, value in files.items() if value is not None]
    given += ["ssl_password"] if cfg.ssl_password is not None else []
    context_given = ["ssl_context"] if cfg.ssl_context is not None else []
    unchecked = [] if cfg.ssl_check_hostname else ["ssl_check_hostname=False"]
    if cfg.security_protocol not in TLS_PROTOCOLS and (given or context_given or unchecked):
        raise ConfigError(
            f"{', '.join(context_given + given + unchecked)} set, but security_protocol="
            f"{cfg.security_protocol!r} does not use TLS: use 'SSL' or 'SASL_SSL', or remove them"
        )
    if context_given and (given or unchecked):
        raise ConfigError(
            f"ssl_context already holds the TLS settings: configure {', '.join(given + unchecked)} on the context "
            "itself, or drop ssl_context"
        )
    if cfg.ssl_certfile is None and (cfg.ssl_keyfile is not None or cfg.ssl_password is not None):
        raise ConfigError("ssl_keyfile and ssl_password belong to a client certificate: set ssl_certfile too")


def _check_sasl(cfg: SecuritySettings) -> None:
    credentials = {
        "sasl_plain_username": cfg.sasl_plain_username,
        "sasl_plain_password": cfg.sasl_plain_password,
        "sasl_oauth_token_provider": cfg.sasl_oauth_token_provider,
    }
    given = [name for name, value in credentials.items() if value is not None]
    mechanism = cfg.sasl_mechanism
    if cfg.security_protocol not in SASL_PROTOCOLS:
        if mechanism is not None or given:
            named = (["sasl_mechanism"] if mechanism is not None else []) + given
            raise ConfigError(
                f"{', '.join(named)} set, but security_protocol={cfg.security_protocol!r} does not use SASL: use "
                "'SASL_SSL' (or 'SASL_PLAINTEXT'), or remove them"
            )
        return
    if mechanism is None:
        raise ConfigError(
            f"security_protocol={cfg.security_protocol!r} needs sasl_mechanism: one of {', '.join(SASL_MECHANISMS)}"
        )
    needed = (
        ["sasl_oauth_token_provider"] if mechanism == "OAUTHBEARER" else ["sasl_plain_username", "sasl_plain_password"]
    )
    missing = [name for name in needed if credentials[name] is None]
    if missing:
        raise ConfigError(f"sasl_mechanism={mechanism!r} needs {' and '.join(missing)}")
    unused = [name for name in given if name not in needed]
    if unused:
        raise ConfigError(f"{', '.join(unused)} not used by sasl_mechanism={mechanism!r}: remove it")
