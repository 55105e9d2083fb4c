"""Several log directories: placement, start-up checks, failures, and the high watermark
a crash leaves behind."""

from __future__ import annotations

import errno
import logging
import shutil
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.log import Log, LogConfig, LogStorageError
from tickwheel.replica import LogDirError, LogManager, ReplicaManager, TopicPartition, check_log_dir
from tickwheel.replica._log_dir_move import LogDirMove
from tickwheel.replica._log_manager import storage_failure

from .conftest import BROKER_ID, T0, T1
from .helpers import fetch, produce
from .records import batch

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


def test_new_partitions_go_to_the_directory_holding_fewest(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs)
    try:
        placed = [
            manager.get_or_create_log(TopicPartition("t", index), LogConfig()) for index in range(4)
        ]
        assert len(placed) == 4
        held = [manager.dir_of(TopicPartition("t", index)) for index in range(4)]
        assert held.count(dirs[0]) == held.count(dirs[1]) == 2
    finally:
        manager.close()
    reopened = LogManager(dirs)
    assert reopened.existing_partitions() == [TopicPartition("t", index) for index in range(4)]
    assert [reopened.dir_of(TopicPartition("t", index)) for index in range(4)] == held


def test_a_partition_in_two_directories_is_refused(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name / "t-0").mkdir(parents=True)
    with pytest.raises(LogDirError, match="t-0 has a log in both"):
        LogManager([tmp_path / "a", tmp_path / "b"])


def test_a_log_dir_under_a_regular_file_is_not_usable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    check_log_dir(tmp_path / "fine" / "nested")
    assert (tmp_path / "fine" / "nested").is_dir()
    with pytest.raises(LogDirError, match="is not a usable directory"):
        check_log_dir(blocker / "logs")


def test_only_io_errors_of_a_directory_are_storage_failures() -> None:
    assert storage_failure(ENOSPC) is ENOSPC
    wrapped = LogStorageError("append failed")
    wrapped.__cause__ = ENOSPC
    assert storage_failure(wrapped) is ENOSPC
    assert storage_failure(LogStorageError("log is closed")) is None
    assert storage_failure(OSError(errno.EMFILE, "Too many open files")) is None


@pytest.mark.asyncio
async def test_a_failed_directory_takes_only_its_partitions_offline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager = ReplicaManager(BROKER_ID, [tmp_path / "a", tmp_path / "b"])
    manager.start()
    try:
        for tp in (T0, T1):
            manager.make_leader(tp, LogConfig())
        failed_dir = manager.log_manager.dir_of(T1)
        assert failed_dir is not None
        assert failed_dir != manager.log_manager.dir_of(T0)
        told: list[tuple[Path, list[TopicPartition]]] = []
        manager.log_dir_failure_listener = lambda log_dir, tps: told.append((log_dir, tps))
        with caplog.at_level(logging.ERROR):
            manager.log_manager.fail_dir(failed_dir, ENOSPC)
            manager.log_manager.fail_dir(failed_dir, ENOSPC)
        assert len(caplog.records) == 1
        assert str(failed_dir) in caplog.records[0].getMessage()
        assert told == [(failed_dir, [T1])]
        assert manager.log_manager.offline_dir_count == 1

        answer = await produce(manager, {T0: batch(b"a"), T1: batch(b"b")})
        assert answer[T0].error_code == ErrorCode.none
        assert answer[T1].error_code == ErrorCode.kafka_storage_error
        read = fetch(manager, [(T1, 0)], max_wait_ms=0).result()
        assert read[T1].error_code == ErrorCode.kafka_storage_error
        # Nothing new goes to the offline directory.
        manager.make_leader(TopicPartition("u", 0), LogConfig())
        assert manager.log_manager.dir_of(TopicPartition("u", 0)) != failed_dir
    finally:
        manager.shutdown()


@pytest.mark.asyncio
async def test_leading_after_a_crash_raises_the_high_watermark_to_the_log_end(
    tmp_path: Path,
) -> None:
    crashed = ReplicaManager(BROKER_ID, [tmp_path])
    crashed.start()
    crashed.make_leader(T0, LogConfig())
    await produce(crashed, {T0: batch(b"a", b"b", b"c")}, acks=-1)
    # A crash: no flush, no checkpoint; a second manager opens the same files.
    hosted_only = ReplicaManager(BROKER_ID, [tmp_path])
    partition = hosted_only.host_partition(T0, LogConfig())
    assert partition.log.log_end_offset == 3
    assert partition.log.high_watermark == 0, "the checkpoint lags: nothing raised it"
    hosted_only.log_manager.close()

    restarted = ReplicaManager(BROKER_ID, [tmp_path])
    restarted.start()
    try:
        led = restarted.make_leader(T0, LogConfig())
        assert led.log.high_watermark == 3
        read = fetch(restarted, [(T0, 0)], max_wait_ms=0).result()[T0]
        assert read.high_watermark == 3
        assert read.size_bytes > 0
    finally:
        restarted.shutdown()
        crashed.shutdown()


