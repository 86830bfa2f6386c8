"""One setting's value: from what a caller or a pasted Java config gives (typed, or a string) to its normal form.

Each parser takes (setting name, value) and returns the normalized value or raises ConfigError naming the setting;
`aioproducer.config` maps the settings to them. Pure: no I/O.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any, Protocol

from aioproducer.errors import ConfigError
from aioproducer.protocol import MAX_STRING_BYTES
from aioproducer.records.compression import CompressionType, validate_level
from aioproducer.serializers import resolve_serializer

__all__ = [
    "COMPRESSION_LEVELS",
    "JAVA_CLASSES",
    "PARTITIONERS",
    "PartitionerLike",
    "Secret",
    "check_address",
    "level_allowed",
    "levels_text",
    "parse_acks",
    "parse_bool",
    "parse_bootstrap",
    "parse_choice",
    "parse_client_id",
    "parse_level",
    "parse_optional_bool",
    "parse_optional_int",
    "parse_partitioner",
    "parse_secret",
    "parse_serializer",
    "parse_text",
    "parse_transactional_id",
    "split_address",
    "to_int",
]


class PartitionerLike(Protocol):
    """Anything with a `partition(...)` method can be given as `partitioner`."""

    def partition(self, *args: Any, **kwargs: Any) -> int: ...


# Java's CompressionType level validators (KIP-390): gzip is 1..9 or -1 (Deflater.DEFAULT_COMPRESSION),
# lz4 1..17, zstd Zstd.minCompressionLevel() (-131072) .. 22; snappy and none take no level.
COMPRESSION_LEVELS: Mapping[str, range] = {"gzip": range(-1, 10), "lz4": range(1, 18), "zstd": range(-131072, 23)}
PARTITIONERS = ("default", "round_robin", "uniform_sticky")
JAVA_CLASSES = {  # class names from pasted Java configs → our names
    "org.apache.kafka.clients.producer.RoundRobinPartitioner": "round_robin",
    "org.apache.kafka.clients.producer.UniformStickyPartitioner": "uniform_sticky",
    "org.apache.kafka.clients.producer.internals.DefaultPartitioner": "default",
    "org.apache.kafka.common.serialization.ByteArraySerializer": "bytes",
    "org.apache.kafka.common.serialization.BytesSerializer": "bytes",
    "org.apache.kafka.common.serialization.ByteBufferSerializer": "bytes",
    "org.apache.kafka.common.serialization.StringSerializer": "str",
}
ADDRESS = re.compile(r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+(?:%[\w.-]+)?)\]|(?P<host>[\w.-]+)):(?P<port>\d{1,5})")
INTEGER = re.compile(r"[+-]?\d+")


class Secret:
    """A password as a setting holds it: `reveal()` gives the text; `repr`, `str`, `format`, `dataclasses.asdict`
    and copies never show it, and `json.dumps` refuses it. Pickling keeps it (a producer config travels to Spark's
    workers that way). Equal to another Secret, or to the plain text, with the same text."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"a Secret holds a str, got a {type(text).__name__}")  # never echo what may be secret
        self._text = text

    def reveal(self) -> str:
        """The secret text, for the code that sends it (TLS key loading, SASL)."""
        return self._text

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(repr(self), spec)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Secret):
            return self._text == other._text
        if isinstance(other, str):
            return self._text == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._text)

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self

    def __reduce__(self) -> tuple[type[Secret], tuple[str]]:
        return Secret, (self._text,)


def parse_secret(name: str, value: Any) -> Secret | None:
    # The value is never echoed: a wrong type may still be the real secret.
    if value is None or isinstance(value, Secret):
        return value
    if isinstance(value, str):
        return Secret(value)
    raise ConfigError(f"{name} must be a str, got a {type(value).__name__}")


def check_wire_string(name: str, value: str) -> str:
    """A setting sent as a Kafka protocol string: UTF-8 within 32,767 bytes (Java's Type.STRING), checked here rather
    than failing the first request that carries it."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ConfigError(f"{name} is not encodable as UTF-8 ({exc.reason} at position {exc.start})") from None
    if size > MAX_STRING_BYTES:
        raise ConfigError(
            f"{name} is {size} bytes in UTF-8; Kafka protocol strings hold at most {MAX_STRING_BYTES}: shorten it"
        )
    return value


def to_int(name: str, value: Any) -> int:
    if isinstance(value, str) and INTEGER.fullmatch(value.strip()):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ConfigError(f"{name} must be an integer (or a string of digits), got {type(value).__name__} {value!r}")


def parse_optional_int(name: str, value: Any) -> int | None:
    return None if value is None else to_int(name, value)


def parse_level(codec: str, value: Any) -> int:
    level = to_int(f"compression.{codec}.level", value)
    if level not in COMPRESSION_LEVELS[codec] or not level_allowed(codec, level):
        raise ConfigError(f"compression.{codec}.level={level} is out of range: {levels_text(codec)}")
    return level


def level_allowed(codec: str, level: int) -> bool:
    """The codec's own rule (gzip takes 1..9 or -1, not 0), so a bad level fails here, not at the first batch."""
    try:
        validate_level(CompressionType.from_name(codec), level)
    except ConfigError:
        return False
    return True


