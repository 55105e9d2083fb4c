"""The source against a real broker: streaming (availableNow, restarts, admission
control, new partitions, data loss) and batch reads. One SparkSession for the run."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource
from pyspark.sql.streaming import StreamingQuery

from tickwheel.spark import FORMAT_NAME, KafkaStreamReader, SourceOptions

from .helpers import KafkaHelper, Record

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

QUERY_TIMEOUT_S = 120


def records(count: int, partitions: int, *, first: int = 0) -> list[Record]:
    """``count`` records spread round-robin, values ``v<n>`` numbered from ``first``."""
    return [
        Record(f"k{n}".encode(), f"v{n}".encode(), n % partitions)
        for n in range(first, first + count)
    ]


def source(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    reader = spark.readStream.format(FORMAT_NAME).option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def run_to_parquet(frame: DataFrame, output: Path, checkpoint: str) -> list[int]:
    """Run an availableNow query into a parquet sink; returns rows per micro-batch."""
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    return finish(query)


def finish(query: StreamingQuery) -> list[int]:
    assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish"
    return [int(progress["numInputRows"]) for progress in query.recentProgress]


def offsets_read(spark: SparkSession, output: Path) -> list[tuple[int, int]]:
    rows = spark.read.parquet(str(output)).select("partition", "offset").collect()
    return sorted((row.partition, row.offset) for row in rows)


def test_available_now_restart_reads_every_record_exactly_once(
    spark: SparkSession, kafka: KafkaHelper, checkpoint: str, tmp_path: Path
) -> None:
    topic = kafka.new_topic("restart", partitions=2)
    output = tmp_path / "out"
    kafka.produce(topic, records(200, 2))
    frame = source(
        spark,
        kafka.bootstrap_servers,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="70",
    ).selectExpr("partition", "offset", "CAST(value AS STRING) AS value")

    first = run_to_parquet(frame, output, checkpoint)
    kafka.produce(topic, records(150, 2, first=200))
    second = run_to_parquet(frame, output, checkpoint)

    assert sum(first) == 200
    assert sum(second) == 150
    values = sorted(row.value for row in spark.read.parquet(str(output)).collect())
    assert values == sorted(f"v{n}" for n in range(350))


def test_max_offsets_per_trigger_bounds_every_batch(
    spark: SparkSession, kafka: KafkaHelper, checkpoint: str, tmp_path: Path
) -> None:
    topic = kafka.new_topic("admission", partitions=3)
    # Uneven partitions: 300, 150 and 50 records.
    kafka.produce(topic, [Record(None, b"x", 0)] * 300 + [Record(None, b"y", 1)] * 150)
    kafka.produce(topic, [Record(None, b"z", 2)] * 50)
    frame = source(
        spark,
        kafka.bootstrap_servers,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="120",
    ).select("partition", "offset")

    batches = run_to_parquet(frame, tmp_path / "out", checkpoint)

    assert batches == [120, 120, 120, 120, 20]
    assert len(set(offsets_read(spark, tmp_path / "out"))) == 500


def test_partition_added_mid_stream_is_read_from_its_start(
    spark: SparkSession, kafka: KafkaHelper, checkpoint: str
) -> None:
    topic = kafka.new_topic("grow", partitions=1)
    kafka.produce(topic, records(40, 1))
    query = (
        source(spark, kafka.bootstrap_servers, subscribe=topic, startingOffsets="earliest")
        .select("partition", "offset")
        .writeStream.format("memory")
        .queryName("grow")
        .option("checkpointLocation", checkpoint)
        .start()
    )
    try:
        query.processAllAvailable()
        kafka.add_partitions(topic, 2)
        kafka.produce(topic, [Record(None, b"new", 1)] * 25 + [Record(None, b"old", 0)] * 5)
        query.processAllAvailable()
    finally:
        query.stop()

    rows = spark.table("grow").collect()
    read = sorted((row.partition, row.offset) for row in rows)
    assert read == [(0, n) for n in range(45)] + [(1, n) for n in range(25)]


def test_starting_offsets_json_per_partition(
    spark: SparkSession, kafka: KafkaHelper, checkpoint: str, tmp_path: Path
) -> None:
    topic = kafka.new_topic("starting", partitions=2)
    kafka.produce(topic, records(100, 2))
    frame = source(
        spark,
        kafka.bootstrap_servers,
        subscribe=topic,
        startingOffsets=f'{{"{topic}": {{"0": 10, "1": -2}}}}',
    ).select("partition", "offset")

    run_to_parquet(frame, tmp_path / "out", checkpoint)

    expected = [(0, n) for n in range(10, 50)] + [(1, n) for n in range(50)]
    assert offsets_read(spark, tmp_path / "out") == expected


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_fail_on_data_loss_after_delete_records(
    spark: SparkSession,
    kafka: KafkaHelper,
    checkpoint: str,
    tmp_path: Path,
    fail_on_data_loss: bool,
) -> None:
    topic = kafka.new_topic("loss", partitions=1)
    output = tmp_path / "out"
    kafka.produce(topic, records(50, 1))

    def frame() -> DataFrame:
        return source(
            spark,
            kafka.bootstrap_servers,
            subscribe=topic,
            startingOffsets="earliest",
            failOnDataLoss=str(fail_on_data_loss).lower(),
        ).select("partition", "offset")

    run_to_parquet(frame(), output, checkpoint)
    kafka.produce(topic, records(50, 1, first=50))
    kafka.delete_records_before(topic, 0, 80)

    if fail_on_data_loss:
        with pytest.raises(StreamingQueryException, match=r"data loss in .*50\.\.79"):
            run_to_parquet(frame(), output, checkpoint)
    else:
        run_to_parquet(frame(), output, checkpoint)
        expected = [(0, n) for n in range(50)] + [(0, n) for n in range(80, 100)]
        assert offsets_read(spark, output) == expected


def test_batch_query_reads_exactly_an_offset_range(spark: SparkSession, kafka: KafkaHelper) -> None:
    topic = kafka.new_topic("batch", partitions=2)
    kafka.produce(topic, records(100, 2))
    frame = (
        spark.read.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", f'{{"{topic}": {{"0": 5, "1": 10}}}}')
        .option("endingOffsets", f'{{"{topic}": {{"0": 20, "1": -1}}}}')
        .load()
    )

    rows = frame.collect()

    assert sorted((r.partition, r.offset) for r in rows) == [(0, n) for n in range(5, 20)] + [
        (1, n) for n in range(10, 50)
    ]
    by_offset = {(r.partition, r.offset): r for r in rows}
    assert by_offset[(1, 10)].value == b"v21"
    assert by_offset[(1, 10)].key == b"k21"
    assert by_offset[(1, 10)].topic == topic
    assert by_offset[(1, 10)].timestampType == 0


def test_batch_query_over_an_empty_topic_reads_nothing(
    spark: SparkSession, kafka: KafkaHelper
) -> None:
    topic = kafka.new_topic("empty", partitions=2)
    frame = (
        spark.read.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .load()
    )
    assert frame.count() == 0


def test_stream_reader_pickles_after_talking_to_the_broker(kafka: KafkaHelper) -> None:
    topic = kafka.new_topic("pickle", partitions=2)
    options = SourceOptions.parse(
        {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic}, streaming=True
    )
    reader = KafkaStreamReader(options)
    start = reader.initialOffset()

    copy = pickle.loads(pickle.dumps(reader))

    assert start == {topic: {"0": 0, "1": 0}}
    assert copy.initialOffset() == start
    reader.stop()
    copy.stop()


def test_spark_refuses_the_name_kafka_for_a_python_source(spark: SparkSession) -> None:
    class NamedKafka(DataSource):
        @classmethod
        def name(cls) -> str:
            return "kafka"

    with pytest.raises(Exception, match="DATA_SOURCE_ALREADY_EXISTS"):
        spark.dataSource.register(NamedKafka)
