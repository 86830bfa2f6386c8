"""`ProducerSettings`: the producer's keyword settings as a TypedDict, so type checkers and IDEs know every name.

`Producer(...)`, `MockProducer(...)` and `ProducerConfig.build(...)` take `**settings: Unpack[ProducerSettings]`: a
misspelt setting (`linger_mss=5`) or a value of the wrong type is a type-checking error, and an IDE completes the
names. Each key is a `ProducerConfig` field, typed as Python code passes it (`tests/test_settings_typing.py` keeps the
two identical); the only extra keys are the codec levels and `sasl_jaas_config`, which `ProducerConfig.build` folds
into fields. Strings as Java configs spell them (`"5"` for 5, lower-case choices) still work at run time, through
`config={...}` or a `dict` unpacked as `**settings`; this type describes the Python spelling. Declarations only.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeAlias, TypedDict

from aioproducer.config_values import PartitionerLike
from aioproducer.serializers import ContextSerializer

__all__ = ["ProducerSettings", "SerializerSetting"]

# A serializer setting: a built-in name, a Java serializer class name, a callable of the value, or an object with
# `serialize(topic, headers, value)` (either may be async); None is "bytes".
SerializerSetting: TypeAlias = 'Literal["bytes", "str", "json"] | str | Callable[[Any], Any] | ContextSerializer | None'


class ProducerSettings(TypedDict, total=False):
    """Every keyword setting of the producer, with the types Python code gives them (see `ProducerConfig` for what
    each means and its default; the names are Java's with dots turned into underscores)."""

    bootstrap_servers: str | Sequence[str]
    client_id: str
    acks: Literal["all", -1, 0, 1]
    enable_idempotence: bool | None
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"]
    compression_level: int | None
    linger_ms: int
    batch_size: int
    batch_max_size: int | None
    buffer_memory: int
    max_block_ms: int
    max_request_size: int
    request_timeout_ms: int
    delivery_timeout_ms: int
    retries: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    metadata_max_age_ms: int
    metadata_max_idle_ms: int
    max_in_flight_requests_per_connection: int
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int
    connections_max_idle_ms: int
    socket_connection_setup_timeout_ms: int
    socket_connection_setup_timeout_max_ms: int
    close_timeout_ms: int | None
    partitioner: Literal["default", "round_robin", "uniform_sticky"] | str | PartitionerLike
    partitioner_ignore_keys: bool
    partitioner_adaptive_partitioning_enable: bool
    partitioner_availability_timeout_ms: int
    key_serializer: SerializerSetting
    value_serializer: SerializerSetting
    interceptor_classes: str | Sequence[Any]
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
    ssl_context: ssl.SSLContext | None
    ssl_cafile: str | os.PathLike[str] | None
    ssl_certfile: str | os.PathLike[str] | None
    ssl_keyfile: str | os.PathLike[str] | None
    ssl_password: str | None
    ssl_check_hostname: bool
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None
    sasl_plain_username: str | None
    sasl_plain_password: str | None
    sasl_oauth_token_provider: Callable[[], Awaitable[Any]] | None
    transactional_id: str | None
    transaction_timeout_ms: int
    allow_auto_create_topics: bool
    # Folded into fields by ProducerConfig.build: the level of the codec in use becomes compression_level (Java keeps
    # one per codec), and a JAAS line gives the SASL username and password.
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    sasl_jaas_config: str
