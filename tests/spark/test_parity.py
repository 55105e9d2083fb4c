"""Spark connector parity against a real broker and the local Spark session: reading
from and to a time, the no-match strategy, minPartitions, minOffsetsPerTrigger with
maxTriggerDelay, Spark-only options refused, what the progress reports, compacted
ranges under failOnDataLoss, and kafka.* settings reaching the readers."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import spark_partition_id

from tickwheel.spark import (
    FORMAT_NAME,
    KafkaStreamReader,
    SourceOptions,
    offsets_behind_latest,
)

from .helpers import TIMEOUT_S, KafkaHelper

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

QUERY_TIMEOUT_S = 120
# Record n of a timed topic has timestamp BASE_MS + n s and goes to partition n % 2, so
# in partition p it sits at offset n // 2.
BASE_MS = 1_700_000_000_000
STEP_MS = 1000
TIMED_RECORDS = 20


def produce_timed(kafka: KafkaHelper, topic: str, numbers: Iterable[int]) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(error)

    for n in numbers:
        producer.produce(
            topic,
            value=f"v{n}".encode(),
            partition=n % 2,
            timestamp=BASE_MS + n * STEP_MS,
            on_delivery=delivered,
        )
    assert producer.flush(TIMEOUT_S) == 0
    assert not failures, failures


def timed_topic(kafka: KafkaHelper, prefix: str) -> str:
    # Its records are stamped in 2023: with the default retention.ms (7 days) the
    # broker's next retention check, every 5 minutes, would delete them.
    topic = kafka.new_topic(prefix, partitions=2, config={"retention.ms": "-1"})
    produce_timed(kafka, topic, range(TIMED_RECORDS))
    return topic


def batch(spark: SparkSession, kafka: KafkaHelper, topic: str, **options: str) -> DataFrame:
    reader = (
        spark.read.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def numbers_read(frame: DataFrame) -> list[int]:
    return sorted(int(row.value.decode()[1:]) for row in frame.select("value").collect())


def offsets(source: Any, which: str) -> Any:
    """A progress source's ``startOffset``/``endOffset``/``latestOffset``, parsed."""
    return json.loads(source[which])


def at(n: int) -> str:
    return str(BASE_MS + n * STEP_MS)


def test_batch_reads_between_two_times(spark: SparkSession, kafka: KafkaHelper) -> None:
    topic = timed_topic(kafka, "times")
    frame = batch(
        spark,
        kafka,
        topic,
        startingTimestamp=at(5),
        endingTimestamp=at(15),
        # Both lose to the timestamps, as in Spark.
        startingOffsets="earliest",
        endingOffsets="latest",
    )

    rows = frame.select("partition", "offset", "timestamp").collect()

    assert numbers_read(frame) == list(range(5, 15))
    # Partition 0 holds 0, 2, 4, ...: it starts at n=6 (offset 3) and ends before n=16
    # (offset 8); partition 1 starts at n=5 (offset 2) and ends before n=15 (offset 7).
    offsets = sorted((r.partition, r.offset) for r in rows)
    assert offsets == [(0, o) for o in range(3, 8)] + [(1, o) for o in range(2, 7)]
    assert min(r.timestamp.timestamp() * 1000 for r in rows) == BASE_MS + 5 * STEP_MS


def test_batch_offsets_by_timestamp_per_partition(spark: SparkSession, kafka: KafkaHelper) -> None:
    topic = timed_topic(kafka, "bytime")
    frame = batch(
        spark,
        kafka,
        topic,
        startingOffsetsByTimestamp=f'{{"{topic}": {{"0": {at(10)}, "1": {at(3)}}}}}',
        startingOffsets=f'{{"{topic}": {{"0": 0, "1": 0}}}}',
        # No record at or after this time: the end is the latest offset. Partition 1,
        # not named, ends at latest too.
        endingOffsetsByTimestamp=f'{{"{topic}": {{"0": {at(1000)}}}}}',
    )

    assert numbers_read(frame) == [
        n for n in range(TIMED_RECORDS) if n >= (10 if n % 2 == 0 else 3)
    ]


def test_no_record_after_the_start_time_fails_or_starts_at_latest(
    spark: SparkSession, kafka: KafkaHelper
) -> None:
    topic = timed_topic(kafka, "nomatch")

    with pytest.raises(Exception, match=r"has no record at or after timestamp"):
        batch(spark, kafka, topic, startingTimestamp=at(1000)).collect()
    late = batch(
        spark,
        kafka,
        topic,
        startingTimestamp=at(1000),
        startingOffsetsByTimestampStrategy="latest",
    )
    assert late.count() == 0
    # Per partition: partition 1 has records after n=12, partition 0 none after n=19.
    mixed = batch(
        spark,
        kafka,
        topic,
        startingOffsetsByTimestamp=f'{{"{topic}": {{"0": {at(1000)}, "1": {at(12)}}}}}',
        startingOffsetsByTimestampStrategy="latest",
    )
    assert numbers_read(mixed) == [13, 15, 17, 19]


