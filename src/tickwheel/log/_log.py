"""``Log``: one partition's durable, segmented log of record batches.

On-disk layout of a partition directory (``<log.dirs>/<topic>-<partition>/``, owned by
the broker)::

    00000000000000000000.log         batches with offsets 0 .. 1233, back to back
    00000000000000000000.index       sparse offset -> position index (8-byte entries)
    00000000000000000000.timeindex   sparse timestamp -> offset index (12-byte entries)
    00000000000000001234.log         the active segment: the only one appended to
    00000000000000001234.index
    00000000000000001234.timeindex
    00000000000000001234.txnindex    aborted transactions whose marker is in the segment
    00000000000000001234.snapshot    producer state at that offset (taken at roll, close)
    leader-epoch-checkpoint          where each leader epoch starts
    cleaner-offset-checkpoint        compacted logs: where the cleaner's dirty part starts

and three offsets kept in ``OffsetCheckpoints`` (``_offset_checkpoints``): the recovery
point (everything below it is fsynced), the log start offset (offsets below it were
deleted) and the high watermark when last checkpointed. A log of a ``LogManager``
shares its log directory's files (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``, one line per
partition); a log opened on its own keeps the same three files, one entry each, in
its partition directory.

Segment files are named by their base offset, 20 digits, as in Kafka; see
``_segment`` for the files, ``_index`` for the index formats, ``_checkpoint`` for the
checkpoint format and its atomic replacement, ``_leader_epoch`` for the leader epoch
cache and its file, and ``_recovery`` for what ``Log.open`` does after a crash.

Leader epochs (KIP-101): the log keeps a ``LeaderEpochFileCache`` of the offset where
each leader epoch's batches start. A leader append records its epoch at the first
new offset when the epoch is new, a follower append each batch's epoch; a truncation
drops the epochs past the new end, a log start move (DeleteRecords, retention) moves
the first epoch up to it, and emptying the log empties the cache, as Kafka's log
does. ``end_offset_for_epoch`` answers OffsetsForLeaderEpoch from it.

Appends: a leader validates the payload (``tickwheel.record``: framing, magic,
CRC-32C; ``_validator``: record count, ``max.message.bytes``), checks idempotent
producers (``_producer_state``), then writes each batch with a patched 16-byte prefix
(base offset and partition leader epoch) in one ``os.writev``: the producer's bytes are
not copied. A follower writes the
batches with the offsets they carry. A segment rolls when the append would exceed
``segment.bytes``, when ``segment.ms`` has passed since its first batch's timestamp,
when an index is full, or when relative offsets would overflow 32 bits.

Append cost. ``append_as_leader`` runs for every produce request, so its Python is kept
lean where that costs no clarity: one pass of client checks that unpacks each header
once, plain comparisons instead of ``max()`` calls, result tuples built with
``tuple.__new__`` (a NamedTuple's generated ``__new__`` is a Python function), and no
per-append syscall besides the one ``os.writev`` (indexes live in memory and reach
their files on flush and roll; the clock is read once). What remains is a fixed cost
per request beside the CRC-32C every produced batch must pass, so it weighs less as
batches grow (docs/benchmarks.md, "Log").

Durability follows Kafka: writes land in the page cache; ``flush.messages``,
``flush.ms`` (checked on append and by ``maybe_flush``) or ``flush()`` fsync the dirty
segments and their indexes, then move the recovery point. A rolled segment is
flushed by the next ``maybe_flush`` (Kafka flushes it in the background at roll). The
high watermark moves in memory on every append or follower fetch. The three offsets
reach their checkpoint files in rounds: ``checkpoint_high_watermark``,
``checkpoint_recovery_point`` and ``checkpoint_log_start_offset`` stage the offset
(and write the file if the log keeps its own), and the log manager writes each
directory's file once per interval (``replica.high.watermark.checkpoint.interval.ms``,
``log.flush.offset.checkpoint.interval.ms``,
``log.flush.start.offset.checkpoint.interval.ms``). So after a crash a checkpointed
offset may lag: a lagging recovery point only means more recovery, and the replica
layer raises a lagging high watermark again when the partition becomes leader
(Kafka's ``makeLeader``). Two changes are written at once, since lagging would be
wrong: a recovery point lowered (by recovery at open, or by a truncation: a later
open must not trust bytes appended above the cut), and a log start moved by
DeleteRecords.

Reads return whole batches as a ``FileRecordsSlice`` for ``os.sendfile``, with the fetch
position as ``LogOffsetMetadata``.

Transactions (KIP-98): a producer's transactional batches are appended like any others;
the transaction ends with a marker (a control batch, ``tickwheel.record``) that the
coordinators append (``AppendOrigin.COORDINATOR``; a client's control batch is
INVALID_RECORD). The producer state (``_producer_state``) tracks each open transaction's
first offset and the completed ones whose marker is not yet below the high watermark;
the last stable offset (LSO) is the first offset of the oldest of them when below the
high watermark, else the high watermark, so a transaction's records become visible to
read_committed readers only once the high watermark passes its marker (Kafka's
``fetchLastStableOffsetMetadata``). It is recomputed after every append, high watermark
move, truncation and log start move. An ABORT marker adds an entry to its segment's
``.txnindex`` (``_txn_index``); ``read(..., collect_aborted=True)`` returns the aborted
transactions overlapping the read.

Compaction (``cleanup.policy=compact``; the cleaner is ``_cleaner``): a leader refuses
records without a key (INVALID_RECORD, naming each: ``RecordValidationError``);
``cleaning_view`` hands the cleaner the closed segments, ``replace_segments`` swaps
cleaned ones in (under the lock, crash-safe), and
``mark_cleaned`` moves ``cleaner-offset-checkpoint``. A compacted log has gaps where
whole batches were removed: reads, lookups and follower appends then step over them,
and recovery accepts them (``_recovery``). Retention skips a log whose policy lacks
``delete``. The producer state is left as it is after a swap: the cleaner keeps each
producer's last batch, the one its state rests on.

Where this log departs from Kafka's (contiguous offsets, whole-batch truncation, when
producer-state snapshots are trusted, a leader epoch cache rebuilt on open, indexes in
memory), and why: docs/log.md, "Where the log differs from Kafka".

Concurrency: thread-safe. One lock (``_lock``) guards all state; every public method
that reads or changes more than one field takes it, so appends, reads, truncations and
retention are serialised; the offset properties, ``latest_epoch`` and
``leader_epoch_entries`` read one immutable value each. After
``close()`` every method raises ``LogStorageError``.

Slices returned by ``read`` may be sent from any thread after the call returns, and stay
valid through appends, rolls, retention, ``delete_records_before`` and the cleaner's
swaps: appends only add bytes past a slice's end, and a deleted or replaced segment is
unlinked but keeps its descriptor open until its last slice is dropped. ``truncate_to``
is the exception, as in Kafka: it cuts the segment holding ``offset`` in place, and
later appends write new batches at the positions it freed, so a slice of that segment
reaching past the cut then reads fewer bytes (``pread`` and ``sendfile`` stop at the end
of the file) or other batches. Slices wholly below the cut, and slices of segments the
truncation deletes whole (or that ``truncate_fully_and_start_at`` deletes), keep their
bytes. Kafka's ``FileRecords`` slices share the segment file the same way, and its
``writeTo`` fails a send that finds the file truncated under it; a caller that may
truncate while a slice is in flight must expect the same.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Final, NamedTuple, Self

from tickwheel.log._checkpoint import (
    CLEANER_CHECKPOINT,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    OFFSET_CHECKPOINTS,
    RECOVERY_POINT_CHECKPOINT,
    fsync_dir,
    topic_partition_of,
    write_checkpoint,
)
from tickwheel.log._config import LOG_APPEND_TIME, LogConfig
from tickwheel.log._errors import (
    InvalidRecordError,
    LogStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordValidationError,
    UnexpectedAppendOffsetError,
)
from tickwheel.log._index import NO_TIMESTAMP
from tickwheel.log._leader_epoch import EpochEntry, LeaderEpochFileCache
from tickwheel.log._offset_checkpoints import OffsetCheckpoints
from tickwheel.log._offset_metadata import LogOffsetMetadata
from tickwheel.log._producer_snapshot import delete_snapshots, write_snapshot
from tickwheel.log._producer_state import (
    AppendOrigin,
    BatchAndMarker,
    BatchMetadata,
    ProducerStateManager,
    ProducerStateSummary,
    VerificationGuard,
)
from tickwheel.log._records import FetchDataInfo, FileRecordsSlice
from tickwheel.log._recovery import (
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    load_log,
    replay_producer_state,
)
from tickwheel.log._segment import BatchEntry, LogSegment
from tickwheel.log._txn_index import AbortedTxn
from tickwheel.log._validator import check_client_batches
from tickwheel.record import (
    CONTROL_FLAG_MASK,
    LEADER_PREFIX,
    LOG_OVERHEAD,
    PREFIX_BYTES,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    EndTxnMarker,
    log_append_time_header,
    null_key_indexes,
    parse_batches,
    read_control_batch,
)

# ListOffsets' special timestamps.
LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
MAX_TIMESTAMP: Final = -3
NO_OFFSET: Final = -1
# RecordBatch.NO_PARTITION_LEADER_EPOCH: a batch, or an answer, without a leader epoch.
NO_PARTITION_LEADER_EPOCH: Final = -1
_NS_PER_MS: Final = 1_000_000


def system_clock_ms() -> int:
    """Wall-clock time in ms since the epoch: the time record timestamps use."""
    return time.time_ns() // _NS_PER_MS


# A NamedTuple rather than a frozen dataclass: one is made on every append, and a tuple
# is built several times faster.
class LogAppendInfo(NamedTuple):
    """Where an append landed; ``first_offset`` is -1 for an empty payload."""

    first_offset: int
    last_offset: int
    num_messages: int
    max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    valid_bytes: int
    num_batches: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class CleanableSegment:
    """A closed segment as the cleaner saw it: offsets [base, ``end_offset``)."""

    segment: LogSegment
    size_bytes: int
    end_offset: int
    first_timestamp_ms: int
    largest_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class CleaningView:
    """A log's closed segments and offsets, as ``Log.cleaning_view`` read them."""

    dir_path: str
    config: LogConfig
    segments: tuple[CleanableSegment, ...]
    log_start_offset: int
    high_watermark: int
    cleaned_offset: int
    # Each idempotent producer's last offset: its batch is kept, so its sequence lives.
    producer_last_offsets: Mapping[int, int]
    # The cleaner never cleans at or above the LSO (Kafka's LogCleanerManager).
    last_stable_offset: int = 0
    # (producer id, first offset, marker offset) of every aborted transaction in the
    # closed segments: their records never enter the key -> offset map.
    aborted_transactions: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """The answer to a ListOffsets lookup: a batch's timestamp, offset and leader epoch."""

    timestamp: int
    offset: int
    leader_epoch: int


