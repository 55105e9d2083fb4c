"""The driver's planning of offset ranges, without a broker (pure offset arithmetic)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.spark import KafkaStreamReader, OffsetRange, SourceOptions, SparkKafkaError
from tickwheel.spark._reader import split_ranges


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


def ranges_of(*sizes: int) -> list[OffsetRange]:
    return [OffsetRange("t", p, 100, 100 + size) for p, size in enumerate(sizes)]


def test_min_partitions_splits_proportionally_like_spark() -> None:
    # 30 and 10 records into 4: the small range stays whole, the large one gets 3 parts.
    assert split_ranges(ranges_of(30, 10), 4) == [
        OffsetRange("t", 0, 100, 110),
        OffsetRange("t", 0, 110, 120),
        OffsetRange("t", 0, 120, 130),
        OffsetRange("t", 1, 100, 110),
    ]
    # Uneven parts differ by one record, the remainder going last.
    assert [r.size for r in split_ranges(ranges_of(10), 3)] == [3, 3, 4]
    # Half rounds up, as Scala's math.round: 10/20*5 = 2.5 -> 3 parts each.
    assert len(split_ranges(ranges_of(10, 10), 5)) == 6


def test_min_partitions_leaves_enough_ranges_alone_and_drops_empty_ones() -> None:
    assert split_ranges(ranges_of(5, 0, 7), 2) == [
        OffsetRange("t", 0, 100, 105),
        OffsetRange("t", 2, 100, 107),
    ]
    assert split_ranges(ranges_of(5, 7), None) == ranges_of(5, 7)
    # Never finer than one record per range.
    assert split_ranges(ranges_of(2), 10) == [
        OffsetRange("t", 0, 100, 101),
        OffsetRange("t", 0, 101, 102),
    ]


def test_max_records_per_partition_caps_each_range_then_min_partitions_applies() -> None:
    # 30 offsets at most 8 per part: 4 even parts (7, 7, 8, 8); 10 offsets: 2 parts.
    assert [r.size for r in split_ranges(ranges_of(30, 10), None, 8)] == [7, 7, 8, 8, 5, 5]
    # Already at least minPartitions parts: nothing more to split.
    assert len(split_ranges(ranges_of(30, 10), 6, 8)) == 6
    # Fewer: the capped parts (15, 15, 10) are split again in proportion, about
    # minPartitions in all: 15/40*12 = 4.5 -> 5 twice, 10/40*12 = 3.
    assert [r.size for r in split_ranges(ranges_of(30, 10), 12, 20)] == [3, 3, 3, 3, 3] * 2 + [
        3,
        3,
        4,
    ]


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=8),
    min_partitions=st.integers(min_value=1, max_value=64),
    max_records=st.none() | st.integers(min_value=1, max_value=20_000),
)
def test_split_ranges_covers_every_offset_once(
    sizes: list[int], min_partitions: int, max_records: int | None
) -> None:
    original = ranges_of(*sizes)
    split = split_ranges(original, min_partitions, max_records)
    for tp_range in original:
        parts = [r for r in split if r.partition == tp_range.partition]
        assert all(r.size > 0 for r in parts)
        covered = [o for r in parts for o in range(r.from_offset, r.until_offset)]
        assert covered == list(range(tp_range.from_offset, tp_range.until_offset))
    if max_records is not None:
        capped = sum(-(-s // max_records) for s in sizes)
        assert len(split) >= capped
        if capped >= min_partitions:
            assert all(r.size <= max_records for r in split)
            assert len(split) == capped
        return
    nonempty = sum(1 for s in sizes if s)
    if nonempty < min_partitions:
        # Spark's "approximately minPartitions": rounding may add or drop a few parts.
        assert len(split) <= min_partitions + nonempty
    else:
        assert len(split) == nonempty


def test_planner_splits_stream_batches_by_min_partitions() -> None:
    options = SourceOptions.parse(
        {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", "minPartitions": "3"},
        streaming=True,
    )
    ranges = KafkaStreamReader(options).partitions({"t": {"0": 0}}, {"t": {"0": 9}})
    assert ranges == [
        OffsetRange("t", 0, 0, 3),
        OffsetRange("t", 0, 3, 6),
        OffsetRange("t", 0, 6, 9),
    ]
