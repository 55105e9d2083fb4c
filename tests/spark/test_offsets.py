"""Offset maps: checkpoint JSON and maxOffsetsPerTrigger admission control."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.spark import SparkKafkaError
from tickwheel.spark._offsets import (
    limit_offsets,
    offsets_behind_latest,
    offsets_from_json,
    offsets_to_json,
    parse_offsets_option,
)

partitions = st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 12))


def test_json_is_canonical_whatever_the_insertion_order() -> None:
    forward = offsets_to_json({("b", 10): 5, ("a", 2): 1, ("b", 2): 7})
    backward = offsets_to_json({("b", 2): 7, ("a", 2): 1, ("b", 10): 5})
    assert json.dumps(forward) == json.dumps(backward)
    assert list(forward) == ["a", "b"]
    assert list(forward["b"]) == ["2", "10"]


@given(st.dictionaries(partitions, st.integers(0, 10**12)))
def test_json_round_trip(offsets: dict[tuple[str, int], int]) -> None:
    text = json.dumps(offsets_to_json(offsets))
    assert offsets_from_json(json.loads(text), what="test") == offsets


@pytest.mark.parametrize(
    "text",
    ['{"t": {"x": 1}}', '{"t": [1]}', '{"t": {"0": "1"}}', '{"t": {"0": -3}}', "[1]", "{"],
)
def test_bad_option_json_is_refused_with_its_name(text: str) -> None:
    with pytest.raises(SparkKafkaError, match="startingOffsets"):
        parse_offsets_option(text, what="startingOffsets")


def test_markers_are_accepted_in_option_json() -> None:
    assert parse_offsets_option('{"t": {"0": -2, "1": -1}}', what="x") == {
        ("t", 0): -2,
        ("t", 1): -1,
    }


@given(
    st.dictionaries(partitions, st.tuples(st.integers(0, 1000), st.integers(0, 1000))),
    st.integers(1, 3000),
)
def test_limit_admits_at_most_the_budget_and_never_passes_latest(
    ranges: dict[tuple[str, int], tuple[int, int]], budget: int
) -> None:
    start = {tp: begin for tp, (begin, _) in ranges.items()}
    latest = {tp: begin + extra for tp, (begin, extra) in ranges.items()}
    end = limit_offsets(start, latest, budget)
    assert end.keys() == latest.keys()
    admitted = sum(end[tp] - start[tp] for tp in end)
    waiting = sum(latest[tp] - start[tp] for tp in latest)
    # Reference: everything fits, or exactly the budget is admitted.
    assert admitted == min(budget, waiting)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in end)


def test_limit_shares_in_proportion_to_what_waits() -> None:
    end = limit_offsets({("t", 0): 0, ("t", 1): 0}, {("t", 0): 300, ("t", 1): 100}, 100)
    assert end == {("t", 0): 75, ("t", 1): 25}


def test_new_partition_starts_at_zero_and_shrunken_log_keeps_latest() -> None:
    end = limit_offsets({("t", 0): 50}, {("t", 0): 40, ("t", 1): 10}, 5)
    assert end == {("t", 0): 40, ("t", 1): 5}


def test_offsets_behind_latest_as_spark_reports_them() -> None:
    progress = {
        "endOffset": json.dumps({"t": {"0": 10, "1": 4, "2": 7}}),
        "latestOffset": json.dumps({"t": {"0": 10, "1": 9, "2": 8}}),
    }
    assert offsets_behind_latest(progress) == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "5",
        "avgOffsetsBehindLatest": "2.0",
    }
    assert offsets_behind_latest({"endOffset": "null", "latestOffset": None}) == {}
    assert offsets_behind_latest({**progress, "latestOffset": "null"}) == {}
