"""Source and sink options: Spark's Kafka connector's names, checked before any task."""

from __future__ import annotations

import pickle

import pytest

from tickwheel.spark import SinkOptions, SourceOptions, SparkKafkaError
from tickwheel.spark._offsets import EARLIEST, LATEST
from tickwheel.spark._options import DEFAULT_POLL_TIMEOUT_MS

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9"}


def test_defaults_follow_spark() -> None:
    streaming = SourceOptions.parse({**BASE, "subscribe": "a"}, streaming=True)
    batch = SourceOptions.parse({**BASE, "subscribe": "a"}, streaming=False)
    assert streaming.starting.default == LATEST
    assert batch.starting.default == EARLIEST
    assert batch.ending.default == LATEST
    assert streaming.fail_on_data_loss
    assert not streaming.include_headers
    assert streaming.max_offsets_per_trigger is None
    assert streaming.poll_timeout_ms == DEFAULT_POLL_TIMEOUT_MS


def test_option_names_are_case_insensitive_and_kafka_options_pass_through() -> None:
    options = SourceOptions.parse(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1",
            "kafka.client.id": "x",
            "Subscribe": " a, b ,",
            "maxoffsetspertrigger": "10",
            "FailOnDataLoss": "false",
            "includeHeaders": "TRUE",
        },
        streaming=True,
    )
    assert dict(options.client_config) == {"bootstrap.servers": "h:1", "client.id": "x"}
    assert options.subscription.topics == ("a", "b")
    assert options.max_offsets_per_trigger == 10
    assert not options.fail_on_data_loss
    assert options.include_headers


