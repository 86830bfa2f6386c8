"""`ProducerConfig`: the producer's settings with Java's names (dots → underscores), defaults and validation rules.

Parses and validates only (each value's parser in `config_values`, security settings in `security.settings`, codec
levels in `compression`); no I/O.
"""

from __future__ import annotations

import dataclasses
import difflib
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from aioproducer.config_values import (
    COMPRESSION_LEVELS,
    PartitionerLike,
    Secret,
    level_allowed,
    levels_text,
    parse_acks,
    parse_bool,
    parse_bootstrap,
    parse_choice,
    parse_client_id,
    parse_interceptors,
    parse_level,
    parse_optional_bool,
    parse_optional_int,
    parse_partitioner,
    parse_secret,
    parse_serializer,
    parse_text,
    parse_transactional_id,
    split_address,
    to_int,
)
from aioproducer.errors import ConfigError, FeatureNotAvailableError
from aioproducer.security import oidc as _oidc
from aioproducer.security import settings as _security
from aioproducer.security.sasl import SaslCredentials
from aioproducer.serializers import Serializer
from aioproducer.settings import ProducerSettings

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from 3.11; only type checkers read it

__all__ = ["COMPRESSION_LEVELS", "PartitionerLike", "ProducerConfig", "Secret", "SerializerSpec"]


SerializerSpec: TypeAlias = "Literal['bytes', 'str', 'json'] | Serializer | None"

_I32 = 2**31 - 1  # Java int settings
_I64 = 2**63 - 1  # Java long settings

_LEVEL_KEYS = {
    key: codec for codec in COMPRESSION_LEVELS for key in (f"compression.{codec}.level", f"compression_{codec}_level")
}

_BOOLS = ("partitioner_ignore_keys", "partitioner_adaptive_partitioning_enable", "allow_auto_create_topics")
_COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Java producer settings aioproducer does not implement: naming one is a missing feature, not a typo.
_UNSUPPORTED_JAVA = frozenset(
    "client.dns.lookup send.buffer.bytes receive.buffer.bytes metric.reporters "  # noqa: SIM905
    "metrics.num.samples metrics.recording.level metrics.sample.window.ms enable.metrics.push "
    "transaction.two.phase.commit.enable security.providers metadata.recovery.strategy "
    "metadata.recovery.rebootstrap.trigger.ms config.providers".split()
)

# librdkafka's names (confluent-kafka's configs) that the Java producer spells otherwise, or lacks: what to write here.
LIBRDKAFKA_EQUIVALENTS: Mapping[str, str] = {
    "queue.buffering.max.ms": "linger_ms (linger.ms), in ms as well",
    "queue.buffering.max.kbytes": "buffer_memory (buffer.memory), in bytes (the kbytes times 1024)",
    "queue.buffering.max.messages": "none: buffer_memory (buffer.memory) bounds the buffer in bytes, not records",
    "message.max.bytes": "max_request_size (max.request.size): the largest request, so the largest record batch",
    "batch.num.messages": "batch_size (batch.size), in bytes (a batch is ready when that full)",
    "compression.codec": "compression_type (compression.type)",
    "message.timeout.ms": "delivery_timeout_ms (delivery.timeout.ms)",
    "socket.timeout.ms": "request_timeout_ms (request.timeout.ms)",
    "message.send.max.retries": "retries",
    "topic.metadata.refresh.interval.ms": "metadata_max_age_ms (metadata.max.age.ms)",
    "metadata.broker.list": "bootstrap_servers (bootstrap.servers)",
    "sasl.mechanisms": "sasl_mechanism (sasl.mechanism)",
    "sasl.username": "sasl_plain_username, or sasl.jaas.config",
    "sasl.password": "sasl_plain_password, or sasl.jaas.config",
    "ssl.ca.location": "ssl_cafile (ssl.truststore.location, a PEM file)",
    "ssl.certificate.location": "ssl_certfile (ssl.keystore.location, a PEM file)",
    "ssl.key.location": "ssl_keyfile",
    "enable.ssl.certificate.verification": "ssl_context (an ssl.SSLContext of your own) to verify otherwise",
    "statistics.interval.ms": "none: read producer.metrics() when you want the numbers (Java's metric names)",
    "sticky.partitioning.linger.ms": "none: keyless records stick to a partition until its batch is full (KIP-794)",
    "dr_cb": "none: await the Delivery that enqueue returns, or add_done_callback on it",
    "dr_msg_cb": "none: await the Delivery that enqueue returns, or add_done_callback on it",
    "on_delivery": "none: await the Delivery that enqueue returns, or add_done_callback on it",
    "error_cb": "none: errors are raised or set on each record's Delivery; health() and the logs show the rest",
}

