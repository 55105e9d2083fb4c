"""LogSegment on its own: appends, lookups, reads, rolling, truncation, load, recovery.

The last part damages the ``.index`` and ``.timeindex`` files: whatever they hold,
loading the segment (and recovering it when the load refuses them, as ``load_log``
does) must not raise, and every lookup must then answer as a linear scan of the
segment's batches does.
"""

from __future__ import annotations

import functools
import logging
import os
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.log import LogConfig
from tickwheel.log._index import NO_TIMESTAMP
from tickwheel.log._segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)
from tickwheel.record import (
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    log_append_time_header,
)

from .batches import header_of, make_batch, with_offsets
from .helpers import START_MS
from .index_garbage import OFFSET_ENTRY, TIME_ENTRY, out_of_range_entries, random_bytes

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
    # The first record at >= 1035 ms opens the fifth batch.
    assert segment.find_offset_by_timestamp(1035, BASE_OFFSET) == (
        1040,
        BASE_OFFSET + 2 * 4,
        header_of(batches[4]),
    )
    # Not before min_offset: the second record of the second batch.
    assert segment.find_offset_by_timestamp(0, BASE_OFFSET + 3) == (
        1010,
        BASE_OFFSET + 3,
        header_of(batches[1]),
    )
    assert segment.find_offset_by_timestamp(max(TIMESTAMPS_MS) + 1, BASE_OFFSET) is None
    newest = TIMESTAMPS_MS.index(max(TIMESTAMPS_MS))
    assert segment.find_max_timestamp() == (BASE_OFFSET + 2 * newest, header_of(batches[newest]))
    assert segment.largest_timestamp_ms() == max(TIMESTAMPS_MS)


def log_append_time(batch: bytes, now_ms: int) -> bytes:
    """``batch`` as a leader stamps it for a LogAppendTime topic."""
    header = log_append_time_header(memoryview(batch), 0, 0, 0, now_ms)
    return header + batch[RECORD_BATCH_OVERHEAD:]


@pytest.mark.parametrize("timestamp_type", [0, TIMESTAMP_TYPE_MASK])
def test_timestamp_lookups_answer_records_inside_a_batch(
    segment: LogSegment, timestamp_type: int
) -> None:
    """20 records 1 s apart in one batch: the record at or after a time, and the first
    record holding the largest one; a LogAppendTime batch gives every record its max."""
    values = [str(i).encode() for i in range(20)]
    batch = make_batch(values, timestamp_ms=10_000, timestamp_step_ms=1_000)
    if timestamp_type:
        batch = log_append_time(batch, 99_000)
    _append(segment, [with_offsets(batch, BASE_OFFSET, 0)])
    header = header_of(with_offsets(batch, BASE_OFFSET, 0))
    if timestamp_type:
        assert segment.find_offset_by_timestamp(17_500, BASE_OFFSET) == (
            99_000,
            BASE_OFFSET,
            header,
        )
        assert segment.find_max_timestamp() == (BASE_OFFSET, header)
    else:
        assert segment.find_offset_by_timestamp(17_500, BASE_OFFSET) == (
            18_000,
            BASE_OFFSET + 8,
            header,
        )
        assert segment.find_offset_by_timestamp(10_000, BASE_OFFSET + 5) == (
            15_000,
            BASE_OFFSET + 5,
            header,
        )
        assert segment.find_max_timestamp() == (BASE_OFFSET + 19, header)


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
    assert loaded.load(None) is None
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
    problem = loaded.load(None)
    assert problem is not None
    assert problem.startswith(f"{loaded.offset_index.path}: last position ")
    # A refused load leaves the indexes empty, ready for recover.
    assert len(loaded.offset_index) == len(loaded.time_index) == 0
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


# -- damaged index files ---------------------------------------------------------

BATCHES = _batches()
POSITIONS = _positions(BATCHES)
SIZE_BYTES = sum(len(batch) for batch in BATCHES)
END_OFFSET = BASE_OFFSET + 2 * len(BATCHES)


@dataclass(frozen=True)
class Pristine:
    """The segment's index files as written, and its state after the appends."""

    index: bytes
    time_index: bytes
    state: tuple[int, ...]