def test_subscription_kinds_select_partitions() -> None:
    counts = {"clicks": 2, "clicks-eu": 1, "other": 3}
    pattern = SourceOptions.parse({**BASE, "subscribePattern": "clicks.*"}, streaming=True)
    assert pattern.subscription.select(counts) == [("clicks", 0), ("clicks", 1), ("clicks-eu", 0)]
    assign = SourceOptions.parse({**BASE, "assign": '{"other": [2, 0]}'}, streaming=True)
    assert assign.subscription.select(counts) == [("other", 0), ("other", 2)]
    missing = SourceOptions.parse({**BASE, "subscribe": "nope,other"}, streaming=True)
    assert missing.subscription.select(counts) == [("other", 0), ("other", 1), ("other", 2)]


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"subscribe": "a"}, True, "kafka.bootstrap.servers"),
        (BASE, True, "exactly one of"),
        ({**BASE, "subscribe": "a", "assign": '{"a": [0]}'}, True, "exactly one of"),
        ({**BASE, "subscribePattern": "("}, True, "subscribePattern"),
        ({**BASE, "assign": '{"a": ["0"]}'}, True, "assign"),
        ({**BASE, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, True, "maxOffsetsPerTrigger"),
        ({**BASE, "subscribe": "a", "failOnDataLoss": "maybe"}, True, "failOnDataLoss"),
        ({**BASE, "subscribe": "a", "endingOffsets": "latest"}, True, "batch queries only"),
        ({**BASE, "subscribe": "a", "startingOffsets": "latest"}, False, "startingOffsets"),
        ({**BASE, "subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, False, "endingOffsets"),
        ({**BASE, "subscribe": "a", "kafka.auto.offset.reset": "latest"}, True, "manages"),
    ],
)
def test_bad_options_are_refused_with_the_option_named(
    options: dict[str, str], streaming: bool, message: str
) -> None:
    with pytest.raises(SparkKafkaError, match=message):
        SourceOptions.parse(options, streaming=streaming)


def test_json_offsets_keep_markers_for_unnamed_partitions() -> None:
    options = SourceOptions.parse(
        {**BASE, "subscribe": "a", "startingOffsets": '{"a": {"1": 5}}'}, streaming=False
    )
    assert options.starting.default == EARLIEST
    assert options.starting.per_partition() == {("a", 1): 5}


def test_sink_options() -> None:
    assert SinkOptions.parse({**BASE, "topic": "out"}).topic == "out"
    with pytest.raises(SparkKafkaError, match="topic"):
        SinkOptions.parse({**BASE, "topic": " "})


def test_options_pickle() -> None:
    options = SourceOptions.parse({**BASE, "subscribe": "a"}, streaming=True)
    assert pickle.loads(pickle.dumps(options)) == options


def test_timestamp_options_take_precedence_over_offsets() -> None:
    both = SourceOptions.parse(
        {
            **BASE,
            "subscribe": "a",
            "startingTimestamp": "1000",
            "startingOffsetsByTimestamp": '{"a": {"0": 5}}',
            "startingOffsets": "earliest",
            "endingOffsetsByTimestamp": '{"a": {"1": 9000}}',
            "endingOffsets": '{"a": {"1": 3}}',
        },
        streaming=False,
    )
    assert both.starting.timestamps_for([("a", 0), ("a", 1)]) == {("a", 0): 1000, ("a", 1): 1000}
    assert both.starting.no_match is None
    assert both.ending.timestamps_for([("a", 0), ("a", 1)]) == {("a", 1): 9000}
    assert both.ending.per_partition() == {}
    assert both.ending.default == LATEST
    latest = SourceOptions.parse(
        {
            **BASE,
            "subscribe": "a",
            "startingOffsetsByTimestamp": '{"a": {"0": 5}}',
            "startingOffsetsByTimestampStrategy": "Latest",
        },
        streaming=True,
    )
    assert latest.starting.no_match == LATEST
    assert latest.starting.default == EARLIEST


def test_trigger_and_partition_options() -> None:
    options = SourceOptions.parse(
        {
            **BASE,
            "subscribe": "a",
            "minOffsetsPerTrigger": "10",
            "maxOffsetsPerTrigger": "10",
            "maxTriggerDelay": "2s",
            "minPartitions": "7",
        },
        streaming=True,
    )
    assert options.min_offsets_per_trigger == 10
    assert options.max_trigger_delay_ms == 2000
    assert options.min_partitions == 7
    default = SourceOptions.parse({**BASE, "subscribe": "a"}, streaming=True)
    assert default.max_trigger_delay_ms == 15 * 60_000
    assert default.min_offsets_per_trigger is None
    assert default.min_partitions is None


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("15m", 900_000),
        ("500", 500),
        ("500ms", 500),
        ("3s", 3000),
        ("2min", 120_000),
        ("1h", 3_600_000),
        ("1d", 86_400_000),
        ("2500us", 2),
    ],
)
def test_max_trigger_delay_takes_spark_time_strings(text: str, ms: int) -> None:
    options = SourceOptions.parse(
        {**BASE, "subscribe": "a", "maxTriggerDelay": text}, streaming=True
    )
    assert options.max_trigger_delay_ms == ms


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"startingTimestamp": "soon"}, True, "startingTimestamp must be a time in ms"),
        ({"startingTimestamp": "-5"}, True, "at least 0 ms"),
        ({"startingOffsetsByTimestamp": '{"a": {"0": -1}}'}, False, "at least 0 ms"),
        ({"startingOffsetsByTimestamp": "{}"}, False, "names no partition"),
        ({"startingOffsetsByTimestampStrategy": "oldest"}, True, "error or latest"),
        ({"endingTimestamp": "5"}, True, "endingTimestamp is for batch queries only"),
        ({"endingOffsetsByTimestamp": '{"a": {"0": 5}}'}, True, "batch queries only"),
        ({"startingTimestamp": "9", "endingTimestamp": "5"}, False, "after endingTimestamp"),
        (
            {"startingTimestamp": "9", "endingOffsetsByTimestamp": '{"a": {"0": 5}}'},
            False,
            "a-0 starts at timestamp 9, after its end 5",
        ),
        ({"minPartitions": "0"}, True, "minPartitions must be positive"),
        ({"minOffsetsPerTrigger": "x"}, True, "minOffsetsPerTrigger must be a whole number"),
        (
            {"minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "10"},
            True,
            r"minOffsetsPerTrigger \(20\) is higher than maxOffsetsPerTrigger \(10\)",
        ),
        ({"maxTriggerDelay": "soon"}, True, "maxTriggerDelay must be a time"),
        ({"maxTriggerDelay": "5 weeks"}, True, "maxTriggerDelay must be a time"),
        ({"maxRecordsPerPartition": "0"}, False, "maxRecordsPerPartition must be positive"),
        ({"groupIdPrefix": "etl"}, True, "groupIdPrefix is not supported"),
        ({"fetchOffset.numRetries": "3"}, True, "fetchOffset.numRetries is not supported"),
        ({"fetchoffset.retryintervalms": "9"}, True, "fetchOffset.retryIntervalMs is not"),
        ({"kafka.value.deserializer": "x.Y"}, True, "kafka.value.deserializer is not supported"),
        ({"kafka.interceptor.classes": "x.Y"}, True, "kafka.interceptor.classes is not"),
    ],
)
def test_parity_options_are_checked_with_the_option_named(
    options: dict[str, str], streaming: bool, message: str
) -> None:
    with pytest.raises(SparkKafkaError, match=message):
        SourceOptions.parse({**BASE, "subscribe": "a", **options}, streaming=streaming)