def levels_text(codec: str) -> str:
    levels = COMPRESSION_LEVELS[codec]
    extra = " except 0 (-1 is zlib's default)" if codec == "gzip" else ""
    return f"{codec} levels run from {levels.start} to {levels.stop - 1}{extra}"


def parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{name} must be True or False (or 'true'/'false'), got {type(value).__name__} {value!r}")


def parse_optional_bool(name: str, value: Any) -> bool | None:
    return None if value is None else parse_bool(name, value)


def parse_choice(name: str, value: Any, choices: tuple[str, ...], *, upper: bool = False) -> str:
    if isinstance(value, str):
        spelled = value.strip().upper() if upper else value.strip().lower()
        if spelled in choices:
            return spelled
    close = difflib.get_close_matches(str(value), choices, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}{hint}")


def parse_acks(name: str, value: Any) -> int:
    if isinstance(value, str) and value.strip().lower() in ("all", "-1", "0", "1"):
        return -1 if value.strip().lower() == "all" else int(value)
    if type(value) is int and value in (-1, 0, 1):
        return value
    raise ConfigError(f"{name} must be 'all' (same as -1), 0 or 1, got {value!r}")


def parse_bootstrap(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        entries = value.split(",")
    elif isinstance(value, list | tuple) and all(isinstance(entry, str) for entry in value):
        entries = list(value)
    else:
        raise ConfigError(f"{name} must be a 'host:port,host:port' string or a list of them, got {value!r}")
    # Java's ClientUtils.parseAndValidateAddresses skips blank entries ("h1:9092, ,h2:9092" is fine).
    servers = tuple(check_address(name, entry.strip()) for entry in entries if entry.strip())
    if not servers:
        raise ConfigError(f"{name} is required: give at least one broker as 'host:port', e.g. 'localhost:9092'")
    return servers


def check_address(name: str, address: str) -> str:
    match = ADDRESS.fullmatch(address)
    if match is None or not 0 < int(match["port"]) < 65536:
        bare_ipv6 = address.count(":") > 1 and "[" not in address
        ipv6_hint = " (write IPv6 addresses in brackets: '[::1]:9092')" if bare_ipv6 else ""
        raise ConfigError(f"{name} entry {address!r} is not 'host:port' with a port from 1 to 65535{ipv6_hint}")
    return address


def split_address(address: str) -> tuple[str, int]:
    """A bootstrap entry ('host:port', or '[v6]:port' as `parse_bootstrap` accepts it) → (host, port), the host without
    its brackets."""
    host, _, port = address.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), int(port)


def parse_text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a str, got {type(value).__name__} {value!r:.80}")
    return value


def parse_client_id(name: str, value: Any) -> str:
    """client_id goes in every request's header (a protocol string)."""
    return check_wire_string(name, parse_text(name, value))


def parse_partitioner(name: str, value: Any) -> str | PartitionerLike:
    if isinstance(value, str):
        return parse_choice(name, JAVA_CLASSES.get(value.strip(), value), PARTITIONERS)
    if isinstance(value, type) or not callable(getattr(value, "partition", None)):
        raise ConfigError(
            f"{name} must be one of {', '.join(map(repr, PARTITIONERS))} or an object (an instance, not a class) "
            f"with a partition() method, got {value!r}"
        )
    partitioner: PartitionerLike = value
    return partitioner


def parse_serializer(name: str, value: Any) -> Any:
    spec = JAVA_CLASSES.get(value.strip(), value.strip()) if isinstance(value, str) else value
    resolve_serializer(spec, role="key" if name == "key_serializer" else "value")  # ConfigError unless usable
    return spec


def parse_transactional_id(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name} must be None or a non-empty str, got {value!r:.80}")
    return check_wire_string(name, value)  # InitProducerId, AddPartitionsToTxn, EndTxn, Produce carry it


def parse_interceptors(name: str, value: Any) -> tuple[Any, ...]:
    """Java's comma-separated class list, or a sequence of names, classes or hook objects (loaded at start)."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise ConfigError(f"{name} must be a comma-separated str or a list, got {value!r}")
    return tuple(item.strip() if isinstance(item, str) else item for item in items if item != "" and item is not None)
