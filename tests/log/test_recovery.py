"""Crash recovery: torn tails and flipped bytes leave the longest valid prefix.

A crash is simulated by dropping the log without a flush (its bytes stay in the page
cache, as after a process crash) and then damaging the active segment's file: cutting
it at every byte of its unflushed batches, or flipping each of their bytes. Reopening
must give exactly the batches before the damage, indexes equal to those of an
undamaged log holding the same batches, and everything flushed.

Damaged index files of a cleanly closed log (every segment below the recovery point,
so every one is loaded and checked) must not stop it from opening: the segments whose
files fail the checks are recovered with a WARNING, and every read and timestamp
lookup answers as a linear scan of the batches.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.log import MAX_TIMESTAMP, UNFLUSHED_RECOVERED, Log, LogConfig
from tickwheel.log._index import NO_TIMESTAMP

from .batches import header_of, make_batch, with_offsets
from .helpers import FakeClock, crash
from .index_garbage import OFFSET_ENTRY, TIME_ENTRY, out_of_range_entries, random_bytes

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=150)
# Of the header bytes outside the CRC, the base offset's flips are caught by the
# contiguous-offsets check; the partition leader epoch's (bytes 12-15) cannot be.
UNCHECKED_EPOCH_BYTES = range(12, 16)


def _build(log_dir: Path, clock: FakeClock) -> tuple[list[bytes], int]:
    """A log with flushed batches, then three unflushed ones; returns them and the flushed end."""
    log = Log.open(log_dir, CONFIG, clock_ms=clock)
    stored = []
    for i in range(30):
        batch = make_batch([bytes([i]) * (20 + i % 7), b"v"], timestamp_ms=1000 + 10 * i)
        info = log.append_as_leader(batch, i // 10)
        stored.append(with_offsets(batch, info.first_offset, i // 10))
        if i == 26:
            log.flush()
    assert len(log.segment_base_offsets) > 1
    flushed_offset = log.recovery_point
    crash(log)
    return stored, flushed_offset


def _active_path(log_dir: Path) -> Path:
    return sorted(log_dir.glob("*.log"))[-1]


def _index_columns(log: Log) -> list[tuple[list[int], ...]]:
    columns = []
    for segment in log._segments:
        offset_index, time_index = segment.offset_index, segment.time_index
        columns.append(
            (
                list(offset_index.keys),
                list(offset_index.values),
                list(time_index.keys),
                list(time_index.values),
            )
        )
    return columns


def _reference(tmp_path: Path, batches: list[bytes], clock: FakeClock) -> Log:
    reference = Log.open(tmp_path / "reference-0", CONFIG, clock_ms=clock)
    for batch in batches:
        reference.append_as_follower(batch)
    return reference


def _check_prefix(log: Log, expected: list[bytes], reference: Log) -> None:
    assert log.log_end_offset == 2 * len(expected)
    data = b"".join(
        log.read(base, 1_000_000).records.read_bytes() for base in log.segment_base_offsets
    )
    assert data == b"".join(expected)
    assert log.segment_base_offsets == reference.segment_base_offsets
    assert _index_columns(log) == _index_columns(reference)
    # The log accepts appends right after the prefix.
    assert log.append_as_leader(make_batch([b"next"]), 9).first_offset == 2 * len(expected)


@pytest.fixture
def crashed(tmp_path: Path, clock: FakeClock) -> tuple[Path, list[bytes], int]:
    log_dir = tmp_path / "crashed-0"
    stored, flushed_offset = _build(log_dir, clock)
    return log_dir, stored, flushed_offset


def _reopen_damaged(
    tmp_path: Path, crashed_dir: Path, clock: FakeClock, damage: Callable[[Path], None]
) -> Log:
    work = tmp_path / "work-0"
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(crashed_dir, work)
    damage(_active_path(work))
    return Log.open(work, CONFIG, clock_ms=clock)


# (damaged batches, stride in bytes). Fast tier: every fourth byte of the last unflushed
# batch, a sample that still reaches each header field (the partition leader epoch
# aside) and the records; slow tier: every byte of all three unflushed batches.
FAST_STRIDE_BYTES = 4
DAMAGE = [
    pytest.param(1, FAST_STRIDE_BYTES, id="last-batch-sampled"),
    pytest.param(3, 1, id="every-byte", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("damaged_batches", "stride_bytes"), DAMAGE)
def test_cut_at_every_byte_of_the_unflushed_tail(
    tmp_path: Path,
    clock: FakeClock,
    crashed: tuple[Path, list[bytes], int],
    damaged_batches: int,
    stride_bytes: int,
) -> None:
    crashed_dir, stored, flushed_offset = crashed
    active_base = int(_active_path(crashed_dir).stem)
    sizes = [len(b) for b in stored[active_base // 2 :]]
    first_damaged = len(sizes) - damaged_batches
    assert active_base + 2 * first_damaged >= flushed_offset
    references: dict[int, Log] = {}
    first_cut, end = sum(sizes[:first_damaged]), sum(sizes)
    # The end itself (nothing cut) is always tried.
    for cut in sorted({*range(first_cut, end + 1, stride_bytes), end}):
        whole = 0
        while whole < len(sizes) and sum(sizes[: whole + 1]) <= cut:
            whole += 1
        expected = stored[: active_base // 2 + whole]
        if len(expected) not in references:
            references[len(expected)] = _reference(
                tmp_path / f"ref{len(expected)}", expected, clock
            )
        log = _reopen_damaged(tmp_path, crashed_dir, clock, lambda p, n=cut: os.truncate(p, n))
        assert log.log_end_offset >= flushed_offset
        _check_prefix(log, expected, references[len(expected)])
        crash(log)
    for reference in references.values():
        reference.close()


@pytest.mark.parametrize(("damaged_batches", "stride_bytes"), DAMAGE)
def test_flipped_byte_in_the_unflushed_tail(
    tmp_path: Path,
    clock: FakeClock,
    crashed: tuple[Path, list[bytes], int],
    damaged_batches: int,
    stride_bytes: int,
) -> None:
    crashed_dir, stored, flushed_offset = crashed
    active_base = int(_active_path(crashed_dir).stem)
    first_damaged = len(stored) - damaged_batches
    assert 2 * first_damaged >= flushed_offset
    position = sum(len(b) for b in stored[active_base // 2 : first_damaged])
    references: dict[int, Log] = {}
    for index in range(first_damaged, len(stored)):
        batch_bytes = len(stored[index])
        # The batch's last byte is always tried.
        for at in sorted({*range(0, batch_bytes, stride_bytes), batch_bytes - 1}):
            if at in UNCHECKED_EPOCH_BYTES:
                continue

            def flip(path: Path, where: int = position + at) -> None:
                with open(path, "r+b") as file:
                    file.seek(where)
                    byte = file.read(1)[0]
                    file.seek(where)
                    file.write(bytes([byte ^ 0x5A]))

            expected = stored[:index]
            if len(expected) not in references:
                references[len(expected)] = _reference(
                    tmp_path / f"ref{len(expected)}", expected, clock
                )
            log = _reopen_damaged(tmp_path, crashed_dir, clock, flip)
            _check_prefix(log, expected, references[len(expected)])
            crash(log)
        position += batch_bytes
    for reference in references.values():
        reference.close()


def test_lost_or_torn_index_files_are_rebuilt(
    tmp_path: Path, clock: FakeClock, crashed: tuple[Path, list[bytes], int]
) -> None:
    crashed_dir, stored, _ = crashed
    reference = _reference(tmp_path / "ref", stored, clock)
    for damage in ("delete", "tear", "garbage"):
        work = tmp_path / f"{damage}-0"
        shutil.copytree(crashed_dir, work)
        for index in work.glob("*.index"):
            if damage == "delete":
                index.unlink()
            elif damage == "tear":
                os.truncate(index, max(index.stat().st_size - 3, 0))
            else:
                index.write_bytes(array("i", [5, 1, 3, 0]).tobytes())
        log = Log.open(work, CONFIG, clock_ms=clock)
        _check_prefix(log, stored, reference)
        log.close()
    reference.close()


def test_recovery_point_survives_and_reopen_after_clean_close_rescans_nothing(
    tmp_path: Path, clock: FakeClock
) -> None:
    log_dir = tmp_path / "clean-0"
    log = Log.open(log_dir, CONFIG, clock_ms=clock)
    for i in range(10):
        log.append_as_leader(make_batch([bytes([i]) * 50]), 0)
    log.close()
    # Damage below the recovery point is not looked for: flushed data is trusted.
    reopened = Log.open(log_dir, CONFIG, clock_ms=clock)
    assert reopened.recovery_point == reopened.log_end_offset == 10
    reopened.close()


def test_only_a_log_not_closed_says_it_recovered_unflushed_offsets(
    tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwheel.log")
    closed_dir, crashed_dir = tmp_path / "closed-0", tmp_path / "crashed-0"
    closed = Log.open(closed_dir, CONFIG, clock_ms=clock)
    crashed = Log.open(crashed_dir, CONFIG, clock_ms=clock)
    for i in range(10):
        closed.append_as_leader(make_batch([bytes([i]) * 50]), 0)
        crashed.append_as_leader(make_batch([bytes([i]) * 50]), 0)
    crashed.flush()
    crashed.append_as_leader(make_batch([b"unflushed"]), 0)
    closed.close()
    crash(crashed)
    Log.open(closed_dir, CONFIG, clock_ms=clock).close()
    assert UNFLUSHED_RECOVERED not in caplog.text
    Log.open(crashed_dir, CONFIG, clock_ms=clock).close()
    assert f"{crashed_dir}: {UNFLUSHED_RECOVERED} offsets 10 to 10 " in caplog.text


def test_truncation_lowers_the_recovery_point_on_disk(tmp_path: Path, clock: FakeClock) -> None:
    log_dir = tmp_path / "trunc-0"
    log = Log.open(log_dir, CONFIG, clock_ms=clock)
    for i in range(10):
        log.append_as_leader(make_batch([bytes([i]) * 50]), 0)
    log.flush()
    log.truncate_to(4)
    # New, unflushed data above the old recovery point, then a crash that tears it.
    for i in range(6):
        log.append_as_leader(make_batch([b"new" * (i + 1)]), 1)
    crash(log)
    os.truncate(_active_path(log_dir), _active_path(log_dir).stat().st_size - 1)
    reopened = Log.open(log_dir, CONFIG, clock_ms=clock)
    assert reopened.log_end_offset == 9
    assert reopened.read(4, 100).records.read_bytes()[61:] != b""
    reopened.close()


def test_leftovers_are_removed_and_stray_segments_dropped(tmp_path: Path, clock: FakeClock) -> None:
    log_dir = tmp_path / "left-0"
    log = Log.open(log_dir, CONFIG, clock_ms=clock)
    for i in range(5):
        log.append_as_leader(make_batch([bytes([i]) * 50]), 0)
    crash(log)
    (log_dir / "recovery-point-offset-checkpoint.tmp").write_text("garbage")
    (log_dir / "00000000000000000003.index.deleted").write_bytes(b"x")
    (log_dir / "00000000000000000077.timeindex").write_bytes(b"x")
    # A segment that does not continue the log (offsets 100..) is not part of it.
    (log_dir / "00000000000000000100.log").write_bytes(make_batch([b"s"], base_offset=100))
    reopened = Log.open(log_dir, CONFIG, clock_ms=clock)
    assert reopened.log_end_offset == 5
    assert reopened.segment_base_offsets == [0]
    assert sorted(p.name for p in log_dir.iterdir() if not p.name.endswith("checkpoint")) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]
    reopened.close()


def test_corruption_in_an_older_unflushed_segment_drops_the_later_ones(
    tmp_path: Path, clock: FakeClock
) -> None:
    log_dir = tmp_path / "older-0"
    config = LogConfig(segment_bytes=400)
    log = Log.open(log_dir, config, clock_ms=clock)
    stored = []
    for i in range(20):
        batch = make_batch([bytes([i]) * 60])
        stored.append(with_offsets(batch, log.append_as_leader(batch, 0).first_offset, 0))
        if i == 3:
            log.flush()
    bases = log.segment_base_offsets
    assert len(bases) >= 4
    crash(log)
    victim = log_dir / f"{bases[2]:020d}.log"
    second_batch = len(stored[bases[2]])
    with open(victim, "r+b") as file:
        file.seek(second_batch + 40)
        byte = file.read(1)[0]
        file.seek(second_batch + 40)
        file.write(bytes([byte ^ 1]))
    reopened = Log.open(log_dir, config, clock_ms=clock)
    assert reopened.log_end_offset == bases[2] + 1
    assert reopened.segment_base_offsets == bases[:3]
    assert not (log_dir / f"{bases[3]:020d}.log").exists()
    data = b"".join(
        reopened.read(base, 100_000).records.read_bytes() for base in reopened.segment_base_offsets
    )
    assert data == b"".join(stored[: bases[2] + 1])
    reopened.close()


# Small segments, so that the log has several, each with a few index entries.
DAMAGE_CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=150)
# Every seventh batch is older than the one before, so the running largest timestamp
# sometimes stays put across an index entry.
DAMAGE_TIMESTAMPS_MS = [900 + i if i % 7 == 3 else 1000 + 10 * i for i in range(30)]


@dataclass(frozen=True)
class ClosedLog:
    """A cleanly closed log's directory, the batches it holds and its segments."""

    dir_path: Path
    batches: list[bytes]
    segment_base_offsets: list[int]