def test_unknown_options_that_spark_does_not_know_are_ignored_as_spark_does() -> None:
    options = SourceOptions.parse({**BASE, "subscribe": "a", "colour": "blue"}, streaming=True)
    assert options == SourceOptions.parse({**BASE, "subscribe": "a"}, streaming=True)


def test_sink_refuses_java_serializers() -> None:
    with pytest.raises(SparkKafkaError, match=r"kafka\.key\.serializer is not supported"):
        SinkOptions.parse({**BASE, "kafka.key.serializer": "x.Y"})


AVRO_SOURCE = {
    **BASE,
    "subscribe": "clicks",
    "valueFormat": "avro",
    "schema.registry.url": "http://r1:8081, http://r2:8081",
}


def test_avro_formats_read_one_topics_subjects_from_the_registry() -> None:
    options = SourceOptions.parse(
        {**AVRO_SOURCE, "schema.registry.basic.auth.user.info": "u:secret"}, streaming=True
    )
    formats = options.formats
    assert formats.avro_columns() == ("value",)
    assert formats.topic == "clicks"
    assert formats.registry is not None
    assert formats.registry.urls == ("http://r1:8081", "http://r2:8081")
    assert "secret" not in repr(formats)
    assert pickle.loads(pickle.dumps(options)) == options


@pytest.mark.parametrize(
    ("changes", "refusal"),
    [
        ({"valueFormat": "json"}, "valueFormat must be binary or avro"),
        ({"schema.registry.url": ""}, "needs the option schema.registry.url"),
        ({"schema.registry.url": "r1:8081"}, "not an http"),
        ({"schema.registry.timeout": "1"}, "schema.registry.timeout is not supported"),
        ({"subscribe": "a,b"}, "exactly one topic"),
    ],
)
def test_avro_source_options_are_checked(changes: dict[str, str], refusal: str) -> None:
    with pytest.raises(SparkKafkaError, match=refusal):
        SourceOptions.parse({**AVRO_SOURCE, **changes}, streaming=False)


def test_avro_sink_options_need_a_topic_and_match_their_format() -> None:
    sink = {**BASE, "valueFormat": "avro", "schema.registry.url": "http://r:1"}
    options = SinkOptions.parse({**sink, "topic": "t", "auto.register.schemas": "false"})
    assert options.formats.avro_columns() == ("value",)
    assert not options.auto_register
    with pytest.raises(SparkKafkaError, match="set the option topic"):
        SinkOptions.parse(sink)
    with pytest.raises(SparkKafkaError, match=r"key\.schema needs keyFormat=avro"):
        SinkOptions.parse({**sink, "topic": "t", "key.schema": '"string"'})