def _leader_pieces(
    data: memoryview, batches: list[tuple[int, BatchHeader]], first_offset: int, epoch: int
) -> tuple[list[bytes | memoryview], list[BatchEntry]]:
    """The writev pieces and index entries of producer batches given offsets from ``first_offset``.

    Each batch is a fresh 16-byte prefix (base offset, length, leader epoch) and a view of
    the producer's remaining bytes: nothing is copied, and the CRC stays valid.
    """
    pieces: list[bytes | memoryview] = []
    entries: list[BatchEntry] = []
    next_offset = first_offset
    for position, header in batches:
        _, length, _, _, _, _, last_delta, _, max_timestamp, _, _, _, _ = header
        size = length + LOG_OVERHEAD
        pieces.append(LEADER_PREFIX.pack(next_offset, length, epoch))
        pieces.append(data[position + PREFIX_BYTES : position + size])
        entries.append((next_offset, next_offset + last_delta, max_timestamp, size))
        next_offset += last_delta + 1
    return pieces, entries


def _log_append_time_pieces(
    data: memoryview,
    batches: list[tuple[int, BatchHeader]],
    first_offset: int,
    epoch: int,
    now_ms: int,
) -> tuple[list[bytes | memoryview], list[BatchEntry]]:
    """As ``_leader_pieces``, with each header rewritten for LogAppendTime ``now_ms``."""
    pieces: list[bytes | memoryview] = []
    entries: list[BatchEntry] = []
    next_offset = first_offset
    for position, header in batches:
        size = header.size_bytes
        pieces.append(log_append_time_header(data, position, next_offset, epoch, now_ms))
        pieces.append(data[position + RECORD_BATCH_OVERHEAD : position + size])
        entries.append((next_offset, next_offset + header.last_offset_delta, now_ms, size))
        next_offset += header.last_offset_delta + 1
    return pieces, entries


def _with_markers(data: memoryview, batches: list[tuple[int, BatchHeader]]) -> list[BatchAndMarker]:
    """Each batch's header with its transaction marker if it is a control batch."""
    found: list[BatchAndMarker] = []
    for position, header in batches:
        marker: EndTxnMarker | None = None
        if header.attributes & CONTROL_FLAG_MASK:
            try:
                marker = read_control_batch(data[position : position + header.size_bytes], header)
            except ValueError as error:
                raise InvalidRecordError(f"bad control batch: {error}") from error
        found.append((header, marker))
    return found