def _state(segment: LogSegment) -> tuple[int, ...]:
    return (
        segment.size_bytes,
        segment.next_offset,
        segment.max_timestamp_ms,
        segment.rolling_timestamp_ms,
    )


@functools.cache
def _pristine() -> Pristine:
    with tempfile.TemporaryDirectory() as dir_path:
        segment = LogSegment.open_file(dir_path, BASE_OFFSET, CONFIG, START_MS)
        _append(segment, BATCHES)
        segment.flush()
        segment.close()
        return Pristine(
            Path(segment.offset_index.path).read_bytes(),
            Path(segment.time_index.path).read_bytes(),
            _state(segment),
        )


def _expected_read(offset: int, max_bytes: int) -> bytes:
    """A linear scan: whole batches from the one holding ``offset``, at least one."""
    first = next(i for i, batch in enumerate(BATCHES) if BASE_OFFSET + 2 * i + 1 >= offset)
    out = BATCHES[first]
    for batch in BATCHES[first + 1 :]:
        if len(out) + len(batch) > max_bytes:
            break
        out += batch
    return out


def _expected_by_timestamp(timestamp_ms: int, min_offset: int) -> int | None:
    """A linear scan over the records (two per batch, both at the batch's timestamp):
    the first at or past ``min_offset`` whose timestamp is >= the target."""
    for i, batch_timestamp_ms in enumerate(TIMESTAMPS_MS):
        for offset in (BASE_OFFSET + 2 * i, BASE_OFFSET + 2 * i + 1):
            if batch_timestamp_ms >= timestamp_ms and offset >= min_offset:
                return offset
    return None


def _assert_answers_as_a_scan(segment: LogSegment) -> None:
    assert _state(segment) == _pristine().state
    for offset in range(BASE_OFFSET, END_OFFSET):
        found = segment.translate_offset(offset)
        assert found is not None
        i = (offset - BASE_OFFSET) // 2
        assert (found[0], found[1].base_offset) == (POSITIONS[i], BASE_OFFSET + 2 * i)
        read = segment.read(offset, 300, SIZE_BYTES, min_one_message=True)
        assert read is not None
        assert read[1].read_bytes() == _expected_read(offset, 300)
    assert segment.translate_offset(END_OFFSET) is None
    targets = {t + delta for t in TIMESTAMPS_MS for delta in (-1, 0, 1)} | {NO_TIMESTAMP}
    for timestamp_ms in sorted(targets):
        for min_offset in (BASE_OFFSET, BASE_OFFSET + 7):
            found = segment.find_offset_by_timestamp(timestamp_ms, min_offset)
            answer = None if found is None else found[1]
            assert answer == _expected_by_timestamp(timestamp_ms, min_offset)
    found = segment.find_max_timestamp()
    assert found is not None
    assert found[0] == BASE_OFFSET + 2 * TIMESTAMPS_MS.index(max(TIMESTAMPS_MS))


def _write_log_file(dir_path: Path) -> None:
    (dir_path / segment_file_name(BASE_OFFSET, LOG_SUFFIX)).write_bytes(b"".join(BATCHES))


@pytest.fixture
def segment_dir(tmp_path: Path) -> Path:
    """A directory holding the segment's log file, without index files."""
    _write_log_file(tmp_path)
    return tmp_path


def _load_or_recover(dir_path: Path, end_offset: int | None) -> LogSegment:
    """Open the segment and load it, recovering it when the load refuses (as load_log)."""
    segment = LogSegment.open_file(str(dir_path), BASE_OFFSET, CONFIG, START_MS)
    if segment.load(end_offset) is not None:
        assert segment.recover(0, BASE_OFFSET) == 0
    return segment


def _index_contents(
    entry: struct.Struct, real: bytes, value_limit: int
) -> st.SearchStrategy[bytes]:
    """The file as written, random bytes, or sorted entries with one out of range."""
    relative_end = END_OFFSET - BASE_OFFSET
    key_bounds = (1, relative_end) if entry is OFFSET_ENTRY else (NO_TIMESTAMP, 2**62)
    value_bounds = (1, value_limit)
    return st.one_of(
        st.just(real),
        random_bytes(),
        out_of_range_entries(entry, key_bounds, value_bounds),
    )


