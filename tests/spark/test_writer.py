"""The sink against a real broker: what Spark writes is what Kafka holds."""

from __future__ import annotations

import pickle

import pytest
from pyspark.sql import DataFrameWriter, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from tickwheel.spark import (
    FORMAT_NAME,
    KafkaStreamWriter,
    SinkOptions,
    SparkKafkaError,
)

from .helpers import KafkaHelper, Record

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

QUERY_TIMEOUT_S = 120
HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
SINK_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("partition", IntegerType()),
        StructField("headers", ArrayType(HEADER)),
    ]
)


def test_batch_write_output_read_back_equals_input(spark: SparkSession, kafka: KafkaHelper) -> None:
    topic = kafka.new_topic("sink", partitions=2)
    rows = [
        (topic, None if n % 7 == 0 else f"k{n}", f"v{n}".encode(), n % 2, None) for n in range(300)
    ]

    (
        spark.createDataFrame(rows, SINK_SCHEMA)
        .write.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .mode("append")
        .save()
    )

    # Values are unique: order by value, since keys may be null.
    expected = sorted(
        (
            (None if key is None else key.encode(), value, partition)
            for _, key, value, partition, _ in rows
        ),
        key=lambda record: record[1],
    )
    got = sorted(
        ((r.key, r.value, r.partition) for r in kafka.read_all(topic, 2)),
        key=lambda record: record[1],
    )
    assert got == expected


def test_headers_round_trip_through_source_and_sink(
    spark: SparkSession, kafka: KafkaHelper, tmp_path: object
) -> None:
    source_topic = kafka.new_topic("headers-in", partitions=1)
    sink_topic = kafka.new_topic("headers-out", partitions=1)
    sent = [
        Record(b"a", b"1", 0, (("trace", b"t1"), ("trace", b"t2"), ("empty", None))),
        Record(b"b", b"2", 0, ()),
        Record(b"c", b"3", 0, (("utf8-\u00e9", b"\x00\xff"),)),
    ]
    kafka.produce(source_topic, sent)

    query = (
        spark.readStream.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", source_topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .select("key", "value", "headers")
        .writeStream.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("topic", sink_topic)
        .option("checkpointLocation", f"{tmp_path}/checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S)

    assert kafka.read_all(sink_topic, 1) == sent


def test_sink_refuses_a_frame_it_cannot_write(spark: SparkSession, kafka: KafkaHelper) -> None:
    frame = spark.createDataFrame([(1,)], "value INT")
    with pytest.raises(Exception, match="'value' must be"):
        (
            frame.write.format(FORMAT_NAME)
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("topic", "never")
            .mode("append")
            .save()
        )


def test_sink_refuses_overwrite(spark: SparkSession, kafka: KafkaHelper) -> None:
    frame = spark.createDataFrame([("x",)], "value STRING")
    with pytest.raises(Exception, match="append-only"):
        (
            frame.write.format(FORMAT_NAME)
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("topic", "never")
            .mode("overwrite")
            .save()
        )


def test_writer_pickles() -> None:
    writer = KafkaStreamWriter(SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "t"}))
    assert isinstance(pickle.loads(pickle.dumps(writer)), KafkaStreamWriter)
    with pytest.raises(SparkKafkaError):
        SinkOptions.parse({"topic": "t"})


def test_the_option_topic_overrides_the_topic_column(
    spark: SparkSession, kafka: KafkaHelper
) -> None:
    column_topic = kafka.new_topic("sink-column", partitions=1)
    option_topic = kafka.new_topic("sink-option", partitions=1)
    frame = spark.createDataFrame(
        [(column_topic, f"v{n}".encode()) for n in range(5)], "topic STRING, value BINARY"
    )

    def writer() -> DataFrameWriter:
        return (
            frame.write.format(FORMAT_NAME)
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .mode("append")
        )

    writer().option("topic", option_topic).save()
    writer().save()

    # Spark's tasks write in any order: compare the sets of values.
    values = [f"v{n}".encode() for n in range(5)]
    assert sorted(r.value or b"" for r in kafka.read_all(option_topic, 1)) == values
    assert sorted(r.value or b"" for r in kafka.read_all(column_topic, 1)) == values


def test_exactly_once_to_the_topics_of_a_topic_column(
    spark: SparkSession, kafka: KafkaHelper, tmp_path: object
) -> None:
    source = kafka.new_topic("eos-column-in", partitions=2)
    evens = kafka.new_topic("eos-evens", partitions=1)
    odds = kafka.new_topic("eos-odds", partitions=1)
    kafka.produce(source, [Record(None, b"%d" % n, n % 2) for n in range(40)])

    query = (
        spark.readStream.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10")
        .load()
        .selectExpr(f"if(partition = 0, '{evens}', '{odds}') as topic", "value")
        .writeStream.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("exactlyOnce", "true")
        .option("exactlyOnce.markerTopic", source)
        .option("checkpointLocation", f"{tmp_path}/checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S)
    assert query.exception() is None

    assert kafka.committed_values(evens, 1) == [b"%d" % n for n in range(0, 40, 2)]
    assert kafka.committed_values(odds, 1) == [b"%d" % n for n in range(1, 40, 2)]