@pytest.fixture(scope="module")
def closed_log(tmp_path_factory: pytest.TempPathFactory) -> ClosedLog:
    log_dir = tmp_path_factory.mktemp("closed") / "closed-0"
    log = Log.open(log_dir, DAMAGE_CONFIG, clock_ms=FakeClock())
    stored = []
    for i, timestamp_ms in enumerate(DAMAGE_TIMESTAMPS_MS):
        batch = make_batch([bytes([i]) * (20 + i % 7), b"v"], timestamp_ms=timestamp_ms)
        stored.append(with_offsets(batch, log.append_as_leader(batch, 0).first_offset, 0))
    bases = log.segment_base_offsets
    assert len(bases) >= 3
    log.close()
    return ClosedLog(log_dir, stored, bases)


def _assert_log_answers_as_a_scan(log: Log, closed: ClosedLog) -> None:
    assert log.segment_base_offsets == closed.segment_base_offsets
    assert log.log_end_offset == 2 * len(closed.batches)
    for offset in range(log.log_end_offset):
        assert log.read(offset, 1).records.read_bytes() == closed.batches[offset // 2]
    max_timestamps_ms = [header_of(batch)[8] for batch in closed.batches]
    targets = {t + delta for t in max_timestamps_ms for delta in (-1, 0, 1)}
    for target_ms in sorted(targets):
        expected = next(
            ((t, 2 * i) for i, t in enumerate(max_timestamps_ms) if t >= target_ms), None
        )
        found = log.offset_for_timestamp(target_ms)
        assert (None if found is None else (found.timestamp, found.offset)) == expected
    latest_ms = max(max_timestamps_ms)
    found = log.offset_for_timestamp(MAX_TIMESTAMP)
    assert found is not None
    assert (found.timestamp, found.offset) == (latest_ms, 2 * max_timestamps_ms.index(latest_ms))


# What happens to one index file: left alone, deleted, or replaced by these bytes.
_index_damage = st.sampled_from(["keep", "delete"]) | random_bytes()
OFFSET_DAMAGE = _index_damage | out_of_range_entries(
    OFFSET_ENTRY, (1, 30), (1, DAMAGE_CONFIG.segment_bytes)
)
TIME_DAMAGE = _index_damage | out_of_range_entries(TIME_ENTRY, (NO_TIMESTAMP, 2**62), (1, 30))


class _Warnings(logging.Handler):
    """The log's WARNING records, kept (caplog is per test, not per hypothesis example)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _damage(path: Path, damage: str | bytes) -> None:
    if damage == "delete":
        path.unlink()
    elif isinstance(damage, bytes):
        path.write_bytes(damage)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_damaged_index_files_never_stop_the_log_from_opening(
    closed_log: ClosedLog, data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as name:
        work = Path(name) / "work-0"
        shutil.copytree(closed_log.dir_path, work)
        for base_offset in closed_log.segment_base_offsets:
            _damage(work / f"{base_offset:020d}.index", data.draw(OFFSET_DAMAGE))
            _damage(work / f"{base_offset:020d}.timeindex", data.draw(TIME_DAMAGE))
        log = Log.open(work, DAMAGE_CONFIG, clock_ms=FakeClock())
        _assert_log_answers_as_a_scan(log, closed_log)
        log.close()
        # Rebuilt indexes were written back: the next open finds nothing to recover.
        warnings = _Warnings()
        logger = logging.getLogger("tickwheel.log")
        logger.addHandler(warnings)
        try:
            reopened = Log.open(work, DAMAGE_CONFIG, clock_ms=FakeClock())
        finally:
            logger.removeHandler(warnings)
        assert warnings.records == []
        _assert_log_answers_as_a_scan(reopened, closed_log)
        reopened.close()


def test_an_index_entry_off_the_file_is_rebuilt_with_a_warning(
    tmp_path: Path, closed_log: ClosedLog, caplog: pytest.LogCaptureFixture
) -> None:
    """The reported failure: a garbled entry's negative position reached ``os.pread``."""
    work = tmp_path / "work-0"
    shutil.copytree(closed_log.dir_path, work)
    stem = work / f"{closed_log.segment_base_offsets[1]:020d}"
    index_path = Path(f"{stem}.index")
    index_path.write_bytes(OFFSET_ENTRY.pack(3, -16) + index_path.read_bytes())
    with caplog.at_level(logging.WARNING, logger="tickwheel.log"):
        log = Log.open(work, DAMAGE_CONFIG, clock_ms=FakeClock())
    assert [(record.name, record.levelno, record.getMessage()) for record in caplog.records] == [
        (
            "tickwheel.log._recovery",
            logging.WARNING,
            f"{index_path}: first position -16 is below 1; "
            f"recovering {stem}.log and rebuilding its indexes",
        )
    ]
    _assert_log_answers_as_a_scan(log, closed_log)
    log.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tickwheel.log"):
        reopened = Log.open(work, DAMAGE_CONFIG, clock_ms=FakeClock())
    assert caplog.records == []
    reopened.close()
