"""Registered Avro through Spark: confluent-kafka's serdes on one side, the source or
the sink on the other, against the broker's own schema registry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (PySpark's convention)
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tickwheel.spark import FORMAT_NAME

from .helpers import KafkaHelper, Record

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

CLICK = {
    "type": "record",
    "name": "Click",
    "namespace": "shop",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "count", "type": "int"},
        {"name": "score", "type": ["null", "double"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["VIEW", "BUY"]}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {
            "name": "place",
            "type": {
                "type": "record",
                "name": "Place",
                "fields": [
                    {"name": "city", "type": "string"},
                    {"name": "zip", "type": ["null", "int"], "default": None},
                ],
            },
        },
    ],
}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
USER_V1 = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
USER_V2 = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int", "default": 7},
    ],
}


@pytest.fixture
def registry(schema_registry_url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": schema_registry_url}) as client:
        yield client


def serialized(
    registry: SchemaRegistryClient,
    schema: object,
    topic: str,
    value: object,
    field: str = MessageField.VALUE,
) -> bytes:
    serialize = AvroSerializer(registry, json.dumps(schema))
    framed = serialize(value, SerializationContext(topic, field))
    assert framed is not None
    return framed


def micros(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)


def avro_source(
    spark: SparkSession, kafka: KafkaHelper, url: str, topic: str, key_format: str = "binary"
) -> DataFrame:
    return (
        spark.read.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("keyFormat", key_format)
        .option("valueFormat", "avro")
        .option("schema.registry.url", url)
        .load()
    )


def test_avro_serializer_records_read_as_typed_columns(
    spark: SparkSession,
    kafka: KafkaHelper,
    registry: SchemaRegistryClient,
    schema_registry_url: str,
) -> None:
    topic = kafka.new_topic("avro-in", partitions=1)
    clicks = [
        {
            "user": "ada",
            "count": 3,
            "score": 1.5,
            "tags": ["a", "b"],
            "attrs": {"x": 1, "y": -2},
            "kind": "BUY",
            "day": date(2026, 12, 7),
            "at": datetime(2026, 12, 7, 11, 0, 0, 123000, tzinfo=UTC),
            "price": Decimal("12.34"),
            "place": {"city": "Oslo", "zip": None},
        },
        {
            "user": "bob",
            "count": -1,
            "score": None,
            "tags": [],
            "attrs": {},
            "kind": "VIEW",
            "day": date(1970, 1, 1),
            "at": datetime(1970, 1, 1, tzinfo=UTC),
            "price": Decimal("-0.01"),
            "place": {"city": "Lima", "zip": 15001},
        },
    ]
    key_schema = {"type": "string"}
    kafka.produce(
        topic,
        [
            Record(
                serialized(registry, key_schema, topic, click["user"], MessageField.KEY),
                serialized(registry, CLICK, topic, click),
                0,
            )
            for click in clicks
        ]
        + [Record(serialized(registry, key_schema, topic, "gone", MessageField.KEY), None, 0)],
    )

    frame = avro_source(spark, kafka, schema_registry_url, topic, key_format="avro")
    rows = frame.orderBy("offset").select(
        "key",
        "offset",
        "value.user",
        "value.count",
        "value.score",
        "value.tags",
        "value.attrs",
        "value.kind",
        "value.day",
        F.unix_micros("value.at"),
        "value.price",
        "value.place.city",
        "value.place.zip",
        F.col("value").isNull(),
    )

    assert frame.schema["key"].dataType == StringType()
    assert frame.schema["value"].dataType.simpleString() == (
        "struct<user:string,count:int,score:double,tags:array<string>,"
        "attrs:map<string,bigint>,kind:string,day:date,at:timestamp,price:decimal(10,2),"
        "place:struct<city:string,zip:int>>"
    )
    assert [tuple(row) for row in rows.collect()] == [
        (
            "ada",
            0,
            "ada",
            3,
            1.5,
            ["a", "b"],
            {"x": 1, "y": -2},
            "BUY",
            date(2026, 12, 7),
            micros(clicks[0]["at"]),
            Decimal("12.34"),
            "Oslo",
            None,
            False,
        ),
        (
            "bob",
            1,
            "bob",
            -1,
            None,
            [],
            {},
            "VIEW",
            date(1970, 1, 1),
            0,
            Decimal("-0.01"),
            "Lima",
            15001,
            False,
        ),
        ("gone", 2, None, None, None, None, None, None, None, None, None, None, None, True),
    ]


def test_records_written_with_v1_are_read_with_v2s_default(
    spark: SparkSession,
    kafka: KafkaHelper,
    registry: SchemaRegistryClient,
    schema_registry_url: str,
) -> None:
    topic = kafka.new_topic("avro-evolve", partitions=1)
    kafka.produce(
        topic,
        [
            Record(None, serialized(registry, USER_V1, topic, {"name": "ada"}), 0),
            Record(None, serialized(registry, USER_V1, topic, {"name": "bob"}), 0),
            Record(None, serialized(registry, USER_V2, topic, {"name": "cy", "age": 36}), 0),
        ],
    )
    assert registry.get_latest_version(f"{topic}-value").version == 2

    frame = avro_source(spark, kafka, schema_registry_url, topic)

    assert [tuple(row) for row in frame.orderBy("offset").select("value.*").collect()] == [
        ("ada", 7),
        ("bob", 7),
        ("cy", 36),
    ]


def test_a_schema_id_the_registry_does_not_have_fails_the_query_naming_it(
    spark: SparkSession,
    kafka: KafkaHelper,
    registry: SchemaRegistryClient,
    schema_registry_url: str,
) -> None:
    topic = kafka.new_topic("avro-unknown-id", partitions=1)
    registry.register_schema(f"{topic}-value", Schema(json.dumps(USER_V1), "AVRO"))
    unknown_id = 987_654
    kafka.produce(topic, [Record(None, b"\x00" + unknown_id.to_bytes(4, "big") + b"\x06ada", 0)])

    frame = avro_source(spark, kafka, schema_registry_url, topic)

    with pytest.raises(
        Exception, match=rf"{topic}-0 offset 0: the value's schema id {unknown_id} is not in"
    ):
        frame.collect()


SINK_SCHEMA = StructType(
    [
        StructField("key", StringType()),
        StructField(
            "value",
            StructType(
                [
                    StructField("name", StringType(), nullable=False),
                    StructField("age", IntegerType()),
                    StructField("tags", ArrayType(StringType())),
                    StructField("attrs", MapType(StringType(), LongType())),
                    StructField("at", TimestampType()),
                ]
            ),
        ),
    ]
)


def test_sink_output_is_read_by_confluents_avro_deserializer(
    spark: SparkSession,
    kafka: KafkaHelper,
    registry: SchemaRegistryClient,
    schema_registry_url: str,
) -> None:
    topic = kafka.new_topic("avro-out", partitions=1)
    at = datetime(2026, 12, 7, 12, 30, 0, 654321, tzinfo=UTC)
    rows = [
        ("a", ("ada", 36, ["x", None], {"k": 1}, at)),
        ("b", ("bob", None, None, None, None)),
        ("c", None),
    ]

    (
        spark.createDataFrame(rows, SINK_SCHEMA)
        .coalesce(1)
        .write.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("topic", topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", schema_registry_url)
        .mode("append")
        .save()
    )

    deserialize = AvroDeserializer(registry)
    context = SerializationContext(topic, MessageField.VALUE)
    written = kafka.read_all(topic, 1)
    registered = registry.get_latest_version(f"{topic}-value")
    assert {r.value[1:5] for r in written if r.value is not None} == {
        registered.schema_id.to_bytes(4, "big")
    }
    assert [(r.key, deserialize(r.value, context)) for r in written] == [
        (b"a", {"name": "ada", "age": 36, "tags": ["x", None], "attrs": {"k": 1}, "at": at}),
        (b"b", {"name": "bob", "age": None, "tags": None, "attrs": None, "at": None}),
        (b"c", None),
    ]


def test_sink_without_auto_register_refuses_a_schema_not_registered(
    spark: SparkSession, kafka: KafkaHelper, schema_registry_url: str
) -> None:
    topic = kafka.new_topic("avro-no-register", partitions=1)
    writer = (
        spark.createDataFrame([("a", ("ada", 1, None, None, None))], SINK_SCHEMA)
        .write.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("topic", topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", schema_registry_url)
        .option("auto.register.schemas", "false")
        .mode("append")
    )

    with pytest.raises(Exception, match=rf"not registered under '{topic}-value'"):
        writer.save()
    assert kafka.end_offsets(topic, 1) == [0]
