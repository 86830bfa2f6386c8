"""Schema Registry serializers (the `schema-registry` extra): confluent-kafka's own Avro, JSON Schema and Protobuf
serializers write through aioproducer to real Kafka, and confluent-kafka's deserializers read the records back.
The registry is the client's in-memory `mock://` one; nothing of the wire format is ours."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.schema_registry import (
    AsyncSchemaRegistryClient,
    SchemaRegistryClient,
    dual_schema_id_deserializer,
    header_schema_id_serializer,
)
from confluent_kafka.schema_registry.avro import (
    AsyncAvroDeserializer,
    AsyncAvroSerializer,
    AvroDeserializer,
    AvroSerializer,
)
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext, StringDeserializer, StringSerializer
from google.protobuf.timestamp_pb2 import Timestamp

from aioproducer import Producer, ProducerRecord, errors
from aioproducer.schema_registry import AsyncSchemaRegistrySerializer, SchemaRegistrySerializer
from aioproducer.testing import ConsumedRecord, MockProducer

AVRO_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"}],
    }
)
JSON_SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "customer": {"type": "string"}},
        "required": ["id", "customer"],
    }
)
ORDERS = [{"id": n, "customer": f"customer-{n % 3}"} for n in range(5)]


def registry() -> Any:
    return SchemaRegistryClient.new_client({"url": "mock://"})  # the in-memory registry


def context(record: ConsumedRecord, field: MessageField = MessageField.VALUE) -> SerializationContext:
    return SerializationContext(record.topic, field, list(record.headers))


async def produce(bootstrap: str, topic: str, values: list[Any], **settings: Any) -> None:
    async with Producer(bootstrap, **settings) as producer:
        results = await producer.send_many(
            [ProducerRecord(topic, value, key=str(value_key(value))) for value in values]
        )
    assert not [r for r in results if isinstance(r, BaseException)], results


def value_key(value: Any) -> object:
    return value["id"] if isinstance(value, dict) else value.seconds


async def test_avro_written_by_us_reads_back_with_confluents_deserializer(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic, client = topic_factory(2), registry()
    await produce(
        bootstrap,
        topic,
        ORDERS,
        value_serializer=SchemaRegistrySerializer(AvroSerializer(client, AVRO_SCHEMA)),
        key_serializer=SchemaRegistrySerializer(StringSerializer(), field="key"),
    )
    records = read_back_records(topic)
    assert all(r.value is not None and r.value[0] == 0 for r in records)  # the magic byte, then the schema id
    decode = AvroDeserializer(client)
    assert sorted((decode(r.value, context(r)) for r in records), key=lambda o: o["id"]) == ORDERS
    keys = StringDeserializer()
    assert sorted(keys(r.key, context(r, MessageField.KEY)) for r in records) == [str(n) for n in range(5)]
    assert client.get_latest_version(f"{topic}-value").schema.schema_type == "AVRO"


async def test_json_schema_validates_and_reads_back(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic, client = topic_factory(1), registry()
    serializer = SchemaRegistrySerializer(JSONSerializer(JSON_SCHEMA, client))
    await produce(bootstrap, topic, ORDERS, value_serializer=serializer, key_serializer="str")
    async with Producer(bootstrap, value_serializer=serializer) as producer:
        with pytest.raises(errors.InvalidRecordError, match="value_serializer"):
            await producer.send(topic, {"id": "not a number", "customer": "x"})  # refused by the schema
    decode = JSONDeserializer(JSON_SCHEMA)
    assert [decode(r.value, context(r)) for r in read_back_records(topic)] == ORDERS


async def test_protobuf_reads_back(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic, client = topic_factory(1), registry()
    stamps = [Timestamp(seconds=1_700_000_000 + n, nanos=n) for n in range(3)]
    serializer = ProtobufSerializer(Timestamp, client, {"use.deprecated.format": False})
    await produce(bootstrap, topic, stamps, value_serializer=SchemaRegistrySerializer(serializer), key_serializer="str")
    decode = ProtobufDeserializer(Timestamp, {"use.deprecated.format": False})
    assert [decode(r.value, context(r)) for r in read_back_records(topic)] == stamps


async def test_schema_id_in_a_header_reaches_the_record(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic, client = topic_factory(1), registry()
    serializer = AvroSerializer(client, AVRO_SCHEMA, conf={"schema.id.serializer": header_schema_id_serializer})
    await produce(
        bootstrap, topic, ORDERS[:2], value_serializer=SchemaRegistrySerializer(serializer), key_serializer="str"
    )
    records = read_back_records(topic)
    assert all(name == "__value_schema_id" for r in records for name, _ in r.headers) and records[0].headers
    # The payload is bare Avro (the id as a zigzag varint, then the name with its length 10 as zigzag 0x14): no
    # framing. (confluent-kafka's AvroDeserializer refuses payloads of 5 bytes or less even in this mode.)
    assert [r.value for r in records] == [b"\x00\x14customer-0", b"\x02\x14customer-1"]
    decode = AvroDeserializer(client, conf={"schema.id.deserializer": dual_schema_id_deserializer})
    assert [decode(r.value, context(r)) for r in records] == ORDERS[:2]


async def test_async_registry_client_and_serializer(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic = topic_factory(1)
    client = AsyncSchemaRegistryClient.new_client({"url": "mock://"})
    serializer = AsyncSchemaRegistrySerializer(await AsyncAvroSerializer(client, AVRO_SCHEMA))
    await produce(bootstrap, topic, ORDERS, value_serializer=serializer, key_serializer="str")
    decode = await AsyncAvroDeserializer(client)
    assert [await decode(r.value, context(r)) for r in read_back_records(topic)] == ORDERS


async def test_the_mock_producer_runs_the_same_serializer() -> None:
    client = registry()
    serializer = SchemaRegistrySerializer(AvroSerializer(client, AVRO_SCHEMA))
    async with MockProducer(value_serializer=serializer) as mock:
        await mock.send("orders", ORDERS[0])
        with pytest.raises(errors.InvalidRecordError):
            await mock.send("orders", {"id": 1})  # the schema needs a customer
    (record,) = mock.records("orders")
    ctx = SerializationContext("orders", MessageField.VALUE, [])
    assert AvroDeserializer(client)(record.value, ctx) == ORDERS[0]


def test_field_must_be_key_or_value() -> None:
    with pytest.raises(errors.ConfigError):
        SchemaRegistrySerializer(StringSerializer(), field="values")  # type: ignore[arg-type]
