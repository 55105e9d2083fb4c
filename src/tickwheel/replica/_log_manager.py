"""``LogManager``: the partition logs under the ``log.dirs`` directories, and their health.

Kafka's layout: each directory of ``log.dirs`` holds one directory per partition,
named ``<topic>-<partition>``, each a ``Log`` (segments, indexes, leader epochs), and
three offset checkpoint files for all of them: ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint`` and ``replication-offset-checkpoint``, one line per
partition (``OffsetCheckpoints``). At start-up every such directory is opened
(``Log.open`` recovers it, from the offsets its directory's checkpoints hold); a
deleted partition's directory is closed and removed, and its entries leave the files
with their next write. A new partition goes to the online directory holding the
fewest partitions, as Kafka's ``LogManager.nextLogDirs`` places it, unless
AlterReplicaLogDirs named its directory before it was hosted (``prefer_dir``).

Checkpoints: the broker has ``checkpoint`` write the high watermarks every
``replica.high.watermark.checkpoint.interval.ms``, the recovery points every
``log.flush.offset.checkpoint.interval.ms`` and the log start offsets every
``log.flush.start.offset.checkpoint.interval.ms``: each log stages its offset (a
dictionary store under its lock, no I/O), then each online directory's file is
replaced once if any entry changed, one fsync of the file and one of the directory.
A round costs the same two fsyncs with 10 or 20,000 partitions. It runs on a worker
thread; no log's lock is held during the I/O.

The older layout, and the move from it: a broker of an earlier version kept the same
three files in every partition directory, each with its one entry. When a log
directory has no file of a checkpoint yet, the per-partition files of that checkpoint
are read at start-up (``_migrate``), the directory's file is written and fsynced, and
only then are the per-partition files deleted, each as its log is opened
(``Log.open`` clears them with its other leftovers). A crash before the directory's
file is in place leaves the per-partition files to be read again; after it, the
directory's file is the truth and the per-partition files left over are deleted
unread. No offset is lost either way. Entries of partitions with no directory are
dropped at start-up, so a partition created again after a crash starts from nothing.

Log directory failure, as Kafka's ``LogDirFailureChannel``: an I/O error on a log
(a full disk, a failing device) takes its whole directory offline. The error is logged
once, with the directory and the errno; the directory's logs are closed without a
flush and their partitions answer KAFKA_STORAGE_ERROR until the broker restarts; the
other directories go on serving. ``offline_dir_count`` is Kafka's
``OfflineLogDirectoryCount``. Unlike Kafka, the broker is not halted when its last
directory fails: it keeps answering metadata and group requests, and its offline
partitions keep answering KAFKA_STORAGE_ERROR, which is what an operator can see.

Moving a log to another directory (AlterReplicaLogDirs): ``start_move`` creates a
``LogDirMove``, whose copy passes the ``ReplicaManager`` runs on a worker thread, and
``finish_move`` swaps it in on the loop; ``_log_dir_move`` tells the steps and why a
crash at any of them loses nothing. At start-up every ``-future`` directory left by
a move is deleted, and a ``-delete`` directory is renamed back when its partition has
no other directory (a crash between the swap's two renames), else deleted.
``describe`` answers DescribeLogDirs: each directory, its volume's total and usable
bytes, and the current and future logs it holds.

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
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from tickwheel.log import (
    OFFSET_CHECKPOINTS,
    Log,
    LogConfig,
    LogStorageError,
    OffsetCheckpoints,
    fsync_dir,
    read_checkpoint,
)
from tickwheel.replica._log_dir_move import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    LogDirMove,
    moving_dir_name,
    parse_moving_dir,
)
from tickwheel.replica._types import TopicPartition

_log = logging.getLogger(__name__)

_PROBE_FILE = ".tickwheel-probe"
_PROCESS_LIMITS = frozenset({errno.EMFILE, errno.ENFILE})
"""Errors of the process's descriptor limits, not of a directory: no failure of it."""

DirFailureListener = Callable[[Path, list[TopicPartition]], None]


class LogDirError(Exception):
    """A ``log.dirs`` entry that cannot hold logs (start-up refuses to go on)."""


