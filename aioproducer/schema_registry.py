"""Schema Registry serializers for the producer: confluent-kafka's own Avro, JSON Schema and Protobuf serializers,
adapted to aioproducer's context-aware serializer protocol (the extra `aioproducer[schema-registry]`).

Nothing of the wire format is re-implemented here: confluent-kafka's serializer writes the magic byte and schema id
(or, with `schema.id.serializer=header_schema_id_serializer`, a header), registers or looks up the schema, and
validates the value. This module only hands it the topic, the field (key or value) and the record's headers.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["AsyncSchemaRegistrySerializer", "SchemaRegistrySerializer"]

_EXTRA_HINT = "Schema Registry serializers need confluent-kafka's: pip install 'aioproducer[schema-registry]'"

Field = Literal["key", "value"]


def _context(topic: str, field: Field, headers: Any) -> Any:
    # `headers` is the record's own list: a serializer that writes the schema id as a header appends to it.
    try:
        from confluent_kafka.serialization import MessageField, SerializationContext
    except ImportError as exc:
        raise ImportError(_EXTRA_HINT) from exc
    return SerializationContext(topic, MessageField.KEY if field == "key" else MessageField.VALUE, headers)


def _check_field(field: str) -> Field:
    if field not in ("key", "value"):
        from aioproducer.errors import ConfigError

        raise ConfigError(f"field must be 'key' or 'value', got {field!r}")
    return field  # type: ignore[return-value]


class SchemaRegistrySerializer:
    """A confluent-kafka serializer (`AvroSerializer`, `JSONSerializer`, `ProtobufSerializer`, built with a
    `SchemaRegistryClient`) as a producer serializer. `field` must say which side it serializes, as it decides
    the subject (`<topic>-key` or `<topic>-value` with the default naming strategy)::

        client = SchemaRegistryClient({"url": "https://registry:8081"})
        Producer(..., value_serializer=SchemaRegistrySerializer(AvroSerializer(client, schema_str)),
                      key_serializer=SchemaRegistrySerializer(StringSerializer(), field="key"))
    """

    def __init__(self, serializer: Any, *, field: Field = "value") -> None:
        self.serializer = serializer
        self.field = _check_field(field)

    def serialize(self, topic: str, headers: list[tuple[str, bytes | None]], value: Any) -> bytes | None:
        data: bytes | None = self.serializer(value, _context(topic, self.field, headers))
        return data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.serializer).__name__}, field={self.field!r})"


class AsyncSchemaRegistrySerializer(SchemaRegistrySerializer):
    """The same for confluent-kafka's async serializers (`await AsyncAvroSerializer(async_client, schema_str)`),
    whose registry calls do not block the event loop; the producer awaits it for each record."""

    async def serialize(  # type: ignore[override]
        self, topic: str, headers: list[tuple[str, bytes | None]], value: Any
    ) -> bytes | None:
        data: bytes | None = await self.serializer(value, _context(topic, self.field, headers))
        return data
