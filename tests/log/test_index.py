"""The sparse indexes: bisect lookups, truncation, their files, and the load checks."""

from __future__ import annotations

import itertools
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.log._index import NO_TIMESTAMP, OffsetIndex, TimeIndex


def test_offset_index_lookups(tmp_path: Path) -> None:
    index = OffsetIndex(str(tmp_path / "x.index"), 100, 1000)
    for i in range(10):
        index.append(100 + 10 * i, 1000 * i)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(100) == (100, 0)
    assert index.lookup(125) == (120, 2000)
    assert index.lookup(10**9) == (190, 9000)
    assert index.lookup_position(2500) == (120, 2000)
    assert index.lookup_position(2000) == (120, 2000)
    assert index.last_entry() == (190, 9000)
    index.truncate_to_position(3000)
    assert len(index) == 3
    assert index.lookup(10**9) == (120, 2000)
    index.clear()
    assert index.last_entry() == index.lookup_position(10**9) == (100, 0)


def test_offset_index_file_round_trip_and_truncation(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(str(path), 5, 1000)
    for i in range(4):
        index.append(5 + i, 100 * i)
    index.persist(fsync=True)
    assert path.stat().st_size == 32
    index.truncate_to_position(200)
    index.append(7, 250)
    index.persist(fsync=False)
    loaded = OffsetIndex(str(path), 5, 1000)
    assert loaded.load() is None
    assert list(loaded.keys) == [0, 1, 2]
    assert list(loaded.values) == [0, 100, 250]


def test_time_index_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    index = TimeIndex(str(path), 5, 1000)
    for offset, timestamp_ms in [(6, NO_TIMESTAMP), (8, 2**40), (9, 2**62)]:
        index.maybe_append(timestamp_ms, offset)
    index.persist(fsync=False)
    loaded = TimeIndex(str(path), 5, 1000)
    assert loaded.load() is None
    assert list(loaded.keys) == [NO_TIMESTAMP, 2**40, 2**62]
    assert list(loaded.values) == [1, 3, 4]
    assert loaded.sanity_check(10) is None


def test_missing_or_torn_index_file_does_not_load(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    assert OffsetIndex(str(path), 0, 10).load() == f"{path}: missing"
    path.write_bytes(b"\x00" * 12)
    assert OffsetIndex(str(path), 0, 10).load() == f"{path}: 12 bytes, not whole 8-byte entries"
    time_path = tmp_path / "x.timeindex"
    time_path.write_bytes(b"\x00" * 16)
    assert TimeIndex(str(time_path), 0, 10).load() == (
        f"{time_path}: 16 bytes, not whole 12-byte entries"
    )


def _offset_index(path: Path, entries: list[tuple[int, int]]) -> OffsetIndex:
    path.write_bytes(b"".join(struct.pack(">ii", *entry) for entry in entries))
    index = OffsetIndex(str(path), 100, 1000)
    assert index.load() is None
    return index


def _time_index(path: Path, entries: list[tuple[int, int]]) -> TimeIndex:
    path.write_bytes(b"".join(struct.pack(">qi", *entry) for entry in entries))
    index = TimeIndex(str(path), 100, 1000)
    assert index.load() is None
    return index


# Offset index entries (relative offset, position) for a segment from offset 100 to 150
# whose batch headers fit below byte 1000, and the reason each breaks a rule.
OFFSET_INDEX_CASES = [
    ([], None),
    ([(2, 70), (9, 400), (49, 999)], None),
    ([(0, 70), (9, 400)], "first relative offset 0 is below 1"),
    ([(-3, 70), (9, 400)], "first relative offset -3 is below 1"),
    ([(2, 70), (50, 400)], "last relative offset 50 is not below 50"),
    ([(2, 70), (2, 400)], "relative offsets do not strictly increase"),
    ([(9, 70), (2, 400), (12, 500)], "relative offsets do not strictly increase"),
    ([(2, 0), (9, 400)], "first position 0 is below 1"),
    ([(2, -70), (9, 400)], "first position -70 is below 1"),
    ([(2, 70), (9, 1000)], "last position 1000 is not below 1000"),
    ([(2, 400), (9, 70), (12, 500)], "positions do not strictly increase"),
]


@pytest.mark.parametrize(("entries", "reason"), OFFSET_INDEX_CASES)
def test_offset_index_sanity_check(
    tmp_path: Path, entries: list[tuple[int, int]], reason: str | None
) -> None:
    path = tmp_path / "x.index"
    problem = _offset_index(path, entries).sanity_check(1000, 150)
    assert problem == (None if reason is None else f"{path}: {reason}")


def test_offset_index_end_offset_is_checked_only_when_known(tmp_path: Path) -> None:
    index = _offset_index(tmp_path / "x.index", [(2, 70), (10**6, 400)])
    assert index.sanity_check(1000, None) is None
    assert index.sanity_check(1000, 150) is not None


# Time index entries (timestamp, relative offset) for a segment from offset 100 to 150.
TIME_INDEX_CASES = [
    ([], None),
    ([(NO_TIMESTAMP, 2), (5, 9), (2**62, 49)], None),
    ([(-2, 2), (5, 9)], "first timestamp -2 is below -1"),
    ([(5, 2), (5, 9)], "timestamps do not strictly increase"),
    ([(5, 0), (6, 9)], "first relative offset 0 is below 1"),
    ([(5, 2), (6, 50)], "last relative offset 50 is not below 50"),
    ([(5, 9), (6, 2), (7, 12)], "relative offsets do not strictly increase"),
]


@pytest.mark.parametrize(("entries", "reason"), TIME_INDEX_CASES)
def test_time_index_sanity_check(
    tmp_path: Path, entries: list[tuple[int, int]], reason: str | None
) -> None:
    path = tmp_path / "x.timeindex"
    problem = _time_index(path, entries).sanity_check(150)
    assert problem == (None if reason is None else f"{path}: {reason}")


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300), time_index=st.booleans())
def test_any_bytes_load_as_their_entries_or_are_refused(data: bytes, time_index: bool) -> None:
    """Random file contents never raise: whole entries load exactly as struct reads them."""
    entry = struct.Struct(">qi" if time_index else ">ii")
    with tempfile.TemporaryDirectory() as dir_path:
        path = Path(dir_path) / "x.index"
        path.write_bytes(data)
        index = (TimeIndex if time_index else OffsetIndex)(str(path), 0, 1000)
        problem = index.load()
        if len(data) % entry.size:
            assert problem is not None
            return
        assert problem is None
        entries = list(entry.iter_unpack(data))
        assert list(zip(index.keys, index.values, strict=True)) == entries
        if time_index:
            assert isinstance(index, TimeIndex)
            checked = index.sanity_check(2**31)
        else:
            assert isinstance(index, OffsetIndex)
            checked = index.sanity_check(2**31, 2**31)
        key_minimum = NO_TIMESTAMP if time_index else 1
        in_order = all(a[0] < b[0] and a[1] < b[1] for a, b in itertools.pairwise(entries))
        from_minimum = not entries or (entries[0][0] >= key_minimum and entries[0][1] >= 1)
        assert (checked is None) == (in_order and from_minimum)


def test_time_index_keeps_only_growing_timestamps(tmp_path: Path) -> None:
    index = TimeIndex(str(tmp_path / "x.timeindex"), 0, 1000)
    for offset, timestamp in [(0, 50), (5, 40), (9, 70), (12, 70), (20, 90)]:
        index.maybe_append(timestamp, offset)
    assert list(index.keys) == [50, 70, 90]
    assert index.offset_before(50) == 0
    assert index.offset_before(51) == 0
    assert index.offset_before(71) == 9
    assert index.offset_before(1000) == 20
    assert index.last_timestamp() == 90
    index.truncate_to_offset(20)
    assert index.last_timestamp() == 70