# batch_max_size's default bound: 16x Java's batch.size. Compressed 1 KB records cost about a quarter less CPU per
# record in batches of this size than in 16 KiB ones, and 1 MiB batches gained little more (tests/benchmarks/NOTES.md).
_GROWN_BATCH_DEFAULT = 256 * 1024
# Compressed batches grow further, as librdkafka's (batch.size 1 MB): the codec's work, the request's share and the
# broker's work per batch fall with their size, and the compiled pipeline compresses them beside the event loop
# (where it cannot, the sender still bounds their growth by what compresses in ~1 ms on the loop).
_GROWN_COMPRESSED_BATCH_DEFAULT = 1024 * 1024
# What a Produce request holds besides its batch (headers, topic and partition framing): a grown batch still fits
# max_request_size.
_REQUEST_FRAMING_BYTES = 1024


def _int(default: int, lowest: int = 0) -> int:
    """A setting Java types `int`; (lowest, highest) from Java's ConfigDef (ProducerConfig.CONFIG, Kafka 4.0)."""
    return field(default=default, metadata={"range": (lowest, _I32)})


def _long(default: int, lowest: int = 0) -> int:
    """A setting Java types `long`."""
    return field(default=default, metadata={"range": (lowest, _I64)})


@dataclass(frozen=True, kw_only=True, repr=False)
class ProducerConfig:
    """Every producer setting, normalized and validated on construction (`build()` also takes Java's names).

    Defaults are Kafka 4.0's. `repr()` shows only settings that differ from their default and never prints a
    field marked `metadata={"secret": True}`.
    """

    bootstrap_servers: tuple[str, ...] = ()  # required, as in Java: "host:port" entries, IPv6 as "[::1]:9092"
    client_id: str = "aioproducer"
    acks: Literal[-1, 0, 1] = -1  # -1 is "all"
    enable_idempotence: bool | None = None  # None: on unless other settings conflict (see `idempotence`)
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"
    compression_level: int | None = field(default=None, metadata={"java": None})  # None: the codec's default
    linger_ms: int = _long(5)
    batch_size: int = _int(16384)
    # How far a batch may grow past batch_size while it waits to be sent (all in-flight slots taken, a retry
    # ahead of it, a caller that has not yielded): batch_size stays the point at which a batch is ready to go, as
    # in Java, but records keep joining it until it is drained or reaches this bound, as KIP-782 proposed and
    # librdkafka does. None: max(batch_size, min(256 KiB, max_request_size)), and batch_size with acks=0 (no answer
    # could tell that a grown batch was too large for its topic). Set it to batch_size for Java's fixed batches.
    # Not a Java setting.
    batch_max_size: int | None = field(default=None, metadata={"java": None, "range": (1, _I32)})
    buffer_memory: int = _long(33554432)
    max_block_ms: int = _long(60000)
    max_request_size: int = _int(1048576)
    request_timeout_ms: int = _int(30000)
    delivery_timeout_ms: int = _int(120000)
    retries: int = _int(2147483647)
    retry_backoff_ms: int = _long(100)
    retry_backoff_max_ms: int = _long(1000)
    metadata_max_age_ms: int = _long(300000)
    metadata_max_idle_ms: int = _long(300000, lowest=5000)
    max_in_flight_requests_per_connection: int = _int(5, lowest=1)
    reconnect_backoff_ms: int = _long(50)
    reconnect_backoff_max_ms: int = _long(1000)
    connections_max_idle_ms: int = _long(540000, lowest=-1)  # Java's Selector: negative = never
    socket_connection_setup_timeout_ms: int = _long(10000)
    socket_connection_setup_timeout_max_ms: int = _long(30000)
    # How long `close()` (and leaving `async with`) waits for buffered records before failing the rest with
    # ProducerClosedError; None waits until each is delivered or failed (within delivery_timeout_ms), as Java's
    # close(). Not a Java setting: set it below a service's shutdown grace period.
    close_timeout_ms: int | None = field(default=None, metadata={"java": None})
    partitioner: str | PartitionerLike = field(default="default", metadata={"java": "partitioner.class"})
    partitioner_ignore_keys: bool = False
    # KIP-794, as Java: keyless records go less to partitions whose queues are longer (their broker falls behind),
    # and, with a timeout above 0, not at all to a broker whose ready batches waited longer than it.
    partitioner_adaptive_partitioning_enable: bool = True
    partitioner_availability_timeout_ms: int = _long(0)
    key_serializer: SerializerSpec = None
    value_serializer: SerializerSpec = None
    # Java's interceptor.classes: hooks given by "module.Class" name, class or object (see aioproducer.hooks).
    interceptor_classes: tuple[Any, ...] = ()
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    # TLS (SSL, SASL_SSL): a ready context, or PEM files. Java's PEM keystore (key and certificate in one file)
    # maps to ssl_certfile; JKS/PKCS12 stores are not readable by Python's ssl module.
    ssl_context: ssl.SSLContext | None = field(default=None, metadata={"java": None})
    ssl_cafile: str | None = field(default=None, metadata={"java": "ssl.truststore.location"})
    ssl_certfile: str | None = field(default=None, metadata={"java": "ssl.keystore.location"})
    ssl_keyfile: str | None = field(default=None, metadata={"java": None})
    # Passwords are held as `Secret` (given as str): repr, asdict and copies of the config never show them.
    ssl_password: Secret | None = field(default=None, metadata={"java": "ssl.key.password", "secret": True})
    ssl_check_hostname: bool = field(default=True, metadata={"java": "ssl.endpoint.identification.algorithm"})
    # SASL (SASL_PLAINTEXT, SASL_SSL). Java's sasl.jaas.config is read for its username and password.
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None = None
    sasl_plain_username: str | None = field(default=None, metadata={"java": None})  # PLAIN and SCRAM
    sasl_plain_password: Secret | None = field(default=None, metadata={"java": None, "secret": True})
    sasl_oauth_token_provider: Callable[[], Awaitable[Any]] | None = field(default=None, metadata={"java": None})
    transactional_id: str | None = None  # a transactional producer: idempotence on, acks=all, <= 5 in flight
    transaction_timeout_ms: int = _int(60000, lowest=1)  # sent in InitProducerId; the coordinator aborts after it
    allow_auto_create_topics: bool = True

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            parse = _PARSERS.get(f.name)
            if parse is not None:
                object.__setattr__(self, f.name, parse(f.name, getattr(self, f.name)))
        self._clamp_backoff_maxima()
        self.validate()

    @classmethod
    def build(cls, config: Mapping[str, Any] | None = None, /, **settings: Unpack[ProducerSettings]) -> ProducerConfig:
        """A config from Java-style keys (`{"linger.ms": "5"}`), Python keyword arguments, or both.

        The same setting given twice with different values, an unknown key, a wrong type or a value out of range
        raises `ConfigError`; a Java setting aioproducer does not implement raises `FeatureNotAvailableError`.
        """
        merged: dict[str, tuple[str, Any]] = {}  # field → (key as given, value)
        levels: dict[str, tuple[str, Any]] = {}  # codec → (key as given, value)
        login: dict[str, Any] = {}  # the OIDC token login's Java settings (KIP-768)
        login_jaas: dict[str, str] = {}  # and OAuthBearerLoginModule's options
        for key, value in [*(config or {}).items(), *settings.items()]:
            if key in _LEVEL_KEYS:
                _put(levels, _LEVEL_KEYS[key], key, value, parse_level)
            elif key in _security.JAAS_KEYS:
                kind, options = _security.parse_jaas(key, value)
                login_jaas = options if kind == "OAUTHBEARER" else login_jaas
                for name, item in _security.jaas_credentials(key, kind, options).items():
                    _put(merged, name, key, item, _PARSERS[name])
            elif key in _security.STORE_TYPE_KEYS:
                _security.check_store_type(key, value)
            elif key in _oidc.LOGIN_KEYS:
                login[key] = value
            else:
                name = _field_for(key)
                _put(merged, name, key, value, _PARSERS[name])
        _merge_codec_level(merged, levels)
        _merge_token_login(merged, login, login_jaas)
        return cls(**{name: value for name, (_key, value) in merged.items()})

    def validate(self) -> None:
        """Check the rules between settings (Java's ProducerConfig.postProcessParsedConfig and KafkaProducer)."""
        # KafkaProducer.configureDeliveryTimeout: a batch may linger, then wait a full request before it expires.
        floor = self.linger_ms + self.request_timeout_ms
        if self.delivery_timeout_ms < floor:
            raise ConfigError(
                f"delivery_timeout_ms={self.delivery_timeout_ms} must be at least linger_ms + request_timeout_ms "
                f"= {floor}: raise delivery_timeout_ms or lower the other two"
            )
        if self.batch_max_size is not None and self.batch_max_size < self.batch_size:
            raise ConfigError(
                f"batch_max_size={self.batch_max_size} is below batch_size={self.batch_size}: a batch may only grow "
                "past batch_size; raise batch_max_size, or leave it unset"
            )
        self._check_compression_level()
        _security.check_security(self)
        conflicts = self._idempotence_conflicts()
        if self.enable_idempotence and conflicts:
            raise ConfigError(
                f"enable_idempotence=True conflicts with {' and '.join(conflicts)}: change those settings, "
                f"or set enable_idempotence=False (or leave it unset to turn it off silently)"
            )
        # Java's postProcessAndValidateIdempotenceConfigs: a transactional id needs idempotence, explicit or implied.
        if self.transactional_id is not None and not self.idempotence:
            reason = " and ".join(conflicts) if conflicts else "enable_idempotence=False"
            raise ConfigError(
                f"transactional_id={self.transactional_id!r} needs idempotence, which {reason} turns off: "
                "remove the conflicting settings"
            )

    @property
    def idempotence(self) -> bool:
        """Whether the producer is idempotent: explicit `enable_idempotence`, else on unless a setting conflicts.

        Java 3.2+ (KIP-679, ProducerConfig.postProcessAndValidateIdempotenceConfigs) drops an unset
        enable.idempotence when acks or retries rule it out; it raises for max.in.flight > 5, which we drop too.
        """
        if self.enable_idempotence is not None:
            return self.enable_idempotence
        return not self._idempotence_conflicts()

    @property
    def effective_batch_max_size(self) -> int:
        """The bound a batch may grow to while it waits (`batch_max_size`, or its default).

        With acks=0 batches stay at batch_size unless batch_max_size says otherwise: a broker refuses a batch over
        the topic's max.message.bytes, and without an answer the only sign is a closed connection, so the split
        that saves a grown batch under acks=1/all cannot happen and the records would be lost (Java's batches stay
        at batch.size)."""
        if self.batch_max_size is not None:
            return self.batch_max_size
        if self.acks == 0:
            return self.batch_size
        grown = _GROWN_BATCH_DEFAULT if self.compression_type == "none" else _GROWN_COMPRESSED_BATCH_DEFAULT
        return max(self.batch_size, min(grown, self.max_request_size - _REQUEST_FRAMING_BYTES))

    @property
    def bootstrap_addresses(self) -> tuple[tuple[str, int], ...]:
        """`bootstrap_servers` as (host, port) pairs, IPv6 hosts without their brackets."""
        return tuple(split_address(address) for address in self.bootstrap_servers)

    @property
    def sasl_credentials(self) -> SaslCredentials | None:
        """What connections authenticate with under SASL_PLAINTEXT / SASL_SSL (validated with the config), else None."""
        if self.sasl_mechanism is None or not self.security_protocol.startswith("SASL_"):
            return None
        password = None if self.sasl_plain_password is None else self.sasl_plain_password.reveal()
        return SaslCredentials(self.sasl_mechanism, self.sasl_plain_username, password, self.sasl_oauth_token_provider)

    def __repr__(self) -> str:
        shown = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "bootstrap_servers" or value != f.default:
                shown.append(f"{f.name}={_show(f.name, value, f.metadata)}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def _idempotence_conflicts(self) -> list[str]:
        conflicts = []
        if self.acks != -1:
            conflicts.append(f"acks={self.acks} (idempotence needs acks='all')")
        # Brokers keep the last 5 batches per producer and partition (ProducerStateEntry.NUM_BATCHES_TO_RETAIN).
        if (in_flight := self.max_in_flight_requests_per_connection) > 5:
            conflicts.append(f"max_in_flight_requests_per_connection={in_flight} (idempotence allows at most 5)")
        if self.retries == 0:
            conflicts.append("retries=0 (idempotence needs retries)")
        return conflicts

    def _check_compression_level(self) -> None:
        if self.compression_level is None:
            return
        levels = COMPRESSION_LEVELS.get(self.compression_type)
        if levels is None:
            raise ConfigError(
                f"compression_level={self.compression_level} has no meaning for compression_type="
                f"{self.compression_type!r}: levels exist for gzip, lz4 and zstd only; remove compression_level"
            )
        if self.compression_level not in levels or not level_allowed(self.compression_type, self.compression_level):
            raise ConfigError(
                f"compression_level={self.compression_level} is out of range for {self.compression_type}: "
                f"{levels_text(self.compression_type)}"
            )

    def _clamp_backoff_maxima(self) -> None:
        # Java (KIP-580) keeps a maximum below its base and backs off statically at the *maximum*; we raise the
        # maximum to the base instead, so the base the user chose is never undercut: a static backoff at the base.
        for base, maximum in (
            ("retry_backoff_ms", "retry_backoff_max_ms"),
            ("reconnect_backoff_ms", "reconnect_backoff_max_ms"),
            ("socket_connection_setup_timeout_ms", "socket_connection_setup_timeout_max_ms"),
        ):
            object.__setattr__(self, maximum, max(getattr(self, base), getattr(self, maximum)))


# ---- keys ---------------------------------------------------------------------------------------------------


def _java_names() -> dict[str, str]:
    names = {}
    for f in dataclasses.fields(ProducerConfig):
        java = f.metadata.get("java", f.name.replace("_", "."))
        if java is not None:
            names[java] = f.name
    return names


def _field_for(key: object) -> str:
    if not isinstance(key, str):
        raise ConfigError(f"setting names must be str, got {type(key).__name__} {key!r}")
    if key in _PARSERS:
        return key
    if key in _JAVA_TO_FIELD:
        return _JAVA_TO_FIELD[key]
    if key in LIBRDKAFKA_EQUIVALENTS:
        raise ConfigError(
            f"{key!r} is a librdkafka (confluent-kafka) setting; aioproducer takes the Java producer's: "
            f"{LIBRDKAFKA_EQUIVALENTS[key]}"
        )
    if key in _UNSUPPORTED_JAVA or key.startswith(("ssl.", "sasl.")):
        raise FeatureNotAvailableError(
            f"the Kafka producer setting {key!r} is not supported by aioproducer yet: remove it"
        )
    known = [*_PARSERS, *_JAVA_TO_FIELD, *_LEVEL_KEYS]
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0]!r}?" if close else "see the ProducerConfig fields for the supported settings"
    raise ConfigError(f"unknown producer setting {key!r}: {hint}")


