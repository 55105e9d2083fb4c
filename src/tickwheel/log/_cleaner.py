"""Log compaction: Kafka's ``LogCleaner`` for logs with ``cleanup.policy=compact``.

A compacted log keeps, for each key, at least its latest record. The cleaner works on
a log's closed segments in two sections (Kafka's terms)::

    log start        cleaned offset            first uncleanable      active segment
    |--- clean section ---|------ dirty section ------|--- too young ---|-- appends -->

- the *clean* section was compacted before: each key appears once there;
- the *dirty* section is everything appended since, up to the *first uncleanable
  offset*: the active segment's base, the high watermark, or the base of the first
  segment holding a record newer than ``min.compaction.lag.ms``, whichever is lowest
  (always a segment boundary, so whole segments are cleaned).

Choosing a log (``plan_cleaning``, ``LogCleaner.clean_once``): the *dirty ratio* is
dirty bytes over clean plus dirty bytes; a log is cleanable when its ratio exceeds
``min.cleanable.dirty.ratio``, or when its first dirty record waited longer than
``max.compaction.lag.ms``; the cleaner takes the cleanable log with the highest ratio.

Cleaning one log, as Kafka's ``Cleaner.doClean``; steps 1-2 are ``write_cleaned``, a
function of plain values (a ``CleaningJob``) that touches only files, steps 3-4 are
``swap_cleaned`` on the log:

1. Map: read the dirty section oldest first and put each keyed record's offset into
   an ``OffsetMap`` (bounded by ``log.cleaner.dedupe.buffer.size`` over the threads);
   if it fills up, the cleaning ends at the last offset mapped.
2. Rewrite: the segments from the log start up to that end are grouped into runs
   whose total size fits ``segment.bytes`` (so small cleaned segments merge), and each
   group is written to one new segment ``<base>.log.cleaned`` (with indexes, fsynced) keeping a
   record when its key maps to no later offset. Records without a key are dropped
   (Kafka counts them invalid). A tombstone (null value) is kept until
   ``delete.retention.ms`` after the cleaning that first saw it (KIP-534: that
   cleaning stores the *delete horizon* in the batch's base timestamp and sets
   attribute bit 6; a later cleaning past the horizon drops the tombstone).
   Batches keep their base offset, last offset delta, producer id, epoch, sequence
   and leader epoch: offsets never change, a consumer sees gaps. A batch whose
   records all survive is copied byte for byte; one emptied entirely is dropped,
   except the last batch of an idempotent producer (its sequence must survive) and
   the last batch of a group (so the cleaned segment ends where the group ended,
   which tells recovery what a swap replaced): those stay as empty batches, records
   count 0, as Kafka keeps a producer's. Compressed batches are decompressed and
   written back with the same codec (``tickwheel.record``). Control batches are copied
   untouched, and so are aborted transactions' batches: read_committed readers skip
   them through the ``.txnindex`` entries, which the swapped-in segment inherits
   (Kafka's cleaner may remove both; that is optional and not done here).

Transactions (Kafka's ``LogCleanerManager`` and ``buildOffsetMapForSegment``): the
uncleanable section starts at the last stable offset at the latest, so an open or
unreplicated transaction's records are never cleaned, and a record of an aborted
transaction never enters the key -> offset map, where it could shadow a committed
value of its key.
3. Swap: group by group, ``Log.replace_segments`` renames the cleaned segment to
   ``.swap``, unlinks the old segments and renames the swap into place, under the log's
   lock (``_recovery`` finishes or discards a swap cut by a crash). If the log refuses
   (retention or a truncation changed those segments since the plan), the cleaned
   segments left are deleted and the checkpoint stays.
4. Checkpoint: ``cleaner-offset-checkpoint`` moves to the end; the next cleaning's dirty
   section starts there.

Crash safety: up to the rename to ``.swap``, a crash leaves ``.cleaned`` files that the
next open deletes (the log is as before); after it, the next open finishes the swap.
Either way the log holds the same latest record per key.

Concurrency: ``LogCleaner`` hands each log to one of its threads at a time
(``_in_progress``, under ``_lock``); the thread plans under the log's lock
(``cleaning_view``), runs ``write_cleaned`` in a worker process, and swaps under the
log's lock again, so appends and reads go on meanwhile; reads of a segment being
swapped keep reading the unlinked file. ``write_cleaned`` reads closed segments by
name, without any lock: they are immutable, and one deleted since the plan ends the
cleaning (``FileNotFoundError``). ``clean`` runs the same steps on the calling thread.
``stop`` kills the worker processes (ending their threads' wait for them) and sets
the event the threads' backoff waits on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO, Final

from tickwheel.log._config import LogConfig
from tickwheel.log._errors import LogError, LogStorageError
from tickwheel.log._log import CleaningView, Log, system_clock_ms
from tickwheel.log._offset_map import OffsetMap
from tickwheel.log._recovery import CLEANED_SUFFIX
from tickwheel.log._segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    TIME_INDEX_SUFFIX,
    BatchEntry,
    LogSegment,
    segment_file_name,
)
from tickwheel.record import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    Record,
    compress,
    decode_records,
    encode_batch,
    encode_record,
    parse_header,
    record_keys,
)

_NO_OFFSET: Final = -1
_MS_PER_S: Final = 1000.0
_PERCENT: Final = 100.0
# The worker: a fresh interpreter running ``run_worker``. The directory holding this
# tickwheel goes at the end of its sys.path: found when the interpreter's own path does
# not have tickwheel (a program that put it on sys.path itself), never shadowing the
# standard library.
_PACKAGE_ROOT: Final = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_WORKER_CODE: Final = (
    "import sys; sys.path.append(sys.argv[1]); "
    "from tickwheel.log._cleaner import run_worker; "
    "run_worker(sys.stdin.buffer, sys.stdout.buffer, int(sys.argv[2]))"
)
_ORPHAN_CHECK_S: Final = 0.5

# Kafka's defaults for the broker's log.cleaner.* settings.
DEFAULT_DEDUPE_BUFFER_BYTES: Final = 128 * 1024 * 1024
DEFAULT_IO_BUFFER_BYTES: Final = 512 * 1024
DEFAULT_IO_BUFFER_LOAD_FACTOR: Final = 0.9
DEFAULT_BACKOFF_MS: Final = 15_000

_log = logging.getLogger(__name__)


class CleaningAbortedError(Exception):
    """The cleaner was stopped in the middle of a cleaning; nothing was swapped since."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings."""

    threads: int = 1
    dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES
    io_buffer_bytes: int = DEFAULT_IO_BUFFER_BYTES
    io_buffer_load_factor: float = DEFAULT_IO_BUFFER_LOAD_FACTOR
    backoff_ms: int = DEFAULT_BACKOFF_MS

    def __post_init__(self) -> None:
        if self.threads < 1 or self.dedupe_buffer_bytes < 1 or self.io_buffer_bytes < 1:
            raise ValueError(
                "log.cleaner.threads, .dedupe.buffer.size and .io.buffer.size must be positive"
            )
        if not 0.0 < self.io_buffer_load_factor <= 1.0:
            raise ValueError("log.cleaner.io.buffer.load.factor must be in (0, 1]")


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    """A compacted log's sections as ``plan_cleaning`` measured them."""

    view: CleaningView
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    # max.compaction.lag.ms passed for the first dirty record: clean whatever the ratio.
    overdue: bool

    @property
    def dirty_ratio(self) -> float:
        """Dirty bytes over clean plus dirty bytes."""
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    @property
    def cleanable(self) -> bool:
        """Whether the cleaner should clean it now (Kafka's rule)."""
        if self.dirty_bytes == 0:
            return False
        return self.overdue or self.dirty_ratio > self.view.config.min_cleanable_dirty_ratio