@dataclass(frozen=True, slots=True)
class ReplicaLogInfo:
    """A log in a log directory, as DescribeLogDirs reports it."""

    tp: TopicPartition
    size_bytes: int
    # Current log: how far its end is below the high watermark (0 on a leader); future
    # log: how far it is behind the current log's end.
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    """A ``log.dirs`` entry as DescribeLogDirs reports it; offline: no sizes, no logs."""

    path: Path
    online: bool
    total_bytes: int = -1
    usable_bytes: int = -1
    logs: tuple[ReplicaLogInfo, ...] = ()


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
        self._moves: dict[TopicPartition, LogDirMove] = {}
        # Where partitions not hosted yet are to be created (AlterReplicaLogDirs before
        # the partition reached this broker, Kafka's ``preferredLogDirs``).
        self._preferred: dict[TopicPartition, Path] = {}
        self._on_disk = self._scan()
        # Partitions on disk per directory, kept as ``_on_disk`` changes: placing a new
        # partition must not cost a pass over every partition.
        self._held = Counter(self._on_disk.values())
        self._checkpoints = {log_dir: self._load_checkpoints(log_dir) for log_dir in self.log_dirs}

    def _load_checkpoints(self, log_dir: Path) -> OffsetCheckpoints:
        """The offset checkpoints of ``log_dir``, moved from the older layout if needed
        and rid of partitions that have no directory."""
        partitions = [tp for tp, held_in in self._on_disk.items() if held_in == log_dir]
        present = {(tp.topic, tp.partition) for tp in partitions}
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
            checkpoints = OffsetCheckpoints.load(str(log_dir))
            checkpoints.remove([key for key in checkpoints.partitions() if key not in present])
            _migrate(log_dir, checkpoints, partitions)
            # Every file exists from now on (the next start looks for no older files)
            # and is durable before any log opens: opening one deletes its older files.
            checkpoints.create_missing()
            checkpoints.write()
        except OSError as error:
            raise LogDirError(
                f"log.dirs entry {str(log_dir)!r}: cannot read or write its checkpoints: {error}"
            ) from error
        return checkpoints

    def _scan(self) -> dict[TopicPartition, Path]:
        found: dict[TopicPartition, Path] = {}
        deleting: list[tuple[TopicPartition, Path]] = []
        for log_dir in self.log_dirs:
            if not log_dir.is_dir():
                continue
            for child in log_dir.iterdir():
                moving = parse_moving_dir(child.name)
                if moving is not None and child.is_dir():
                    if moving[1] == FUTURE_DIR_SUFFIX:
                        _log.info("deleting %s, the copy of a move the broker stopped in", child)
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        deleting.append((moving[0], child))
                    continue
                tp = parse_partition_dir(child.name)
                if tp is None or not child.is_dir():
                    continue
                if tp in found:
                    raise LogDirError(
                        f"partition {tp.topic}-{tp.partition} has a log in both "
                        f"{found[tp]} and {log_dir}; remove one of them"
                    )
                found[tp] = log_dir
        for tp, path in deleting:
            if tp in found:
                shutil.rmtree(path, ignore_errors=True)
                continue
            # The broker stopped between a move's two renames: the source is complete.
            restored = path.parent / partition_dir_name(tp)
            _log.warning("restoring %s as %s: its move did not finish", path, restored)
            try:
                path.rename(restored)
                fsync_dir(str(path.parent))
            except OSError as error:
                raise LogDirError(f"cannot restore {path} as {restored}: {error}") from error
            found[tp] = path.parent
        return found

    def existing_partitions(self) -> list[TopicPartition]:
        """Partitions with a log directory on disk in an online directory, sorted."""
        return sorted(tp for tp, log_dir in self._on_disk.items() if log_dir not in self._offline)

    def logs(self) -> list[Log]:
        """The open logs, as a list the caller may iterate on any thread."""
        return list(self._logs.values())

    def open_log(self, tp: TopicPartition) -> Log | None:
        """``tp``'s open log, if it has one."""
        return self._logs.get(tp)

    @property
    def online_log_dirs(self) -> list[Path]:
        """The log directories no I/O error has taken offline, in ``log.dirs`` order."""
        return [log_dir for log_dir in self.log_dirs if log_dir not in self._offline]

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
        online = self.online_log_dirs
        if not online:
            raise LogStorageError("every log directory is offline")
        preferred = self._preferred.pop(tp, None)
        if preferred in online:
            return preferred
        return min(online, key=lambda log_dir: self._held[log_dir])

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
        if tp not in self._on_disk:
            self._on_disk[tp] = log_dir
            self._held[log_dir] += 1
        try:
            path.mkdir(parents=True, exist_ok=True)
            log = Log.open(
                str(path), config, clock_ms=self._clock_ms, checkpoints=self._checkpoints[log_dir]
            )
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
        self.abandon_move(tp)
        log = self._logs.pop(tp, None)
        log_dir = self._dir_of.pop(tp, None) or self._on_disk.get(tp)
        try:
            if log is not None:
                log.close()
        finally:
            # Removed even when closing failed: nothing reopens it.
            if log_dir is not None:
                self._checkpoints[log_dir].remove([(tp.topic, tp.partition)])
                path = log_dir / partition_dir_name(tp)
                shutil.rmtree(path, ignore_errors=True)
                if not path.exists() and self._on_disk.pop(tp, None) is not None:
                    self._held[log_dir] -= 1

    def fail_dir(self, log_dir: Path, error: OSError) -> None:
        """Take ``log_dir`` offline after ``error`` and tell ``on_dir_failure``.

        Logged once per directory; a directory already offline is left as it is.
        """
        if log_dir in self._offline:
            return
        self._offline.add(log_dir)
        for move in list(self._moves.values()):
            if log_dir in (move.destination_dir, move.source.parent):
                self.abandon_move(move.tp)
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

    def checkpoint_plan(self) -> list[tuple[Path, OffsetCheckpoints, list[Log]]]:
        """Each online directory with its checkpoints and open logs, for ``checkpoint``
        on another thread."""
        logs_of: dict[Path, list[Log]] = {
            log_dir: [] for log_dir in self.log_dirs if log_dir not in self._offline
        }
        for tp, log in self._logs.items():
            held = logs_of.get(self._dir_of[tp])
            if held is not None:
                held.append(log)
        return [(log_dir, self._checkpoints[log_dir], logs) for log_dir, logs in logs_of.items()]

    @staticmethod
    def checkpoint(
        plan: Sequence[tuple[Path, OffsetCheckpoints, Sequence[Log]]],
        stage: Callable[[Log], None],
        name: str,
    ) -> list[tuple[Path, OSError]]:
        """Stage each log's offset (``stage``, say ``Log.checkpoint_high_watermark``) and
        write checkpoint ``name`` of each directory once.

        Returns the directories whose write failed with an I/O error. Safe on a worker
        thread; hand the failures to ``fail_dir`` on the loop.
        """
        failed: list[tuple[Path, OSError]] = []
        for log_dir, checkpoints, logs in plan:
            for log in logs:
                # A log closed meanwhile (its partition deleted) raises: skip it.
                with contextlib.suppress(LogStorageError):
                    stage(log)
            try:
                checkpoints.write((name,))
            except OSError as error:
                failed.append((log_dir, error))
        return failed

    def sync_dirs(self) -> None:
        """fsync every online log directory, making the partition directories created
        in it durable (one fsync for all of them); a failure takes the directory
        offline."""
        for log_dir in self.log_dirs:
            if log_dir in self._offline:
                continue
            try:
                fsync_dir(str(log_dir))
            except OSError as error:
                self.fail_dir(log_dir, error)

    def flush_all(self) -> None:
        """Flush every open log to disk."""
        for log in self._logs.values():
            log.flush()

    def close(self) -> None:
        """Flush and close every log, then write each online directory's checkpoints."""
        for tp in list(self._moves):
            self.abandon_move(tp)
        logs, self._logs = self._logs, {}
        try:
            for tp, log in logs.items():
                try:
                    log.close()
                except (OSError, LogStorageError) as error:
                    # A full disk, say: the other logs still close, and this one is
                    # recovered from its last flush at the next start.
                    _log.error("log %s failed to flush as it closed: %s", tp, error)
                else:
                    _log.debug("closed log %s", tp)
        finally:
            self.write_checkpoints()

    # -- moves between log directories (AlterReplicaLogDirs) ------------------------

    def resolve_dir(self, path: str) -> Path | None:
        """The ``log.dirs`` entry whose absolute path is ``path``, or None."""
        wanted = os.path.abspath(path)
        return next((d for d in self.log_dirs if os.path.abspath(d) == wanted), None)

    def is_dir_offline(self, log_dir: Path) -> bool:
        """Whether ``log_dir`` (a ``log.dirs`` entry) is offline."""
        return log_dir in self._offline

    def prefer_dir(self, tp: TopicPartition, log_dir: Path) -> None:
        """Create ``tp``'s log in ``log_dir`` when it is first hosted here."""
        self._preferred[tp] = log_dir

    def move_of(self, tp: TopicPartition) -> LogDirMove | None:
        """The move of ``tp``'s log under way, if any."""
        return self._moves.get(tp)

    def start_move(self, tp: TopicPartition, destination: Path) -> LogDirMove:
        """Begin moving ``tp``'s open log to ``destination``: its future directory exists.

        ``LogStorageError`` if the log is not open here; ``OSError`` (the destination
        taken offline first) if the future directory cannot be created.
        """
        log_dir = self._dir_of.get(tp)
        if log_dir is None or tp not in self._logs:
            raise LogStorageError(f"{tp} has no open log to move")
        move = LogDirMove(tp, log_dir / partition_dir_name(tp), destination)
        try:
            move.create()
        except OSError as error:
            move.discard()
            if storage_failure(error) is not None:
                self.fail_dir(destination, error)
            raise
        self._moves[tp] = move
        return move

    def abandon_move(self, tp: TopicPartition) -> None:
        """Stop ``tp``'s move, if any, and remove its copy."""
        move = self._moves.pop(tp, None)
        if move is not None:
            move.discard()

    def finish_move(self, tp: TopicPartition) -> Log:
        """Swap ``tp``'s future log in for its current one (step 3 of ``_log_dir_move``);
        the log, open in the destination.

        Raises ``LogStorageError``: when the destination fails before the swap the
        move is abandoned and the source log reopened where it was (the destination
        taken offline); when the source fails, its directory is taken offline.
        """
        move = self._moves.pop(tp)
        source_dir, destination = move.source.parent, move.destination_dir
        old = self._logs[tp]
        high_watermark = old.high_watermark
        key = (tp.topic, tp.partition)
        try:
            old.close(release_files=False)
        except (OSError, LogStorageError) as error:
            move.discard()
            cause = storage_failure(error)
            if cause is not None:
                self.fail_dir(source_dir, cause)
            self._logs.pop(tp, None)
            raise
        source, target = self._checkpoints[source_dir], self._checkpoints[destination]
        try:
            move.copy_changed()
            for name in OFFSET_CHECKPOINTS:
                offset = source.get(name, key)
                if offset is not None:
                    target.stage(name, key, offset)
            target.write()
        except OSError as error:
            move.discard()
            target.remove([key])
            self._logs.pop(tp)
            if storage_failure(error) is not None:
                self.fail_dir(destination, error)
            self.get_or_create_log(tp, old.config).update_high_watermark(high_watermark)
            raise LogStorageError(f"moving {tp} to {destination} failed: {error}") from error
        doomed = source_dir / moving_dir_name(tp, DELETE_DIR_SUFFIX)
        moved = destination / partition_dir_name(tp)
        try:
            move.source.rename(doomed)
            fsync_dir(str(source_dir))
            move.future.rename(moved)
            fsync_dir(str(destination))
            source.remove([key])
            source.write()
        except OSError as error:
            self.fail_dir(source_dir, error)
            raise LogStorageError(f"moving {tp} to {destination} failed: {error}") from error
        shutil.rmtree(doomed, ignore_errors=True)
        del self._logs[tp]
        self._dir_of[tp] = self._on_disk[tp] = destination
        self._held[source_dir] -= 1
        self._held[destination] += 1
        log = self.get_or_create_log(tp, old.config)
        log.update_high_watermark(high_watermark)
        _log.info("moved the log of %s from %s to %s", tp, source_dir, destination)
        return log

    def describe(self, partitions: Collection[TopicPartition] | None) -> list[LogDirInfo]:
        """Each ``log.dirs`` entry with its current and future logs of ``partitions``
        (None: all), for DescribeLogDirs."""
        held: dict[Path, list[ReplicaLogInfo]] = {log_dir: [] for log_dir in self.log_dirs}
        for tp, log in self._logs.items():
            if partitions is not None and tp not in partitions:
                continue
            with contextlib.suppress(LogStorageError):
                lag = max(log.high_watermark - log.log_end_offset, 0)
                held[self._dir_of[tp]].append(ReplicaLogInfo(tp, log.size_bytes, lag, False))
                move = self._moves.get(tp)
                if move is not None:
                    lag = log.log_end_offset - move.copied_end_offset
                    held[move.destination_dir].append(
                        ReplicaLogInfo(tp, move.size_bytes, lag, True)
                    )
        described = []
        for log_dir in self.log_dirs:
            path = Path(os.path.abspath(log_dir))
            if log_dir in self._offline:
                described.append(LogDirInfo(path, online=False))
                continue
            try:
                usage = shutil.disk_usage(log_dir)
            except OSError as error:
                _log.warning("cannot read the volume sizes of %s: %s", log_dir, error)
                described.append(LogDirInfo(path, online=False))
                continue
            logs = tuple(sorted(held[log_dir], key=lambda info: info.tp))
            described.append(LogDirInfo(path, True, usage.total, usage.free, logs))
        return described

    def write_checkpoints(self) -> None:
        """Write each online directory's checkpoints now, with the offsets its logs
        staged (a flush stages the recovery point); ``OSError`` if a write fails."""
        for log_dir, checkpoints in self._checkpoints.items():
            if log_dir not in self._offline:
                checkpoints.write()


def _migrate(
    log_dir: Path, checkpoints: OffsetCheckpoints, partitions: list[TopicPartition]
) -> None:
    """Stage the offsets of the older layout's per-partition files, for each checkpoint
    the directory has no file of yet (see the module docstring)."""
    for name in OFFSET_CHECKPOINTS:
        if checkpoints.file_existed(name):
            continue
        moved = 0
        for tp in partitions:
            offset = read_checkpoint(str(log_dir / partition_dir_name(tp) / name))
            if offset is not None:
                checkpoints.stage(name, (tp.topic, tp.partition), offset)
                moved += 1
        if moved:
            _log.info("moved %d partitions' %s files into %s", moved, name, log_dir / name)
