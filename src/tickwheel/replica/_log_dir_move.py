"""``LogDirMove``: a partition's log copied to another of the broker's log directories.

AlterReplicaLogDirs moves a replica's log between the directories of ``log.dirs``
while the partition keeps serving, and loses nothing. Kafka creates a "future" log in
the destination and fills it through a fetcher thread, then swaps it in; here the
future is a copy of the files:

1. The future directory ``<topic>-<partition>.<uuid>-future`` is created in the
   destination (a name no start-up scan takes for a partition).
2. Copy passes on a worker thread (``copy_changed``) bring it up to the source's
   files: each file new or changed since its last copy (inode, size and modification
   time) is copied and fsynced, files the source lost (retention, compaction) are
   deleted. The source keeps serving meanwhile; closed segments are copied once, and
   a file that changes during its copy is copied again by the next pass. Work files
   of the log (``.tmp``, the cleaner's ``.cleaned`` and ``.swap``) are never copied.
3. The swap, on the event loop, where no append can interleave (``LogManager.
   finish_move``): the source log closes (flush, producer snapshot; its files stay
   open to the fetches still sending from them), a last pass copies what changed
   since the previous one (the active segment's tail, its indexes, the snapshot),
   the destination's checkpoints take the partition's offsets, the source directory
   is renamed ``<topic>-<partition>.<uuid>-delete``, the future is renamed to the
   partition's name, the log opens there and the partition reads and appends to it.
   The pause is that last pass: the files written since the previous pass.
4. The ``-delete`` directory is removed.

Crash safety, each step fsynced before the next: before the source's rename the
source is the partition's log and the future a leftover; between the two renames
both are complete copies, and start-up renames the ``-delete`` directory back; after
them the destination holds the partition. Start-up deletes every ``-future`` and
every other ``-delete`` directory (``LogManager``). A broker stopped mid-move thus
keeps the partition where it was and drops the copy; the move is asked again.

The offset lag DescribeLogDirs reports for a future log is the source's log end
minus the log end the last completed pass began from (everything below it was in the
files that pass copied).

Concurrency: ``copy_changed`` runs on one thread at a time (a worker during the
passes, the event loop for the last); the other attributes are the loop's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path
from typing import Final

from tickwheel.log import CLEANED_SUFFIX, SWAP_SUFFIX, TEMP_SUFFIX, fsync_dir, fsync_file
from tickwheel.replica._types import TopicPartition

FUTURE_DIR_SUFFIX: Final = "-future"
DELETE_DIR_SUFFIX: Final = "-delete"
_WORK_FILE_SUFFIXES: Final = (TEMP_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
_LOG_FILE_SUFFIX: Final = ".log"
_MAX_NAME_BYTES: Final = 255
"""The longest file name the file systems take (``NAME_MAX``), as Kafka checks it."""
_UNIQUE_ID_CHARS: Final = 32

FileStamp = tuple[int, int, int]
"""A file's inode, size and modification time (ns): changed when any of them is."""


def moving_dir_name(tp: TopicPartition, suffix: str) -> str:
    """Kafka's name of a future (or to-be-deleted) directory of ``tp``'s log."""
    return f"{tp.topic}-{tp.partition}.{uuid.uuid4().hex}{suffix}"


def movable(tp: TopicPartition) -> bool:
    """Whether ``tp``'s future directory name fits a file name (Kafka refuses to move
    a partition of a longer topic name, KAFKA-4893)."""
    name = f"{tp.topic}-{tp.partition}.{'0' * _UNIQUE_ID_CHARS}{FUTURE_DIR_SUFFIX}"
    return len(name.encode()) <= _MAX_NAME_BYTES


def parse_moving_dir(name: str) -> tuple[TopicPartition, str] | None:
    """The partition and suffix of a ``-future`` or ``-delete`` directory name, or None."""
    for suffix in (FUTURE_DIR_SUFFIX, DELETE_DIR_SUFFIX):
        if name.endswith(suffix):
            base, dot, unique = name.removesuffix(suffix).rpartition(".")
            topic, dash, partition = base.rpartition("-")
            if dot and unique and dash and topic and partition.isdigit():
                return TopicPartition(topic, int(partition)), suffix
    return None


def _stamp(stat: os.stat_result) -> FileStamp:
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


class LogDirMove:
    """The copy of ``tp``'s log from ``source`` into a future directory of
    ``destination_dir`` (see the module docstring)."""

    def __init__(self, tp: TopicPartition, source: Path, destination_dir: Path) -> None:
        self.tp = tp
        self.source = source
        self.destination_dir = destination_dir
        self.future = destination_dir / moving_dir_name(tp, FUTURE_DIR_SUFFIX)
        # The source log's end when the last completed pass began.
        self.copied_end_offset = 0
        self._copied: dict[str, FileStamp] = {}

    def create(self) -> None:
        """Create the future directory (durably); ``OSError`` if the destination fails."""
        self.future.mkdir()
        fsync_dir(str(self.destination_dir))

    def copy_changed(self) -> int:
        """Bring the future directory up to the source's files; the bytes copied.

        ``OSError`` if either directory fails; a file the source deletes meanwhile is
        skipped (the next pass deletes its copy).
        """
        copied_bytes = 0
        present: set[str] = set()
        with os.scandir(self.source) as entries:
            files = [
                entry
                for entry in entries
                if entry.is_file(follow_symlinks=False)
                and not entry.name.endswith(_WORK_FILE_SUFFIXES)
            ]
        for entry in files:
            present.add(entry.name)
            try:
                stamp = _stamp(entry.stat(follow_symlinks=False))
                if self._copied.get(entry.name) == stamp:
                    continue
                target = self.future / entry.name
                shutil.copyfile(entry.path, target)
            except FileNotFoundError:
                present.discard(entry.name)
                continue
            fsync_file(str(target))
            # The stamp from before the copy: a write during it makes the next pass copy again.
            self._copied[entry.name] = stamp
            copied_bytes += stamp[1]
        for name in [name for name in self._copied if name not in present]:
            del self._copied[name]
            with contextlib.suppress(FileNotFoundError):
                (self.future / name).unlink()
        fsync_dir(str(self.future))
        return copied_bytes

    @property
    def size_bytes(self) -> int:
        """The bytes of segment files copied so far (DescribeLogDirs' partition size)."""
        return sum(
            stamp[1] for name, stamp in self._copied.items() if name.endswith(_LOG_FILE_SUFFIX)
        )

    def discard(self) -> None:
        """Remove the future directory (an abandoned or cancelled move)."""
        shutil.rmtree(self.future, ignore_errors=True)