@dataclass(slots=True)
class CleanerStats:
    """What one cleaning read, wrote and took."""

    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_written: int = 0
    buffer_utilization: float = 0.0
    elapsed_s: float = 0.0
    end_offset: int = _NO_OFFSET

    @property
    def recopy_percent(self) -> float:
        """Bytes written over bytes read, in percent (Kafka's cleaner-recopy-percent)."""
        return _PERCENT * self.bytes_written / max(self.bytes_read, 1)


def plan_cleaning(view: CleaningView, now_ms: int) -> CleaningPlan:
    """Measure the clean and dirty sections of a log (see the module docstring)."""
    config = view.config
    first_dirty = view.cleaned_offset
    uncleanable = min(view.high_watermark, view.last_stable_offset)
    lag_horizon_ms = now_ms - config.min_compaction_lag_ms
    for entry in view.segments:
        if entry.end_offset > first_dirty and entry.largest_timestamp_ms > lag_horizon_ms:
            uncleanable = min(uncleanable, entry.segment.base_offset)
            break
    clean_bytes = dirty_bytes = 0
    first_dirty_timestamp_ms = -1
    for entry in view.segments:
        if entry.end_offset > uncleanable:
            uncleanable = min(uncleanable, entry.segment.base_offset)
            break
        if entry.end_offset <= first_dirty:
            clean_bytes += entry.size_bytes
        else:
            if first_dirty_timestamp_ms < 0:
                first_dirty_timestamp_ms = entry.first_timestamp_ms
            dirty_bytes += entry.size_bytes
    else:
        last_end = view.segments[-1].end_offset if view.segments else view.log_start_offset
        uncleanable = min(uncleanable, last_end)
    overdue = (
        dirty_bytes > 0
        and first_dirty_timestamp_ms >= 0
        and now_ms - first_dirty_timestamp_ms > config.max_compaction_lag_ms
    )
    return CleaningPlan(view, first_dirty, uncleanable, clean_bytes, dirty_bytes, overdue)


