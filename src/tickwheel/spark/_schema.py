"""The columns of Spark's Kafka connector, for the source and the sink.

Source rows are ``key, value, topic, partition, offset, timestamp, timestampType`` and,
with ``includeHeaders``, ``headers`` (an array of ``key``/``value`` structs). The
``timestampType`` is Kafka's: 0 for CreateTime, 1 for LogAppendTime, -1 when absent.

A sink takes a ``value`` column (string or binary) and optionally ``key`` (string or
binary), ``topic`` (string; else the ``topic`` option), ``headers`` (as above) and
``partition`` (int; else the producer's partitioner); other columns are ignored, as in
Spark's connector. ``check_sink_schema`` rejects anything else before a task runs.

A key or value in the ``avro`` format (``_options.RecordFormats``) is a struct column
instead, of the type its Avro schema maps to (``_avro_types``), in the source and the
sink alike.

Concurrency: immutable type objects; safe anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tickwheel.spark._errors import SparkKafkaError

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
_BASE_FIELDS = (
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
)
_SINK_TYPES: dict[str, tuple[DataType, ...]] = {
    "value": (StringType(), BinaryType()),
    "key": (StringType(), BinaryType()),
    "topic": (StringType(),),
    "headers": (HEADERS_TYPE,),
    "partition": (IntegerType(),),
}


def source_schema(
    *, include_headers: bool, column_types: Mapping[str, DataType] | None = None
) -> StructType:
    """The source's row schema; ``column_types`` replaces the binary type of ``key`` or
    ``value`` (an Avro column's struct type)."""
    types = column_types or {}
    fields = [StructField(f.name, types[f.name]) if f.name in types else f for f in _BASE_FIELDS]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def check_sink_schema(
    schema: StructType, *, default_topic: str | None, avro_columns: Sequence[str] = ()
) -> None:
    """Raise ``SparkKafkaError`` unless ``schema`` can be written to Kafka, the columns
    named in ``avro_columns`` as structs."""
    types = {field.name.lower(): field.dataType for field in schema.fields}
    if "value" not in types:
        raise SparkKafkaError("the Kafka sink needs a 'value' column (string or binary)")
    if "topic" not in types and default_topic is None:
        raise SparkKafkaError("the Kafka sink needs a 'topic' column or the option topic")
    for name in avro_columns:
        if name in types and not isinstance(types[name], StructType):
            raise SparkKafkaError(
                f"Kafka sink column {name!r} must be a struct with {name}Format=avro,"
                f" not {types[name].simpleString()}"
            )
    for name, allowed in _SINK_TYPES.items():
        if name in avro_columns:
            continue
        actual = types.get(name)
        if actual is not None and not _matches(actual, allowed):
            names = " or ".join(t.simpleString() for t in allowed)
            raise SparkKafkaError(
                f"Kafka sink column {name!r} must be {names}, not {actual.simpleString()}"
            )


def _matches(actual: DataType, allowed: tuple[DataType, ...]) -> bool:
    # Compare by type shape, ignoring nullability, which a DataFrame may set either way.
    return actual.simpleString() in {t.simpleString() for t in allowed}
