"""The log directory's offset checkpoint files: one per directory for all its partitions,
the move from the older per-partition files, and what a damaged file costs."""

from __future__ import annotations

import logging
import os
import tarfile
from pathlib import Path

import pytest

from tickwheel.log import (
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    OFFSET_CHECKPOINTS,
    RECOVERY_POINT_CHECKPOINT,
    Log,
    LogConfig,
)
from tickwheel.log._checkpoint import parse_checkpoint
from tickwheel.replica import LogDirError, LogManager, TopicPartition

from .records import batch

# A log directory written by the broker before this layout (three partitions of
# "orders", each directory with its own one-entry checkpoint files), and its offsets.
OLD_LAYOUT = Path(__file__).parent / "data" / "per-partition-checkpoints.tar.gz"
# (log start, recovery point, high watermark, log end) of orders-0, -1, -2.
OLD_OFFSETS = [(0, 5, 4, 5), (3, 8, 7, 8), (0, 11, 10, 11)]
CONFIG = LogConfig(segment_bytes=400)
PARTITIONS = [TopicPartition("orders", index) for index in range(3)]


@pytest.fixture
def old_log_dir(tmp_path: Path) -> Path:
    with tarfile.open(OLD_LAYOUT) as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path / "logs"


def _offsets(manager: LogManager) -> list[tuple[int, int, int, int]]:
    offsets = []
    for tp in PARTITIONS:
        log = manager.get_or_create_log(tp, CONFIG)
        offsets.append(
            (log.log_start_offset, log.recovery_point, log.high_watermark, log.log_end_offset)
        )
    return offsets


def _per_partition_files(log_dir: Path) -> list[Path]:
    return sorted(path for name in OFFSET_CHECKPOINTS for path in log_dir.glob(f"*/{name}"))


def _assert_a_start_keeps_every_offset(log_dir: Path) -> None:
    """A broker starting on ``log_dir`` finds every offset, in the new layout only."""
    manager = LogManager([log_dir])
    try:
        assert _offsets(manager) == OLD_OFFSETS
    finally:
        manager.close()
    assert _per_partition_files(log_dir) == []


def test_the_older_layout_moves_to_one_file_per_directory_without_losing_an_offset(
    old_log_dir: Path,
) -> None:
    assert _per_partition_files(old_log_dir)
    _assert_a_start_keeps_every_offset(old_log_dir)
    entries = {
        name: parse_checkpoint((old_log_dir / name).read_bytes()) for name in OFFSET_CHECKPOINTS
    }
    assert entries[HIGH_WATERMARK_CHECKPOINT] == {
        ("orders", 0): 4,
        ("orders", 1): 7,
        ("orders", 2): 10,
    }
    assert entries[RECOVERY_POINT_CHECKPOINT] == {
        ("orders", 0): 5,
        ("orders", 1): 8,
        ("orders", 2): 11,
    }
    assert entries[LOG_START_OFFSET_CHECKPOINT][("orders", 1)] == 3
    # And the next start reads the new files.
    _assert_a_start_keeps_every_offset(old_log_dir)


@pytest.mark.parametrize("crash_at", ["before-the-first-rename", "before-the-second-rename"])
def test_a_crash_while_writing_the_new_files_leaves_the_old_ones_to_read_again(
    old_log_dir: Path, monkeypatch: pytest.MonkeyPatch, crash_at: str
) -> None:
    renames: list[str] = []
    real_replace = os.replace

    def crash(source: str, destination: str) -> None:
        if crash_at == "before-the-first-rename" or renames:
            raise OSError("power cut")
        renames.append(destination)
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(LogDirError, match="power cut"):
        LogManager([old_log_dir])
    monkeypatch.undo()
    # No per-partition file was deleted, whichever directory files made it.
    assert len(_per_partition_files(old_log_dir)) == 7
    _assert_a_start_keeps_every_offset(old_log_dir)


def test_a_crash_while_deleting_the_old_files_keeps_the_new_ones_as_the_truth(
    old_log_dir: Path,
) -> None:
    # The directory's files are written at start-up; each log deletes its older files
    # as it opens. A run that stopped (or crashed) after opening the first log leaves
    # the others' files.
    manager = LogManager([old_log_dir])
    try:
        manager.get_or_create_log(PARTITIONS[0], CONFIG)
    finally:
        manager.close()
    assert 0 < len(_per_partition_files(old_log_dir)) < 7
    # A file left over is never read again once the directory's file exists: make one
    # lie, and it must not be believed.
    stale = old_log_dir / "orders-2" / HIGH_WATERMARK_CHECKPOINT
    stale.write_bytes(b"0\n1\norders 2 1\n")
    _assert_a_start_keeps_every_offset(old_log_dir)


@pytest.mark.parametrize(
    "garbage",
    [b"0\n3\norders 0 5\norders 1 8\n", b"0\n3\norders 0 5\norders 1 8\norders 2 1", b"\x00" * 40],
    ids=["a-line-missing", "cut-mid-line", "zeroed"],
)
def test_a_damaged_directory_checkpoint_is_reported_and_the_logs_recover(
    old_log_dir: Path, caplog: pytest.LogCaptureFixture, garbage: bytes
) -> None:
    LogManager([old_log_dir]).close()
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT):
        (old_log_dir / name).write_bytes(garbage)
    with caplog.at_level(logging.ERROR):
        manager = LogManager([old_log_dir])
    try:
        for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT):
            assert f"checkpoint file {old_log_dir / name} is malformed" in caplog.text
        # Recovered from the logs: every batch re-checked from the start (recovery point
        # at the log start), the log start at the first segment, never a made-up offset.
        offsets = _offsets(manager)
        assert [(start, end) for start, _, _, end in offsets] == [(0, 5), (0, 8), (0, 11)]
        assert [point for _, point, _, _ in offsets] == [0, 0, 0]
        assert [hw for _, _, hw, _ in offsets] == [4, 7, 10]
    finally:
        manager.close()
    # Rewritten: the next start reads well-formed files and reports nothing.
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        LogManager([old_log_dir]).close()
    assert "malformed" not in caplog.text


def test_a_checkpoint_round_writes_each_file_once_for_all_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "logs"
    manager = LogManager([log_dir])
    try:
        for index in range(200):
            log = manager.get_or_create_log(TopicPartition("many", index), LogConfig())
            log.append_as_leader(batch(b"x"), 0)
            log.update_high_watermark(1)
        fsyncs: list[int] = []
        real_fsync = os.fsync
        monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
        failed = LogManager.checkpoint(
            manager.checkpoint_plan(), Log.checkpoint_high_watermark, HIGH_WATERMARK_CHECKPOINT
        )
        assert failed == []
        assert len(fsyncs) == 2  # the file and the directory
        monkeypatch.undo()
        entries = parse_checkpoint((log_dir / HIGH_WATERMARK_CHECKPOINT).read_bytes())
        assert entries == {("many", index): 1 for index in range(200)}
        manager.delete_log(TopicPartition("many", 0))
    finally:
        manager.close()
    entries = parse_checkpoint((log_dir / HIGH_WATERMARK_CHECKPOINT).read_bytes())
    assert ("many", 0) not in entries
    assert len(entries) == 199