def clean(
    log: Log,
    now_ms: int,
    *,
    map_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES,
    map_load_factor: float = DEFAULT_IO_BUFFER_LOAD_FACTOR,
    io_buffer_bytes: int = DEFAULT_IO_BUFFER_BYTES,
) -> CleanerStats | None:
    """Clean ``log`` once, on this thread, if it is cleanable at ``now_ms``.

    The entry point tests drive with a manual clock; returns the stats, or None if
    the log was not cleanable or changed under the cleaning (nothing swapped then).
    Raises ``LogStorageError`` if the log closes, ``OSError`` if its files fail.
    """
    plan = plan_cleaning(log.cleaning_view(), now_ms)
    if not plan.cleanable:
        return None
    job = cleaning_job(plan, now_ms, map_buffer_bytes, map_load_factor, io_buffer_bytes)
    return swap_cleaned(log, plan, write_cleaned(job))


@dataclass(frozen=True, slots=True)
class SegmentFiles:
    """A closed segment as a cleaning job names it: its ``.log`` file and offsets."""

    path: str
    base_offset: int
    size_bytes: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class CleaningJob:
    """Steps 1 and 2 of one cleaning, as plain values: a worker process can run it."""

    dir_path: str
    config: LogConfig
    segments: tuple[SegmentFiles, ...]
    first_dirty_offset: int
    first_uncleanable_offset: int
    producer_last_offsets: dict[int, int]
    # Producer id -> (first offset, marker offset) of its aborted transactions.
    aborted: dict[int, tuple[tuple[int, int], ...]]
    now_ms: int
    map_buffer_bytes: int
    map_load_factor: float
    io_buffer_bytes: int


@dataclass(frozen=True, slots=True)
class CleanedSegments:
    """What a job wrote: one ``.cleaned`` segment per group, named by its base offset."""

    end_offset: int
    # The base offsets of the old segments each cleaned segment replaces.
    groups: tuple[tuple[int, ...], ...]
    stats: CleanerStats


def cleaning_job(
    plan: CleaningPlan,
    now_ms: int,
    map_buffer_bytes: int,
    map_load_factor: float,
    io_buffer_bytes: int,
) -> CleaningJob:
    """The job of a planned cleaning."""
    view = plan.view
    return CleaningJob(
        dir_path=view.dir_path,
        config=view.config,
        segments=tuple(
            SegmentFiles(
                entry.segment.file.path,
                entry.segment.base_offset,
                entry.size_bytes,
                entry.end_offset,
            )
            for entry in view.segments
        ),
        first_dirty_offset=plan.first_dirty_offset,
        first_uncleanable_offset=plan.first_uncleanable_offset,
        producer_last_offsets=dict(view.producer_last_offsets),
        aborted=_aborted_by_producer(view.aborted_transactions),
        now_ms=now_ms,
        map_buffer_bytes=map_buffer_bytes,
        map_load_factor=map_load_factor,
        io_buffer_bytes=io_buffer_bytes,
    )