def _check_keys(
    config: LogConfig,
    name: str,
    data: memoryview,
    batches: list[tuple[int, BatchHeader]],
) -> None:
    """Refuse records without a key, as Kafka does, if the topic is compacted: the
    first batch holding any is refused with each of them (``RecordValidationError``)."""
    if not config.compacted:
        return
    for position, header in batches:
        keyless = null_key_indexes(data[position : position + header.size_bytes], header)
        if keyless:
            reason = f"Compacted topic cannot accept message without key in topic partition {name}"
            raise RecordValidationError([(index, reason) for index in keyless])


class Log:
    """A partition's segmented log; create it with ``Log.open``."""

    def __init__(
        self,
        dir_path: str,
        config: LogConfig,
        clock_ms: Callable[[], int],
        segments: list[LogSegment],
        log_start_offset: int,
        recovery_point: int,
        high_watermark: int,
        producer_state: ProducerStateManager,
        leader_epochs: LeaderEpochFileCache,
        checkpoints: OffsetCheckpoints,
        owns_checkpoints: bool,
        cleaned_offset: int,
        contiguous: bool,
    ) -> None:
        self._lock = threading.RLock()
        self._dir_path = dir_path
        self._config = config
        self._clock_ms = clock_ms
        self._topic, self._partition = topic_partition_of(dir_path)
        self._segments = segments
        self._base_offsets = [segment.base_offset for segment in segments]
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._producers = producer_state
        self._leader_epochs = leader_epochs
        self._closed = False
        self._unflushed_messages = 0
        self._last_flush_ms = clock_ms()
        self._rolled_since_flush = False
        self._checkpoints = checkpoints
        self._owns_checkpoints = owns_checkpoints
        self._cleaned_offset = cleaned_offset
        self._contiguous = contiguous and not config.compacted
        self._update_log_end()
        self._high_watermark = self._metadata_for(high_watermark)
        self._last_stable_offset = high_watermark
        self._update_last_stable_offset()
        # The offset of the last snapshot this log wrote (None: none yet).
        self._snapshot_offset: int | None = None

    @classmethod
    def open(
        cls,
        dir_path: str | os.PathLike[str],
        config: LogConfig,
        *,
        clock_ms: Callable[[], int] | None = None,
        checkpoints: OffsetCheckpoints | None = None,
    ) -> Log:
        """Open (creating if needed) and recover the log in a partition directory.

        ``clock_ms`` returns wall-clock milliseconds (default: ``time.time_ns``); it
        drives ``segment.ms``, ``flush.ms``, retention and LogAppendTime.
        ``checkpoints`` are the offset checkpoints of the log directory it lives in,
        shared with its other logs and written by their owner; without them the log
        keeps its own in the partition directory and writes them itself.
        """
        path = os.fspath(dir_path)
        clock = clock_ms or system_clock_ms
        owns_checkpoints = checkpoints is None
        key = topic_partition_of(path)
        if checkpoints is None:
            os.makedirs(path, exist_ok=True)
            checkpoints = OffsetCheckpoints.load(path, owner=key)
        stored_recovery_point = checkpoints.get(RECOVERY_POINT_CHECKPOINT, key)
        loaded = load_log(path, config, clock(), checkpoints, key)
        log = cls(
            path,
            config,
            clock,
            loaded.segments,
            loaded.log_start_offset,
            loaded.recovery_point,
            loaded.high_watermark,
            loaded.producer_state,
            loaded.leader_epochs,
            checkpoints,
            owns_checkpoints,
            loaded.cleaned_offset,
            loaded.contiguous,
        )
        with log._lock:
            # Recovery may have lowered the recovery point (a cut tail): record it
            # before anything is appended above it.
            lowered = (
                stored_recovery_point is not None and loaded.recovery_point < stored_recovery_point
            )
            log._checkpoint(OFFSET_CHECKPOINTS, at_once=lowered)
        return log

    # -- properties --------------------------------------------------------------------

    @property
    def dir_path(self) -> str:
        """The partition directory."""
        return self._dir_path

    @property
    def config(self) -> LogConfig:
        """The settings in force."""
        return self._config

    @property
    def log_start_offset(self) -> int:
        """The first offset a read may ask for."""
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets (LEO)."""
        return self._log_end.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        """The log end offset with its segment and position."""
        return self._log_end

    @property
    def high_watermark(self) -> int:
        """The high watermark: consumers read below it."""
        return self._high_watermark.message_offset

    @property
    def high_watermark_metadata(self) -> LogOffsetMetadata:
        """The high watermark with its segment and position."""
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The last stable offset: the first offset of the oldest transaction that is
        open or whose marker is not yet below the high watermark, if that is below the
        high watermark; else the high watermark. read_committed fetches stop here."""
        return self._last_stable_offset

    def _update_last_stable_offset(self) -> None:
        """Recompute the LSO after an append, a HW move, a truncation or a start move."""
        high_watermark = self._high_watermark.message_offset
        first_unstable = self._producers.first_unstable_offset()
        if first_unstable is not None and first_unstable < high_watermark:
            self._last_stable_offset = max(first_unstable, self._log_start_offset)
            self._last_stable_metadata: LogOffsetMetadata | None = None
        else:
            self._last_stable_offset = high_watermark
            self._last_stable_metadata = self._high_watermark

    @property
    def last_stable_offset_metadata(self) -> LogOffsetMetadata:
        """The last stable offset with its segment and position."""
        with self._lock:
            if self._last_stable_metadata is None:
                self._last_stable_metadata = self._metadata_for(self._last_stable_offset)
            return self._last_stable_metadata

    def active_producers(self) -> list[ProducerStateSummary]:
        """DescribeProducers: every producer the log's state holds."""
        with self._lock:
            self._check_open()
            return self._producers.summaries()

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` with no open
        transaction; returns how many."""
        with self._lock:
            self._check_open()
            return self._producers.remove_expired(now_ms, expiration_ms)

    @property
    def recovery_point(self) -> int:
        """Every offset below this is on disk (fsynced)."""
        return self._recovery_point

    @property
    def latest_epoch(self) -> int | None:
        """The newest leader epoch the log holds, or None if it knows none."""
        return self._leader_epochs.latest_epoch

    @property
    def leader_epoch_entries(self) -> tuple[EpochEntry, ...]:
        """(epoch, start offset) of every leader epoch the log holds, oldest first."""
        return self._leader_epochs.entries

    @property
    def size_bytes(self) -> int:
        """Total bytes of all segments."""
        with self._lock:
            return sum(segment.size_bytes for segment in self._segments)

    @property
    def segment_base_offsets(self) -> list[int]:
        """Base offsets of the segments, oldest first."""
        with self._lock:
            return list(self._base_offsets)

    def update_config(self, config: LogConfig) -> None:
        """Apply changed topic settings (AlterConfigs) from the next append on."""
        with self._lock:
            self._config = config
            self._contiguous = self._contiguous and not config.compacted
            for segment in self._segments:
                segment.update_config(config)

    # -- appends -----------------------------------------------------------------------

    def start_transaction_verification(
        self, producer_id: int, producer_epoch: int
    ) -> VerificationGuard:
        """The guard to verify a transactional produce of the producer with (its
        coordinator must confirm the partition first), or ``NO_VERIFICATION_GUARD``
        when its transaction is already open here at that epoch."""
        with self._lock:
            return self._producers.start_verification(producer_id, producer_epoch, self._clock_ms())

    def append_as_leader(
        self,
        records: bytes | memoryview,
        leader_epoch: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> LogAppendInfo:
        """Validate a producer's batches, assign their offsets and epoch, and append them.

        ``verification_guard``: the guard a transactional produce was verified with
        (``start_transaction_verification``), None when not verified.

        A retried idempotent batch returns its first append's offsets (``duplicate``).
        ``origin`` COORDINATOR (the broker's coordinators) may append transaction
        markers and skips the sequence checks (``_producer_state``). Raises
        ``CorruptRecordError``, ``InvalidRecordError`` (``RecordValidationError`` for
        records without a key on a compacted topic), ``RecordTooLargeError``,
        ``RecordBatchTooLargeError``, ``OutOfOrderSequenceError``,
        ``InvalidProducerEpochError``, ``InvalidTxnStateError`` or
        ``TransactionCoordinatorFencedError``; nothing is written then.
        """
        data = memoryview(records).cast("B")
        batches = parse_batches(data)
        config = self._config
        coordinator = origin is AppendOrigin.COORDINATOR
        num_messages, max_timestamp, idempotent = check_client_batches(
            batches, config.max_message_bytes, allow_control=coordinator
        )
        marked = _with_markers(data, batches) if idempotent else None
        if not coordinator:
            _check_keys(config, f"{self._topic}-{self._partition}", data, batches)
        total_bytes = len(data)
        with self._lock:
            if self._closed:
                raise self._closed_error()
            if not batches:
                return self._empty_append_info()
            if total_bytes > config.segment_bytes:
                raise RecordBatchTooLargeError(
                    f"{total_bytes} bytes of batches exceed segment.bytes {config.segment_bytes}"
                )
            if marked is not None:
                duplicate = self._producers.check(marked, origin, verification_guard)
                if duplicate is not None:
                    return self._duplicate_append_info(duplicate)
            now_ms = self._clock_ms()
            append_time = config.message_timestamp_type == LOG_APPEND_TIME
            if append_time:
                max_timestamp = now_ms
            first_offset = self._log_end.message_offset
            last_offset = first_offset + num_messages - 1
            segment = self._segments[-1]
            if segment.should_roll(total_bytes, max_timestamp, last_offset, now_ms, config):
                segment = self._roll_at(first_offset, now_ms)
            if append_time:
                pieces, entries = _log_append_time_pieces(
                    data, batches, first_offset, leader_epoch, now_ms
                )
            else:
                pieces, entries = _leader_pieces(data, batches, first_offset, leader_epoch)
            self._note_epoch(leader_epoch, first_offset)
            segment.append(pieces, entries, total_bytes)
            if marked is not None:
                self._record_producers(segment, marked, entries)
            self._after_append(segment, num_messages, now_ms)
            # tuple.__new__ skips the NamedTuple's generated (Python-level) __new__.
            return tuple.__new__(
                LogAppendInfo,
                (
                    first_offset,
                    last_offset,
                    num_messages,
                    max_timestamp,
                    now_ms if append_time else NO_TIMESTAMP,
                    self._log_start_offset,
                    total_bytes,
                    len(batches),
                    False,
                ),
            )

    def _duplicate_append_info(self, duplicate: BatchMetadata) -> LogAppendInfo:
        return LogAppendInfo(
            first_offset=duplicate.first_offset,
            last_offset=duplicate.last_offset,
            num_messages=duplicate.last_offset - duplicate.first_offset + 1,
            max_timestamp=duplicate.max_timestamp_ms,
            log_append_time_ms=NO_TIMESTAMP,
            log_start_offset=self._log_start_offset,
            valid_bytes=0,
            num_batches=0,
            duplicate=True,
        )

    def append_as_follower(self, records: bytes | memoryview) -> LogAppendInfo:
        """Append a leader's batches with the offsets they carry.

        Raises ``CorruptRecordError``/``InvalidRecordError`` for a bad batch and
        ``UnexpectedAppendOffsetError`` unless each batch starts where the previous one
        (or the log) ends. A compacted log may skip offsets (the leader's cleaner
        removed batches) but never go back; in any other log a gap can only be a
        replication bug.
        """
        data = memoryview(records).cast("B")
        batches = parse_batches(data)
        with self._lock:
            self._check_open()
            if not batches:
                return self._empty_append_info()
            next_offset = self._log_end.message_offset
            entries: list[BatchEntry] = []
            gaps = False
            for _, header in batches:
                if (
                    header.base_offset < next_offset
                    or (self._contiguous and header.base_offset != next_offset)
                    or header.last_offset_delta < 0
                ):
                    raise UnexpectedAppendOffsetError(
                        f"batch at offset {header.base_offset} does not follow {next_offset}",
                        first_offset=header.base_offset,
                        last_offset=header.base_offset + header.last_offset_delta,
                    )
                gaps = gaps or header.base_offset != next_offset
                last_offset = header.base_offset + header.last_offset_delta
                entries.append(
                    (
                        header.base_offset,
                        last_offset,
                        header.max_timestamp,
                        header.batch_length + LOG_OVERHEAD,
                    )
                )
                next_offset = last_offset + 1
            if gaps:
                self._keep_gaps()
            now_ms = self._clock_ms()
            first_offset = entries[0][0]
            max_timestamp = max(entry[2] for entry in entries)
            segment = self._segments[-1]
            if segment.should_roll(len(data), max_timestamp, next_offset - 1, now_ms, self._config):
                segment = self._roll_at(first_offset, now_ms)
            for _, header in batches:
                self._note_epoch(header.partition_leader_epoch, header.base_offset)
            segment.append([data], entries, len(data))
            if any(header.producer_id >= 0 for _, header in batches):
                self._record_producers(segment, _with_markers(data, batches), entries)
            num_messages = sum(entry[1] - entry[0] + 1 for entry in entries)
            self._after_append(segment, num_messages, now_ms)
            return LogAppendInfo(
                first_offset=first_offset,
                last_offset=next_offset - 1,
                num_messages=num_messages,
                max_timestamp=max_timestamp,
                log_append_time_ms=NO_TIMESTAMP,
                log_start_offset=self._log_start_offset,
                valid_bytes=len(data),
                num_batches=len(batches),
            )

    def _record_producers(
        self, segment: LogSegment, marked: list[BatchAndMarker], entries: list[BatchEntry]
    ) -> None:
        """Record appended producer batches; index the transactions they aborted."""
        for (header, marker), entry in zip(marked, entries, strict=True):
            if header.producer_id >= 0:
                aborted = self._producers.record(header, entry[0], entry[2], marker)
                if aborted is not None:
                    segment.txn_index.append(aborted)
        self._update_last_stable_offset()

    def _empty_append_info(self) -> LogAppendInfo:
        return LogAppendInfo(
            first_offset=NO_OFFSET,
            last_offset=NO_OFFSET,
            num_messages=0,
            max_timestamp=NO_TIMESTAMP,
            log_append_time_ms=NO_TIMESTAMP,
            log_start_offset=self._log_start_offset,
            valid_bytes=0,
            num_batches=0,
        )

    def _note_epoch(self, epoch: int, start_offset: int) -> None:
        """Record in the cache that ``epoch`` starts at ``start_offset``, if it is new.

        Called before the batches are written, as Kafka does: a crash in between leaves
        an entry past the log end, which the next open drops.
        """
        epochs = self._leader_epochs
        # The latest epoch starts at or below the log end, so an append in it never
        # changes the cache: skip the call. A batch no leader stamped has no epoch.
        if epoch != epochs.latest_epoch and epoch > NO_PARTITION_LEADER_EPOCH:
            epochs.assign(epoch, start_offset)

    def _after_append(self, segment: LogSegment, num_messages: int, now_ms: int) -> None:
        """Move the log end past an append to ``segment`` and flush if it is due."""
        # tuple.__new__ skips the NamedTuple's generated (Python-level) __new__.
        self._log_end = tuple.__new__(
            LogOffsetMetadata, (segment.next_offset, segment.base_offset, segment.size_bytes)
        )
        self._unflushed_messages += num_messages
        config = self._config
        if (
            self._unflushed_messages >= config.flush_messages
            or now_ms - self._last_flush_ms >= config.flush_ms
        ):
            self._flush(now_ms)

    def _update_log_end(self) -> None:
        segment = self._segments[-1]
        self._log_end = LogOffsetMetadata(
            max(segment.next_offset, segment.base_offset), segment.base_offset, segment.size_bytes
        )

    # -- rolling -----------------------------------------------------------------------

    def roll(self) -> int:
        """Start a new active segment at the log end; returns its base offset."""
        with self._lock:
            self._check_open()
            return self._roll_at(self._log_end.message_offset, self._clock_ms()).base_offset

    def _roll_at(self, base_offset: int, now_ms: int) -> LogSegment:
        base_offset = max(base_offset, self._log_end.message_offset)
        active = self._segments[-1]
        if active.size_bytes == 0:
            if active.base_offset == base_offset:
                return active
            self._segments.pop()
            self._base_offsets.pop()
            active.delete()
        else:
            active.persist_indexes()
        segment = LogSegment.open_file(self._dir_path, base_offset, self._config, now_ms)
        self._segments.append(segment)
        self._base_offsets.append(base_offset)
        self._rolled_since_flush = True
        self._update_log_end()
        self._take_snapshot(base_offset)
        return segment

    def _take_snapshot(self, offset: int) -> None:
        """Write the producer-state snapshot at ``offset`` (the log end) unless written."""
        if offset == self._snapshot_offset:
            return
        try:
            write_snapshot(self._dir_path, offset, self._producers.snapshot())
        except OSError as error:
            raise LogStorageError(f"snapshot of {self._dir_path} failed: {error}") from error
        self._snapshot_offset = offset

    def _delete_snapshots(self, doomed: Callable[[int], bool]) -> None:
        try:
            delete_snapshots(self._dir_path, doomed)
        except OSError as error:
            raise LogStorageError(f"snapshots of {self._dir_path}: {error}") from error
        if self._snapshot_offset is not None and doomed(self._snapshot_offset):
            self._snapshot_offset = None

    # -- reads -------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
        collect_aborted: bool = False,
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``start_offset``, up to ``max_bytes``.

        Batches at or beyond ``max_offset`` (e.g. the high watermark or the last stable
        offset) are left out. With ``min_one_message`` the first batch is returned even
        if larger than ``max_bytes``. With ``collect_aborted`` (read_committed) the
        answer lists the aborted transactions overlapping [``start_offset``,
        ``max_offset``) as (producer id, first offset), from the ``.txnindex`` of the
        segments from the one holding ``start_offset`` on (Kafka's
        ``collectAbortedTxns``; the bound is the read's limit, a superset of what the
        slice holds, which consumers ignore). Raises ``OffsetOutOfRangeError`` outside
        [log start, log end].
        """
        info = self._read(start_offset, max_bytes, max_offset, min_one_message)
        if not collect_aborted:
            return info
        with self._lock:
            upper = min(
                max_offset if max_offset is not None else self._log_end.message_offset,
                self._log_end.message_offset,
            )
            aborted = self._collect_aborted(start_offset, upper)
        return FetchDataInfo(
            fetch_offset_metadata=info.fetch_offset_metadata,
            records=info.records,
            log_start_offset=info.log_start_offset,
            log_end_offset=info.log_end_offset,
            high_watermark=info.high_watermark,
            last_stable_offset=info.last_stable_offset,
            first_entry_incomplete=info.first_entry_incomplete,
            aborted_transactions=aborted,
        )

    def _collect_aborted(self, start_offset: int, upper_offset: int) -> list[tuple[int, int]]:
        found: list[AbortedTxn] = []
        index = bisect.bisect_right(self._base_offsets, start_offset) - 1
        for segment in self._segments[max(index, 0) :]:
            if not segment.txn_index.entries:
                # Most segments hold no aborted transaction: skip the call.
                continue
            entries, complete = segment.txn_index.collect(start_offset, upper_offset)
            found.extend(entries)
            if complete:
                break
        return [(entry.producer_id, entry.first_offset) for entry in found]

    def _read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None,
        min_one_message: bool,
    ) -> FetchDataInfo:
        with self._lock:
            self._check_open()
            log_end = self._log_end
            if start_offset > log_end.message_offset or start_offset < self._log_start_offset:
                raise OffsetOutOfRangeError(
                    f"offset {start_offset} is outside [{self._log_start_offset}, "
                    f"{log_end.message_offset}] of {self._dir_path}"
                )
            if max_offset is None or max_offset >= log_end.message_offset:
                limit = log_end
            elif max_offset == self._high_watermark.message_offset:
                limit = self._high_watermark
            else:
                limit = self._metadata_for(max(max_offset, self._log_start_offset))
            if start_offset >= limit.message_offset:
                metadata = (
                    limit
                    if start_offset == limit.message_offset
                    else self._metadata_for(start_offset)
                )
                return self._fetch_info(metadata, self._empty_slice(metadata))
            index = bisect.bisect_right(self._base_offsets, start_offset) - 1
            for segment in self._segments[max(index, 0) :]:
                if segment.base_offset > limit.segment_base_offset:
                    break
                max_position = (
                    limit.relative_position
                    if segment.base_offset == limit.segment_base_offset
                    else segment.size_bytes
                )
                found = segment.read(start_offset, max_bytes, max_position, min_one_message)
                if found is not None:
                    position, records, incomplete = found
                    metadata = LogOffsetMetadata(start_offset, segment.base_offset, position)
                    return self._fetch_info(metadata, records, incomplete)
            return self._fetch_info(limit, self._empty_slice(limit))

    def _fetch_info(
        self, metadata: LogOffsetMetadata, records: FileRecordsSlice, incomplete: bool = False
    ) -> FetchDataInfo:
        return FetchDataInfo(
            fetch_offset_metadata=metadata,
            records=records,
            log_start_offset=self._log_start_offset,
            log_end_offset=self._log_end.message_offset,
            high_watermark=self._high_watermark.message_offset,
            last_stable_offset=self._last_stable_offset,
            first_entry_incomplete=incomplete,
        )

    def _empty_slice(self, metadata: LogOffsetMetadata) -> FileRecordsSlice:
        index = bisect.bisect_right(self._base_offsets, metadata.segment_base_offset) - 1
        segment = self._segments[max(index, 0)]
        return FileRecordsSlice(segment.file, max(metadata.relative_position, 0), 0)

    def _metadata_for(self, offset: int) -> LogOffsetMetadata:
        """Metadata of ``offset``: the position of the batch holding it (or the log end)."""
        if offset >= self._log_end.message_offset:
            return self._log_end
        index = bisect.bisect_right(self._base_offsets, offset) - 1
        for segment in self._segments[max(index, 0) :]:
            found = segment.translate_offset(offset)
            if found is not None:
                return LogOffsetMetadata(offset, segment.base_offset, found[0])
        return self._log_end

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampAndOffset | None:
        """ListOffsets: the first record whose timestamp is >= ``timestamp_ms``.

        The special timestamps -1 (latest), -2 (earliest) and -3 (max timestamp: the
        first record holding the log's largest timestamp, KIP-734) are understood.
        Records are found as Kafka's log finds them: the time index and the batch
        headers narrow the search to a batch, whose records are then decoded; the
        answer is that record's offset (at least the log start) and its timestamp.
        None when no record is that recent. The leader epoch is the record's batch's;
        for latest, the latest epoch; for earliest, the first epoch if it covers the
        log start; -1 when unknown (as Kafka's log answers).
        """
        with self._lock:
            self._check_open()
            epochs = self._leader_epochs.entries
            if timestamp_ms == LATEST_TIMESTAMP:
                latest_epoch = epochs[-1].epoch if epochs else NO_PARTITION_LEADER_EPOCH
                return TimestampAndOffset(NO_TIMESTAMP, self._log_end.message_offset, latest_epoch)
            if timestamp_ms == EARLIEST_TIMESTAMP:
                covers_start = epochs and epochs[0].start_offset <= self._log_start_offset
                first_epoch = epochs[0].epoch if covers_start else NO_PARTITION_LEADER_EPOCH
                return TimestampAndOffset(NO_TIMESTAMP, self._log_start_offset, first_epoch)
            found: tuple[int, int, BatchHeader] | None = None
            if timestamp_ms == MAX_TIMESTAMP:
                best = max(self._segments, key=lambda segment: segment.max_timestamp_ms)
                if best.max_timestamp_ms != NO_TIMESTAMP:
                    at_max = best.find_max_timestamp()
                    if at_max is not None:
                        found = (at_max[1].max_timestamp, *at_max)
            else:
                for segment in self._segments:
                    if segment.max_timestamp_ms >= timestamp_ms:
                        found = segment.find_offset_by_timestamp(
                            timestamp_ms, self._log_start_offset
                        )
                        if found is not None:
                            break
            if found is None:
                return None
            timestamp, offset, header = found
            return TimestampAndOffset(
                timestamp,
                max(offset, self._log_start_offset),
                max(header.partition_leader_epoch, NO_PARTITION_LEADER_EPOCH),
            )

    # -- leader epochs -----------------------------------------------------------------

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (epoch, end offset) of ``leader_epoch`` in this log.

        The answer is the newest epoch not above ``leader_epoch`` and the offset where
        the next epoch starts, or the log end offset when ``leader_epoch`` is the latest;
        ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)`` (-1, -1) when no epoch answers
        (see ``_leader_epoch`` for every case).
        """
        with self._lock:
            self._check_open()
            return self._leader_epochs.end_offset_for(leader_epoch, self._log_end.message_offset)

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record that ``leader_epoch`` starts at ``start_offset`` if the epoch is new.

        The replica layer calls it with the log end offset when this broker becomes
        leader (Kafka's ``makeLeader``), so the new epoch answers OffsetsForLeaderEpoch
        before its first append. Raises ``ValueError`` for a negative epoch or a start
        outside [0, log end].
        """
        with self._lock:
            self._check_open()
            if not 0 <= start_offset <= self._log_end.message_offset:
                raise ValueError(
                    f"epoch {leader_epoch} cannot start at {start_offset}: the log ends at "
                    f"{self._log_end.message_offset}"
                )
            # At the log end the entry waits for the next flush to be fsynced: a restart
            # forgets entries at or past the log end, and batches after it reach the
            # disk only with a flush (see ``_leader_epoch``).
            at_end = start_offset == self._log_end.message_offset
            self._leader_epochs.assign(leader_epoch, start_offset, sync=not at_end)

    # -- high watermark ----------------------------------------------------------------

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log start, log end]; returns it."""
        with self._lock:
            self._check_open()
            clamped = min(max(offset, self._log_start_offset), self._log_end.message_offset)
            if clamped != self._high_watermark.message_offset:
                self._high_watermark = self._metadata_for(clamped)
                self._producers.on_high_watermark(clamped)
                self._update_last_stable_offset()
            return clamped

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Raise the high watermark to ``offset`` (clamped to the log end) if higher."""
        with self._lock:
            self._check_open()
            if min(offset, self._log_end.message_offset) <= self._high_watermark.message_offset:
                return False
            self.update_high_watermark(offset)
            return True

    # -- truncation and deletion ------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding an offset >= ``offset`` (a follower's divergence).

        Batches are atomic: one straddling ``offset`` goes too, and the log end becomes
        its base offset (if that batch also holds the log start, the log is emptied and
        restarts at the log start). Returns whether anything was removed.
        """
        with self._lock:
            self._check_open()
            if offset >= self._log_end.message_offset:
                # An epoch this broker began as leader but wrote nothing in may end the
                # cache at the log end: drop it, as Kafka does, before a new leader's
                # batches arrive.
                self._leader_epochs.truncate_from_end(self._log_end.message_offset)
                return False
            if offset < self._log_start_offset or offset <= self._segments[0].base_offset:
                self._truncate_fully(offset)
                return True
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                doomed = self._segments.pop()
                self._base_offsets.pop()
                # Not closed: slices handed out may still be sending from it.
                doomed.delete()
            self._segments[-1].truncate_to(offset)
            if self._segments[-1].next_offset < self._log_start_offset:
                # The cut batch also held the log start: nothing readable is left.
                self._truncate_fully(self._log_start_offset)
            else:
                self._after_truncation()
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset``."""
        with self._lock:
            self._check_open()
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        self._delete_snapshots(lambda _: True)
        for segment in self._segments:
            # Not closed: slices handed out may still be sending from it.
            segment.delete()
        segment = LogSegment.open_file(self._dir_path, offset, self._config, self._clock_ms())
        self._segments = [segment]
        self._base_offsets = [offset]
        self._log_start_offset = offset
        self._leader_epochs.clear()
        self._after_truncation()

    def _after_truncation(self) -> None:
        self._update_log_end()
        log_end = self._log_end.message_offset
        # The new end, not the offset asked for: a straddling batch went whole.
        self._leader_epochs.truncate_from_end(log_end)
        # The high watermark's batch may have moved or gone with the cut segment.
        self._high_watermark = self._metadata_for(
            max(min(self._high_watermark.message_offset, log_end), self._log_start_offset)
        )
        high_watermark = self._high_watermark.message_offset
        self._delete_snapshots(lambda offset: offset > log_end)
        replay_producer_state(
            self._segments,
            self._producers,
            high_watermark,
            min(self._recovery_point, high_watermark, log_end),
        )
        self._update_last_stable_offset()
        # A recovery point above the new end would make a later open trust bytes
        # appended after this truncation without checking them: lower it on disk now.
        self._recovery_point = min(self._recovery_point, log_end)
        self._checkpoint(OFFSET_CHECKPOINTS, at_once=True)
        if self._cleaned_offset > log_end:
            self._write_cleaned_offset(max(log_end, self._log_start_offset))

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to ``offset`` (at most the high watermark).

        Segments wholly below it are deleted. Returns the new log start offset (the
        low watermark). Raises ``OffsetOutOfRangeError`` above the high watermark.
        """
        with self._lock:
            self._check_open()
            if offset > self._high_watermark.message_offset or offset < 0:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: the high watermark is "
                    f"{self._high_watermark.message_offset}"
                )
            if offset > self._log_start_offset:
                self._log_start_offset = offset
                self._after_log_start_moved()
                self._checkpoint(OFFSET_CHECKPOINTS, at_once=True)
            return self._log_start_offset

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete old segments by ``retention.ms`` and ``retention.bytes``; returns how many.

        Only segments wholly below the high watermark are eligible; the active one is
        rolled first if it must go too. A log whose ``cleanup.policy`` lacks ``delete``
        (``compact`` alone) keeps every segment: the cleaner bounds it instead.
        """
        with self._lock:
            self._check_open()
            now = self._clock_ms() if now_ms is None else now_ms
            config = self._config
            if not config.retention_deletes:
                return 0
            excess_bytes = (
                sum(segment.size_bytes for segment in self._segments) - config.retention_bytes
                if config.retention_bytes >= 0
                else 0
            )
            high_watermark = self._high_watermark.message_offset
            deletable = 0
            for i, segment in enumerate(self._segments):
                upper = (
                    self._segments[i + 1].base_offset
                    if i + 1 < len(self._segments)
                    else self._log_end.message_offset
                )
                if segment.size_bytes == 0 or upper > high_watermark:
                    break
                too_old = (
                    config.retention_ms >= 0
                    and now - segment.largest_timestamp_ms() > config.retention_ms
                )
                too_big = excess_bytes - segment.size_bytes >= 0 and config.retention_bytes >= 0
                if not (too_old or too_big):
                    break
                excess_bytes -= segment.size_bytes
                deletable += 1
            if deletable == 0:
                return 0
            if deletable == len(self._segments):
                self._roll_at(self._log_end.message_offset, now)
            new_start = self._segments[deletable].base_offset
            self._log_start_offset = max(self._log_start_offset, new_start)
            self._after_log_start_moved()
            return deletable

    def _after_log_start_moved(self) -> None:
        """Delete the segments wholly below the log start; start its epoch there."""
        self._leader_epochs.truncate_from_start(self._log_start_offset)
        while len(self._segments) > 1 and self._segments[1].base_offset <= self._log_start_offset:
            doomed = self._segments.pop(0)
            self._base_offsets.pop(0)
            # Not closed: slices handed out may still be sending from it.
            doomed.delete()
        log_start = self._log_start_offset
        self._delete_snapshots(lambda offset: offset < log_start)
        self._producers.on_log_start(log_start)
        self._update_last_stable_offset()

    # -- compaction (driven by ``_cleaner``) --------------------------------------------

    @property
    def cleaned_offset(self) -> int:
        """Where the cleaner's dirty section starts (``cleaner-offset-checkpoint``)."""
        return self._cleaned_offset

    def cleaning_view(self) -> CleaningView:
        """What the cleaner needs to plan a cleaning, read at one instant.

        The closed segments are immutable (appends go to the active one), so the
        cleaner may read them without the lock; ``replace_segments`` checks that they
        are still there, unchanged, before it swaps.
        """
        with self._lock:
            self._check_open()
            segments = tuple(
                CleanableSegment(
                    segment,
                    segment.size_bytes,
                    self._segments[i + 1].base_offset,
                    segment.rolling_timestamp_ms,
                    segment.largest_timestamp_ms(),
                )
                for i, segment in enumerate(self._segments[:-1])
            )
            last_offsets = {
                producer_id: entry.batches[-1].last_offset
                for producer_id, entry in self._producers.producers.items()
                if entry.batches
            }
            return CleaningView(
                dir_path=self._dir_path,
                config=self._config,
                segments=segments,
                log_start_offset=self._log_start_offset,
                high_watermark=self._high_watermark.message_offset,
                cleaned_offset=max(self._cleaned_offset, self._log_start_offset),
                producer_last_offsets=last_offsets,
                last_stable_offset=self._last_stable_offset,
                aborted_transactions=tuple(
                    (txn.producer_id, txn.first_offset, txn.last_offset)
                    for entry in segments
                    for txn in entry.segment.txn_index.entries
                ),
            )

    def replace_segments(self, old: Sequence[CleanableSegment], cleaned: LogSegment) -> bool:
        """Swap ``cleaned`` (its files named ``*.cleaned``, flushed) in for ``old``.

        ``old`` must still be consecutive closed segments of the log, unchanged since
        ``cleaning_view``; if retention, a truncation or DeleteRecords touched them, the
        swap is refused (False) and the caller deletes ``cleaned``. The steps, each safe
        to be cut by a crash (``_recovery`` finishes a swap whose ``.log.swap`` file
        exists and discards ``.cleaned`` files): rename the cleaned files to ``*.swap``
        (the log file last), fsync the directory, unlink the old segments' files,
        rename the ``.swap`` files to the segment names, fsync the directory. Slices of
        the old segments keep reading their unlinked files.
        """
        with self._lock:
            self._check_open()
            first = next(
                (i for i, segment in enumerate(self._segments) if segment is old[0].segment), None
            )
            if (
                first is None
                or first + len(old) >= len(self._segments)
                or old[0].segment.base_offset < self._log_start_offset
                or any(
                    self._segments[first + i] is not entry.segment
                    or entry.segment.size_bytes != entry.size_bytes
                    for i, entry in enumerate(old)
                )
            ):
                return False
            self._keep_gaps()
            try:
                cleaned.change_file_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
                fsync_dir(self._dir_path)
                for entry in old:
                    # Not closed: slices handed out may still be sending from it.
                    entry.segment.delete()
                cleaned.change_file_suffix(SWAP_SUFFIX, "")
                fsync_dir(self._dir_path)
            except OSError as error:
                raise LogStorageError(f"swap in {self._dir_path} failed: {error}") from error
            cleaned.txn_index.replace(
                [txn for entry in old for txn in entry.segment.txn_index.entries]
            )
            self._segments[first : first + len(old)] = [cleaned]
            self._base_offsets[first : first + len(old)] = [cleaned.base_offset]
            # The high watermark's position may have moved inside a cleaned segment.
            self._high_watermark = self._metadata_for(self._high_watermark.message_offset)
            self._update_last_stable_offset()
            self._contiguous = False
            return True

    def mark_cleaned(self, offset: int) -> None:
        """Record that the log is clean below ``offset`` (``cleaner-offset-checkpoint``),
        never past its end: a truncation since the cleaning's plan may have cut it."""
        with self._lock:
            self._check_open()
            self._write_cleaned_offset(min(offset, self._log_end.message_offset))

    def _keep_gaps(self) -> None:
        """Before the log first holds an offset gap (a swap of cleaned segments, or a
        follower append of a compacted leader's batches), write the cleaner checkpoint
        if there is none: its presence tells recovery that gaps are not corruption,
        whatever ``cleanup.policy`` says after a restart."""
        if not os.path.exists(os.path.join(self._dir_path, CLEANER_CHECKPOINT)):
            self._write_cleaned_offset(self._cleaned_offset)
        self._contiguous = False

    def _write_cleaned_offset(self, offset: int) -> None:
        try:
            write_checkpoint(
                self._dir_path, CLEANER_CHECKPOINT, self._topic, self._partition, offset
            )
        except OSError as error:
            raise LogStorageError(f"checkpoint of {self._dir_path} failed: {error}") from error
        self._cleaned_offset = offset

    # -- durability --------------------------------------------------------------------

    def flush(self) -> None:
        """fsync every unflushed segment and index, then checkpoint the recovery point."""
        with self._lock:
            self._check_open()
            self._flush(self._clock_ms())

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """Flush if ``flush.ms`` has passed or a segment rolled since the last flush."""
        with self._lock:
            self._check_open()
            now = self._clock_ms() if now_ms is None else now_ms
            due = now - self._last_flush_ms >= self._config.flush_ms
            if (due and self._unflushed_messages > 0) or self._rolled_since_flush:
                self._flush(now)
                return True
            return False

    def _flush(self, now_ms: int) -> None:
        try:
            index = bisect.bisect_right(self._base_offsets, self._recovery_point) - 1
            for segment in self._segments[max(index, 0) :]:
                segment.flush()
            if self._rolled_since_flush:
                # Make the new segment files' names durable before the checkpoint names
                # offsets inside them.
                fsync_dir(self._dir_path)
            self._leader_epochs.sync()
            self._recovery_point = self._log_end.message_offset
            self._checkpoint(OFFSET_CHECKPOINTS, at_once=False)
        except OSError as error:
            raise LogStorageError(f"flush of {self._dir_path} failed: {error}") from error
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self._rolled_since_flush = False

    def checkpoint_high_watermark(self) -> None:
        """Stage the high watermark in the checkpoints if it moved since.

        A log keeping its own checkpoints writes the file; a log of a ``LogManager``
        leaves that to it, which writes each directory's file once for all its logs
        every ``replica.high.watermark.checkpoint.interval.ms``. Raises
        ``LogStorageError`` if a write fails.
        """
        with self._lock:
            self._check_open()
            self._checkpoint((HIGH_WATERMARK_CHECKPOINT,), at_once=False)

    def checkpoint_recovery_point(self) -> None:
        """Stage the recovery point in the checkpoints if it moved since (as
        ``checkpoint_high_watermark``; ``log.flush.offset.checkpoint.interval.ms``)."""
        with self._lock:
            self._check_open()
            self._checkpoint((RECOVERY_POINT_CHECKPOINT,), at_once=False)

    def checkpoint_log_start_offset(self) -> None:
        """Stage the log start offset in the checkpoints if it moved since (as
        ``checkpoint_high_watermark``; ``log.flush.start.offset.checkpoint.interval.ms``).
        Retention moves it without a write of its own; DeleteRecords writes it at once."""
        with self._lock:
            self._check_open()
            self._checkpoint((LOG_START_OFFSET_CHECKPOINT,), at_once=False)

    def _checkpoint(self, names: tuple[str, ...], *, at_once: bool) -> None:
        """Stage the named offsets; write the files that changed if ``at_once`` or if
        this log keeps its own checkpoints."""
        offsets = {
            RECOVERY_POINT_CHECKPOINT: self._recovery_point,
            LOG_START_OFFSET_CHECKPOINT: self._log_start_offset,
            HIGH_WATERMARK_CHECKPOINT: self._high_watermark.message_offset,
        }
        key = (self._topic, self._partition)
        changed = [name for name in names if self._checkpoints.stage(name, key, offsets[name])]
        if changed and (at_once or self._owns_checkpoints):
            try:
                self._checkpoints.write(changed)
            except OSError as error:
                raise LogStorageError(f"checkpoint of {self._dir_path} failed: {error}") from error

    def close(self, *, release_files: bool = True) -> None:
        """Flush everything and close the files; idempotent.

        With ``release_files`` False the log refuses every call from now on but leaves
        its segment files open to the slices still reading them (a fetch being sent);
        each closes when its last reader drops it. A log moved to another directory is
        closed so.
        """
        with self._lock:
            if self._closed:
                return
            try:
                self._flush(self._clock_ms())
                self._take_snapshot(self._log_end.message_offset)
            finally:
                self._closed = True
                if release_files:
                    for segment in self._segments:
                        segment.close()

    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()

    def _closed_error(self) -> LogStorageError:
        return LogStorageError(f"log {self._dir_path} is closed")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Log({self._dir_path!r}, start={self._log_start_offset}, "
            f"end={self._log_end.message_offset}, hw={self._high_watermark.message_offset})"
        )
