"""Opening a partition directory: finding segments, recovering them, rebuilding state.

The procedure ``load_log`` follows on every open (after a clean close or a crash):

1. Finish or undo interrupted cleanings (``_cleaner``), as Kafka does: a
   ``<base>.log.swap`` file is a cleaned segment that was completely written and
   fsynced, so the swap is finished -- the segments it replaces (those whose base
   offset lies in [its base offset, its end offset)) are deleted and the ``.swap``
   files take the segment names. Then delete leftovers of interrupted work: ``*.tmp``
   checkpoints, ``*.deleted``, ``*.cleaned`` and other ``*.swap`` files, index
   files whose ``.log`` file is gone, and, in a log whose offsets its log directory's
   checkpoints hold, the older layout's per-partition offset checkpoint files (their
   offsets were moved to the directory's files before any log was opened).
2. Read the checkpoints: recovery point (every byte below it was fsynced with its
   index files), log start offset and high watermark from the ``OffsetCheckpoints``
   the log was opened with (its directory's files, see ``_offset_checkpoints``), and
   the cleaner's ``cleaner-offset-checkpoint`` in the partition directory (where the
   next cleaning's dirty section starts). A missing one means 0 / the first
   segment's base offset / 0 / the log start.
3. Segments wholly below the recovery point are *loaded*: their index files are
   read and sanity-checked (whole entries, increasing, inside the file and the
   segment, last entries naming real batches: see ``_segment``) and only the headers
   after the last index entry are read to find the end offset and largest timestamp;
   the segment must start at its base offset and end at the next one's (for a log
   that was ever compacted: start at or after its base offset, end at or before the
   next one's, since the cleaner leaves gaps). A segment
   that fails is recovered instead (step 4), with one WARNING naming the file and the
   reason, as Kafka's "Found a corrupted index file ... rebuilding index files".
4. The segment holding the recovery point and every later one are *recovered*:
   from the recovery point's batch (or from byte 0 if it cannot be found) each batch
   is read whole and must pass the framing, magic and CRC checks and start at the
   offset after the previous batch's (each segment starts where the previous one
   ends; in a log that was ever compacted, at any offset after it). The indexes are
   rebuilt as the scan goes. At the first batch that fails, the file is cut there (a
   torn write or a corrupt byte) and every later segment is deleted: the log is the
   longest valid prefix.
5. Segments wholly below the log start offset are deleted; an empty directory gets
   an empty segment at the log start offset.
6. Producer state is loaded from the newest snapshot in [log start, min(recovery
   point, high watermark)] that reads back (bad ones are deleted; snapshots outside
   [log start, log end] too), the ``.txnindex`` entries below it from their files
   (which must check out, or the snapshot is not used), and the batches after it are
   replayed (headers, plus each transaction marker's one record), rebuilding the
   ``.txnindex`` entries past it; each file that disagrees is rewritten. The leader
   epoch cache is rebuilt by reading every batch header: each epoch starts at the
   first batch carrying an epoch newer than every batch's before it (Kafka's recovery
   rule), the first one moved up to the log start, none at or past the log end;
   ``leader-epoch-checkpoint`` is checked against that and rewritten if it differs
   (see ``_leader_epoch``).
7. The log end offset is the end of the last segment; the recovery point and the high
   watermark are clamped into [log start, log end].

A log closed cleanly has its recovery point at its end, so step 4 re-reads nothing;
otherwise one INFO line (``UNFLUSHED_RECOVERED``, as Kafka's "Recovering unflushed
segment") names the offsets that were re-verified.

Nothing flushed is lost: flushed bytes lie below the recovery point or passed their
CRC check, and a cut only removes bytes after the first bad one.

Concurrency: runs inside ``Log.open`` before the log is shared.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from tickwheel.log._checkpoint import (
    CLEANER_CHECKPOINT,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    OFFSET_CHECKPOINTS,
    RECOVERY_POINT_CHECKPOINT,
    TEMP_SUFFIX,
    TopicPartitionKey,
    fsync_dir,
    read_checkpoint,
)
from tickwheel.log._config import LogConfig
from tickwheel.log._errors import LogError
from tickwheel.log._leader_epoch import EpochEntry, LeaderEpochFileCache, load_leader_epoch_cache
from tickwheel.log._offset_checkpoints import OffsetCheckpoints
from tickwheel.log._producer_snapshot import (
    SnapshotEntry,
    delete_snapshots,
    read_snapshot,
    snapshot_offsets,
)
from tickwheel.log._producer_state import BatchAndMarker, ProducerStateManager
from tickwheel.log._segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    OFFSET_DIGITS,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from tickwheel.log._txn_index import TXN_INDEX_SUFFIX, AbortedTxn
from tickwheel.record import CONTROL_FLAG_MASK, BatchHeader, read_control_batch

CLEANED_SUFFIX: Final = ".cleaned"
SWAP_SUFFIX: Final = ".swap"
# Suffixes Kafka gives files of unfinished deletes, cleanings and swaps.
_LEFTOVER_SUFFIXES: Final = (TEMP_SUFFIX, ".deleted", CLEANED_SUFFIX, SWAP_SUFFIX)
# Bigger reads when every header of a segment is wanted.
_FULL_SCAN_CHUNK_BYTES: Final = 64 * 1024

_log = logging.getLogger(__name__)


UNFLUSHED_RECOVERED: Final = "recovered unflushed"
"""Words of the INFO line of a log opened with records above its recovery point (one
not closed cleanly): what a clean restart never logs."""


@dataclass(slots=True)
class LoadedLog:
    """What ``load_log`` found: the segments and the offsets to start from."""

    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    high_watermark: int
    producer_state: ProducerStateManager
    leader_epochs: LeaderEpochFileCache
    # Where the cleaner's dirty section starts (``cleaner-offset-checkpoint``).
    cleaned_offset: int
    # Whether offsets are contiguous: the log was never compacted and is not compactable.
    contiguous: bool


def load_log(
    dir_path: str,
    config: LogConfig,
    now_ms: int,
    checkpoints: OffsetCheckpoints,
    key: TopicPartitionKey,
) -> LoadedLog:
    """Open, recover and index every segment of a partition directory (steps 1-7 above).

    ``key``'s offsets come from ``checkpoints``; a missing entry is given its default
    there (``OffsetCheckpoints.assume``), so that only a change makes a file due.
    """
    os.makedirs(dir_path, exist_ok=True)
    _finish_swaps(dir_path, config, now_ms)
    # The older layout's files are leftovers once the offsets live elsewhere.
    moved = OFFSET_CHECKPOINTS if checkpoints.dir_path != dir_path else ()
    base_offsets = _clean_directory(dir_path, moved)
    cleaner_checkpoint = read_checkpoint(os.path.join(dir_path, CLEANER_CHECKPOINT))
    # Offsets are contiguous unless the cleaner may have left gaps.
    contiguous = cleaner_checkpoint is None and not config.compacted
    recovery_point = checkpoints.get(RECOVERY_POINT_CHECKPOINT, key) or 0
    start_checkpoint = checkpoints.get(LOG_START_OFFSET_CHECKPOINT, key)
    high_watermark = checkpoints.get(HIGH_WATERMARK_CHECKPOINT, key) or 0
    checkpoints.assume(RECOVERY_POINT_CHECKPOINT, key, recovery_point)
    checkpoints.assume(HIGH_WATERMARK_CHECKPOINT, key, high_watermark)

    segments = [LogSegment.open_file(dir_path, base, config, now_ms) for base in base_offsets]
    kept = len(segments)
    for i, segment in enumerate(segments):
        next_base = base_offsets[i + 1] if i + 1 < len(segments) else None
        previous_end = segments[i - 1].next_offset if i > 0 else segment.base_offset
        if segment.base_offset < previous_end or (
            contiguous and segment.base_offset != previous_end
        ):
            # Segments continue each other; a gap or overlap means this one is stray.
            kept = i
            break
        if next_base is not None and next_base <= recovery_point:
            cut_bytes = _load(segment, next_base, contiguous=contiguous)
        else:
            cut_bytes = _recover_from(segment, recovery_point, next_base, contiguous=contiguous)
        if cut_bytes:
            kept = i + 1
            break
    for later in segments[kept:]:
        later.close()
        later.delete()
    del segments[kept:]

    log_start = start_checkpoint if start_checkpoint is not None else 0
    if segments:
        log_start = max(log_start, segments[0].base_offset)
    while len(segments) > 1 and segments[1].base_offset <= log_start:
        doomed = segments.pop(0)
        doomed.close()
        doomed.delete()
    if not segments:
        segments.append(LogSegment.open_file(dir_path, log_start, config, now_ms))
    log_end = max(segments[-1].next_offset, segments[-1].base_offset)
    if log_end > max(recovery_point, log_start):
        _log.info(
            "%s: %s offsets %d to %d above the recovery point",
            dir_path,
            UNFLUSHED_RECOVERED,
            max(recovery_point, log_start),
            log_end - 1,
        )
    log_start = min(log_start, log_end)
    checkpoints.assume(LOG_START_OFFSET_CHECKPOINT, key, log_start)

    producer_state = ProducerStateManager()
    batch_epochs: list[EpochEntry] = []
    clamped_high_watermark = min(max(high_watermark, log_start), log_end)
    clamped_recovery_point = min(max(recovery_point, log_start), log_end)
    # Snapshots past the log end (a cut tail, an unfinished truncation) or below the
    # log start describe another log.
    delete_snapshots(dir_path, lambda offset: not log_start <= offset <= log_end)
    replay_producer_state(
        segments,
        producer_state,
        clamped_high_watermark,
        min(clamped_recovery_point, clamped_high_watermark),
        _epoch_noter(batch_epochs),
    )
    return LoadedLog(
        segments=segments,
        log_start_offset=log_start,
        recovery_point=clamped_recovery_point,
        high_watermark=clamped_high_watermark,
        producer_state=producer_state,
        leader_epochs=load_leader_epoch_cache(
            dir_path, batch_epochs, log_start, log_end, compacted=not contiguous
        ),
        cleaned_offset=min(max(cleaner_checkpoint or 0, log_start), log_end),
        contiguous=contiguous,
    )


def replay_producer_state(
    segments: list[LogSegment],
    producer_state: ProducerStateManager,
    high_watermark: int,
    snapshot_limit: int,
    on_header: Callable[[BatchHeader], None] | None = None,
) -> None:
    """Rebuild the producer state and each segment's ``.txnindex`` from the log.

    Starts from the newest usable snapshot (``_usable_snapshot``) at or below
    ``snapshot_limit``, trusting the ``.txnindex`` entries below it, else from nothing;
    then replays the batches after it (headers only, plus each control batch's record),
    and rewrites each ``.txnindex`` that disagrees with the result. ``on_header`` sees
    every header of the log, replayed or not.
    """
    dir_path = os.path.dirname(segments[0].file.path)
    usable = _usable_snapshot(dir_path, segments, snapshot_limit)
    start, snapshot, kept = usable if usable is not None else (0, None, [[] for _ in segments])
    aborted = producer_state.rebuild(
        _batches_and_markers(segments, on_header, start), high_watermark, snapshot
    )
    base_offsets = [segment.base_offset for segment in segments]
    for entry in aborted:
        kept[max(bisect.bisect_right(base_offsets, entry.last_offset) - 1, 0)].append(entry)
    for segment, entries in zip(segments, kept, strict=True):
        segment.txn_index.replace(entries)


def _usable_snapshot(
    dir_path: str, segments: list[LogSegment], limit: int
) -> tuple[int, list[SnapshotEntry], list[list[AbortedTxn]]] | None:
    """The newest snapshot in [log start, ``limit``] that reads back, with the
    ``.txnindex`` entries of each segment below it, or None.

    The caller's limit is at most the recovery point (so the index files below it were
    fsynced with their segments) and the high watermark (so no transaction completed
    below it waits for replication: a snapshot does not keep those). A snapshot whose
    index files do not check out (torn, out of order, outside their segment) is not
    used: the full replay rebuilds them.
    """
    log_start = segments[0].base_offset
    for offset in reversed(snapshot_offsets(dir_path)):
        if not log_start <= offset <= limit:
            continue
        try:
            snapshot = read_snapshot(dir_path, offset)
        except (OSError, ValueError) as error:
            _log.warning("%s: snapshot at %d is unreadable (%s); deleted", dir_path, offset, error)
            delete_snapshots(dir_path, offset.__eq__)
            continue
        kept: list[list[AbortedTxn]] = []
        for i, segment in enumerate(segments):
            if segment.base_offset >= offset:
                # Rebuilt by the replay: whatever its file holds does not matter.
                kept.append([])
                continue
            end = segments[i + 1].base_offset if i + 1 < len(segments) else None
            entries = segment.txn_index.read_file(segment.base_offset, end)
            if entries is None:
                return None
            kept.append([entry for entry in entries if entry.last_offset < offset])
        return offset, snapshot, kept
    return None


def _batches_and_markers(
    segments: list[LogSegment],
    on_header: Callable[[BatchHeader], None] | None,
    from_offset: int,
) -> Iterator[BatchAndMarker]:
    """Every batch of the log from ``from_offset``, oldest first, with its marker if
    it is one (``on_header`` sees the earlier headers too)."""
    for i, segment in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if on_header is None and next_base is not None and next_base <= from_offset:
            continue
        for position, header in segment.iter_headers(0, segment.size_bytes, _FULL_SCAN_CHUNK_BYTES):
            if on_header is not None:
                on_header(header)
            if header.base_offset < from_offset:
                continue
            marker = None
            if header.attributes & CONTROL_FLAG_MASK:
                try:
                    marker = read_control_batch(
                        segment.file.read(position, header.size_bytes), header
                    )
                except (ValueError, LogError) as error:
                    _log.warning(
                        "%s: control batch at offset %d is unreadable (%s); ignored",
                        segment.file.path,
                        header.base_offset,
                        error,
                    )
            yield header, marker


def _epoch_noter(batch_epochs: list[EpochEntry]) -> Callable[[BatchHeader], None]:
    """A header callback appending to ``batch_epochs`` where each newer epoch starts.

    One scan of the headers then serves both the producer state and the epoch cache.
    Batches without a leader epoch (-1) are skipped, as Kafka's recovery skips them.
    """

    def note(header: BatchHeader) -> None:
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (not batch_epochs or epoch > batch_epochs[-1].epoch):
            batch_epochs.append(EpochEntry(epoch, header.base_offset))

    return note


def _clean_directory(dir_path: str, moved: tuple[str, ...]) -> list[int]:
    """Delete leftovers (step 1), ``moved`` files among them; return the base offsets
    of the segments, sorted."""
    names = os.listdir(dir_path)
    base_offsets: set[int] = set()
    for name in names:
        stem, dot, _ = name.partition(".")
        if name.endswith(_LEFTOVER_SUFFIXES) or name in moved:
            os.unlink(os.path.join(dir_path, name))
        elif name.endswith(LOG_SUFFIX) and len(stem) == OFFSET_DIGITS and stem.isdigit() and dot:
            base_offsets.add(int(stem))
    for name in names:
        stem = name.partition(".")[0]
        is_index = name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))
        if is_index and stem.isdigit() and int(stem) not in base_offsets:
            os.unlink(os.path.join(dir_path, name))
    return sorted(base_offsets)


def _load(segment: LogSegment, next_base: int, *, contiguous: bool) -> int:
    """Load a segment below the recovery point, or recover it; returns the bytes cut."""
    problem = segment.load(next_base)
    if problem is None and segment.size_bytes:
        first = next(segment.iter_headers(0, segment.size_bytes))[1]
        if first.base_offset < segment.base_offset or (
            contiguous and first.base_offset != segment.base_offset
        ):
            problem = (
                f"{segment.file.path}: first batch has offset {first.base_offset}, "
                f"not the segment's {segment.base_offset}"
            )
        elif segment.next_offset > next_base or (contiguous and segment.next_offset != next_base):
            problem = (
                f"{segment.file.path}: ends at offset {segment.next_offset}, "
                f"not at the next segment's {next_base}"
            )
    if problem is None:
        return 0
    return _recover_after(segment, problem, contiguous=contiguous)


def _recover_from(
    segment: LogSegment, recovery_point: int, next_base: int | None, *, contiguous: bool
) -> int:
    """Recover a segment at or above the recovery point, from its batch when possible."""
    if segment.base_offset < recovery_point:
        problem = segment.load(next_base)
        if problem is not None:
            return _recover_after(segment, problem, contiguous=contiguous)
        try:
            found = segment.translate_offset(recovery_point)
        except LogError:
            found = None
        if found is not None and found[1].base_offset == recovery_point:
            return segment.recover(found[0], recovery_point, contiguous=contiguous)
        if found is None and segment.next_offset == recovery_point:
            # A clean close: the recovery point is the end, nothing to re-verify.
            return segment.recover(segment.size_bytes, recovery_point, contiguous=contiguous)
    return segment.recover(0, segment.base_offset, contiguous=contiguous)


def _recover_after(segment: LogSegment, problem: str, *, contiguous: bool) -> int:
    """Recover a whole segment whose files failed to load because of ``problem``."""
    _log.warning("%s; recovering %s and rebuilding its indexes", problem, segment.file.path)
    return segment.recover(0, segment.base_offset, contiguous=contiguous)


def _finish_swaps(dir_path: str, config: LogConfig, now_ms: int) -> None:
    """Step 1: complete every swap whose cleaned ``.log`` file reached its ``.swap`` name.

    The cleaner fsyncs a cleaned segment before the rename that makes it a swap, and
    always keeps its group's last batch (see ``_cleaner``), so the swap's end offset is
    the end of the segments it replaces.
    """
    swap_log_suffix = LOG_SUFFIX + SWAP_SUFFIX
    for name in sorted(os.listdir(dir_path)):
        stem = name.removesuffix(swap_log_suffix)
        if stem == name or len(stem) != OFFSET_DIGITS or not stem.isdigit():
            continue
        base_offset = int(stem)
        swap = LogSegment.open_file(dir_path, base_offset, config, now_ms, SWAP_SUFFIX)
        try:
            end_offset = base_offset
            for _, header in swap.iter_headers(0, swap.file.size(), _FULL_SCAN_CHUNK_BYTES):
                end_offset = header.last_offset + 1
        finally:
            swap.close()
        for other in os.listdir(dir_path):
            other_stem, dot, _ = other.partition(".")
            replaced = (
                other.endswith((LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX))
                and len(other_stem) == OFFSET_DIGITS
                and other_stem.isdigit()
                and dot
                and base_offset <= int(other_stem) < end_offset
            )
            if replaced:
                os.unlink(os.path.join(dir_path, other))
        swap.change_file_suffix(SWAP_SUFFIX, "")
        fsync_dir(dir_path)
        _log.info("%s: finished an interrupted swap of cleaned segment %d", dir_path, base_offset)
