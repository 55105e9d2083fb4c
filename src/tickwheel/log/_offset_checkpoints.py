"""``OffsetCheckpoints``: the three offset checkpoint files of one directory.

Kafka's ``LogManager`` keeps ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint`` and ``replication-offset-checkpoint`` once per log
directory, one line per partition (format: ``_checkpoint``). This object holds their
entries in memory: a log *stages* its offset (``stage``: a dictionary store, no I/O)
and ``write`` replaces a file whose entries changed since it was last written, with one
fsync of the file and one of the directory, however many partitions it holds. So a
checkpoint round costs two fsyncs per directory, not two per partition.

Two owners use it. A ``LogManager`` loads one per ``log.dirs`` entry and shares it
among the logs of that directory; it writes each file once per checkpoint interval,
and a log writes at once only what must not lag (a recovery point lowered by a
truncation or by recovery, a log start moved by DeleteRecords). A ``Log`` opened on
its own keeps one in its partition directory, holding its one entry, and writes
through on every change.

Reading: a file that is absent holds no entries; a file that is malformed is reported
with its path and the reason, read as holding no entries and rewritten by the next
write, so every partition of the directory recovers from its logs (recovery point 0,
log start at the first segment, high watermark at the log start), as Kafka resets
them: no partition ever starts from an offset the file did not clearly say.
``file_existed`` tells the log manager whether a file was there at all, which decides
whether the per-partition files of the older layout are still the truth (see
``replica._log_manager``).

Concurrency: thread-safe. ``_lock`` guards the entries and is held only for dictionary
work (a log stages under its own lock, so the order is always log lock, then this one);
``_write_lock`` serialises the writes of the files, which snapshot the entries under
``_lock`` and do their I/O outside it, so staging never waits for an fsync.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterable

from tickwheel.log._checkpoint import (
    OFFSET_CHECKPOINTS,
    TEMP_SUFFIX,
    CheckpointFormatError,
    TopicPartitionKey,
    format_checkpoint,
    read_checkpoint_file,
    write_atomically,
)

_log = logging.getLogger(__name__)


class OffsetCheckpoints:
    """The offset checkpoint files of one directory; create it with ``load``."""

    def __init__(
        self,
        dir_path: str,
        entries: dict[str, dict[TopicPartitionKey, int]],
        existing: frozenset[str],
    ) -> None:
        self._dir_path = dir_path
        self._entries = entries
        self._existing = existing
        self._dirty: set[str] = set()
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()

    @classmethod
    def load(cls, dir_path: str, *, owner: TopicPartitionKey | None = None) -> OffsetCheckpoints:
        """Read the checkpoint files of ``dir_path``; delete leftover ``.tmp`` files.

        ``owner``: ``dir_path`` is that partition's directory, and each file's one entry
        is its offset whatever partition the entry names (a copied or renamed partition
        directory keeps its offsets); a file with more entries is malformed.
        """
        entries: dict[str, dict[TopicPartitionKey, int]] = {}
        existing: set[str] = set()
        malformed: set[str] = set()
        for name in OFFSET_CHECKPOINTS:
            path = os.path.join(dir_path, name)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path + TEMP_SUFFIX)
            try:
                found = read_checkpoint_file(path)
                if found is not None and owner is not None:
                    found = _owned(path, found, owner)
            except CheckpointFormatError as error:
                _log.error("%s; its partitions recover from their logs", error)
                found = {}
                malformed.add(name)
            if found is not None:
                existing.add(name)
            entries[name] = found or {}
        checkpoints = cls(dir_path, entries, frozenset(existing))
        # Rewritten by the next write, so that it is reported once, not at every start.
        checkpoints._dirty.update(malformed)
        return checkpoints

    @property
    def dir_path(self) -> str:
        """The directory holding the files."""
        return self._dir_path

    def file_existed(self, name: str) -> bool:
        """Whether file ``name`` was there (well-formed or not) when loaded."""
        return name in self._existing

    def create_missing(self) -> None:
        """Make each file that was not there due, so that the next write creates it
        (holding whatever entries are staged, perhaps none)."""
        with self._lock:
            self._dirty.update(name for name in OFFSET_CHECKPOINTS if name not in self._existing)

    def get(self, name: str, key: TopicPartitionKey) -> int | None:
        """The offset of ``key`` in checkpoint ``name``, or None."""
        with self._lock:
            return self._entries[name].get(key)

    def partitions(self) -> set[TopicPartitionKey]:
        """Every partition any of the checkpoints holds an entry for."""
        with self._lock:
            return {key for entries in self._entries.values() for key in entries}

    def stage(self, name: str, key: TopicPartitionKey, offset: int) -> bool:
        """Set ``key``'s offset in checkpoint ``name`` (in memory); whether it changed."""
        with self._lock:
            entries = self._entries[name]
            if entries.get(key) == offset:
                return False
            entries[key] = offset
            self._dirty.add(name)
            return True

    def assume(self, name: str, key: TopicPartitionKey, offset: int) -> None:
        """Take ``offset`` as ``key``'s entry in checkpoint ``name`` if it has none,
        without making the file due: the default a missing entry reads as."""
        with self._lock:
            self._entries[name].setdefault(key, offset)

    def remove(self, keys: Iterable[TopicPartitionKey]) -> None:
        """Drop every entry of ``keys`` (deleted partitions); written with the next write."""
        with self._lock:
            for name, entries in self._entries.items():
                for key in keys:
                    if entries.pop(key, None) is not None:
                        self._dirty.add(name)

    def write(self, names: Iterable[str] = OFFSET_CHECKPOINTS) -> None:
        """Replace each named file whose entries changed since it was last written.

        Raises ``OSError`` if a write fails; the file stays due for the next write.
        """
        with self._write_lock:
            for name in names:
                with self._lock:
                    if name not in self._dirty:
                        continue
                    self._dirty.discard(name)
                    snapshot = dict(self._entries[name])
                try:
                    write_atomically(self._dir_path, name, format_checkpoint(snapshot))
                except OSError:
                    with self._lock:
                        self._dirty.add(name)
                    raise


def _owned(
    path: str, entries: dict[TopicPartitionKey, int], owner: TopicPartitionKey
) -> dict[TopicPartitionKey, int]:
    """A partition directory's own file: its one entry, as ``owner``'s."""
    if len(entries) != 1:
        raise CheckpointFormatError(
            f"checkpoint file {path} is malformed: {len(entries)} entries in a "
            "partition's own checkpoint"
        )
    return {owner: next(iter(entries.values()))}
