"""The sparse indexes: bisect lookups, truncation, and their files."""

from __future__ import annotations

from pathlib import Path

from tickwheel.log._index import OffsetIndex, TimeIndex


def test_offset_index_lookups(tmp_path: Path) -> None:
    index = OffsetIndex(str(tmp_path / "x.index"), 100, 1000)
    for i in range(10):
        index.append(100 + 10 * i, 1000 * i)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(100) == (100, 0)
    assert index.lookup(125) == (120, 2000)
    assert index.lookup(10**9) == (190, 9000)
    assert index.lookup_position(2500) == 2000
    assert index.lookup_position(2000) == 2000
    index.truncate_to_position(3000)
    assert len(index) == 3
    assert index.lookup(10**9) == (120, 2000)


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
    assert loaded.load()
    assert list(loaded.keys) == [0, 1, 2]
    assert list(loaded.values) == [0, 100, 250]
    assert loaded.fits(251)
    assert not loaded.fits(250)


def test_torn_or_unordered_index_file_does_not_load(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(b"\x00" * 12)
    assert not OffsetIndex(str(path), 0, 10).load()
    path.write_bytes(bytes.fromhex("00000002000000100000000100000020"))
    assert not OffsetIndex(str(path), 0, 10).load()


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
    assert index.fits(20)
    assert not index.fits(9)