@st.composite
def _damaged_files(draw: st.DrawFn) -> tuple[bytes | None, bytes | None]:
    """Contents (None: no file) of the .index and .timeindex."""
    pristine = _pristine()
    position_limit = SIZE_BYTES - RECORD_BATCH_OVERHEAD + 1
    offset_limit = END_OFFSET - BASE_OFFSET
    index = draw(st.none() | _index_contents(OFFSET_ENTRY, pristine.index, position_limit))
    time_index = draw(st.none() | _index_contents(TIME_ENTRY, pristine.time_index, offset_limit))
    return index, time_index


def _write(dir_path: Path, index: bytes | None, time_index: bytes | None) -> None:
    for suffix, data in ((INDEX_SUFFIX, index), (TIME_INDEX_SUFFIX, time_index)):
        path = dir_path / segment_file_name(BASE_OFFSET, suffix)
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(data)


@settings(max_examples=100, deadline=None)
@given(files=_damaged_files(), end_known=st.booleans())
def test_damaged_index_files_never_raise_and_lookups_answer_as_a_scan(
    files: tuple[bytes | None, bytes | None], end_known: bool
) -> None:
    with tempfile.TemporaryDirectory() as name:
        dir_path = Path(name)
        _write_log_file(dir_path)
        _write(dir_path, *files)
        segment = _load_or_recover(dir_path, END_OFFSET if end_known else None)
        _assert_answers_as_a_scan(segment)
        # Whatever was rebuilt reaches the files, and they load without a problem.
        segment.flush()
        segment.close()
        reloaded = LogSegment.open_file(name, BASE_OFFSET, CONFIG, START_MS)
        assert reloaded.load(None) is None
        _assert_answers_as_a_scan(reloaded)
        reloaded.close()


@st.composite
def _moved_middle_positions(draw: st.DrawFn) -> bytes:
    """The offset index as written, with positions of entries before the last moved.

    Every entry stays in order and inside the file, and the last one is right, so the
    load checks pass: only the run-time check of each entry's batch can catch them.
    """
    entries = list(OFFSET_ENTRY.iter_unpack(_pristine().index))
    for i in range(len(entries) - 1):
        low = entries[i - 1][1] + 1 if i else 1
        position = draw(st.integers(low, entries[i + 1][1] - 1))
        entries[i] = (entries[i][0], position)
    return b"".join(OFFSET_ENTRY.pack(*entry) for entry in entries)


