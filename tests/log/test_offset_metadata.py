"""LogOffsetMetadata: the segment comparisons DelayedFetch relies on."""

from __future__ import annotations

import pytest

from tickwheel.log import LogError, LogOffsetMetadata


def test_older_and_same_segment() -> None:
    fetch = LogOffsetMetadata(10, 0, 500)
    end_same = LogOffsetMetadata(20, 0, 900)
    end_rolled = LogOffsetMetadata(30, 25, 100)
    assert fetch.on_same_segment(end_same)
    assert not fetch.on_older_segment(end_same)
    assert fetch.on_older_segment(end_rolled)
    assert not end_rolled.on_older_segment(fetch)
    assert not fetch.on_same_segment(end_rolled)


def test_position_diff_counts_bytes_on_the_same_segment() -> None:
    assert LogOffsetMetadata(20, 0, 900).position_diff(LogOffsetMetadata(10, 0, 500)) == 400
    with pytest.raises(LogError):
        LogOffsetMetadata(30, 25, 100).position_diff(LogOffsetMetadata(10, 0, 500))


def test_message_offset_only_cannot_be_compared() -> None:
    only = LogOffsetMetadata(7)
    assert only.message_offset_only
    assert not LogOffsetMetadata(7, 0, 0).message_offset_only
    full = LogOffsetMetadata(9, 0, 10)
    for compare in (only.on_older_segment, only.on_same_segment, only.position_diff):
        with pytest.raises(LogError):
            compare(full)
    with pytest.raises(LogError):
        full.on_same_segment(only)
