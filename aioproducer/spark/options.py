"""The options of a Spark publish as Spark's Kafka sink spells them (`kafka.*`, `topic`), plus our own (`failOnError`,
`chunkRows`, `producerCache`, `producerCacheTimeoutMs`, `delivery`, `transactionalIdPrefix`, `reportPath`): checked
on the driver before any task runs; `${env:NAME}` / `${file:PATH}` values resolved where the producer runs. Imports
no Spark and builds no producer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from aioproducer import ProducerConfig
from aioproducer.errors import ConfigError, FeatureNotAvailableError
from aioproducer.spark.transactional import AT_LEAST_ONCE, TRANSACTIONAL, check_delivery

__all__ = [
    "AT_LEAST_ONCE",
    "DEFAULT_CHUNK_ROWS",
    "DEFAULT_CACHE_TIMEOUT_MS",
    "PublishOptions",
    "check_producer_config",
    "parse_options",
    "resolve_placeholders",
]

KAFKA_PREFIX = "kafka."
# Above the Arrow batches Spark hands a Python worker (spark.sql.execution.arrow.maxRecordsPerBatch, 10,000 rows by
# default), so that each is one send_table call: a call costs a hand-off to the producer's loop thread and sends its
# last batches at once. Outside Spark, 1 M rows in chunks of 4096 cost 0.55 client CPU-us per row, in 10,000s 0.33.
DEFAULT_CHUNK_ROWS = 16384
# A Python worker Spark keeps idle for a minute is stopped anyway (PythonWorkerFactory's idle timeout).
DEFAULT_CACHE_TIMEOUT_MS = 60_000
_MAX_CHUNK_ROWS = 1_000_000
_MAX_CACHE_TIMEOUT_MS = 24 * 3600 * 1000
# Our own options, matched case-insensitively: Spark's Python Data Source hands options over lower-cased.
_TOPIC, _FAIL_ON_ERROR, _CHUNK_ROWS = "topic", "failonerror", "chunkrows"
_CACHE, _CACHE_TIMEOUT, _DELIVERY, _REPORT_PATH = "producercache", "producercachetimeoutms", "delivery", "reportpath"
_TXN_PREFIX = "transactionalidprefix"
_CHECKPOINT = "checkpointlocation"  # Spark passes a streaming query's checkpoint location to its sink: not ours
_OWN = {_TOPIC, _FAIL_ON_ERROR, _CHUNK_ROWS, _CACHE, _CACHE_TIMEOUT, _DELIVERY, _TXN_PREFIX, _REPORT_PATH, _CHECKPOINT}
# The `delivery` option's spellings (case, '-' and '_' ignored) and the modes they name.
_DELIVERY_SPELLINGS = {"atleastonce": AT_LEAST_ONCE, "transactional": TRANSACTIONAL}
_BOOLEANS = {"true": True, "false": False}
# Spark's KafkaSourceProvider rejects these for the sink: the columns are already bytes (ByteArraySerializer).
_SERIALIZER_KEYS = {"key.serializer": "keys", "value.serializer": "values"}
# The placeholder forms of Kafka's EnvVarConfigProvider / FileConfigProvider (KIP-887, KIP-297); a file's whole
# text is the value (Java's FileConfigProvider would read one key of a properties file).
_PLACEHOLDER = re.compile(r"\$\{(?P<provider>env|file):(?P<name>[^}]+)\}")


@dataclass(frozen=True)
class PublishOptions:
    """A checked publish request. `producer_config` has Java keys without `kafka.`, placeholders unresolved;
    `delivery` is `transactional.AT_LEAST_ONCE` or `TRANSACTIONAL` (then with its `transactional_id_prefix`)."""

    producer_config: Mapping[str, str]
    topic: str | None
    fail_on_error: bool
    chunk_rows: int
    producer_cache: bool = True
    producer_cache_timeout_ms: int = DEFAULT_CACHE_TIMEOUT_MS
    delivery: str = AT_LEAST_ONCE
    report_path: str | None = None
    transactional_id_prefix: str | None = None


def parse_options(
    options: Mapping[str, object],
    topic: str | None = None,
    *,
    fail_on_error: bool | None = None,
    streaming: bool = False,
) -> PublishOptions:
    """Check `options` as Spark's Kafka sink would, plus the producer settings themselves (ProducerConfig rules).

    `topic` and `fail_on_error` are the keyword forms of the `topic` and `failOnError` options; giving both forms
    with different values is a ConfigError. `reportPath` belongs to streaming writes. Raises ConfigError, or
    FeatureNotAvailableError for a Kafka feature aioproducer does not have (a login other than the built-in OIDC
    one, ...).
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
    unknown = sorted(set(own) - _OWN)
    if unknown:
        raise ConfigError(
            f"unknown option(s) {unknown}: producer settings take the prefix 'kafka.' (e.g. 'kafka.linger.ms'); "
            "other options are 'topic', 'failOnError', 'chunkRows', 'producerCache', 'producerCacheTimeoutMs', "
            "'delivery', 'transactionalIdPrefix' and (streaming) 'reportPath'"
        )
    if _REPORT_PATH in own and not streaming:
        raise ConfigError("option 'reportPath' is for writeStream; a batch publish returns its report (publish())")
    delivery = _delivery(own.get(_DELIVERY), producer_config)
    prefix = own.get(_TXN_PREFIX)
    try:
        check_delivery(delivery, prefix)
    except ConfigError as exc:
        raise ConfigError(f"in the options 'delivery' and 'transactionalIdPrefix': {exc}") from None
    check_producer_config(producer_config)
    return PublishOptions(
        producer_config=producer_config,
        topic=_one_of("topic", topic, own.get(_TOPIC)),
        fail_on_error=_fail_on_error(fail_on_error, own.get(_FAIL_ON_ERROR)),
        chunk_rows=_bounded("chunkRows", own.get(_CHUNK_ROWS), DEFAULT_CHUNK_ROWS, 1, _MAX_CHUNK_ROWS),
        producer_cache=_boolean("producerCache", own.get(_CACHE), default=True),
        producer_cache_timeout_ms=_bounded(
            "producerCacheTimeoutMs", own.get(_CACHE_TIMEOUT), DEFAULT_CACHE_TIMEOUT_MS, 0, _MAX_CACHE_TIMEOUT_MS
        ),
        delivery=delivery,
        report_path=own.get(_REPORT_PATH) or None,
        transactional_id_prefix=prefix,
    )