def write_cleaned(job: CleaningJob) -> CleanedSegments:
    """Steps 1 and 2: map the dirty section, write each group's ``.cleaned`` segment.

    Touches only files: it runs in a cleaner worker process, or on the caller's thread
    (``clean``). On an error the ``.cleaned`` files written so far are deleted (a killed
    worker leaves them; the next cleaning of that group, or the next open, deletes them).
    """
    started_s = time.monotonic()
    stats = CleanerStats()
    offset_map = OffsetMap(job.map_buffer_bytes, job.map_load_factor)
    dirty = [
        entry
        for entry in job.segments
        if job.first_dirty_offset < entry.end_offset <= job.first_uncleanable_offset
    ]
    end_offset = _build_offset_map(job, dirty, offset_map)
    stats.buffer_utilization = offset_map.utilization
    groups: list[list[SegmentFiles]] = []
    if end_offset > job.first_dirty_offset:
        to_clean = [entry for entry in job.segments if entry.base_offset < end_offset]
        groups = group_segments_by_size(to_clean, job.config.segment_bytes)
    writer = _GroupWriter(job, offset_map, stats)
    written: list[LogSegment] = []
    try:
        for group in groups:
            # Appended one by one: a failure must know what was written before it.
            written.append(writer.write_group(group))  # noqa: PERF401
    except BaseException:
        for cleaned in written:
            cleaned.delete()
        raise
    stats.end_offset = end_offset
    stats.elapsed_s = time.monotonic() - started_s
    return CleanedSegments(
        end_offset,
        tuple(tuple(entry.base_offset for entry in group) for group in groups),
        stats,
    )


def swap_cleaned(log: Log, plan: CleaningPlan, cleaned: CleanedSegments) -> CleanerStats | None:
    """Steps 3 and 4: swap each cleaned segment in, then move the cleaner checkpoint.

    If the log refuses a swap (retention, DeleteRecords or a truncation touched those
    segments), the cleaned segments not yet swapped are deleted, the checkpoint stays
    and None is returned. A ``.cleaned`` file gone missing is an error, never an empty
    segment.
    """
    started_s = time.monotonic()
    by_base = {entry.segment.base_offset: entry for entry in plan.view.segments}
    config = plan.view.config
    pending = list(cleaned.groups)
    refused = False
    try:
        while pending:
            old = [by_base[base] for base in pending[0]]
            name = segment_file_name(old[0].segment.base_offset, LOG_SUFFIX) + CLEANED_SUFFIX
            if not os.path.exists(os.path.join(log.dir_path, name)):
                raise LogError(f"{log.dir_path}: the cleaned segment {name} is missing")
            # A closed segment: its creation time (for segment.ms) is never read.
            segment = LogSegment.open_file(
                log.dir_path, old[0].segment.base_offset, config, 0, CLEANED_SUFFIX
            )
            problem = segment.load(old[-1].end_offset)
            if problem is not None:
                segment.recover(0, segment.base_offset, contiguous=False)
            if not log.replace_segments(old, segment):
                segment.close()
                refused = True
                break
            pending.pop(0)
        else:
            log.mark_cleaned(cleaned.end_offset)
    finally:
        for group in pending:
            _delete_cleaned(log.dir_path, group[0])
    cleaned.stats.elapsed_s += time.monotonic() - started_s
    return None if refused else cleaned.stats


def run_worker(stdin: BinaryIO, stdout: BinaryIO, broker_pid: int) -> None:
    """A cleaner worker process: read a pickled job, write back its pickled result or
    its error (raised again by the cleaner thread).

    A worker whose broker died (a SIGKILL leaves it an orphan) exits: at once if the
    job never came, else within ``_ORPHAN_CHECK_S``, rather than go on writing
    ``.cleaned`` files that the restarted broker's recovery has deleted.
    """

    def exit_when_orphaned() -> None:
        # The broker's pid comes from the broker: read here, the parent may already be
        # gone (this worker adopted) before the check starts.
        while os.getppid() == broker_pid:
            time.sleep(_ORPHAN_CHECK_S)
        os._exit(1)

    threading.Thread(target=exit_when_orphaned, daemon=True).start()
    try:
        job: CleaningJob = pickle.load(stdin)
    except EOFError:
        return  # The broker went before it sent the job.
    try:
        outcome: CleanedSegments | BaseException = write_cleaned(job)
    except Exception as error:
        outcome = error
    pickle.dump(outcome, stdout)
    stdout.flush()


