"""Checkpoint files: Kafka's text format, atomic replacement, strict parsing, and the
offset checkpoints of a directory (one file for many partitions)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from tickwheel.log import Log, LogConfig
from tickwheel.log._checkpoint import (
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    TEMP_SUFFIX,
    CheckpointFormatError,
    format_checkpoint,
    parse_checkpoint,
    read_checkpoint,
    topic_partition_of,
    write_checkpoint,
)
from tickwheel.log._offset_checkpoints import OffsetCheckpoints

from .batches import make_batch
from .helpers import FakeClock

NAME = "recovery-point-offset-checkpoint"


def test_written_in_kafkas_format_and_read_back(tmp_path: Path) -> None:
    write_checkpoint(str(tmp_path), NAME, "orders", 3, 1234)
    assert (tmp_path / NAME).read_bytes() == b"0\n1\norders 3 1234\n"
    assert read_checkpoint(str(tmp_path / NAME)) == 1234
    assert not list(tmp_path.glob(f"*{TEMP_SUFFIX}"))


def test_many_entries_round_trip_in_kafkas_format() -> None:
    entries = {("orders", 0): 5, ("orders", 1): 0, ("my topic", 12): 2**40}
    data = format_checkpoint(entries)
    assert data == b"0\n3\norders 0 5\norders 1 0\nmy topic 12 1099511627776\n"
    assert parse_checkpoint(data) == entries
    assert parse_checkpoint(b"0\n0\n") == {}


def test_a_checkpoint_is_replaced_by_rename_not_rewritten_in_place(tmp_path: Path) -> None:
    write_checkpoint(str(tmp_path), NAME, "orders", 3, 1)
    before = os.stat(tmp_path / NAME).st_ino
    write_checkpoint(str(tmp_path), NAME, "orders", 3, 2)
    # A new inode: the old file was never opened for writing, so it can never be torn.
    assert os.stat(tmp_path / NAME).st_ino != before
    assert read_checkpoint(str(tmp_path / NAME)) == 2


def test_a_crash_before_the_rename_leaves_the_old_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_checkpoint(str(tmp_path), NAME, "orders", 3, 10)

    def crash(source: str, destination: str) -> None:
        raise OSError("crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="crash before the rename"):
        write_checkpoint(str(tmp_path), NAME, "orders", 3, 20)
    monkeypatch.undo()
    assert read_checkpoint(str(tmp_path / NAME)) == 10
    assert (tmp_path / (NAME + TEMP_SUFFIX)).exists()


def test_a_missing_checkpoint_reads_as_none(tmp_path: Path) -> None:
    assert read_checkpoint(str(tmp_path / NAME)) is None


MALFORMED = [
    pytest.param(b"", id="empty"),
    pytest.param(b"0\n1\n", id="no-entry"),
    pytest.param(b"0\n1\norders 3 1234", id="cut-before-the-last-newline"),
    pytest.param(b"0\n1\norders 3 12", id="cut-inside-the-offset"),
    pytest.param(b"1\n1\norders 3 1234\n", id="unknown-version"),
    pytest.param(b"0\n2\norders 3 1234\n", id="entry-count-disagrees"),
    pytest.param(b"0\n1\norders 3 1234\nextra 0 1\n", id="extra-line"),
    pytest.param(b"0\n1\norders 3\n", id="missing-field"),
    pytest.param(b"0\n1\norders x 1234\n", id="bad-partition"),
    pytest.param(b"0\n1\norders 3 12a4\n", id="bad-offset"),
    pytest.param(b"0\n1\norders 3 -5\n", id="negative-offset"),
    pytest.param(b"0\n1\norders 3 1_000\n", id="python-only-digits"),
    pytest.param(b"\xff\xfe\x00garbage", id="binary-garbage"),
]


@pytest.mark.parametrize("content", MALFORMED)
def test_a_malformed_one_entry_checkpoint_reads_as_none(tmp_path: Path, content: bytes) -> None:
    (tmp_path / NAME).write_bytes(content)
    assert read_checkpoint(str(tmp_path / NAME)) is None


@pytest.mark.parametrize("content", [p for p in MALFORMED if p.id != "no-entry"])
def test_a_malformed_checkpoint_is_refused(content: bytes) -> None:
    with pytest.raises(CheckpointFormatError):
        parse_checkpoint(content)


def test_topic_and_partition_come_from_the_directory_name() -> None:
    assert topic_partition_of("/data/orders-3") == ("orders", 3)
    assert topic_partition_of("/data/my-topic-12/") == ("my-topic", 12)
    assert topic_partition_of("/data/scratch") == ("scratch", -1)


def test_a_directory_writes_one_file_per_checkpoint_for_all_its_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoints = OffsetCheckpoints.load(str(tmp_path))
    for partition in range(1000):
        checkpoints.stage(HIGH_WATERMARK_CHECKPOINT, ("orders", partition), partition * 2)
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    checkpoints.write()
    # One fsync of the file, one of the directory, whatever the partition count.
    assert len(fsyncs) == 2
    fsyncs.clear()
    checkpoints.write()
    assert fsyncs == []  # nothing changed: nothing written
    monkeypatch.undo()
    entries = parse_checkpoint((tmp_path / HIGH_WATERMARK_CHECKPOINT).read_bytes())
    assert entries == {("orders", p): p * 2 for p in range(1000)}
    assert not (tmp_path / RECOVERY_POINT_CHECKPOINT).exists()
    reloaded = OffsetCheckpoints.load(str(tmp_path))
    assert reloaded.get(HIGH_WATERMARK_CHECKPOINT, ("orders", 999)) == 1998
    reloaded.remove([("orders", 999)])
    reloaded.write()
    assert ("orders", 999) not in parse_checkpoint(
        (tmp_path / HIGH_WATERMARK_CHECKPOINT).read_bytes()
    )


def test_a_failed_write_stays_due(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoints = OffsetCheckpoints.load(str(tmp_path))
    checkpoints.stage(RECOVERY_POINT_CHECKPOINT, ("orders", 0), 7)

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        checkpoints.write()
    monkeypatch.undo()
    checkpoints.write()
    assert read_checkpoint(str(tmp_path / RECOVERY_POINT_CHECKPOINT)) == 7


def test_a_garbled_directory_checkpoint_is_reported_with_its_path_and_read_as_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / LOG_START_OFFSET_CHECKPOINT
    path.write_bytes(b"0\n3\norders 0 5\norders 1 7\n")  # cut short: one line missing
    with caplog.at_level(logging.ERROR):
        checkpoints = OffsetCheckpoints.load(str(tmp_path))
    assert str(path) in caplog.text
    assert "entry count" in caplog.text
    assert checkpoints.get(LOG_START_OFFSET_CHECKPOINT, ("orders", 0)) is None
    assert checkpoints.file_existed(LOG_START_OFFSET_CHECKPOINT)
    assert not checkpoints.file_existed(HIGH_WATERMARK_CHECKPOINT)


def _log_with_data(log_dir: Path, clock: FakeClock) -> list[bytes]:
    log = Log.open(log_dir, LogConfig(segment_bytes=300), clock_ms=clock)
    for i in range(8):
        log.append_as_leader(make_batch([bytes([i]) * 40]), 0)
    log.update_high_watermark(8)
    assert log.delete_records_before(3) == 3
    log.close()
    reopened = Log.open(log_dir, LogConfig(segment_bytes=300), clock_ms=clock)
    assert (reopened.log_start_offset, reopened.high_watermark) == (3, 8)
    stored = [reopened.read(offset, 1).records.read_bytes() for offset in range(3, 8)]
    reopened.close()
    return stored


def test_corrupt_checkpoints_at_open_mean_recover_everything(
    tmp_path: Path, clock: FakeClock
) -> None:
    log_dir = tmp_path / "orders-0"
    batches = _log_with_data(log_dir, clock)
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, HIGH_WATERMARK_CHECKPOINT):
        (log_dir / name).write_bytes(b"0\n1\norders 0 9")
    (log_dir / (RECOVERY_POINT_CHECKPOINT + TEMP_SUFFIX)).write_bytes(b"0\n1\norders 0 99\n")
    log = Log.open(log_dir, LogConfig(segment_bytes=300), clock_ms=clock)
    # Read as absent: the log start falls back to the first segment's base offset, the
    # recovery point and the high watermark to the log start, and the whole log is
    # re-checked from there: nothing is lost.
    assert log.log_start_offset == log.segment_base_offsets[0] < 3
    assert log.recovery_point == log.high_watermark == log.log_start_offset
    assert log.log_end_offset == 8
    assert [log.read(offset, 1).records.read_bytes() for offset in range(3, 8)] == batches
    # A leftover temporary file is deleted on open, never renamed into place.
    assert not (log_dir / (RECOVERY_POINT_CHECKPOINT + TEMP_SUFFIX)).exists()
    log.flush()
    assert read_checkpoint(str(log_dir / RECOVERY_POINT_CHECKPOINT)) == 8
    log.close()
