"""OAUTHBEARER tokens from an OAuth 2 / OIDC token endpoint with the client-credentials grant (KIP-768), set up from
string settings as Java's OAuthBearerLoginCallbackHandler is: the settings, the token request, the client-side check
of the JWT, and when to fetch a fresh one. The SASL exchange itself stays in `sasl.py`.

No message or repr here contains the client secret or a token.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import random
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeGuard

from aioproducer.errors import AuthenticationError, ConfigError, FeatureNotAvailableError
from aioproducer.security.sasl import OAuthBearerToken

__all__ = [
    "LOGIN_KEYS",
    "AccessToken",
    "ClientCredentialsTokenProvider",
    "OidcLogin",
    "login_from_settings",
    "parse_token_response",
    "refresh_at_ms",
    "token_request",
]

# Java's SaslConfigs names (Kafka 4.1): KIP-768's login settings, KIP-1139's client credentials and scope.
URL_KEY = "sasl.oauthbearer.token.endpoint.url"
CLIENT_ID_KEY = "sasl.oauthbearer.client.credentials.client.id"
CLIENT_SECRET_KEY = "sasl.oauthbearer.client.credentials.client.secret"
HANDLER_KEY = "sasl.login.callback.handler.class"
URLENCODE_KEY = "sasl.oauthbearer.header.urlencode"
_TEXT_KEYS = {
    URL_KEY: "token_endpoint_url",
    CLIENT_ID_KEY: "client_id",
    CLIENT_SECRET_KEY: "client_secret",
    "sasl.oauthbearer.scope": "scope",
    "sasl.oauthbearer.sub.claim.name": "sub_claim_name",
    "sasl.oauthbearer.scope.claim.name": "scope_claim_name",
}
# key → (field, lowest, highest), ranges from Java's SaslConfigs. Java leaves both timeouts unset (no limit): we
# bound them at 10 s so that an endpoint that never answers cannot hold a connection attempt forever.
_NUMBER_KEYS: dict[str, tuple[str, float, float]] = {
    "sasl.login.connect.timeout.ms": ("connect_timeout_ms", 1, 2**31 - 1),
    "sasl.login.read.timeout.ms": ("read_timeout_ms", 1, 2**31 - 1),
    "sasl.login.retry.backoff.ms": ("retry_backoff_ms", 0, 2**63 - 1),
    "sasl.login.retry.backoff.max.ms": ("retry_backoff_max_ms", 0, 2**63 - 1),
    "sasl.login.refresh.min.period.seconds": ("refresh_min_period_s", 0, 900),
    "sasl.login.refresh.buffer.seconds": ("refresh_buffer_s", 0, 3600),
    "sasl.login.refresh.window.factor": ("refresh_window_factor", 0.5, 1.0),
    "sasl.login.refresh.window.jitter": ("refresh_window_jitter", 0.0, 0.25),
}
LOGIN_KEYS = frozenset([*_TEXT_KEYS, *_NUMBER_KEYS, HANDLER_KEY, URLENCODE_KEY])
# OAuthBearerLoginModule's JAAS options (KIP-768); KIP-1139 deprecates the first three for the settings above, which
# win when both are given (Java's ConfigOrJaas). `ssl.truststore.location` trusts a PEM CA for an https endpoint.
_JAAS_OPTIONS = {"clientId": CLIENT_ID_KEY, "clientSecret": CLIENT_SECRET_KEY, "scope": "sasl.oauthbearer.scope"}
_JAAS_CAFILE = "ssl.truststore.location"
_JAAS_EXTENSION = "extension_"
_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",  # before Kafka 3.4
)
# Java's HttpAccessTokenRetriever.UNRETRYABLE_HTTP_CODES; any other failure is retried until the backoff maximum.
_UNRETRYABLE_HTTP = frozenset({400, 401, 402, 403, 404, 405, 406, 407, 409, 410, 411, 412, 413, 414, 415, 501, 505})
_MAX_RESPONSE_BYTES = 1 << 20
_MAX_DETAIL_CHARS = 300
_EXPIRED_RETRY_MS = 10_000  # ExpiringCredentialRefreshingLogin.DELAY_SECONDS_BEFORE_NEXT_RETRY_WHEN_RELOGIN_FAILS


@dataclass(frozen=True, repr=False)
class OidcLogin:
    """The checked settings of one client-credentials login (defaults: Kafka 4.1's, except the two timeouts)."""

    token_endpoint_url: str
    client_id: str
    client_secret: str
    scope: str | None = None
    extensions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    cafile: str | None = None
    sub_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    header_urlencode: bool = False
    connect_timeout_ms: int = 10_000
    read_timeout_ms: int = 10_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000
    refresh_window_factor: float = 0.8
    refresh_window_jitter: float = 0.05
    refresh_min_period_s: int = 60
    refresh_buffer_s: int = 300

    def __repr__(self) -> str:
        return f"OidcLogin(url={self.token_endpoint_url!r}, client_id={self.client_id!r}, client_secret='***')"


@dataclass(frozen=True, repr=False)
class AccessToken:
    """A token from the endpoint with the claims the client checks (Java's ClientJwtValidator)."""

    value: str
    expires_ms: int
    subject: str
    issued_ms: int | None = None

    def __repr__(self) -> str:
        return f"AccessToken(subject={self.subject!r}, expires_ms={self.expires_ms}, value='***')"


# ---- settings ----------------------------------------------------------------------------------------------------


def login_from_settings(settings: Mapping[str, Any], jaas_options: Mapping[str, str]) -> OidcLogin | None:
    """The login described by Java-named `settings` (keys in LOGIN_KEYS) and OAuthBearerLoginModule's JAAS options,
    or None when there are neither. Raises ConfigError, or FeatureNotAvailableError for another login handler."""
    if not settings and not jaas_options:
        return None
    handler = settings.get(HANDLER_KEY)
    if handler is not None and str(handler).strip() not in _HANDLERS:
        raise FeatureNotAvailableError(
            f"{HANDLER_KEY}={handler!r} is not supported: the built-in login is Kafka's {_HANDLERS[0]} "
            "(client credentials); for any other login pass an async sasl_oauth_token_provider"
        )
    text = _jaas_settings(jaas_options)
    text.update({key: value for key, value in settings.items() if key in _TEXT_KEYS})
    if not text.get(URL_KEY):
        named = sorted([*settings, *(f"the JAAS option {name}" for name in jaas_options)])
        raise ConfigError(f"{', '.join(named)} given without {URL_KEY}: set the token endpoint's URL")
    values: dict[str, Any] = {name: _text(key, text[key]) for key, name in _TEXT_KEYS.items() if key in text}
    values["token_endpoint_url"] = _check_url(values["token_endpoint_url"])
    for key, (name, lowest, highest) in _NUMBER_KEYS.items():
        if key in settings:
            values[name] = _number(key, settings[key], float if "window" in key else int, lowest, highest)
    if URLENCODE_KEY in settings:
        values["header_urlencode"] = _boolean(URLENCODE_KEY, settings[URLENCODE_KEY])
    values["extensions"] = MappingProxyType(
        {name[len(_JAAS_EXTENSION) :]: v for name, v in jaas_options.items() if name.startswith(_JAAS_EXTENSION)}
    )
    values["cafile"] = jaas_options.get(_JAAS_CAFILE)
    values.setdefault("client_id", "")
    values.setdefault("client_secret", "")
    login = OidcLogin(**values)
    if login.retry_backoff_max_ms < login.retry_backoff_ms:
        raise ConfigError("sasl.login.retry.backoff.max.ms must be at least sasl.login.retry.backoff.ms")
    if not (login.client_id.strip() and login.client_secret.strip()):
        # Java's ClientCredentialsRequestFormatter rejects a blank id or secret too.
        raise ConfigError(
            f"the client-credentials login needs {CLIENT_ID_KEY} and {CLIENT_SECRET_KEY} "
            "(or the JAAS options clientId and clientSecret), neither blank"
        )
    return login


def _jaas_settings(options: Mapping[str, str]) -> dict[str, str]:
    known = (*_JAAS_OPTIONS, _JAAS_CAFILE)
    unknown = sorted(name for name in options if name not in known and not name.startswith(_JAAS_EXTENSION))
    if unknown:
        raise FeatureNotAvailableError(
            f"sasl.jaas.config: the OAuthBearerLoginModule option(s) {unknown} are not supported; aioproducer reads "
            f"clientId, clientSecret, scope, extension_<name> and {_JAAS_CAFILE} (a PEM file)"
        )
    return {_JAAS_OPTIONS[name]: value for name, value in options.items() if name in _JAAS_OPTIONS}


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{key} must be a str, got a {type(value).__name__}")  # never the value: may be a secret
    return value.strip()


def _check_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{URL_KEY} must be an http:// or https:// URL, got {url!r}")
    return url


def _number(key: str, value: Any, kind: type[float], lowest: float, highest: float) -> Any:
    try:
        number = kind(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not lowest <= number <= highest:
        raise ConfigError(f"{key} must be in [{lowest}, {highest}], got {value!r}")
    return number


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{key} must be true or false, got {value!r}")


# ---- the exchange, without I/O -----------------------------------------------------------------------------------


def token_request(login: OidcLogin) -> tuple[dict[str, str], bytes]:
    """The headers and form body of the token request (Java's ClientCredentialsRequestFormatter, RFC 6749 §4.4)."""
    quote = urllib.parse.quote_plus if login.header_urlencode else str
    client_id, secret = quote(login.client_id.strip()), quote(login.client_secret.strip())
    # RFC 7617 Basic credentials, standard (not URL-safe) base64 (KAFKA-14496).
    basic = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    body = "grant_type=client_credentials"
    if login.scope and login.scope.strip():
        body += "&scope=" + urllib.parse.quote_plus(login.scope.strip())
    headers = {
        "Accept": "application/json",
        "Authorization": f"Basic {basic}",
        "Cache-Control": "no-cache",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    return headers, body.encode()


def parse_token_response(body: bytes, login: OidcLogin) -> AccessToken:
    """The access token of a token endpoint's JSON answer, checked as Java's ClientJwtValidator checks it: a JWT
    whose payload has a numeric `exp`, a non-blank subject claim, and optional numeric `iat` and scope strings."""
    try:
        document = json.loads(body)
    except ValueError:
        raise AuthenticationError("the token endpoint's answer is not JSON") from None
    token = document.get("access_token") if isinstance(document, dict) else None
    if not isinstance(token, str) or not token.strip():
        raise AuthenticationError("the token endpoint's answer has no access_token")
    token = token.strip()
    parts = token.split(".")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise AuthenticationError("the access token is not a JWT (header.payload.signature)")
    claims = _jwt_payload(parts[1])
    exp, iat, subject = claims.get("exp"), claims.get("iat"), claims.get(login.sub_claim_name)
    if not _is_number(exp) or exp < 0:
        raise AuthenticationError("the access token has no valid 'exp' claim")
    if not isinstance(subject, str) or not subject.strip():
        raise AuthenticationError(f"the access token has no valid {login.sub_claim_name!r} claim")
    issued_ms = None
    if iat is not None:
        if not _is_number(iat) or iat < 0:
            raise AuthenticationError("the access token's 'iat' claim is not a non-negative number")
        issued_ms = int(iat * 1000)
    scopes = claims.get(login.scope_claim_name)
    scope_list = [scopes] if isinstance(scopes, str) else scopes if isinstance(scopes, list) else []
    if any(not isinstance(s, str) or not s.strip() for s in scope_list):
        raise AuthenticationError(f"the access token's {login.scope_claim_name!r} claim holds a blank scope")
    return AccessToken(token, int(exp * 1000), subject.strip(), issued_ms)


def _jwt_payload(segment: str) -> dict[str, Any]:
    try:
        payload = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (binascii.Error, ValueError):
        raise AuthenticationError("the access token's payload is not base64url-encoded JSON") from None
    if not isinstance(payload, dict):
        raise AuthenticationError("the access token's payload is not a JSON object")
    return payload


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def refresh_at_ms(now_ms: int, start_ms: int | None, expires_ms: int, login: OidcLogin, draw: float) -> int:
    """When to fetch the next token (Java's ExpiringCredentialRefreshingLogin.refreshMs): at the window factor plus
    `draw` (0..1) times the jitter of the token's lifetime from `start_ms` (its `iat`, else now), but no sooner
    than the minimum period and no later than the buffer before expiry; when the time left cannot hold both, at
    that share of the time left. A token that arrives expired is fetched again after 10 s."""
    if expires_ms <= now_ms:
        return now_ms + _EXPIRED_RETRY_MS
    share = login.refresh_window_factor + login.refresh_window_jitter * draw
    min_period_ms, buffer_ms = login.refresh_min_period_s * 1000, login.refresh_buffer_s * 1000
    if now_ms + min_period_ms + buffer_ms > expires_ms:
        return now_ms + int((expires_ms - now_ms) * share)
    start = now_ms if start_ms is None else start_ms
    proposed = start + int((expires_ms - start) * share)
    if proposed > expires_ms - buffer_ms:
        return expires_ms - buffer_ms
    return max(proposed, now_ms + min_period_ms)


# ---- the provider ------------------------------------------------------------------------------------------------


class _Unretryable(Exception):
    pass


class ClientCredentialsTokenProvider:
    """`sasl_oauth_token_provider` for a client-credentials login: fetches a token, keeps it until its refresh
    time, and gives the same token to every connection until then (one fetch at a time, whatever the event loop).

    A failed fetch raises AuthenticationError (a connection attempt then fails, and is retried as any other).
    """

    def __init__(
        self,
        login: OidcLogin,
        *,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        post: Callable[[OidcLogin, dict[str, str], bytes], bytes] | None = None,
    ) -> None:
        self.login = login
        self._clock_ms = clock_ms
        self._post = post or _http_post
        self._lock = threading.Lock()
        self._token: OAuthBearerToken | None = None
        self._refresh_ms = 0
        self.fetches = 0

    def __repr__(self) -> str:
        return f"ClientCredentialsTokenProvider({self.login!r})"

    async def __call__(self) -> OAuthBearerToken:
        token = self._token
        if token is not None and self._clock_ms() < self._refresh_ms:
            return token
        # Blocking HTTP (and its backoff sleeps) in a worker thread; the lock makes concurrent callers share one
        # fetch. Cancelling the caller does not stop a fetch under way: its token is kept for the next caller.
        return await asyncio.to_thread(self.token_now)

    def token_now(self) -> OAuthBearerToken:
        """The current token, fetching a fresh one first when it is due (blocking)."""
        with self._lock:
            if self._token is None or self._clock_ms() >= self._refresh_ms:
                access = self._fetch()
                now = self._clock_ms()
                self._token = OAuthBearerToken(access.value, self.login.extensions)
                self._refresh_ms = refresh_at_ms(now, access.issued_ms, access.expires_ms, self.login, random.random())
            return self._token

    def _fetch(self) -> AccessToken:
        login = self.login
        headers, body = token_request(login)
        deadline = time.monotonic() + login.retry_backoff_max_ms / 1000
        attempt, first_error = 0, ""
        # Java's Retry: exponential backoff from retry_backoff_ms until the maximum has passed; an answer that is
        # not a valid token is not retried (HttpAccessTokenRetriever parses after its retries).
        while True:
            attempt += 1
            self.fetches += 1
            try:
                return parse_token_response(self._post(login, headers, body), login)
            except _Unretryable as exc:
                first_error = first_error or str(exc)
                break
            except OSError as exc:
                first_error = first_error or str(exc)
            wait = min(login.retry_backoff_ms / 1000 * 2 ** (attempt - 1), deadline - time.monotonic())
            if wait <= 0:
                break
            time.sleep(wait)
        raise AuthenticationError(
            f"no OAUTHBEARER token from {login.token_endpoint_url} after {attempt} attempt(s): {first_error}"
        )


def _http_post(login: OidcLogin, headers: dict[str, str], body: bytes) -> bytes:
    """POST the token request: the body of a 200/201 answer, else _Unretryable or OSError (retried)."""
    # Imported here: urllib.request (with http.client and email) would add ~20 ms to every `import aioproducer`.
    import urllib.error
    import urllib.request

    class NoRedirects(urllib.request.HTTPRedirectHandler):
        # A redirect would carry the client's Basic credentials wherever it points: it is an error instead.
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    handlers: list[Any] = [NoRedirects()]
    if login.token_endpoint_url.startswith("https"):
        handlers.append(urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=login.cafile)))
    request = urllib.request.Request(login.token_endpoint_url, data=body, headers=headers, method="POST")
    # urllib has one socket timeout for connecting and reading: the larger of the two settings bounds both.
    timeout = max(login.connect_timeout_ms, login.read_timeout_ms) / 1000
    try:
        with urllib.request.build_opener(*handlers).open(request, timeout=timeout) as response:
            data: bytes = response.read(_MAX_RESPONSE_BYTES)
            status = response.status
    except urllib.error.HTTPError as exc:
        message = f"HTTP {exc.code} from the token endpoint{_error_detail(exc.read(_MAX_RESPONSE_BYTES))}"
        if exc.code in _UNRETRYABLE_HTTP or 300 <= exc.code < 400:
            raise _Unretryable(message) from None
        raise OSError(message) from None
    except urllib.error.URLError as exc:
        raise OSError(f"the token endpoint is unreachable: {exc.reason}") from None
    except ssl.SSLError as exc:
        raise OSError(f"TLS with the token endpoint failed: {exc}") from None
    if status not in (200, 201):
        raise OSError(f"HTTP {status} from the token endpoint")
    return data


def _error_detail(body: bytes) -> str:
    # RFC 6749 §5.2 error answers name the problem (`invalid_client`); Okta's use errorCode/errorSummary.
    try:
        document = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(document, dict):
        return ""
    for code, text in (("error", "error_description"), ("errorCode", "errorSummary")):
        if code in document:
            return f": {str(document[code])[:_MAX_DETAIL_CHARS]} {str(document.get(text, ''))[:_MAX_DETAIL_CHARS]}"
    return ""
