"""The Avro <-> Spark type mapping, as Spark's from_avro and to_avro make it."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from tickwheel.spark import SparkKafkaError
from tickwheel.spark._avro_types import avro_schema, parse, spark_type


def mapped(schema: object) -> tuple[DataType, bool]:
    return spark_type(parse(json.dumps(schema)), "value")


def test_avro_types_map_to_sparks() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "n", "type": ["null", "long"]},
            {"name": "widened", "type": ["int", "long"]},
            {"name": "real", "type": ["null", "float", "double"]},
            {"name": "kind", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
            {"name": "raw", "type": {"type": "fixed", "name": "F", "size": 2}},
            {"name": "again", "type": "F"},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
            {"name": "time", "type": {"type": "int", "logicalType": "time-millis"}},
            {
                "name": "amount",
                "type": {
                    "type": "fixed",
                    "name": "D",
                    "size": 8,
                    "logicalType": "decimal",
                    "precision": 12,
                    "scale": 3,
                },
            },
            {"name": "items", "type": {"type": "array", "items": ["null", "string"]}},
            {"name": "counts", "type": {"type": "map", "values": "int"}},
        ],
    }

    assert mapped(schema) == (
        StructType(
            [
                StructField("id", StringType(), False),
                StructField("n", LongType(), True),
                StructField("widened", LongType(), False),
                StructField("real", DoubleType(), True),
                StructField("kind", StringType(), False),
                StructField("raw", BinaryType(), False),
                StructField("again", BinaryType(), False),
                StructField("day", DateType(), False),
                StructField("at", TimestampType(), False),
                StructField("local", TimestampNTZType(), False),
                StructField("time", IntegerType(), False),
                StructField("amount", DecimalType(12, 3), False),
                StructField("items", ArrayType(StringType(), True), False),
                StructField("counts", MapType(StringType(), IntegerType(), False), False),
            ]
        ),
        False,
    )


@pytest.mark.parametrize(
    ("field_type", "refusal"),
    [
        (["string", "int"], r"value\.f: the union .* has no Spark type"),
        ({"type": "bytes", "logicalType": "decimal", "precision": 39}, r"value\.f: .*39"),
        (["null", "Node"], r"value\.f: the recursive type Node"),
    ],
)
def test_avro_types_spark_has_none_for_are_refused_naming_the_field(
    field_type: object, refusal: str
) -> None:
    schema = {"type": "record", "name": "Node", "fields": [{"name": "f", "type": field_type}]}
    with pytest.raises(SparkKafkaError, match=refusal):
        mapped(schema)


def test_a_derived_avro_schema_maps_back_to_the_spark_type() -> None:
    inner = StructType([StructField("city", StringType()), StructField("zip", IntegerType())])
    spark = StructType(
        [
            StructField("name", StringType(), False),
            StructField("place", inner),
            StructField("places", ArrayType(inner, False)),
            StructField("at", TimestampType()),
            StructField("price", DecimalType(10, 2)),
            StructField("attrs", MapType(StringType(), LongType(), True)),
        ]
    )

    derived = json.loads(avro_schema(spark, "value"))

    assert derived["name"] == "topLevelRecord"
    assert derived["fields"][1]["type"][0]["name"] == "place"
    assert derived["fields"][1]["type"][0]["namespace"] == "topLevelRecord"
    assert mapped(derived) == (spark, False)


def test_types_avro_cannot_hold_are_refused_naming_the_field() -> None:
    spark = StructType([StructField("m", MapType(ShortType(), StringType()))])
    with pytest.raises(SparkKafkaError, match=r"value\.m: an Avro map has string keys"):
        avro_schema(spark, "value")


def test_invalid_avro_schema_is_refused() -> None:
    with pytest.raises(SparkKafkaError, match="not a valid Avro schema"):
        parse(json.dumps({"type": "record", "name": "R", "fields": [{"name": "f"}]}))