def _put(into: dict[str, tuple[str, Any]], name: str, key: str, value: Any, parse: Callable[[str, Any], Any]) -> None:
    if name in into:
        first_key, first = into[name]
        if parse(name, first) != parse(name, value):
            raise ConfigError(
                f"{name} is given twice with different values: {first_key}={_show(name, first)} and "
                f"{key}={_show(name, value)}; keep one"
            )
    into[name] = (key, value)


def _merge_token_login(merged: dict[str, tuple[str, Any]], login: dict[str, Any], jaas: dict[str, str]) -> None:
    # Java's OAuthBearerLoginCallbackHandler from string settings: the built-in client-credentials token provider.
    oidc_login = _oidc.login_from_settings(login, jaas)
    if oidc_login is None:
        return
    if "sasl_oauth_token_provider" in merged:
        raise ConfigError(
            f"sasl_oauth_token_provider and {_oidc.URL_KEY} both set: give the provider or the token endpoint"
        )
    merged["sasl_oauth_token_provider"] = (_oidc.URL_KEY, _oidc.ClientCredentialsTokenProvider(oidc_login))


def _merge_codec_level(merged: dict[str, tuple[str, Any]], levels: dict[str, tuple[str, Any]]) -> None:
    # Java keeps one level per codec (compression.gzip.level, ...) and uses the one of compression.type;
    # the others are validated but have no effect, as in Java.
    for other, (_key, value) in levels.items():
        parse_level(other, value)
    codec = parse_choice("compression_type", merged.get("compression_type", ("", "none"))[1], _COMPRESSION_TYPES)
    if codec in levels:
        key, value = levels[codec]
        _put(merged, "compression_level", key, value, parse_optional_int)