def _start_worker() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER_CODE, _PACKAGE_ROOT, str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )


def _delete_cleaned(dir_path: str, base_offset: int) -> None:
    """Unlink the ``.cleaned`` files of a segment that will not be swapped in."""
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        name = segment_file_name(base_offset, suffix) + CLEANED_SUFFIX
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(dir_path, name))


def group_segments_by_size(
    segments: Sequence[SegmentFiles], max_bytes: int
) -> list[list[SegmentFiles]]:
    """Runs of consecutive segments whose sizes add up to at most ``max_bytes``.

    As Kafka's ``groupSegmentsBySize``: a group also spans at most 2^31 - 1 offsets,
    since the cleaned segment's indexes hold offsets relative to its base.
    """
    groups: list[list[SegmentFiles]] = []
    for entry in segments:
        if groups:
            group = groups[-1]
            size = sum(member.size_bytes for member in group) + entry.size_bytes
            span = entry.end_offset - 1 - group[0].base_offset
            if size <= max_bytes and span <= MAX_RELATIVE_OFFSET:
                group.append(entry)
                continue
        groups.append([entry])
    return groups


def _batches(entry: SegmentFiles, io_buffer_bytes: int) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Each batch of a closed segment, read in chunks of about ``io_buffer_bytes``.

    The file is opened read-only by name: a segment deleted since the plan raises
    ``FileNotFoundError`` and ends the cleaning.
    """
    fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        position = 0
        while position < entry.size_bytes:
            want = min(max(io_buffer_bytes, RECORD_BATCH_OVERHEAD), entry.size_bytes - position)
            chunk = memoryview(os.pread(fd, want, position))
            at = 0
            while at + RECORD_BATCH_OVERHEAD <= len(chunk):
                header = parse_header(chunk, at)
                size = header.size_bytes
                if size < RECORD_BATCH_OVERHEAD:
                    raise LogError(f"{entry.path}: batch at {position + at} has length {size}")
                if at + size > len(chunk):
                    if at:
                        break
                    chunk = memoryview(os.pread(fd, size, position))
                    if len(chunk) < size:
                        raise LogError(f"{entry.path}: batch at {position} is cut short")
                yield header, chunk[at : at + size]
                at += size
            if at == 0:
                raise LogError(f"{entry.path}: batch header at {position} is cut short")
            position += at
    finally:
        os.close(fd)


def _aborted_by_producer(
    aborted: tuple[tuple[int, int, int], ...],
) -> dict[int, tuple[tuple[int, int], ...]]:
    found: dict[int, list[tuple[int, int]]] = {}
    for producer_id, first_offset, last_offset in aborted:
        found.setdefault(producer_id, []).append((first_offset, last_offset))
    return {producer_id: tuple(ranges) for producer_id, ranges in found.items()}


def _is_aborted(job: CleaningJob, header: BatchHeader) -> bool:
    """Whether the batch belongs to an aborted transaction."""
    if not header.attributes & TRANSACTIONAL_FLAG_MASK:
        return False
    ranges = job.aborted.get(header.producer_id, ())
    return any(first <= header.base_offset <= last for first, last in ranges)


def _build_offset_map(job: CleaningJob, dirty: list[SegmentFiles], offset_map: OffsetMap) -> int:
    """Step 1: map the dirty section's keys; returns the offset the cleaning ends at."""
    first_dirty = job.first_dirty_offset
    for entry in dirty:
        for header, batch in _batches(entry, job.io_buffer_bytes):
            if (
                header.attributes & CONTROL_FLAG_MASK
                or header.last_offset < first_dirty
                or _is_aborted(job, header)
            ):
                continue
            base_offset = header.base_offset
            for offset_delta, key in record_keys(batch, header):
                offset = base_offset + offset_delta
                if key is None or offset < first_dirty:
                    continue
                if offset_map.full:
                    return offset_map.latest_offset + 1
                offset_map.put(key, offset)
    return dirty[-1].end_offset if dirty else first_dirty


