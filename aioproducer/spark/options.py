"""The options of a Spark publish as Spark's Kafka sink spells them (`kafka.*`, `topic`, plus `failOnError` and
`chunkRows`): checked on the driver before any task runs; `${env:NAME}` / `${file:PATH}` values resolved where the
producer runs. Imports no Spark and builds no producer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from aioproducer import ProducerConfig
from aioproducer.errors import ConfigError, FeatureNotAvailableError

__all__ = ["DEFAULT_CHUNK_ROWS", "PublishOptions", "check_producer_config", "parse_options", "resolve_placeholders"]

KAFKA_PREFIX = "kafka."
DEFAULT_CHUNK_ROWS = 4096
_MAX_CHUNK_ROWS = 1_000_000
# Our own options, matched case-insensitively: Spark's Python Data Source hands options over lower-cased.
_TOPIC, _FAIL_ON_ERROR, _CHUNK_ROWS = "topic", "failonerror", "chunkrows"
_BOOLEANS = {"true": True, "false": False}
# Spark's KafkaSourceProvider rejects these for the sink: the columns are already bytes (ByteArraySerializer).
_SERIALIZER_KEYS = {"key.serializer": "keys", "value.serializer": "values"}
# The placeholder forms of Kafka's EnvVarConfigProvider / FileConfigProvider (KIP-887, KIP-297), whole value only.
_PLACEHOLDER = re.compile(r"\$\{(?P<provider>env|file):(?P<name>[^}]+)\}")


@dataclass(frozen=True)
class PublishOptions:
    """A checked publish request. `producer_config` has Java keys without `kafka.`, placeholders unresolved."""

    producer_config: Mapping[str, str]
    topic: str | None
    fail_on_error: bool
    chunk_rows: int


def parse_options(
    options: Mapping[str, object], topic: str | None = None, *, fail_on_error: bool | None = None
) -> PublishOptions:
    """Check `options` as Spark's Kafka sink would, plus the producer settings themselves (ProducerConfig rules).

    `topic` and `fail_on_error` are the keyword forms of the `topic` and `failOnError` options; giving both forms
    with different values is a ConfigError. Raises ConfigError, or FeatureNotAvailableError for a Kafka feature
    aioproducer does not have.
    """
    producer_config: dict[str, str] = {}
    own: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise ConfigError(f"option names must be str, got {type(key).__name__} {key!r}")
        if key[: len(KAFKA_PREFIX)].lower() == KAFKA_PREFIX:
            producer_config[key[len(KAFKA_PREFIX) :]] = _option_text(key, value)
        else:
            own[key.lower()] = _option_text(key, value)
    unknown = sorted(set(own) - {_TOPIC, _FAIL_ON_ERROR, _CHUNK_ROWS})
    if unknown:
        raise ConfigError(
            f"unknown option(s) {unknown}: producer settings take the prefix 'kafka.' (e.g. 'kafka.linger.ms'); "
            "other options are 'topic', 'failOnError' and 'chunkRows'"
        )
    check_producer_config(producer_config)
    return PublishOptions(
        producer_config=producer_config,
        topic=_one_of("topic", topic, own.get(_TOPIC)),
        fail_on_error=_fail_on_error(fail_on_error, own.get(_FAIL_ON_ERROR)),
        chunk_rows=_chunk_rows(own.get(_CHUNK_ROWS)),
    )


def check_producer_config(config: Mapping[str, str]) -> None:
    """The driver-side check of the `kafka.*` settings: required, rejected and unsupported keys, then every value.

    A placeholder the driver cannot resolve is left to the executors, which check it when they build the producer.
    """
    if not config.get("bootstrap.servers"):
        raise ConfigError("Option 'kafka.bootstrap.servers' must be specified for configuring the Kafka producer")
    for key, what in _SERIALIZER_KEYS.items():
        if key in config:
            raise ConfigError(
                f"Kafka option 'kafka.{key}' is not supported as {what} are serialized with ByteArraySerializer: "
                f"cast the column to string or binary in Spark instead"
            )
    if "transactional.id" in config:
        raise ConfigError(
            "Kafka option 'kafka.transactional.id' is not accepted: publish with delivery='transactional' and "
            "transactional_id_prefix, which gives each Spark partition its own transactional id"
        )
    try:
        ProducerConfig.build(resolve_placeholders(config, strict=False))
    except (ConfigError, FeatureNotAvailableError) as exc:
        raise type(exc)(f"in the 'kafka.*' options: {exc}") from exc


def resolve_placeholders(config: Mapping[str, str], *, strict: bool) -> dict[str, str]:
    """`config` with `${env:NAME}` and `${file:PATH}` values replaced by the variable or the file's text.

    Unresolvable placeholders raise ConfigError when `strict` (the executors), else their keys are left out (the
    driver, which may lack the executors' environment). Messages name the variable or file, never a value.
    """
    resolved: dict[str, str] = {}
    for key, value in config.items():
        match = _PLACEHOLDER.fullmatch(value)
        if match is None:
            resolved[key] = value
            continue
        secret = _lookup(match["provider"], match["name"])
        if secret is not None:
            resolved[key] = secret
        elif strict:
            where = "environment variable" if match["provider"] == "env" else "file"
            raise ConfigError(f"option 'kafka.{key}': {where} {match['name']!r} is not available where the task runs")
    return resolved


def _lookup(provider: str, name: str) -> str | None:
    if provider == "env":
        return os.environ.get(name)
    try:
        with open(name, encoding="utf-8") as file:
            return file.read().rstrip("\r\n")
    except OSError:
        return None


def _option_text(key: str, value: object) -> str:
    # Spark options are strings (DataFrameWriter.option stringifies too); booleans in Spark's lower-case spelling.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ConfigError(f"option {key!r} must be a str, int, float or bool, got {type(value).__name__}")


def _one_of(name: str, keyword: str | None, option: str | None) -> str | None:
    if keyword is not None and option is not None and keyword != option:
        raise ConfigError(f"{name}={keyword!r} and the option {name!r}={option!r} disagree: give one of them")
    chosen = keyword if keyword is not None else option
    if chosen is not None and not chosen:
        raise ConfigError(f"the {name} must not be empty")
    return chosen


def _fail_on_error(keyword: bool | None, option: str | None) -> bool:
    parsed = None
    if option is not None:
        parsed = _BOOLEANS.get(option.strip().lower())
        if parsed is None:
            raise ConfigError(f"option 'failOnError' must be 'true' or 'false', got {option!r}")
    if keyword is not None and parsed is not None and keyword != parsed:
        raise ConfigError(f"fail_on_error={keyword} and the option 'failOnError'={option!r} disagree: give one")
    if keyword is not None:
        return keyword
    return True if parsed is None else parsed


def _chunk_rows(option: str | None) -> int:
    if option is None:
        return DEFAULT_CHUNK_ROWS
    text = option.strip()
    if not text.isdigit() or not 1 <= int(text) <= _MAX_CHUNK_ROWS:
        raise ConfigError(f"option 'chunkRows' must be an integer in 1..{_MAX_CHUNK_ROWS}, got {option!r}")
    return int(text)
