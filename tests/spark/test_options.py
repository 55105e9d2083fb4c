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