def _delivery(option: str | None, producer_config: Mapping[str, str]) -> str:
    spelled = (option or "atLeastOnce").strip().lower().replace("-", "").replace("_", "")
    if spelled not in _DELIVERY_SPELLINGS:
        raise ConfigError(f"option 'delivery' must be 'atLeastOnce' or 'transactional', got {option!r}")
    if "transactional.id" in producer_config:
        check_producer_config(producer_config)  # refuses it, naming delivery='transactional'
    return _DELIVERY_SPELLINGS[spelled]


def check_producer_config(config: Mapping[str, str]) -> None:
    """The driver-side check of the `kafka.*` settings: required, rejected and unsupported keys, then every value.

    A setting whose whole value is a placeholder the driver cannot resolve is left to the executors, which resolve
    it and build the producer: when such a setting is missing here, a failing check is theirs to report.
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
            "transactional_id_prefix (options 'delivery' and 'transactionalIdPrefix'), which gives each Spark "
            "partition its own transactional id"
        )
    resolved = resolve_placeholders(config, strict=False)
    try:
        ProducerConfig.build(resolved)
    except (ConfigError, FeatureNotAvailableError) as exc:
        if set(config) - set(resolved):
            return  # the executors see the missing settings and check everything
        raise type(exc)(f"in the 'kafka.*' options: {exc}") from exc


def resolve_placeholders(config: Mapping[str, str], *, strict: bool) -> dict[str, str]:
    """`config` with each `${env:NAME}` / `${file:PATH}` replaced by the variable or the file's text, wherever it
    appears in a value (a JAAS string may hold several).

    Unresolvable placeholders raise ConfigError when `strict` (the executors). Otherwise (the driver, which may lack
    the executors' environment) a value that is one placeholder is left out, and a placeholder inside a longer value
    stays as written. Messages name the variable or file, never a value.
    """
    resolved: dict[str, str] = {}
    for key, value in config.items():
        text, missing = _substitute(value)
        if missing and strict:
            where = "environment variable" if missing[0][0] == "env" else "file"
            raise ConfigError(f"option 'kafka.{key}': {where} {missing[0][1]!r} is not available where the task runs")
        if missing and _PLACEHOLDER.fullmatch(value):
            continue
        resolved[key] = text
    return resolved


def _substitute(value: str) -> tuple[str, list[tuple[str, str]]]:
    """`value` with its resolvable placeholders replaced, and the (provider, name) of those that are not."""
    missing: list[tuple[str, str]] = []

    def one(match: re.Match[str]) -> str:
        secret = _lookup(match["provider"], match["name"])
        if secret is None:
            missing.append((match["provider"], match["name"]))
            return match[0]
        return secret

    return _PLACEHOLDER.sub(one, value), missing


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
    parsed = None if option is None else _boolean("failOnError", option, default=True)
    if keyword is not None and parsed is not None and keyword != parsed:
        raise ConfigError(f"fail_on_error={keyword} and the option 'failOnError'={option!r} disagree: give one")
    if keyword is not None:
        return keyword
    return True if parsed is None else parsed


def _boolean(name: str, option: str | None, *, default: bool) -> bool:
    if option is None:
        return default
    parsed = _BOOLEANS.get(option.strip().lower())
    if parsed is None:
        raise ConfigError(f"option {name!r} must be 'true' or 'false', got {option!r}")
    return parsed


def _bounded(name: str, option: str | None, default: int, lowest: int, highest: int) -> int:
    if option is None:
        return default
    text = option.strip()
    if not text.isdigit() or not lowest <= int(text) <= highest:
        raise ConfigError(f"option {name!r} must be an integer in {lowest}..{highest}, got {option!r}")
    return int(text)
