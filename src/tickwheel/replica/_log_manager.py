"""``LogManager``: the partition logs under the ``log.dirs`` directories, and their health.

Kafka's layout: each directory of ``log.dirs`` holds one directory per partition,
named ``<topic>-<partition>``, each a ``Log`` (segments, indexes, and its own
checkpoints, which the log layer writes). At start-up every such directory is opened
(``Log.open`` recovers it); a deleted partition's directory is closed and removed. A
new partition goes to the online directory holding the fewest partitions, as Kafka's
``LogManager.nextLogDirs`` places it.

Checkpoints: the broker has ``checkpoint`` write the high watermark of every log every
``replica.high.watermark.checkpoint.interval.ms``, the recovery points every
``log.flush.offset.checkpoint.interval.ms`` and the log start offsets every
``log.flush.start.offset.checkpoint.interval.ms``; each log writes only a file whose
offset moved. They run on a worker thread, since they fsync; each log holds its lock
while its file is written (about a millisecond), so an append to that one log waits
that long, and every other log and request goes on.

Log directory failure, as Kafka's ``LogDirFailureChannel``: an I/O error on a log
(a full disk, a failing device) takes its whole directory offline. The error is logged
once, with the directory and the errno; the directory's logs are closed without a
flush and their partitions answer KAFKA_STORAGE_ERROR until the broker restarts; the
other directories go on serving. ``offline_dir_count`` is Kafka's
``OfflineLogDirectoryCount``. Unlike Kafka, the broker is not halted when its last
directory fails: it keeps answering metadata and group requests, and its offline
partitions keep answering KAFKA_STORAGE_ERROR, which is what an operator can see.

Concurrency: owned by the ``ReplicaManager``; every method is called on its event-loop
thread, except ``checkpoint``, which may run on a worker thread over the list
``logs()`` returned (a ``Log`` is thread-safe; a log closed meanwhile is skipped).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from tickwheel.log import Log, LogConfig, LogStorageError
from tickwheel.replica._types import TopicPartition

_log = logging.getLogger(__name__)

_PROBE_FILE = ".tickwheel-probe"
_PROCESS_LIMITS = frozenset({errno.EMFILE, errno.ENFILE})
"""Errors of the process's descriptor limits, not of a directory: no failure of it."""

DirFailureListener = Callable[[Path, list[TopicPartition]], None]


class LogDirError(Exception):
    """A ``log.dirs`` entry that cannot hold logs (start-up refuses to go on)."""


def partition_dir_name(tp: TopicPartition) -> str:
    """Kafka's directory name for a partition's log."""
    return f"{tp.topic}-{tp.partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """The partition a ``<topic>-<partition>`` directory holds, or None."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


