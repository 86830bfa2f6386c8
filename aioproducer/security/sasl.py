"""SASL client mechanisms as small sans-I/O state machines (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER).

Each turns server bytes into the next client bytes; none touches a socket, the clock or asyncio. SCRAM's
cryptography is `scramp`'s. Reprs and error messages never contain a password or a token.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from inspect import isawaitable
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from aioproducer.errors import AuthenticationError, ConfigError

if TYPE_CHECKING:
    from aioproducer.config import ProducerConfig

__all__ = [
    "OAuthBearerClient",
    "OAuthBearerToken",
    "PlainClient",
    "SaslClient",
    "SaslCredentials",
    "ScramClient",
    "TokenProvider",
]

# RFC 7628 §3.1 / Java's OAuthBearerClientInitialResponse: extension keys are letters, values printable ASCII.
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
_TOKEN = re.compile(r"[\x21-\x7E]+")


@dataclass(frozen=True, repr=False)
class OAuthBearerToken:
    """What a token provider returns when it needs SASL extensions (KIP-342) besides the token itself.

    Confluent Cloud, for instance, wants `extensions={"logicalCluster": "lkc-...", "identityPoolId": "pool-..."}`.
    """

    token: str
    extensions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __repr__(self) -> str:
        return f"OAuthBearerToken(token='***', extensions={dict(self.extensions)!r})"


TokenProvider: TypeAlias = Callable[[], Awaitable["str | OAuthBearerToken"]]


class SaslClient(Protocol):
    """One authentication exchange: `first_message()`, then `receive(server_bytes)` until it returns None.

    `receive` returns the next client message, or None once the exchange is complete on the client's side; it
    raises AuthenticationError when the server's answer proves the exchange cannot succeed.
    """

    mechanism: str

    def first_message(self) -> bytes: ...

    def receive(self, server_bytes: bytes) -> bytes | None: ...


class PlainClient(SaslClient):
    """RFC 4616 PLAIN: one message, `authzid NUL username NUL password`, with an empty authzid as Java sends it."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\0" + username.encode() + b"\0" + password.encode()

    def __repr__(self) -> str:
        return "PlainClient(***)"

    def first_message(self) -> bytes:
        return self._message

    def receive(self, server_bytes: bytes) -> bytes | None:
        return None  # the server's verdict is the response's error code; PLAIN has no second round


class ScramClient(SaslClient):
    """RFC 5802 SCRAM via scramp: client-first, client-final, then the server's signature is verified.

    Kafka's ScramSaslClient sends no channel binding (gs2 header `n,,`), as here. scramp applies SASLprep to the
    username and password, which changes nothing for ASCII credentials.
    """

    def __init__(self, mechanism: str, username: str, password: str, *, nonce: str | None = None) -> None:
        if mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ConfigError(f"not a SCRAM mechanism: {mechanism!r}")
        self.mechanism = mechanism
        # Imported here: scramp (with asn1crypto) would add ~30 ms to every `import aioproducer`.
        import scramp  # type: ignore[import-untyped]  # scramp ships no type information

        self._scram_error: type[Exception] = scramp.ScramException
        try:
            self._client = scramp.ScramClient([mechanism], username, password, c_nonce=nonce)
        except scramp.ScramException as exc:  # e.g. characters SASLprep prohibits
            raise ConfigError(f"the SCRAM username or password cannot be used: {exc}") from None
        self._round = 0

    def __repr__(self) -> str:
        return f"ScramClient({self.mechanism}, ***)"

    def first_message(self) -> bytes:
        return str(self._client.get_client_first()).encode()

    def receive(self, server_bytes: bytes) -> bytes | None:
        self._round += 1
        try:
            text = server_bytes.decode()
            if self._round == 1:
                self._client.set_server_first(text)
                return str(self._client.get_client_final()).encode()
            if self._round == 2:
                self._client.set_server_final(text)
                return None
        except UnicodeDecodeError:
            raise AuthenticationError("SCRAM exchange failed: the server's message is not UTF-8") from None
        except self._scram_error as exc:  # scramp's messages describe the protocol step, never the credentials
            raise AuthenticationError(f"SCRAM exchange failed: {exc}") from None
        raise AuthenticationError("SCRAM exchange failed: the server kept sending challenges after the final one")


