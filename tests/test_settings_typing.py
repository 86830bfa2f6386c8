"""Typed settings: `ProducerSettings` names every setting `ProducerConfig` takes, with types a checker enforces, so
mypy catches a misspelt setting in `Producer(...)`, `MockProducer(...)` and `ProducerConfig.build(...)`; librdkafka's
names are answered with the setting to use instead."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
import typing
from pathlib import Path

import pytest

from aioproducer import Producer, ProducerConfig
from aioproducer.config import LIBRDKAFKA_EQUIVALENTS
from aioproducer.errors import ConfigError
from aioproducer.settings import ProducerSettings

# Keys that are not fields: ProducerConfig.build folds them into fields (the codec levels, a JAAS line).
FOLDED = {"compression_gzip_level", "compression_lz4_level", "compression_zstd_level", "sasl_jaas_config"}


def test_the_typed_settings_and_the_config_fields_are_the_same_names() -> None:
    fields = {f.name for f in dataclasses.fields(ProducerConfig)}
    keys = set(typing.get_type_hints(ProducerSettings))
    assert keys - FOLDED == fields, {"not typed": fields - keys, "not a field": keys - FOLDED - fields}
    assert ProducerSettings.__total__ is False  # every setting is optional


def test_every_folded_key_is_a_setting_the_config_takes() -> None:
    config = ProducerConfig.build(bootstrap_servers="h:1", compression_type="zstd", compression_zstd_level=3)
    assert config.compression_level == 3
    for key in FOLDED - {"sasl_jaas_config"}:
        ProducerConfig.build(bootstrap_servers="h:1", **{key: 1})
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required username='u' password='p';"
    sasl = ProducerConfig.build(
        bootstrap_servers="h:1", security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_jaas_config=jaas
    )
    assert sasl.sasl_plain_username == "u"


def _default_calls() -> str:
    """`Producer("h:1", name=<default>)` for every setting with a plain default: each must type-check."""
    calls = []
    for f in dataclasses.fields(ProducerConfig):
        if f.name == "bootstrap_servers" or f.default is dataclasses.MISSING:
            continue
        if f.default is None or isinstance(f.default, bool | int | str):
            calls.append(f"Producer('h:1', {f.name}={f.default!r})")
    return "\n".join(calls)


SNIPPET = """
from aioproducer import Producer, ProducerConfig
from aioproducer.testing import MockProducer

Producer("h:1", linger_ms=5, acks="all", compression_type="zstd", value_serializer="json")
Producer(bootstrap_servers=["h:1", "h:2"], config={{"linger.ms": "5"}}, hooks=[])
MockProducer(topics={{"orders": 3}}, key_serializer="str", transactional_id="t")
{defaults}
Producer("h:1", linger_mss=5)  # TYPO-1
MockProducer(lingerms=5)  # TYPO-2
ProducerConfig.build(None, bootstrap_server="h:1")  # TYPO-3
Producer("h:1", linger_ms="5")  # WRONG-TYPE
Producer("h:1", compression_type="zstandard")  # WRONG-CHOICE
"""


@pytest.mark.timeout(300)
def test_mypy_catches_a_misspelt_setting(tmp_path: Path) -> None:
    """A setting arrived as `**settings: Any`, so neither mypy nor an IDE caught a misspelt name (`linger_mss=5`)."""
    snippet = tmp_path / "service.py"
    snippet.write_text(textwrap.dedent(SNIPPET.format(defaults=_default_calls())))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent", str(snippet)],
        capture_output=True,
        text=True,
        check=False,
        timeout=280,
    )
    lines = snippet.read_text().splitlines()
    flagged: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        if ": error: " in line and line.startswith(str(snippet)):
            number = int(line.split(":")[1])
            flagged.setdefault(lines[number - 1].split("# ")[-1], []).append(line)
    assert set(flagged) == {"TYPO-1", "TYPO-2", "TYPO-3", "WRONG-TYPE", "WRONG-CHOICE"}, done.stdout
    assert 'Unexpected keyword argument "linger_mss"' in "".join(flagged["TYPO-1"])
    assert 'Unexpected keyword argument "lingerms"' in "".join(flagged["TYPO-2"])
    assert 'Unexpected keyword argument "bootstrap_server"' in "".join(flagged["TYPO-3"])


@pytest.mark.parametrize(
    ("key", "equivalent"),
    [
        ("queue.buffering.max.ms", "linger_ms"),
        ("message.max.bytes", "max_request_size"),
        ("queue.buffering.max.kbytes", "buffer_memory"),
        ("message.timeout.ms", "delivery_timeout_ms"),
        ("sasl.username", "sasl_plain_username"),
        ("ssl.ca.location", "ssl_cafile"),
    ],
)
def test_a_librdkafka_setting_is_answered_with_its_equivalent(key: str, equivalent: str) -> None:
    """Bug: librdkafka's names (`queue.buffering.max.ms`, `message.max.bytes`) got only "unknown setting"."""
    with pytest.raises(ConfigError, match="librdkafka") as raised:
        Producer(config={"bootstrap.servers": "h:1", key: "5"})
    assert equivalent in str(raised.value) and key in str(raised.value)


def test_every_librdkafka_name_is_not_also_a_java_name() -> None:
    # A Java name is taken as it is, before this table is read: an entry here for one would never show.
    for key in LIBRDKAFKA_EQUIVALENTS:
        with pytest.raises(ConfigError, match="librdkafka"):
            ProducerConfig.build({"bootstrap.servers": "h:1", key: "1"})