@settings(max_examples=50, deadline=None)
@given(index=_moved_middle_positions())
def test_entries_that_pass_the_load_checks_but_lie_are_dropped_at_lookup(index: bytes) -> None:
    with tempfile.TemporaryDirectory() as name:
        dir_path = Path(name)
        _write_log_file(dir_path)
        _write(dir_path, index, _pristine().time_index)
        segment = LogSegment.open_file(name, BASE_OFFSET, CONFIG, START_MS)
        assert segment.load(END_OFFSET) is None
        _assert_answers_as_a_scan(segment)
        # What is left names real batches only.
        for offset, position in zip(
            segment.offset_index.keys, segment.offset_index.values, strict=True
        ):
            assert POSITIONS[offset // 2] == position
        segment.close()


@pytest.fixture
def loaded(segment_dir: Path) -> Iterator[LogSegment]:
    """The segment loaded from its files as written."""
    pristine = _pristine()
    _write(segment_dir, pristine.index, pristine.time_index)
    segment = LogSegment.open_file(str(segment_dir), BASE_OFFSET, CONFIG, START_MS)
    assert segment.load(END_OFFSET) is None
    yield segment
    segment.close()


def test_a_lying_entry_is_dropped_with_those_after_it_and_one_warning(
    loaded: LogSegment, caplog: pytest.LogCaptureFixture
) -> None:
    offset_index = loaded.offset_index
    kept = len(offset_index) // 2
    assert kept >= 1
    lying_offset = BASE_OFFSET + offset_index.keys[kept]
    # Inside the batch of the entry before: still in order, but no batch starts there.
    lying_position = offset_index.values[kept - 1] + RECORD_BATCH_OVERHEAD
    offset_index.values[kept] = lying_position
    with caplog.at_level(logging.WARNING, logger="tickwheel.log._segment"):
        _assert_answers_as_a_scan(loaded)
    assert [record.getMessage() for record in caplog.records] == [
        f"{offset_index.path}: entry (offset {lying_offset}, position {lying_position}) does "
        "not hold a batch with that offset; dropping it and the entries after it"
    ]
    assert len(offset_index) == kept
    assert max(loaded.time_index.values) < lying_offset - BASE_OFFSET


@pytest.mark.parametrize(
    ("entry", "position"), [(0, -1), (0, -(2**31)), (-1, SIZE_BYTES), (-1, 2**31 - 1)]
)
def test_a_lookup_never_reads_outside_the_file(
    loaded: LogSegment, entry: int, position: int
) -> None:
    """Entries kept in order but off the file: dropped, never handed to ``pread``."""
    kept = 0 if entry == 0 else len(loaded.offset_index) - 1
    loaded.offset_index.values[entry] = position
    _assert_answers_as_a_scan(loaded)
    assert len(loaded.offset_index) == kept


def test_each_agreement_rule_refuses_the_load(segment_dir: Path) -> None:
    pristine = _pristine()
    entries = list(OFFSET_ENTRY.iter_unpack(pristine.index))
    times = list(TIME_ENTRY.iter_unpack(pristine.time_index))
    assert len(entries) >= 2
    assert times[0][1] == entries[0][0]
    assert times[-1][1] == entries[-1][0]
    stem = segment_dir / segment_file_name(BASE_OFFSET, "")

    def problem(offset_entries: list[tuple[int, int]], time_entries: list[tuple[int, int]]) -> str:
        _write(
            segment_dir,
            b"".join(OFFSET_ENTRY.pack(*entry) for entry in offset_entries),
            b"".join(TIME_ENTRY.pack(*entry) for entry in time_entries),
        )
        segment = LogSegment.open_file(str(segment_dir), BASE_OFFSET, CONFIG, START_MS)
        found = segment.load(END_OFFSET)
        segment.close()
        assert found is not None
        return found

    last_offset = BASE_OFFSET + entries[-1][0]
    assert problem(entries, []) == (
        f"{stem}.timeindex: does not start at the offset index's first offset"
    )
    assert problem(entries, times[1:]) == (
        f"{stem}.timeindex: does not start at the offset index's first offset"
    )
    # The last offset entry moved onto a neighbouring batch boundary.
    moved = [*entries[:-1], (entries[-1][0], POSITIONS[-1])]
    assert (
        problem(moved, times)
        == f"{stem}.index: last entry (offset {last_offset}) names no indexed batch"
    )
    # A time index cut short: the last indexed batch is newer than its last timestamp.
    last_batch_ms = TIMESTAMPS_MS[entries[-1][0] // 2]
    assert problem(entries, times[:-1]) == (
        f"{stem}.timeindex: last timestamp {times[-2][0]} is older than batch {last_offset}'s "
        f"{last_batch_ms}"
    )
    # A last timestamp older than its own batch's.
    older = [*times[:-1], (times[-2][0] + 1, times[-1][1])]
    assert times[-2][0] + 1 < last_batch_ms
    assert problem(entries, older).startswith(f"{stem}.timeindex: last timestamp ")
    # A last time entry naming an offset the offset index does not hold.
    not_indexed = [*times[:-1], (times[-1][0], times[-1][1] + 1)]
    assert problem(entries, not_indexed) == (
        f"{stem}.timeindex: last entry (offset {last_offset + 1}) names no indexed batch"
    )
    # The time index's own rules come first, then the segment's.
    assert problem(entries, [*times, (times[-1][0] + 1, END_OFFSET)]) == (
        f"{stem}.timeindex: last relative offset {END_OFFSET} is not below "
        f"{END_OFFSET - BASE_OFFSET}"
    )


def test_the_files_as_written_load_whole(loaded: LogSegment) -> None:
    pristine = _pristine()
    assert list(zip(loaded.offset_index.keys, loaded.offset_index.values, strict=True)) == list(
        OFFSET_ENTRY.iter_unpack(pristine.index)
    )
    assert list(zip(loaded.time_index.keys, loaded.time_index.values, strict=True)) == list(
        TIME_ENTRY.iter_unpack(pristine.time_index)
    )
    _assert_answers_as_a_scan(loaded)
