"""LogSegment on its own: appends, lookups, reads, rolling, truncation, load, recovery."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tickwheel.log import LogConfig
from tickwheel.log._segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)

from .batches import header_of, make_batch, with_offsets
from .helpers import START_MS

BASE_OFFSET = 100
# Small enough that every few batches get an index entry.
CONFIG = LogConfig(index_interval_bytes=200)
# Ten batches of two records each, timestamps rising by 10 ms, one with an older
# timestamp (batch 6) so the largest timestamp is not the last batch's.
TIMESTAMPS_MS = [1000, 1010, 1020, 1030, 1040, 1050, 900, 1070, 1080, 1090]


def _batches(base_offset: int = BASE_OFFSET) -> list[bytes]:
    stored = []
    offset = base_offset
    for i, timestamp_ms in enumerate(TIMESTAMPS_MS):
        batch = make_batch([bytes([i]) * (30 + 5 * i), b"v"], timestamp_ms=timestamp_ms)
        stored.append(with_offsets(batch, offset, 0))
        offset += 2
    return stored


def _append(segment: LogSegment, batches: list[bytes]) -> None:
    """Append batches as the log does: their bytes and one (base, last, max ts, size) each."""
    for batch in batches:
        header = header_of(batch)
        base_offset, last_offset_delta, max_timestamp_ms = header[0], header[6], header[8]
        entry = (base_offset, base_offset + last_offset_delta, max_timestamp_ms, len(batch))
        segment.append([batch], [entry], len(batch))


@pytest.fixture
def segment(tmp_path: Path) -> Iterator[LogSegment]:
    segment = LogSegment.open_file(str(tmp_path), BASE_OFFSET, CONFIG, START_MS)
    yield segment
    segment.close()


def _positions(batches: list[bytes]) -> list[int]:
    positions, position = [], 0
    for batch in batches:
        positions.append(position)
        position += len(batch)
    return positions


def test_files_are_named_by_the_20_digit_base_offset(tmp_path: Path) -> None:
    assert segment_file_name(1234, LOG_SUFFIX) == "00000000000000001234.log"
    segment = LogSegment.open_file(str(tmp_path), 1234, CONFIG, START_MS)
    _append(segment, _batches(1234)[:1])
    segment.flush()
    assert sorted(os.listdir(tmp_path)) == [
        segment_file_name(1234, suffix) for suffix in (INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX)
    ]
    segment.close()


def test_append_tracks_size_offsets_timestamps_and_sparse_index(segment: LogSegment) -> None:
    batches = _batches()
    _append(segment, batches)
    assert segment.size_bytes == sum(len(b) for b in batches)
    assert segment.next_offset == BASE_OFFSET + 2 * len(batches)
    assert segment.max_timestamp_ms == max(TIMESTAMPS_MS)
    assert segment.rolling_timestamp_ms == TIMESTAMPS_MS[0]
    assert segment.file.read(0, segment.size_bytes) == b"".join(batches)
    # An entry once more than index.interval.bytes were appended since the last one.
    positions = _positions(batches)
    expected, since = [], 0
    for i, batch in enumerate(batches):
        if since > CONFIG.index_interval_bytes:
            expected.append((2 * i, positions[i]))
            since = len(batch)
        else:
            since += len(batch)
    assert expected
    assert list(zip(segment.offset_index.keys, segment.offset_index.values, strict=True)) == (
        expected
    )


def test_translate_offset_finds_the_batch_holding_any_offset(segment: LogSegment) -> None:
    batches = _batches()
    _append(segment, batches)
    positions = _positions(batches)
    for offset in range(BASE_OFFSET, segment.next_offset):
        found = segment.translate_offset(offset)
        assert found is not None
        index = (offset - BASE_OFFSET) // 2
        assert found[0] == positions[index]
        assert found[1].base_offset == BASE_OFFSET + 2 * index
    assert segment.translate_offset(segment.next_offset) is None


def test_read_cuts_at_batch_boundaries(segment: LogSegment) -> None:
    batches = _batches()
    _append(segment, batches)
    positions = _positions(batches)
    # From the batch holding offset 105 (batch 2), room for batches 2 and 3 and part of 4.
    max_bytes = len(batches[2]) + len(batches[3]) + 10
    found = segment.read(BASE_OFFSET + 5, max_bytes, segment.size_bytes, min_one_message=True)
    assert found is not None
    position, records, incomplete = found
    assert (position, incomplete) == (positions[2], False)
    assert records.read_bytes() == batches[2] + batches[3]
    # max_position stops the read at a batch boundary too.
    found = segment.read(BASE_OFFSET, 10_000, positions[3], min_one_message=True)
    assert found is not None
    assert found[1].read_bytes() == b"".join(batches[:3])
    assert segment.read(segment.next_offset, 10_000, segment.size_bytes, True) is None


def test_read_of_a_batch_larger_than_max_bytes(segment: LogSegment) -> None:
    batches = _batches()
    _append(segment, batches)
    found = segment.read(BASE_OFFSET, 1, segment.size_bytes, min_one_message=True)
    assert found is not None
    assert found[1].read_bytes() == batches[0]
    assert found[2] is False
    found = segment.read(BASE_OFFSET, 1, segment.size_bytes, min_one_message=False)
    assert found is not None
    assert (found[1].length, found[2]) == (0, True)


def test_timestamp_lookups(segment: LogSegment) -> None:
    batches = _batches()
    _append(segment, batches)
    found = segment.find_offset_by_timestamp(1035, BASE_OFFSET)
    assert found is not None
    assert found[1].base_offset == BASE_OFFSET + 2 * 4  # the first batch at >= 1035 ms
    found = segment.find_offset_by_timestamp(0, BASE_OFFSET + 3)
    assert found is not None
    assert found[1].base_offset == BASE_OFFSET + 2  # the batch holding min_offset
    assert segment.find_offset_by_timestamp(max(TIMESTAMPS_MS) + 1, BASE_OFFSET) is None
    found = segment.find_max_timestamp()
    assert found is not None
    assert found[1].max_timestamp == max(TIMESTAMPS_MS)
    assert found[1].base_offset == BASE_OFFSET + 2 * TIMESTAMPS_MS.index(max(TIMESTAMPS_MS))
    assert segment.largest_timestamp_ms() == max(TIMESTAMPS_MS)


def test_largest_timestamp_falls_back_to_the_file_time(segment: LogSegment) -> None:
    _append(segment, [with_offsets(make_batch([b"x"], timestamp_ms=-1), BASE_OFFSET, 0)])
    os.utime(segment.file.path, ns=(START_MS * 1_000_000, START_MS * 1_000_000))
    assert segment.largest_timestamp_ms() == START_MS


def test_should_roll_on_each_of_kafkas_conditions(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000, segment_ms=500, segment_index_bytes=16)
    segment = LogSegment.open_file(str(tmp_path), 0, config, START_MS)
    ts = START_MS
    # An empty segment takes anything (but a relative offset overflow).
    assert not segment.should_roll(5000, ts + 10_000, 10, START_MS + 10_000, config)
    assert segment.should_roll(1, ts, MAX_RELATIVE_OFFSET + 1, START_MS, config)
    batch = with_offsets(make_batch([b"a" * 100], timestamp_ms=ts), 0, 0)
    segment.append([batch], [(0, 0, ts, len(batch))], len(batch))
    room = config.segment_bytes - len(batch)
    assert not segment.should_roll(room, ts, 1, START_MS, config)
    assert segment.should_roll(room + 1, ts, 1, START_MS, config)  # segment.bytes
    assert not segment.should_roll(10, ts + 500, 1, START_MS, config)
    assert segment.should_roll(10, ts + 501, 1, START_MS, config)  # segment.ms, record time
    # Without record timestamps, segment.ms counts on the clock from the segment's creation.
    assert not segment.should_roll(10, -1, 1, START_MS + 500, config)
    assert segment.should_roll(10, -1, 1, START_MS + 501, config)
    # Two 8-byte offset index entries fill segment.index.bytes = 16.
    segment.offset_index.append(1, 10)
    assert not segment.should_roll(10, ts, 1, START_MS, config)
    segment.offset_index.append(2, 20)
    assert segment.should_roll(10, ts, 1, START_MS, config)
    segment.close()


def test_truncate_to_cuts_whole_batches_and_their_index_entries(segment: LogSegment) -> None:
    batches = _batches()
    _append(segment, batches)
    segment.flush()
    positions = _positions(batches)
    assert max(segment.offset_index.values) >= positions[4]
    assert max(segment.time_index.values) >= 8
    # Offset 109 is the second record of batch 4: the whole batch goes.
    assert segment.truncate_to(BASE_OFFSET + 9) == sum(len(b) for b in batches[4:])
    assert segment.size_bytes == positions[4] == segment.file.size()
    assert segment.next_offset == BASE_OFFSET + 8
    assert segment.max_timestamp_ms == max(TIMESTAMPS_MS[:4])
    assert all(position < positions[4] for position in segment.offset_index.values)
    assert all(relative_offset < 8 for relative_offset in segment.time_index.values)
    # The index files were cut too (8-byte offset entries, 12-byte time entries).
    assert os.path.getsize(segment.offset_index.path) == 8 * len(segment.offset_index)
    assert os.path.getsize(segment.time_index.path) == 12 * len(segment.time_index)
    assert segment.truncate_to(segment.next_offset) == 0


def test_load_restores_a_flushed_segment_from_its_files(tmp_path: Path) -> None:
    batches = _batches()
    written = LogSegment.open_file(str(tmp_path), BASE_OFFSET, CONFIG, START_MS)
    _append(written, batches)
    written.flush()
    written.close()
    loaded = LogSegment.open_file(str(tmp_path), BASE_OFFSET, CONFIG, START_MS)
    assert loaded.load()
    assert (loaded.size_bytes, loaded.next_offset, loaded.max_timestamp_ms) == (
        written.size_bytes,
        written.next_offset,
        written.max_timestamp_ms,
    )
    assert loaded.offset_index.values == written.offset_index.values
    assert loaded.time_index.keys == written.time_index.keys
    loaded.close()


def test_load_refuses_an_index_pointing_past_the_file(tmp_path: Path) -> None:
    batches = _batches()
    written = LogSegment.open_file(str(tmp_path), BASE_OFFSET, CONFIG, START_MS)
    _append(written, batches)
    written.flush()
    written.close()
    os.truncate(written.file.path, _positions(batches)[2])
    loaded = LogSegment.open_file(str(tmp_path), BASE_OFFSET, CONFIG, START_MS)
    assert not loaded.load()
    loaded.close()


def test_recover_keeps_the_valid_prefix_and_rebuilds_the_indexes(tmp_path: Path) -> None:
    batches = _batches()
    reference_dir = tmp_path / "reference"
    reference_dir.mkdir()
    reference = LogSegment.open_file(str(reference_dir), BASE_OFFSET, CONFIG, START_MS)
    _append(reference, batches[:6])
    damaged_dir = tmp_path / "damaged"
    damaged_dir.mkdir()
    damaged = LogSegment.open_file(str(damaged_dir), BASE_OFFSET, CONFIG, START_MS)
    _append(damaged, batches)
    # Flip a record byte of batch 6: its CRC fails, so it and everything after go.
    flip_at = _positions(batches)[6] + len(batches[6]) - 3
    with open(damaged.file.path, "r+b") as file:
        file.seek(flip_at)
        byte = file.read(1)[0]
        file.seek(flip_at)
        file.write(bytes([byte ^ 0xFF]))
    expected_cut = sum(len(b) for b in batches[6:])
    assert damaged.recover(0, BASE_OFFSET) == expected_cut
    assert damaged.file.read(0, damaged.file.size()) == b"".join(batches[:6])
    assert (damaged.size_bytes, damaged.next_offset) == (
        reference.size_bytes,
        reference.next_offset,
    )
    assert damaged.offset_index.values == reference.offset_index.values
    assert damaged.time_index.keys == reference.time_index.keys
    # A batch whose base offset is not the expected one is cut as well.
    kept_bytes = damaged.size_bytes
    assert damaged.recover(0, BASE_OFFSET + 1) == kept_bytes
    assert damaged.size_bytes == damaged.file.size() == 0
    assert damaged.next_offset == BASE_OFFSET
    reference.close()
    damaged.close()


def test_delete_unlinks_the_files_but_open_slices_still_read(segment: LogSegment) -> None:
    batches = _batches()
    _append(segment, batches)
    segment.flush()
    found = segment.read(BASE_OFFSET, 10_000, segment.size_bytes, min_one_message=True)
    assert found is not None
    paths = [segment.file.path, segment.offset_index.path, segment.time_index.path]
    segment.delete()
    assert not any(os.path.exists(path) for path in paths)
    assert found[1].read_bytes() == b"".join(batches)