# ---- parsers: (setting name, value as given) → normalized value, or ConfigError ----------------------------


def _parse_int(name: str, value: Any) -> int:
    lowest, highest = _INT_RANGES[name]
    number = to_int(name, value)
    if number < lowest:
        raise ConfigError(f"{name} must be at least {lowest}, got {number}")
    if number > highest:
        raise ConfigError(f"{name} must be at most {highest}, got {number}")
    return number


def _parse_long(name: str, value: Any) -> int:
    number = to_int(name, value)
    if not 0 <= number <= _I64:
        raise ConfigError(f"{name} must be from 0 to {_I64}, got {number}")
    return number


def _show(name: str, value: Any, metadata: Mapping[str, Any] | None = None) -> str:
    # A field marked secret (a password) is never echoed in a repr or an error message.
    if metadata is None:
        fields = {f.name: f for f in dataclasses.fields(ProducerConfig)}
        metadata = fields[name].metadata if name in fields else {}
    return "'***'" if metadata.get("secret") and value is not None else repr(value)


_INT_RANGES: dict[str, tuple[int, int]] = {
    f.name: f.metadata["range"] for f in dataclasses.fields(ProducerConfig) if "range" in f.metadata
}
_PARSERS: dict[str, Callable[[str, Any], Any]] = {
    **dict.fromkeys(_INT_RANGES, _parse_int),
    **dict.fromkeys(_BOOLS, parse_bool),
    "bootstrap_servers": parse_bootstrap,
    "client_id": parse_client_id,
    "acks": parse_acks,
    "enable_idempotence": parse_optional_bool,
    "compression_type": lambda name, value: parse_choice(name, value, _COMPRESSION_TYPES),
    "compression_level": parse_optional_int,
    "close_timeout_ms": lambda name, value: None if value is None else _parse_long(name, value),
    "batch_max_size": lambda name, value: None if value is None else _parse_int(name, value),
    "partitioner": parse_partitioner,
    "key_serializer": parse_serializer,
    "value_serializer": parse_serializer,
    "interceptor_classes": parse_interceptors,
    "security_protocol": lambda name, value: parse_choice(name, value, _SECURITY_PROTOCOLS, upper=True),
    "transactional_id": parse_transactional_id,
    "ssl_context": _security.parse_ssl_context,
    **dict.fromkeys(("ssl_cafile", "ssl_certfile", "ssl_keyfile"), _security.parse_path),
    **dict.fromkeys(("ssl_password", "sasl_plain_password"), parse_secret),
    "ssl_check_hostname": _security.parse_check_hostname,
    "sasl_mechanism": _security.parse_mechanism,
    "sasl_plain_username": lambda name, value: None if value is None else parse_text(name, value),
    "sasl_oauth_token_provider": _security.parse_token_provider,
}
_JAVA_TO_FIELD = _java_names()