def test_stream_starts_at_a_time_and_resumes_from_its_checkpoint(
    spark: SparkSession, kafka: KafkaHelper, checkpoint: str, tmp_path: Path
) -> None:
    topic = timed_topic(kafka, "streamtime")
    output = tmp_path / "out"

    def run() -> list[Any]:
        query = (
            spark.readStream.format(FORMAT_NAME)
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingTimestamp", at(15))
            .option("startingOffsets", "earliest")
            .load()
            .select("partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish"
        return [p["sources"][0] for p in query.recentProgress if p["numInputRows"]]

    first = run()
    produce_timed(kafka, topic, range(TIMED_RECORDS, TIMED_RECORDS + 6))
    second = run()

    # Spark reports no startOffset for a query's first batch: the rows show where it began.
    read = spark.read.parquet(str(output)).groupBy("partition").min("offset").collect()
    assert sorted((r[0], r[1]) for r in read) == [(0, 8), (1, 7)]
    assert offsets(first[-1], "endOffset") == {topic: {"0": 10, "1": 10}}
    # The restart ignores the time: it goes on from the checkpoint.
    assert offsets(second[0], "startOffset") == {topic: {"0": 10, "1": 10}}
    assert offsets(second[-1], "endOffset") == {topic: {"0": 13, "1": 13}}
    assert numbers_read(spark.read.parquet(str(output))) == list(range(15, TIMED_RECORDS + 6))


def test_min_partitions_splits_batch_and_stream_reads(
    spark: SparkSession, kafka: KafkaHelper, checkpoint: str
) -> None:
    topic = kafka.new_topic("minparts", partitions=2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for n in range(40):
        # 30 records in partition 0, 10 in partition 1.
        producer.produce(topic, value=f"v{n}".encode(), partition=0 if n < 30 else 1)
    assert producer.flush(TIMEOUT_S) == 0

    plain = batch(spark, kafka, topic)
    split = batch(spark, kafka, topic, minPartitions="4")
    # At most 8 records per task: 4 tasks for partition 0 (30 = 8+7+7+8), 2 for partition
    # 1; minPartitions=3 asks for fewer and changes nothing.
    capped = batch(spark, kafka, topic, maxRecordsPerPartition="8", minPartitions="3")

    assert plain.rdd.getNumPartitions() == 2
    assert split.rdd.getNumPartitions() == 4
    assert capped.rdd.getNumPartitions() == 6
    assert sorted(r.offset for r in capped.where("partition = 0").collect()) == list(range(30))
    tasks = split.select(spark_partition_id().alias("task"), "partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in tasks) == [(0, o) for o in range(30)] + [
        (1, o) for o in range(10)
    ]
    # Partition 0 is read by three tasks of 10 records, partition 1 by one.
    by_task: dict[int, list[int]] = {}
    for r in tasks:
        by_task.setdefault(r.task, []).append(r.partition)
    assert sorted((parts[0], len(parts)) for parts in by_task.values()) == [
        (0, 10),
        (0, 10),
        (0, 10),
        (1, 10),
    ]

    query = (
        spark.readStream.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("minPartitions", "4")
        .load()
        .select(spark_partition_id().alias("task"), "partition", "offset")
        .writeStream.format("memory")
        .queryName("minparts")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish"
    streamed = spark.table("minparts").collect()
    assert len(streamed) == 40
    assert len({r.task for r in streamed}) == 4


def test_min_offsets_per_trigger_waits_for_records_or_the_delay(
    spark: SparkSession, kafka: KafkaHelper, checkpoint: str
) -> None:
    topic = kafka.new_topic("minoffsets", partitions=2)
    delay_s = 6
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})

    def produce(count: int) -> None:
        for n in range(count):
            producer.produce(topic, value=b"x", partition=n % 2)
        assert producer.flush(TIMEOUT_S) == 0

    def rows() -> int:
        return int(spark.table("minoffsets").count())

    query = (
        spark.readStream.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("minOffsetsPerTrigger", "50")
        .option("maxTriggerDelay", f"{delay_s}s")
        .load()
        .select("partition", "offset")
        .writeStream.format("memory")
        .queryName("minoffsets")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        # The first trigger is let through (nothing to read yet) and starts the delay.
        query.processAllAvailable()
        started = time.monotonic()
        produce(20)
        # 20 < 50 waiting: held back, the source reports no new data.
        query.processAllAvailable()
        assert rows() == 0
        before_batch = time.monotonic()
        produce(40)
        query.processAllAvailable()
        held = rows()
        elapsed = time.monotonic() - started
        # 60 >= 50: one batch with all of them, without waiting for the delay.
        assert held == 60
        assert elapsed < delay_s, f"took {elapsed:.1f} s: the batch waited for the delay"
        produce(5)
        deadline = time.monotonic() + QUERY_TIMEOUT_S
        while rows() < 65:
            assert time.monotonic() < deadline, "the delayed batch never came"
            query.awaitTermination(0.2)
        # 5 < 50: read only once maxTriggerDelay had passed since the batch of 60, which
        # was let through after before_batch.
        assert time.monotonic() - before_batch >= delay_s
    finally:
        query.stop()
    batches = [int(p["numInputRows"]) for p in query.recentProgress if p["numInputRows"]]
    assert batches == [60, 5]


def test_min_offsets_per_trigger_on_the_driver_with_a_manual_clock(kafka: KafkaHelper) -> None:
    topic = kafka.new_topic("minclock", partitions=1)
    kafka_options = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic}
    options = SourceOptions.parse(
        {**kafka_options, "minOffsetsPerTrigger": "10", "maxTriggerDelay": "1m"}, streaming=True
    )
    now_ms = [1_000_000]
    reader = KafkaStreamReader(options, clock_ms=lambda: now_ms[0])
    limit = reader.getDefaultReadLimit()
    start = reader.initialOffset()
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})

    def produce(count: int) -> None:
        for _ in range(count):
            producer.produce(topic, value=b"x", partition=0)
        assert producer.flush(TIMEOUT_S) == 0

    try:
        produce(3)
        assert reader.latestOffset(start, limit) == {topic: {"0": 3}}  # the first goes
        start = {topic: {"0": 3}}
        produce(4)
        now_ms[0] += 59_999
        assert reader.latestOffset(start, limit) == start  # 4 < 10, under a minute
        assert reader.reportLatestOffset() == {topic: {"0": 7}}
        now_ms[0] += 1
        assert reader.latestOffset(start, limit) == {topic: {"0": 7}}  # the minute is up
        start = {topic: {"0": 7}}
        produce(10)
        assert reader.latestOffset(start, limit) == {topic: {"0": 17}}  # 10 waiting
    finally:
        reader.stop()