class OAuthBearerClient(SaslClient):
    """RFC 7628 OAUTHBEARER with Kafka's framing (Java's OAuthBearerClientInitialResponse), KIP-255/KIP-342.

    On failure the server first sends a JSON error status; RFC 7628 §3.2.3 has the client answer it with a lone
    0x01 so the server can end the exchange with its error, whose status is kept in `server_error`.
    """

    mechanism = "OAUTHBEARER"

    def __init__(self, token: str | OAuthBearerToken) -> None:
        if isinstance(token, str):
            token = OAuthBearerToken(token)
        if not isinstance(token, OAuthBearerToken) or not isinstance(token.token, str):
            raise AuthenticationError("the token provider must return a str or an OAuthBearerToken")
        if not _TOKEN.fullmatch(token.token):
            raise AuthenticationError("the token provider returned an empty token or one with invalid characters")
        for key, value in token.extensions.items():
            if key == "auth" or not _EXTENSION_KEY.fullmatch(key) or not _EXTENSION_VALUE.fullmatch(value):
                raise AuthenticationError(f"invalid OAUTHBEARER extension {key!r}: letters only, 'auth' reserved")
        extensions = "".join(f"\x01{key}={value}" for key, value in token.extensions.items())
        self._message = f"n,,\x01auth=Bearer {token.token}{extensions}\x01\x01".encode()
        self._answered_error = False
        self.server_error: str | None = None

    def __repr__(self) -> str:
        return "OAuthBearerClient(***)"

    def first_message(self) -> bytes:
        return self._message

    def receive(self, server_bytes: bytes) -> bytes | None:
        if not server_bytes or self._answered_error:
            return None
        self.server_error = server_bytes.decode(errors="replace")
        self._answered_error = True
        return b"\x01"


@dataclass(frozen=True, repr=False)
class SaslCredentials:
    """A mechanism and what it needs; `new_client()` starts one exchange (at connect, and at each KIP-368
    re-authentication, when OAUTHBEARER asks its provider for a fresh token)."""

    mechanism: str
    username: str | None = None
    password: str | None = None
    token_provider: TokenProvider | None = None

    def __repr__(self) -> str:
        user = f", username={self.username!r}" if self.username is not None else ""
        return f"SaslCredentials({self.mechanism}{user}, ***)"

    @classmethod
    def from_config(cls, config: ProducerConfig) -> SaslCredentials | None:
        """The credentials of a SASL_* config (validated by ProducerConfig), else None."""
        if config.sasl_mechanism is None or not config.security_protocol.startswith("SASL_"):
            return None
        return cls(
            config.sasl_mechanism,
            config.sasl_plain_username,
            None if config.sasl_plain_password is None else config.sasl_plain_password.reveal(),
            config.sasl_oauth_token_provider,
        )

    async def new_client(self) -> SaslClient:
        if self.mechanism == "OAUTHBEARER":
            return OAuthBearerClient(await self._token())
        if self.username is None or self.password is None:
            raise ConfigError(f"SASL {self.mechanism} needs sasl_plain_username and sasl_plain_password")
        if self.mechanism == "PLAIN":
            return PlainClient(self.username, self.password)
        return ScramClient(self.mechanism, self.username, self.password)

    async def _token(self) -> str | OAuthBearerToken:
        if self.token_provider is None:
            raise ConfigError("SASL OAUTHBEARER needs sasl_oauth_token_provider")
        pending: Any = self.token_provider()
        if not isawaitable(pending):
            raise ConfigError("sasl_oauth_token_provider must be an async function (it returned a non-awaitable)")
        token: str | OAuthBearerToken = await pending
        return token