def _one_record_log(log_dir: Path) -> None:
    manager = LogManager([log_dir])
    try:
        manager.get_or_create_log(TopicPartition("t", 0), LogConfig()).append_as_leader(
            batch(b"kept"), 0
        )
    finally:
        manager.close()


def _stopped_move(tmp_path: Path, copy_name: str) -> tuple[Path, Path]:
    """Two log directories as a move stopped after the source's rename left them."""
    source, destination = tmp_path / "a", tmp_path / "b"
    _one_record_log(source)
    destination.mkdir()
    shutil.copytree(source / "t-0", destination / copy_name)
    (source / "t-0").rename(source / "t-0.9a8b-delete")
    return source, destination


def test_a_move_stopped_between_its_renames_restores_the_source(tmp_path: Path) -> None:
    source, destination = _stopped_move(tmp_path, "t-0.1f2e-future")
    manager = LogManager([source, destination])
    try:
        assert manager.dir_of(TopicPartition("t", 0)) == source
        assert sorted(p.name for p in source.iterdir() if p.is_dir()) == ["t-0"]
        assert [p.name for p in destination.iterdir() if p.is_dir()] == []
        log = manager.get_or_create_log(TopicPartition("t", 0), LogConfig())
        assert log.log_end_offset == 1
    finally:
        manager.close()


def test_a_finished_move_deletes_the_source_left_behind(tmp_path: Path) -> None:
    source, destination = _stopped_move(tmp_path, "t-0")
    manager = LogManager([source, destination])
    try:
        assert manager.dir_of(TopicPartition("t", 0)) == destination
        assert [p.name for p in source.iterdir() if p.is_dir()] == []
    finally:
        manager.close()


def _moving(manager: LogManager, destination: Path, *values: bytes) -> tuple[Log, LogDirMove]:
    """Partition t-0's log holding ``values``, and its move to ``destination`` begun."""
    log = manager.get_or_create_log(TopicPartition("t", 0), LogConfig())
    for value in values:
        log.append_as_leader(batch(value), 0)
    return log, manager.start_move(TopicPartition("t", 0), destination)


def test_a_moved_log_keeps_what_was_appended_up_to_its_swap(tmp_path: Path) -> None:
    source, destination = tmp_path / "a", tmp_path / "b"
    tp = TopicPartition("t", 0)
    manager = LogManager([source, destination])
    try:
        log, move = _moving(manager, destination, b"one", b"two", b"three")
        log.update_high_watermark(3)

        def future() -> tuple[int, int, bool]:
            (info,) = next(d for d in manager.describe(None) if d.path == destination).logs
            return info.size_bytes, info.offset_lag, info.is_future

        assert future() == (0, 3, True)
        move.copy_changed()
        move.copied_end_offset = 3
        assert future() == (log.size_bytes, 0, True)
        log.append_as_leader(batch(b"four"), 0)
        assert future()[1] == 1

        moved = manager.finish_move(tp)
        assert manager.dir_of(tp) == destination
        assert (moved.log_end_offset, moved.high_watermark) == (4, 3)
        assert [d.path for d in manager.describe(None) if d.logs] == [destination]
        assert sorted(p.name for p in source.iterdir() if p.is_dir()) == []
    finally:
        manager.close()
    reopened = LogManager([source, destination])
    try:
        assert reopened.dir_of(tp) == destination
        assert reopened.get_or_create_log(tp, LogConfig()).log_end_offset == 4
    finally:
        reopened.close()


def test_deleting_a_moving_partition_removes_its_copy(tmp_path: Path) -> None:
    destination = tmp_path / "b"
    tp = TopicPartition("t", 0)
    manager = LogManager([tmp_path / "a", destination])
    try:
        _, move = _moving(manager, destination, b"x")
        move.copy_changed()
        manager.delete_log(tp)
        assert [p.name for p in destination.iterdir() if p.is_dir()] == []
        assert manager.move_of(tp) is None
    finally:
        manager.close()
