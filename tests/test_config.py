"""Tests for aioproducer.config: Java defaults and names, parsing, every validation message, idempotence rules."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from aioproducer import config as config_module
from aioproducer.config import ProducerConfig
from aioproducer.errors import ConfigError, FeatureNotAvailableError
from aioproducer.serializers import json_serializer

BOOT = {"bootstrap_servers": "localhost:9092"}

# The producer defaults as the Kafka 4.0 documentation lists them (kafka.apache.org/documentation/#producerconfigs),
# written as the strings a user pastes from a .properties file.
JAVA_DOCUMENTED_DEFAULTS = {
    "acks": "all",
    "enable.idempotence": "true",
    "compression.type": "none",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "linger.ms": "5",
    "batch.size": "16384",
    "buffer.memory": "33554432",
    "max.block.ms": "60000",
    "max.request.size": "1048576",
    "request.timeout.ms": "30000",
    "delivery.timeout.ms": "120000",
    "retries": "2147483647",
    "retry.backoff.ms": "100",
    "retry.backoff.max.ms": "1000",
    "metadata.max.age.ms": "300000",
    "metadata.max.idle.ms": "300000",
    "max.in.flight.requests.per.connection": "5",
    "reconnect.backoff.ms": "50",
    "reconnect.backoff.max.ms": "1000",
    "connections.max.idle.ms": "540000",
    "socket.connection.setup.timeout.ms": "10000",
    "socket.connection.setup.timeout.max.ms": "30000",
    "partitioner.ignore.keys": "false",
    "partitioner.adaptive.partitioning.enable": "true",
    "partitioner.availability.timeout.ms": "0",
    "security.protocol": "PLAINTEXT",
    "allow.auto.create.topics": "true",
}

# Every field's default. Where it is not Java's literal default the comment says why.
PYTHON_DEFAULTS: dict[str, Any] = {
    "client_id": "aioproducer",  # Java: "" then "producer-N"
    "acks": -1,
    "enable_idempotence": None,  # Java: true, dropped silently on conflicts unless set by the user
    "compression_type": "none",
    "compression_level": None,  # Java: one default per codec; None = the codec's default
    "batch_max_size": None,  # not in Java (KIP-782's batch.max.size): None = max(batch_size, 256 KiB)
    "linger_ms": 5,
    "batch_size": 16384,
    "buffer_memory": 33554432,
    "max_block_ms": 60000,
    "max_request_size": 1048576,
    "request_timeout_ms": 30000,
    "delivery_timeout_ms": 120000,
    "retries": 2147483647,
    "retry_backoff_ms": 100,
    "retry_backoff_max_ms": 1000,
    "metadata_max_age_ms": 300000,
    "metadata_max_idle_ms": 300000,
    "max_in_flight_requests_per_connection": 5,
    "reconnect_backoff_ms": 50,
    "reconnect_backoff_max_ms": 1000,
    "connections_max_idle_ms": 540000,
    "socket_connection_setup_timeout_ms": 10000,
    "socket_connection_setup_timeout_max_ms": 30000,
    "close_timeout_ms": None,  # not a Java setting (Java's close() takes a Duration): None waits for every record
    "partitioner": "default",  # Java: partitioner.class=null, the built-in (uniform sticky, KIP-794)
    "partitioner_ignore_keys": False,
    "partitioner_adaptive_partitioning_enable": True,
    "partitioner_availability_timeout_ms": 0,
    "key_serializer": None,  # Java: required; here bytes only
    "value_serializer": None,
    "interceptor_classes": (),
    "security_protocol": "PLAINTEXT",
    "ssl_context": None,
    "ssl_cafile": None,
    "ssl_certfile": None,
    "ssl_keyfile": None,
    "ssl_password": None,
    "ssl_check_hostname": True,  # Java: ssl.endpoint.identification.algorithm=https
    "sasl_mechanism": None,  # Java: GSSAPI, which aioproducer does not offer; required with SASL_*
    "sasl_plain_username": None,  # Java: in sasl.jaas.config
    "sasl_plain_password": None,
    "sasl_oauth_token_provider": None,  # Java: sasl.login.callback.handler.class
    "transactional_id": None,
    "transaction_timeout_ms": 60000,
    "allow_auto_create_topics": True,
}

# (Java key, pasted value, Python field, Python value): a non-default value for every setting with a Java name.
JAVA_PARITY = [
    ("bootstrap.servers", "b1:9092,b2:9093", "bootstrap_servers", ("b1:9092", "b2:9093")),
    ("client.id", "billing", "client_id", "billing"),
    ("acks", "1", "acks", 1),
    ("enable.idempotence", "false", "enable_idempotence", False),
    ("compression.type", "zstd", "compression_type", "zstd"),
    ("linger.ms", "20", "linger_ms", 20),
    ("batch.size", "65536", "batch_size", 65536),
    ("buffer.memory", "1048576", "buffer_memory", 1048576),
    ("max.block.ms", "1000", "max_block_ms", 1000),
    ("max.request.size", "2097152", "max_request_size", 2097152),
    ("request.timeout.ms", "15000", "request_timeout_ms", 15000),
    ("delivery.timeout.ms", "60000", "delivery_timeout_ms", 60000),
    ("retries", "3", "retries", 3),
    ("retry.backoff.ms", "200", "retry_backoff_ms", 200),
    ("retry.backoff.max.ms", "5000", "retry_backoff_max_ms", 5000),
    ("metadata.max.age.ms", "60000", "metadata_max_age_ms", 60000),
    ("metadata.max.idle.ms", "60000", "metadata_max_idle_ms", 60000),
    ("max.in.flight.requests.per.connection", "1", "max_in_flight_requests_per_connection", 1),
    ("reconnect.backoff.ms", "10", "reconnect_backoff_ms", 10),
    ("reconnect.backoff.max.ms", "20000", "reconnect_backoff_max_ms", 20000),
    ("connections.max.idle.ms", "-1", "connections_max_idle_ms", -1),
    ("socket.connection.setup.timeout.ms", "5000", "socket_connection_setup_timeout_ms", 5000),
    ("socket.connection.setup.timeout.max.ms", "60000", "socket_connection_setup_timeout_max_ms", 60000),
    ("partitioner.class", "org.apache.kafka.clients.producer.RoundRobinPartitioner", "partitioner", "round_robin"),
    ("partitioner.ignore.keys", "true", "partitioner_ignore_keys", True),
    ("partitioner.adaptive.partitioning.enable", "false", "partitioner_adaptive_partitioning_enable", False),
    ("partitioner.availability.timeout.ms", "2500", "partitioner_availability_timeout_ms", 2500),
    ("key.serializer", "org.apache.kafka.common.serialization.StringSerializer", "key_serializer", "str"),
    ("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer", "value_serializer", "bytes"),
    ("interceptor.classes", "mypkg.Audit, mypkg.Trace", "interceptor_classes", ("mypkg.Audit", "mypkg.Trace")),
    ("security.protocol", "ssl", "security_protocol", "SSL"),
    ("ssl.truststore.location", "/ca.pem", "ssl_cafile", "/ca.pem"),
    ("ssl.keystore.location", "/client.pem", "ssl_certfile", "/client.pem"),
    ("ssl.key.password", "pw", "ssl_password", "pw"),
    ("ssl.endpoint.identification.algorithm", "", "ssl_check_hostname", False),
    ("allow.auto.create.topics", "false", "allow_auto_create_topics", False),
    ("transaction.timeout.ms", "30000", "transaction_timeout_ms", 30000),
]


def build(**settings: Any) -> ProducerConfig:
    return ProducerConfig.build(**{**BOOT, **settings})


def test_public_names() -> None:
    assert set(config_module.__all__) == {
        "COMPRESSION_LEVELS",
        "PartitionerLike",
        "ProducerConfig",
        "Secret",
        "SerializerSpec",
    }


# ---- defaults and Java names -------------------------------------------------------------------------------


def test_every_field_has_a_checked_default() -> None:
    names = {f.name for f in dataclasses.fields(ProducerConfig)}
    assert names == {"bootstrap_servers", *PYTHON_DEFAULTS}


@pytest.mark.parametrize(("name", "expected"), PYTHON_DEFAULTS.items())
def test_default(name: str, expected: object) -> None:
    assert getattr(build(), name) == expected


def test_pasted_java_defaults_equal_our_defaults() -> None:
    pasted = ProducerConfig.build({"bootstrap.servers": "localhost:9092", **JAVA_DOCUMENTED_DEFAULTS})
    ours = build()
    assert dataclasses.replace(pasted, enable_idempotence=None) == ours
    assert pasted.enable_idempotence is True
    assert pasted.idempotence is ours.idempotence is True


def test_every_java_name_is_in_the_parity_table() -> None:
    covered = {python for _java, _pasted, python, _value in JAVA_PARITY}
    # No Java key of their own (SASL credentials live in sasl.jaas.config; SASL needs SASL_*: tested apart).
    unpaired = {"ssl_context", "ssl_keyfile", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password"}
    # transactional.id needs idempotence, which the table's acks=1 turns off: tested apart.
    unpaired |= {"sasl_oauth_token_provider", "compression_level", "transactional_id", "close_timeout_ms"}
    unpaired |= {"batch_max_size"}
    assert covered == {"bootstrap_servers", *PYTHON_DEFAULTS} - unpaired


def test_java_keys_and_python_keys_build_the_same_config() -> None:
    java = ProducerConfig.build({key: pasted for key, pasted, _name, _value in JAVA_PARITY})
    python = ProducerConfig.build(**{name: value for _key, _pasted, name, value in JAVA_PARITY})
    assert java == python
    for _key, _pasted, name, value in JAVA_PARITY:
        assert getattr(java, name) == value, name


def test_direct_construction_normalizes_like_build() -> None:
    direct = ProducerConfig(bootstrap_servers="h:1", linger_ms="7", acks="all", compression_type="LZ4")  # type: ignore[arg-type]
    assert direct == ProducerConfig.build({"bootstrap.servers": "h:1", "linger.ms": 7, "compression.type": "lz4"})
    assert direct.bootstrap_servers == ("h:1",)


def test_mapping_and_keywords_merge() -> None:
    merged = ProducerConfig.build({"bootstrap.servers": "h:1", "linger.ms": "9"}, acks=0)
    assert (merged.linger_ms, merged.acks) == (9, 0)


# ---- duplicates and unknown keys ---------------------------------------------------------------------------


def test_same_setting_twice_with_different_values_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"linger_ms is given twice with different values: linger.ms='5' and "):
        ProducerConfig.build({"bootstrap.servers": "h:1", "linger.ms": "5"}, linger_ms=6)


def test_same_setting_twice_with_equal_values_is_fine() -> None:
    same = ProducerConfig.build({"bootstrap.servers": "h:1", "acks": "all", "linger.ms": "5"}, acks=-1, linger_ms=5)
    assert (same.acks, same.linger_ms) == (-1, 5)


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [("linger.mss", "linger.ms"), ("lingerms", "linger_ms"), ("batchsize", "batch_size"), ("ack", "acks")],
)
def test_unknown_key_suggests_the_closest_name(key: str, suggestion: str) -> None:
    with pytest.raises(ConfigError, match=f"unknown producer setting '{key}': did you mean '{suggestion}'"):
        build(**{key: 1})


def test_unknown_key_with_nothing_close() -> None:
    with pytest.raises(ConfigError, match="unknown producer setting 'zzz': see the ProducerConfig fields"):
        build(zzz=1)


def test_non_str_key_is_an_error() -> None:
    with pytest.raises(ConfigError, match="setting names must be str, got int"):
        ProducerConfig.build({1: "x"})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    "key", ["send.buffer.bytes", "metric.reporters", "ssl.truststore.password", "sasl.login.class"]
)
def test_java_settings_we_lack_are_a_missing_feature_not_a_typo(key: str) -> None:
    with pytest.raises(FeatureNotAvailableError, match=f"'{re.escape(key)}' is not supported by aioproducer yet"):
        ProducerConfig.build({"bootstrap.servers": "h:1", key: "x"})


# ---- every validation message ------------------------------------------------------------------------------

INVALID = [
    ({"linger_ms": -1}, "linger_ms must be at least 0, got -1"),
    ({"linger_ms": "soon"}, "linger_ms must be an integer (or a string of digits), got str 'soon'"),
    ({"linger_ms": 1.5}, "linger_ms must be an integer (or a string of digits), got float 1.5"),
    ({"retries": True}, "retries must be an integer (or a string of digits), got bool True"),
    ({"batch_size": 2**31}, "batch_size must be at most 2147483647, got 2147483648"),
    ({"buffer_memory": 2**63}, "buffer_memory must be at most 9223372036854775807, got 9223372036854775808"),
    ({"metadata_max_idle_ms": 4999}, "metadata_max_idle_ms must be at least 5000, got 4999"),
    ({"max_in_flight_requests_per_connection": 0}, "max_in_flight_requests_per_connection must be at least 1, got 0"),
    ({"connections_max_idle_ms": -2}, "connections_max_idle_ms must be at least -1, got -2"),
    ({"interceptor_classes": 3}, "interceptor_classes must be a comma-separated str or a list, got 3"),
    ({"close_timeout_ms": -1}, "close_timeout_ms must be from 0 to 9223372036854775807, got -1"),
    ({"close_timeout_ms": 2.5}, "close_timeout_ms must be an integer (or a string of digits), got float 2.5"),
    ({"partitioner_ignore_keys": "yes"}, "partitioner_ignore_keys must be True or False (or 'true'/'false'), got str"),
    ({"allow_auto_create_topics": 1}, "allow_auto_create_topics must be True or False (or 'true'/'false'), got int 1"),
    ({"enable_idempotence": "on"}, "enable_idempotence must be True or False (or 'true'/'false'), got str 'on'"),
    ({"acks": 2}, "acks must be 'all' (same as -1), 0 or 1, got 2"),
    ({"acks": True}, "acks must be 'all' (same as -1), 0 or 1, got True"),
    ({"acks": 1.0}, "acks must be 'all' (same as -1), 0 or 1, got 1.0"),
    ({"acks": "any"}, "acks must be 'all' (same as -1), 0 or 1, got 'any'"),
    ({"compression_type": "brotli"}, "compression_type must be one of 'none', 'gzip', 'snappy', 'lz4', 'zstd', got"),
    ({"compression_type": "lz5"}, "got 'lz5' (did you mean 'lz4'?)"),
    ({"compression_type": "gzip", "compression_level": 10}, "compression_level=10 is out of range for gzip: gzip "),
    ({"compression_type": "lz4", "compression_level": 0}, "lz4 levels run from 1 to 17"),
    ({"compression_type": "zstd", "compression_level": 23}, "zstd levels run from -131072 to 22"),
    ({"compression_type": "snappy", "compression_level": 1}, "has no meaning for compression_type='snappy'"),
    ({"compression_level": 3}, "compression_level=3 has no meaning for compression_type='none'"),
    ({"compression_level": "high"}, "compression_level must be an integer (or a string of digits), got str"),
    ({"compression.lz4.level": 40}, "compression.lz4.level=40 is out of range: lz4 levels run from 1 to 17"),
    ({"compression.gzip.level": "x"}, "compression.gzip.level must be an integer"),
    ({"bootstrap_servers": ""}, "bootstrap_servers is required: give at least one broker as 'host:port'"),
    ({"bootstrap_servers": " , "}, "bootstrap_servers is required"),
    ({"bootstrap_servers": "broker"}, "bootstrap_servers entry 'broker' is not 'host:port' with a port from 1 to"),
    ({"bootstrap_servers": "broker:0"}, "entry 'broker:0' is not 'host:port'"),
    ({"bootstrap_servers": "broker:65536"}, "entry 'broker:65536' is not 'host:port'"),
    ({"bootstrap_servers": "h:1,bad host:2"}, "entry 'bad host:2' is not 'host:port'"),
    ({"bootstrap_servers": "::1:9092"}, "(write IPv6 addresses in brackets: '[::1]:9092')"),
    ({"bootstrap_servers": ["h:1", 2]}, "bootstrap_servers must be a 'host:port,host:port' string or a list"),
    ({"bootstrap_servers": None}, "bootstrap_servers must be a 'host:port,host:port' string or a list"),
    ({"client_id": 7}, "client_id must be a str, got int 7"),
    ({"security_protocol": "TLS"}, "security_protocol must be one of 'PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'"),
    ({"partitioner": "roundrobin"}, "got 'roundrobin' (did you mean 'round_robin'?)"),
    ({"partitioner": object()}, "or an object (an instance, not a class) with a partition() method, got"),
    ({"key_serializer": "avro"}, "unknown key_serializer 'avro': use 'bytes', 'str', 'json' or a callable"),
    ({"value_serializer": "com.example.AvroSerializer"}, "unknown value_serializer 'com.example.AvroSerializer'"),
    ({"value_serializer": 3}, "value_serializer must be None, 'bytes', 'str', 'json' or a callable"),
    ({"transactional_id": ""}, "transactional_id must be None or a non-empty str, got ''"),
    ({"request_timeout_ms": 200000}, "delivery_timeout_ms=120000 must be at least linger_ms + request_timeout_ms"),
    ({"delivery_timeout_ms": 30004}, "= 30005: raise delivery_timeout_ms or lower the other two"),
]


@pytest.mark.parametrize(("settings", "message"), INVALID)
def test_invalid_setting_message(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.build({**BOOT, **settings})
    assert message in str(info.value)


def test_errors_are_value_errors_too() -> None:
    with pytest.raises(ValueError, match="linger_ms"):
        build(linger_ms=-1)


def test_a_class_is_not_a_partitioner_instance() -> None:
    class Fixed:
        def partition(self, *args: Any) -> int:
            return 0

    with pytest.raises(ConfigError, match="an instance, not a class"):
        build(partitioner=Fixed)
    instance = Fixed()
    assert build(partitioner=instance).partitioner is instance


def test_transactional_id_needs_idempotence_as_in_java() -> None:
    config = ProducerConfig.build({"bootstrap.servers": "h:1", "transactional.id": "orders-1"})
    assert config.transactional_id == "orders-1" and config.idempotence and config.acks == -1
    assert config.transaction_timeout_ms == 60000
    for conflict, message in [
        ({"acks": 1}, "acks=1"),
        ({"max_in_flight_requests_per_connection": 6}, "max_in_flight_requests_per_connection=6"),
        ({"retries": 0}, "retries=0"),
        ({"enable_idempotence": False}, "enable_idempotence=False"),
    ]:
        with pytest.raises(ConfigError, match=f"transactional_id='orders-1' needs idempotence, which {message}"):
            build(transactional_id="orders-1", **conflict)
    with pytest.raises(ConfigError, match="enable_idempotence=True conflicts"):
        build(transactional_id="orders-1", enable_idempotence=True, acks=0)


def test_transaction_timeout_is_a_positive_int() -> None:
    assert build(transaction_timeout_ms=900000).transaction_timeout_ms == 900000
    for bad in (0, -1, 2**31):
        with pytest.raises(ConfigError, match="transaction_timeout_ms"):
            build(transaction_timeout_ms=bad)


def test_delivery_timeout_may_equal_linger_plus_request_timeout() -> None:
    assert build(linger_ms=5, request_timeout_ms=30000, delivery_timeout_ms=30005).delivery_timeout_ms == 30005


@pytest.mark.parametrize("value", [-1, 0, 1, "-1", "0", "1", "all", "ALL", " all "])
def test_acks_spellings(value: object) -> None:
    expected = -1 if str(value).strip().lower() == "all" else int(str(value))
    assert build(acks=value).acks == expected


# ---- values that parse -------------------------------------------------------------------------------------


def test_bootstrap_forms() -> None:
    assert build(bootstrap_servers=" h1:9092, ,h2:9093 ,").bootstrap_servers == ("h1:9092", "h2:9093")
    assert build(bootstrap_servers=["h1:1", "h2:2"]).bootstrap_servers == ("h1:1", "h2:2")
    ipv6 = build(bootstrap_servers="[::1]:9092,[fe80::1%eth0]:9093,kafka-0.svc_local:19092")
    assert ipv6.bootstrap_addresses == (("::1", 9092), ("fe80::1%eth0", 9093), ("kafka-0.svc_local", 19092))


def test_case_insensitive_names() -> None:
    oauth = {"sasl_mechanism": "oauthbearer", "sasl_oauth_token_provider": print}
    assert build(security_protocol="sasl_ssl", **oauth).security_protocol == "SASL_SSL"
    assert build(compression_type=" GZIP ").compression_type == "gzip"
    assert build(partitioner_ignore_keys="TRUE").partitioner_ignore_keys is True


def test_java_compression_levels_map_to_the_chosen_codec() -> None:
    pasted = {"bootstrap.servers": "h:1", "compression.type": "zstd", "compression.zstd.level": "-5"}
    pasted |= {"compression.gzip.level": "9", "compression.lz4.level": "17"}
    assert ProducerConfig.build(pasted).compression_level == -5
    assert build(compression_type="gzip", compression_gzip_level=1).compression_level == 1


def test_levels_of_other_codecs_have_no_effect() -> None:
    assert build(compression_type="lz4", **{"compression.gzip.level": 9}).compression_level is None
    assert build(**{"compression.zstd.level": 3}).compression_level is None


def test_compression_level_given_two_ways() -> None:
    same = build(compression_type="gzip", compression_level=4, **{"compression.gzip.level": "4"})
    assert same.compression_level == 4
    with pytest.raises(ConfigError, match="compression_level is given twice with different values"):
        build(compression_type="gzip", compression_level=4, **{"compression.gzip.level": 5})


def test_serializer_specs_kept_as_given() -> None:
    assert build(key_serializer="json", value_serializer="str").key_serializer == "json"
    assert build(value_serializer=json_serializer).value_serializer is json_serializer
    assert build(value_serializer=" str ").value_serializer == "str"


def test_retry_backoff_max_below_base_is_raised_to_the_base() -> None:
    clamped = build(retry_backoff_ms=2000)
    assert (clamped.retry_backoff_ms, clamped.retry_backoff_max_ms) == (2000, 2000)
    reconnect = build(reconnect_backoff_ms=1500, reconnect_backoff_max_ms=10)
    assert reconnect.reconnect_backoff_max_ms == 1500
    setup = build(socket_connection_setup_timeout_ms=45000)
    assert setup.socket_connection_setup_timeout_max_ms == 45000
    untouched = build(retry_backoff_ms=50, retry_backoff_max_ms=800)
    assert untouched.retry_backoff_max_ms == 800


# ---- idempotence -------------------------------------------------------------------------------------------

CONFLICTING = [{"acks": 0}, {"acks": 1}, {"max_in_flight_requests_per_connection": 6}, {"retries": 0}]


@pytest.mark.parametrize("enable", [None, True, False])
@pytest.mark.parametrize("acks", [-1, 0, 1])
@pytest.mark.parametrize("in_flight", [1, 5, 6])
@pytest.mark.parametrize("retries", [0, 1])
def test_idempotence_matrix(enable: bool | None, acks: int, in_flight: int, retries: int) -> None:
    settings = {"enable_idempotence": enable, "acks": acks, "max_in_flight_requests_per_connection": in_flight}
    settings["retries"] = retries
    compatible = acks == -1 and in_flight <= 5 and retries > 0
    if enable is True and not compatible:
        with pytest.raises(ConfigError, match="enable_idempotence=True conflicts with"):
            build(**settings)
        return
    expected = compatible if enable is None else enable
    assert build(**settings).idempotence is expected


@pytest.mark.parametrize(
    ("conflict", "explanation"),
    [
        ({"acks": 1}, "acks=1 (idempotence needs acks='all')"),
        ({"max_in_flight_requests_per_connection": 6}, "max_in_flight_requests_per_connection=6 (idempotence allows"),
        ({"retries": 0}, "retries=0 (idempotence needs retries)"),
    ],
)
def test_explicit_idempotence_conflict_messages(conflict: dict[str, int], explanation: str) -> None:
    with pytest.raises(ConfigError, match="or set enable_idempotence=False") as info:
        build(enable_idempotence="true", **conflict)
    assert explanation in str(info.value)


def test_all_conflicts_are_listed_together() -> None:
    with pytest.raises(ConfigError, match=r"acks=0 .* and retries=0 "):
        build(enable_idempotence=True, acks=0, retries=0)


# ---- the dataclass -----------------------------------------------------------------------------------------


def test_frozen() -> None:
    cfg = build()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.linger_ms = 1  # type: ignore[misc]


def test_replace_revalidates() -> None:
    with pytest.raises(ConfigError, match="linger_ms must be at least 0"):
        dataclasses.replace(build(), linger_ms=-5)
    assert dataclasses.replace(build(), acks="0").acks == 0  # type: ignore[arg-type]


def test_missing_bootstrap_servers() -> None:
    with pytest.raises(ConfigError, match="bootstrap_servers is required"):
        ProducerConfig()
    with pytest.raises(ConfigError, match="bootstrap_servers is required"):
        ProducerConfig.build({"linger.ms": 5})


def test_repr_shows_bootstrap_and_changed_settings_only() -> None:
    assert repr(build()) == "ProducerConfig(bootstrap_servers=('localhost:9092',))"
    assert (
        repr(build(linger_ms=20, acks=1))
        == "ProducerConfig(bootstrap_servers=('localhost:9092',), acks=1, linger_ms=20)"
    )


def test_repr_never_prints_a_secret_field() -> None:
    cfg = build(
        security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_plain_username="u", sasl_plain_password="pw!"
    )
    assert "pw!" not in repr(cfg) and "pw!" not in str(cfg)
    assert "sasl_plain_password='***'" in repr(cfg)


def test_batch_max_size_defaults_to_256_kib_or_1_mib_compressed_within_a_request_and_never_below_batch_size() -> None:
    assert build().effective_batch_max_size == 256 * 1024
    assert build(compression_type="zstd").effective_batch_max_size == 1024 * 1024 - 1024  # ~librdkafka's batch.size
    assert build(max_request_size=100_000).effective_batch_max_size == 100_000 - 1024  # room for the request
    assert build(batch_size=1 << 20).effective_batch_max_size == 1 << 20
    assert build(batch_max_size="16384").effective_batch_max_size == 16384  # Java's fixed batches
    with pytest.raises(ConfigError, match="batch_max_size=100 is below batch_size=16384"):
        build(batch_max_size=100)


# -- protocol-bounded strings --------------------------------------------------------------------------------------

KAFKA_STRING_BYTES = 32767  # Java's Type.STRING: an int16 length, Short.MAX_VALUE


@pytest.mark.parametrize("setting", ["client_id", "transactional_id"])
def test_a_setting_longer_than_a_kafka_string_is_refused_at_construction(setting: str) -> None:
    """Regression: a client_id or transactional_id over 32,767 bytes was accepted, and the producer's first request
    then failed with ProtocolError from the encoder, far from the setting that caused it."""
    assert build(**{setting: "x" * KAFKA_STRING_BYTES}).__dict__[setting] == "x" * KAFKA_STRING_BYTES
    with pytest.raises(ConfigError, match=rf"{setting} is 32768 bytes in UTF-8.*at most 32767"):
        build(**{setting: "x" * (KAFKA_STRING_BYTES + 1)})
    # The bound is in bytes of UTF-8, not characters: 10,923 euro signs are 32,769 bytes.
    with pytest.raises(ConfigError, match=rf"{setting} is 32769 bytes"):
        build(**{setting: "€" * 10923})
    assert len(build(**{setting: "€" * 10922 + "x"}).__dict__[setting].encode()) == KAFKA_STRING_BYTES
    with pytest.raises(ConfigError, match=rf"{setting} is not encodable as UTF-8"):
        build(**{setting: "id-\ud800"})  # a lone surrogate: no encoder can send it
    # Java-style keys take the same path.
    with pytest.raises(ConfigError, match=rf"{setting} is 32768 bytes"):
        ProducerConfig.build({"bootstrap.servers": "h:9092", setting.replace("_", "."): "y" * 32768})


# -- secrets in exports of the config --------------------------------------------------------------------------------


def test_asdict_and_copies_of_the_config_never_show_a_password() -> None:
    """Regression: repr and str masked the passwords, but dataclasses.asdict(config) (and anything printing its
    fields) showed them in plain text."""
    import copy
    import json
    import pickle

    from aioproducer.config import Secret

    cfg = build(
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_plain_username="u",
        sasl_plain_password="pw-SECRET",
        ssl_certfile="/c.pem",
        ssl_password="key-SECRET",
    )
    exported = dataclasses.asdict(cfg)
    for shown in (repr(exported), str(exported), f"{exported}", repr(dataclasses.astuple(cfg)), repr(vars(cfg))):
        assert "SECRET" not in shown
    assert "SECRET" not in f"{cfg.sasl_plain_password} {cfg.ssl_password!s} {cfg.ssl_password:>20}"
    with pytest.raises(TypeError):
        json.dumps(exported)  # refused, never written out in plain text
    # The config still holds the passwords for the code that sends them, and copies keep them.
    assert isinstance(cfg.sasl_plain_password, Secret) and cfg.sasl_plain_password.reveal() == "pw-SECRET"
    assert cfg.sasl_plain_password == "pw-SECRET" and cfg.ssl_password == Secret("key-SECRET")
    for twin in (copy.deepcopy(cfg), pickle.loads(pickle.dumps(cfg)), dataclasses.replace(cfg, linger_ms=7)):
        assert twin.sasl_plain_password == "pw-SECRET" and twin.ssl_password == "key-SECRET"
    assert ProducerConfig(**exported) == cfg  # what asdict gives builds the same config again
    with pytest.raises(ConfigError) as refused:
        build(security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_plain_username="u", sasl_plain_password=42)
    assert "42" not in str(refused.value)