@dataclass(slots=True)
class _GroupWriter:
    """Step 2 for each group of one cleaning."""

    job: CleaningJob
    offset_map: OffsetMap
    stats: CleanerStats
    _pending: list[bytes] = field(default_factory=list)
    _pending_entries: list[BatchEntry] = field(default_factory=list)
    _pending_bytes: int = 0

    def write_group(self, group: list[SegmentFiles]) -> LogSegment:
        """Write, flush and close the group's ``.cleaned`` segment; returns it."""
        job = self.job
        # A fresh file: a leftover of an earlier cleaning (or of a dead broker's worker
        # still holding it open) is never appended to.
        _delete_cleaned(job.dir_path, group[0].base_offset)
        cleaned = LogSegment.open_file(
            job.dir_path, group[0].base_offset, job.config, job.now_ms, CLEANED_SUFFIX
        )
        try:
            # One batch behind the reads, so the group's last batch is known as such.
            previous: tuple[BatchHeader, memoryview] | None = None
            for entry in group:
                for current in _batches(entry, job.io_buffer_bytes):
                    if previous is not None:
                        self._clean_batch(cleaned, *previous, last_of_group=False)
                    previous = current
            if previous is not None:
                self._clean_batch(cleaned, *previous, last_of_group=True)
            self._write_pending(cleaned)
            cleaned.flush()
        except BaseException:
            cleaned.delete()
            raise
        finally:
            cleaned.close()
        return cleaned

    def _clean_batch(
        self, cleaned: LogSegment, header: BatchHeader, batch: memoryview, *, last_of_group: bool
    ) -> None:
        stats = self.stats
        stats.bytes_read += header.size_bytes
        if header.attributes & CONTROL_FLAG_MASK:
            self._add(cleaned, header, bytes(batch))
            return
        records = decode_records(batch, header)
        stats.records_read += len(records)
        retained = self._retained(header, records)
        stats.records_written += len(retained)
        has_tombstone = any(record.value is None for record in retained)
        has_horizon = header.attributes & DELETE_HORIZON_FLAG_MASK
        if len(retained) == len(records) and (has_horizon or not has_tombstone):
            self._add(cleaned, header, bytes(batch))
        elif retained:
            self._add(cleaned, *self._rebuilt(header, retained, has_tombstone))
        elif last_of_group or (
            header.producer_id >= 0
            and self.job.producer_last_offsets.get(header.producer_id) == header.last_offset
        ):
            self._add(cleaned, *_empty_batch(header))

    def _retained(self, header: BatchHeader, records: list[Record]) -> list[Record]:
        """The records of a batch the cleaning keeps."""
        offset_map = self.offset_map
        mapped_until = offset_map.latest_offset
        drop_tombstones = (
            header.attributes & DELETE_HORIZON_FLAG_MASK
            and self.job.now_ms >= header.base_timestamp
        )
        retained: list[Record] = []
        for record in records:
            offset = header.base_offset + record.offset_delta
            if offset > mapped_until:
                # Past the map (it filled up): not cleaned this time.
                retained.append(record)
                continue
            if record.key is None or offset_map.get(record.key) > offset:
                continue
            if record.value is None and drop_tombstones:
                continue
            retained.append(record)
        return retained

    def _rebuilt(
        self, header: BatchHeader, retained: list[Record], has_tombstone: bool
    ) -> tuple[BatchHeader, bytes]:
        """A batch of the retained records, its header kept but for count, times, CRC."""
        attributes = header.attributes
        base_timestamp = header.base_timestamp
        if has_tombstone and not attributes & DELETE_HORIZON_FLAG_MASK:
            base_timestamp = self.job.now_ms + self.job.config.delete_retention_ms
            attributes |= DELETE_HORIZON_FLAG_MASK
        timestamps = [header.base_timestamp + record.timestamp_delta for record in retained]
        if base_timestamp == header.base_timestamp:
            records = b"".join(record.raw for record in retained)
        else:
            records = b"".join(
                encode_record(record, timestamp - base_timestamp)
                for record, timestamp in zip(retained, timestamps, strict=True)
            )
        payload = compress(attributes & COMPRESSION_CODEC_MASK, records)
        max_timestamp = (
            header.max_timestamp if attributes & TIMESTAMP_TYPE_MASK else max(timestamps)
        )
        return _encode_batch(
            header, attributes, base_timestamp, max_timestamp, len(retained), payload
        )

    def _add(self, cleaned: LogSegment, header: BatchHeader, data: bytes) -> None:
        size = len(data)
        self._pending.append(data)
        self._pending_entries.append(
            (header.base_offset, header.last_offset, header.max_timestamp, size)
        )
        self._pending_bytes += size
        if self._pending_bytes >= self.job.io_buffer_bytes:
            self._write_pending(cleaned)

    def _write_pending(self, cleaned: LogSegment) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        cleaned.append([data], self._pending_entries, len(data))
        self.stats.bytes_written += len(data)
        self._pending = []
        self._pending_entries = []
        self._pending_bytes = 0