def check_log_dir(path: Path) -> None:
    """Create ``path`` if needed and prove that logs can be written in it.

    Raises ``LogDirError`` naming the directory and the reason (a path under a regular
    file, no permission, a read-only file system, ...).
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / _PROBE_FILE
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, b"ok")
        finally:
            os.close(fd)
        probe.unlink()
    except OSError as error:
        raise LogDirError(
            f"log.dirs entry {str(path)!r} is not a usable directory: {error}"
        ) from error


def storage_failure(error: BaseException) -> OSError | None:
    """The I/O error behind ``error`` if it is a storage failure, else None.

    A ``LogStorageError`` caused by an ``OSError`` is one; a ``LogStorageError`` of a
    log closed under a request (a deleted partition) is not, and neither is running
    out of file descriptors, which says nothing of the directory.
    """
    cause: BaseException | None = error
    if isinstance(error, LogStorageError):
        cause = error.__cause__
    if isinstance(cause, OSError) and cause.errno not in _PROCESS_LIMITS:
        return cause
    return None


class LogManager:
    """Opens, places, deletes, checkpoints and closes the partition logs of ``log.dirs``."""

    def __init__(
        self,
        log_dirs: Sequence[Path],
        on_dir_failure: DirFailureListener | None = None,
        *,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        if not log_dirs:
            raise LogDirError("log.dirs names no directory")
        self.log_dirs = tuple(log_dirs)
        # Epoch milliseconds for every log opened here (segment.ms rolls, flush.ms,
        # retention.ms, LogAppendTime): the broker's clock.
        self._clock_ms = clock_ms
        # Told of each directory taken offline, with its partitions that had open logs.
        self.on_dir_failure = on_dir_failure
        self._offline: set[Path] = set()
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._on_disk = self._scan()

    def _scan(self) -> dict[TopicPartition, Path]:
        found: dict[TopicPartition, Path] = {}
        for log_dir in self.log_dirs:
            if not log_dir.is_dir():
                continue
            for child in log_dir.iterdir():
                tp = parse_partition_dir(child.name)
                if tp is None or not child.is_dir():
                    continue
                if tp in found:
                    raise LogDirError(
                        f"partition {tp.topic}-{tp.partition} has a log in both "
                        f"{found[tp]} and {log_dir}; remove one of them"
                    )
                found[tp] = log_dir
        return found

    def existing_partitions(self) -> list[TopicPartition]:
        """Partitions with a log directory on disk in an online directory, sorted."""
        return sorted(tp for tp, log_dir in self._on_disk.items() if log_dir not in self._offline)

    def logs(self) -> list[Log]:
        """The open logs, as a list the caller may iterate on any thread."""
        return list(self._logs.values())

    @property
    def offline_dir_count(self) -> int:
        """How many log directories are offline (Kafka's ``OfflineLogDirectoryCount``)."""
        return len(self._offline)

    def dir_of(self, tp: TopicPartition) -> Path | None:
        """The log directory holding ``tp``'s log, if it has one."""
        return self._dir_of.get(tp) or self._on_disk.get(tp)

    def is_offline(self, tp: TopicPartition) -> bool:
        """Whether ``tp``'s log lives in an offline directory."""
        return self.dir_of(tp) in self._offline

    def _place(self, tp: TopicPartition) -> Path:
        existing = self.dir_of(tp)
        if existing is not None:
            if existing in self._offline:
                raise LogStorageError(f"log directory {existing} of {tp} is offline")
            return existing
        online = [log_dir for log_dir in self.log_dirs if log_dir not in self._offline]
        if not online:
            raise LogStorageError("every log directory is offline")
        counts = dict.fromkeys(online, 0)
        for log_dir in (*self._dir_of.values(), *self._on_disk.values()):
            if log_dir in counts:
                counts[log_dir] += 1
        return min(online, key=lambda log_dir: counts[log_dir])

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig) -> Log:
        """The open log of ``tp``, opened (and recovered) or created on first use.

        Raises ``LogStorageError`` when its directory is offline, or after taking the
        directory offline when opening fails with an I/O error.
        """
        log = self._logs.get(tp)
        if log is not None:
            return log
        log_dir = self._place(tp)
        path = log_dir / partition_dir_name(tp)
        # Known on disk from here on, so that ``delete_log`` finds what a failed open left.
        self._on_disk[tp] = log_dir
        try:
            path.mkdir(parents=True, exist_ok=True)
            log = Log.open(str(path), config, clock_ms=self._clock_ms)
        except (OSError, LogStorageError) as error:
            cause = storage_failure(error)
            if cause is not None:
                self.fail_dir(log_dir, cause)
            if isinstance(error, LogStorageError):
                raise
            raise LogStorageError(f"cannot open the log of {tp} in {log_dir}: {error}") from error
        self._logs[tp] = log
        self._dir_of[tp] = log_dir
        return log

    def delete_log(self, tp: TopicPartition) -> None:
        """Close ``tp``'s log and remove its directory.

        What cannot be removed now (out of descriptors) stays known, so a later call
        removes it.
        """
        log = self._logs.pop(tp, None)
        log_dir = self._dir_of.pop(tp, None) or self._on_disk.get(tp)
        try:
            if log is not None:
                log.close()
        finally:
            # Removed even when closing failed: nothing reopens it.
            if log_dir is not None:
                path = log_dir / partition_dir_name(tp)
                shutil.rmtree(path, ignore_errors=True)
                if not path.exists():
                    self._on_disk.pop(tp, None)

    def fail_dir(self, log_dir: Path, error: OSError) -> None:
        """Take ``log_dir`` offline after ``error`` and tell ``on_dir_failure``.

        Logged once per directory; a directory already offline is left as it is.
        """
        if log_dir in self._offline:
            return
        self._offline.add(log_dir)
        failed = sorted(tp for tp, held_in in self._dir_of.items() if held_in == log_dir)
        _log.error(
            "log directory %s is offline after an I/O error (errno %s, %s): %d partitions "
            "now answer KAFKA_STORAGE_ERROR until the broker restarts; %d of %d log "
            "directories are offline",
            log_dir,
            error.errno,
            error.strerror or error,
            len(failed),
            len(self._offline),
            len(self.log_dirs),
        )
        for tp in failed:
            log = self._logs.pop(tp)
            # The directory failed: closing flushes, which may fail again, and nothing
            # written now could be trusted anyway.
            with contextlib.suppress(OSError, LogStorageError):
                log.close()
        if self.on_dir_failure is not None:
            self.on_dir_failure(log_dir, failed)

    @staticmethod
    def checkpoint(logs: Sequence[Log], write: Callable[[Log], None]) -> list[tuple[Log, OSError]]:
        """Run a checkpoint ``write`` (say ``Log.checkpoint_high_watermark``) on each log.

        Returns the logs whose write failed with an I/O error. Safe on a worker thread;
        hand the failures to ``fail_logs`` on the loop.
        """
        failed: list[tuple[Log, OSError]] = []
        for log in logs:
            try:
                write(log)
            except LogStorageError as error:
                cause = storage_failure(error)
                if cause is not None:
                    failed.append((log, cause))
        return failed

    def fail_logs(self, failures: Sequence[tuple[Log, OSError]]) -> None:
        """Take offline the directory of each log a checkpoint failed on.

        A log no longer open here (its partition was deleted meanwhile) is skipped:
        its files going away is what failed the write.
        """
        if not failures:
            return  # The common case, every checkpoint tick: no map of every log to build.
        held_in = {id(log): self._dir_of[tp] for tp, log in self._logs.items()}
        for log, error in failures:
            log_dir = held_in.get(id(log))
            if log_dir is not None:
                self.fail_dir(log_dir, error)

    def flush_all(self) -> None:
        """Flush every open log to disk."""
        for log in self._logs.values():
            log.flush()

    def close(self) -> None:
        """Flush and close every log (each writes its checkpoints as it closes)."""
        logs, self._logs = self._logs, {}
        for tp, log in logs.items():
            try:
                log.close()
            except (OSError, LogStorageError) as error:
                # A full disk, say: the other logs still close, and this one is
                # recovered from its last flush at the next start.
                _log.error("log %s failed to flush as it closed: %s", tp, error)
            else:
                _log.debug("closed log %s", tp)
