"""The driver's planning of offset ranges, without a broker (pure offset arithmetic)."""

from __future__ import annotations

import pytest

from tickwheel.spark import KafkaStreamReader, OffsetRange, SourceOptions, SparkKafkaError


def reader(*, fail_on_data_loss: bool = True) -> KafkaStreamReader:
    options = SourceOptions.parse(
        {
            "kafka.bootstrap.servers": "127.0.0.1:9",
            "subscribe": "t",
            "failOnDataLoss": str(fail_on_data_loss).lower(),
        },
        streaming=True,
    )
    return KafkaStreamReader(options)


def test_one_range_per_partition_with_records_and_new_partitions_from_zero() -> None:
    ranges = reader().partitions({"t": {"0": 5, "1": 9}}, {"t": {"0": 8, "1": 9, "2": 4}})
    assert ranges == [OffsetRange("t", 0, 5, 8), OffsetRange("t", 2, 0, 4)]


def test_nothing_to_read_still_gives_spark_one_empty_range() -> None:
    ranges = reader().partitions({"t": {"0": 5}}, {"t": {"0": 5}})
    assert [r.size for r in ranges if isinstance(r, OffsetRange)] == [0]


def test_offsets_going_back_are_data_loss_or_skipped() -> None:
    with pytest.raises(SparkKafkaError, match="went back from offset 50 to 10"):
        reader().partitions({"t": {"0": 50}}, {"t": {"0": 10}})
    ranges = reader(fail_on_data_loss=False).partitions({"t": {"0": 50}}, {"t": {"0": 10}})
    assert [r.size for r in ranges if isinstance(r, OffsetRange)] == [0]