def _encode_batch(
    header: BatchHeader,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    records_count: int,
    payload: bytes,
) -> tuple[BatchHeader, bytes]:
    data = encode_batch(
        payload,
        records_count=records_count,
        last_offset_delta=header.last_offset_delta,
        base_timestamp_ms=base_timestamp,
        max_timestamp_ms=max_timestamp,
        attributes=attributes,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
    )
    return parse_header(data, 0), data


def _empty_batch(header: BatchHeader) -> tuple[BatchHeader, bytes]:
    """The batch's header alone, records count 0, as Kafka keeps a producer's last batch."""
    attributes = header.attributes & ~(COMPRESSION_CODEC_MASK | DELETE_HORIZON_FLAG_MASK)
    return _encode_batch(header, attributes, header.max_timestamp, header.max_timestamp, 0, b"")


@dataclass(slots=True)
class CleanerMetrics:
    """The cleaner's gauges under Kafka's names, as the last cleanings left them."""

    max_dirty_percent: float = 0.0
    cleaner_recopy_percent: float = 0.0
    max_clean_time_secs: float = 0.0
    max_buffer_utilization_percent: float = 0.0
    uncleanable_partitions_count: int = 0


class LogCleaner:
    """``log.cleaner.threads`` threads that keep compacted logs compacted.

    ``logs`` returns the logs to consider (the broker's open logs); only those whose
    ``cleanup.policy`` holds ``compact`` are cleaned. ``clock_ms`` drives the lags and
    the delete horizon. ``clean_once`` runs one round on the calling thread.

    Each thread hands the file work of a cleaning (``write_cleaned``: reading, mapping,
    writing the cleaned segments) to a worker process it starts for that cleaning
    (``run_worker`` in a fresh interpreter: nothing of the broker's state inherited,
    the job and its result pickled over its stdin and stdout;
    about 0.2 s to start, small beside a cleaning and its backoff) and waits; it plans
    and swaps itself. Decoding every record is CPU work that would otherwise take the
    GIL from the threads serving clients; in its own process it runs on another core,
    as Kafka's cleaner threads do. Unlike ``multiprocessing``'s spawn, the worker never
    imports the program's main module, so a program that embeds a broker needs no
    ``if __name__ == "__main__":`` guard. ``stop`` kills the workers: a cleaning cut
    there leaves ``.cleaned`` files, which the next open deletes.
    """

    def __init__(
        self,
        config: CleanerConfig,
        logs: Callable[[], Sequence[Log]],
        *,
        clock_ms: Callable[[], int] = system_clock_ms,
    ) -> None:
        self.config = config
        self._logs = logs
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._in_progress: set[str] = set()
        self._uncleanable: set[str] = set()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._last_stats: dict[int, CleanerStats] = {}
        self._max_dirty_percent = 0.0
        self._workers: set[subprocess.Popen[bytes]] = set()

    @property
    def metrics(self) -> CleanerMetrics:
        """The gauges Kafka's LogCleaner and LogCleanerManager publish."""
        with self._lock:
            stats = list(self._last_stats.values())
            return CleanerMetrics(
                max_dirty_percent=self._max_dirty_percent,
                cleaner_recopy_percent=(
                    sum(s.recopy_percent for s in stats) / len(stats) if stats else 0.0
                ),
                max_clean_time_secs=max((s.elapsed_s for s in stats), default=0.0),
                max_buffer_utilization_percent=_PERCENT
                * max((s.buffer_utilization for s in stats), default=0.0),
                uncleanable_partitions_count=len(self._uncleanable),
            )

    def start(self) -> None:
        """Start the cleaner threads."""
        for index in range(self.config.threads):
            thread = threading.Thread(
                target=self._run,
                args=(index,),
                name=f"kafka-log-cleaner-thread-{index}",
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        """Stop the threads and the worker processes; idempotent."""
        self._stop.set()
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            worker.kill()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    def _run(self, index: int) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self.clean_once(thread_index=index)
            except Exception:
                # Never let a surprise end the thread for good: log it and back off.
                _log.exception("log cleaner thread %d: a round failed", index)
                cleaned = False
            if not cleaned:
                self._stop.wait(self.config.backoff_ms / _MS_PER_S)

    def _in_worker(self, job: CleaningJob) -> CleanedSegments:
        """Run ``write_cleaned(job)`` in a worker process; ``CleaningAbortedError`` on stop."""
        request = pickle.dumps(job)
        with self._lock:
            if self._stop.is_set():
                raise CleaningAbortedError
            worker = _start_worker()
            self._workers.add(worker)
        try:
            # stop() kills the worker, which ends this wait at once.
            output, _ = worker.communicate(request)
        finally:
            with self._lock:
                self._workers.discard(worker)
        if self._stop.is_set():
            raise CleaningAbortedError
        if worker.returncode != 0 or not output:
            raise LogError(
                f"cleaner worker for {job.dir_path} died (exit code {worker.returncode})"
            )
        outcome: CleanedSegments | BaseException = pickle.loads(output)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def clean_once(self, *, thread_index: int = 0) -> bool:
        """Clean the dirtiest cleanable log, if any; whether one was cleaned."""
        now_ms = self._clock_ms()
        chosen = self._grab_filthiest(now_ms)
        if chosen is None:
            return False
        log, plan = chosen
        config = self.config
        try:
            job = cleaning_job(
                plan,
                now_ms,
                config.dedupe_buffer_bytes // config.threads,
                config.io_buffer_load_factor,
                config.io_buffer_bytes,
            )
            stats = swap_cleaned(log, plan, self._in_worker(job))
        except CleaningAbortedError:
            return False
        except (LogStorageError, OSError) as error:
            # The log closed or its directory went (a deleted topic, a failed disk)
            # under the cleaning: the next round sees whether it is still there.
            _log.warning("cleaning %s stopped: %s", log.dir_path, error)
            return False
        except Exception:
            _log.exception("cleaning %s failed; it will not be cleaned again", log.dir_path)
            with self._lock:
                self._uncleanable.add(log.dir_path)
            return False
        finally:
            with self._lock:
                self._in_progress.discard(log.dir_path)
        if stats is None:
            # Retention, DeleteRecords or a truncation changed the segments meanwhile:
            # back off, and plan again from what the log holds then.
            _log.info("cleaning %s: the log changed under it; not swapped", log.dir_path)
            return False
        with self._lock:
            self._last_stats[thread_index] = stats
        _log.info(
            "cleaned %s up to offset %d: %d of %d bytes kept in %.3f s",
            log.dir_path,
            stats.end_offset,
            stats.bytes_written,
            stats.bytes_read,
            stats.elapsed_s,
        )
        return True

    def _grab_filthiest(self, now_ms: int) -> tuple[Log, CleaningPlan] | None:
        """The cleanable log with the highest dirty ratio, marked in progress."""
        plans: list[tuple[Log, CleaningPlan]] = []
        logs = self._logs()
        for log in logs:
            if not log.config.compacted:
                continue
            # A log closed, or its files failing, meanwhile: not cleanable this round.
            with contextlib.suppress(LogStorageError, OSError):
                plans.append((log, plan_cleaning(log.cleaning_view(), now_ms)))
        with self._lock:
            # A deleted (or re-created) partition starts afresh.
            self._uncleanable &= {log.dir_path for log in logs}
            self._max_dirty_percent = _PERCENT * max(
                (plan.dirty_ratio for _, plan in plans), default=0.0
            )
            candidates = [
                (log, plan)
                for log, plan in plans
                if plan.cleanable
                and log.dir_path not in self._in_progress
                and log.dir_path not in self._uncleanable
            ]
            if not candidates:
                return None
            log, plan = max(candidates, key=lambda chosen: chosen[1].dirty_ratio)
            self._in_progress.add(log.dir_path)
            return log, plan