def test_progress_reports_latest_offset_but_no_metrics(
    spark: SparkSession, kafka: KafkaHelper, checkpoint: str
) -> None:
    topic = timed_topic(kafka, "progress")
    query = (
        spark.readStream.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "8")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish"
    first = query.recentProgress[0]["sources"][0]

    assert offsets(first, "endOffset") == {topic: {"0": 4, "1": 4}}
    assert offsets(first, "latestOffset") == {topic: {"0": 10, "1": 10}}
    # PySpark 4.3 gives a Python source no way to fill these (see _reader's docstring);
    # offsets_behind_latest computes Spark's figures from the progress instead.
    assert not first["metrics"]
    assert offsets_behind_latest(first) == {
        "minOffsetsBehindLatest": "6",
        "maxOffsetsBehindLatest": "6",
        "avgOffsetsBehindLatest": "6.0",
    }


def test_spark_only_option_fails_the_query_with_its_name(
    spark: SparkSession, kafka: KafkaHelper
) -> None:
    topic = kafka.new_topic("sparkonly", partitions=1)

    def stream() -> None:
        query = (
            spark.readStream.format(FORMAT_NAME)
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("subscribe", topic)
            .option("groupIdPrefix", "etl")
            .load()
            .writeStream.format("noop")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(QUERY_TIMEOUT_S)

    with pytest.raises(Exception, match="groupIdPrefix is not supported"):
        stream()
    with pytest.raises(Exception, match="groupIdPrefix is not supported"):
        batch(spark, kafka, topic, groupIdPrefix="etl").collect()


def test_min_offsets_per_trigger_lets_a_one_time_trigger_read_everything(
    spark: SparkSession, kafka: KafkaHelper, checkpoint: str
) -> None:
    topic = timed_topic(kafka, "minonce")
    query = (
        spark.readStream.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("minOffsetsPerTrigger", "1000")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(once=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish"
    assert [int(p["numInputRows"]) for p in query.recentProgress] == [TIMED_RECORDS]


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_topic_deleted_mid_query_is_data_loss(
    spark: SparkSession, kafka: KafkaHelper, checkpoint: str, fail_on_data_loss: bool
) -> None:
    gone = timed_topic(kafka, "deleted")
    kept = timed_topic(kafka, "kept")
    name = f"deleted_{str(fail_on_data_loss).lower()}"
    query = (
        spark.readStream.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", f"{gone},{kept}")
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", str(fail_on_data_loss).lower())
        .load()
        .select("topic", "offset")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", checkpoint)
        .start()
    )
    try:
        query.processAllAvailable()
        assert spark.table(name).count() == 2 * TIMED_RECORDS
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        admin.delete_topics([gone])[gone].result(TIMEOUT_S)
        produce_timed(kafka, kept, range(TIMED_RECORDS, TIMED_RECORDS + 4))
        if fail_on_data_loss:
            with pytest.raises(StreamingQueryException, match=rf"partition {gone}-\d is gone"):
                query.processAllAvailable()
        else:
            query.processAllAvailable()
            rows = spark.table(name).collect()
            assert sum(1 for r in rows if r.topic == kept) == TIMED_RECORDS + 4
    finally:
        query.stop()


# A compacted topic whose segments roll after a pause, cleaned as soon as they are dirty.
COMPACTED_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "300",
    "min.cleanable.dirty.ratio": "0.01",
}
COMPACTED_KEYS = 5
COMPACTED_ROUNDS = 20


def read_offsets_and_values(kafka: KafkaHelper, topic: str) -> list[tuple[int, bytes]]:
    """What a plain consumer reads of partition 0, to its end."""
    (end,) = kafka.end_offsets(topic, 1)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": "parity-reader",
            "enable.auto.commit": False,
        }
    )
    read: list[tuple[int, bytes]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while not read or read[-1][0] < end - 1:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None
            assert message.error() is None
            read.append((message.offset() or 0, message.value() or b""))
    finally:
        consumer.close()
    return read


def test_compacted_ranges_are_not_data_loss(
    spark: SparkSession, kafka: KafkaHelper, checkpoint: str
) -> None:
    topic = kafka.new_topic("compacted", partitions=1, config=COMPACTED_CONFIG)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
    for n in range(COMPACTED_KEYS * COMPACTED_ROUNDS):
        producer.produce(topic, key=b"k%d" % (n % COMPACTED_KEYS), value=b"%d" % n, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    total = COMPACTED_KEYS * COMPACTED_ROUNDS
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    before = read_offsets_and_values(kafka, topic)
    rolls = 0
    while len(before) > total // 2:
        assert time.monotonic() < deadline, f"{topic} was not compacted"
        # Each produce after segment.ms rolls the segment the earlier ones sit in; its
        # key is its own, so no roll record compacts another.
        rolls += 1
        producer.produce(topic, key=b"roll-%d" % rolls, value=b"roll", partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        time.sleep(0.4)
        before = read_offsets_and_values(kafka, topic)

    rows = batch(spark, kafka, topic, failOnDataLoss="true").select("offset", "value").collect()
    query = (
        spark.readStream.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "7")
        .load()
        .select("offset", "value")
        .writeStream.format("memory")
        .queryName("compacted_stream")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S)
    assert query.exception() is None
    streamed = spark.sql("select * from compacted_stream").collect()
    after = set(read_offsets_and_values(kafka, topic))

    # Ranges of 7 offsets start and end inside compacted gaps: nothing fails and nothing
    # is read twice. The cleaner may still be at work, so each read holds at most what a
    # consumer saw before it and at least what one saw after it.
    for read in (rows, streamed):
        got = sorted((r.offset, bytes(r.value)) for r in read)
        assert len(got) == len(set(got))
        assert after <= set(got) <= set(before)
        assert len(got) < total


def test_kafka_isolation_level_reaches_the_readers(spark: SparkSession, kafka: KafkaHelper) -> None:
    topic = kafka.new_topic("isolation", partitions=1)
    transactional = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": topic}
    )
    transactional.init_transactions(TIMEOUT_S)
    for value, commit in ((b"committed-1", True), (b"aborted", False), (b"committed-2", True)):
        transactional.begin_transaction()
        transactional.produce(topic, value=value, partition=0)
        if commit:
            transactional.commit_transaction(TIMEOUT_S)
        else:
            # Sent first: librdkafka drops the records it still holds when it aborts.
            assert transactional.flush(TIMEOUT_S) == 0
            transactional.abort_transaction(TIMEOUT_S)

    default = batch(spark, kafka, topic).select("value").collect()
    uncommitted = (
        batch(spark, kafka, topic, **{"kafka.isolation.level": "read_uncommitted"})
        .select("value")
        .collect()
    )

    assert [bytes(r.value) for r in default] == [b"committed-1", b"committed-2"]
    assert [bytes(r.value) for r in uncommitted] == [b"committed-1", b"aborted", b"committed-2"]
