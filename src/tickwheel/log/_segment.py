"""``LogSegment``: one ``.log`` file of record batches with its offset and time indexes.

A segment is named by its base offset, zero-padded to 20 digits as in Kafka
(``00000000000000000000.log``, ``.index``, ``.timeindex``, and ``.txnindex`` once an
aborted transaction's marker lands in it: ``_txn_index``). The log file is batches
back to back, exactly the bytes producers sent with offsets patched in; it is only
ever appended to, or cut at a batch boundary (follower truncation, a torn tail). The
cleaner writes whole new segments under a suffix (``.log.cleaned``), renames them
(``change_file_suffix``) and never changes an existing one.

Lookups: ``translate_offset`` bisects the offset index and scans batch headers forward
from the entry found (at most about ``index.interval.bytes``); ``read`` also bisects the
positions to cut its slice at the last batch boundary within ``max_bytes``; both read
headers with ``pread`` and never decode records.

Loading: ``load`` trusts the index files of a segment below the recovery point after
sanity checks, and re-reads only the headers after the last index entry to find the
segment's end offset and largest timestamp. The checks are Kafka's ``sanityCheck``
made stricter. First each index's own rules (whole entries, strictly increasing, inside
the file and the segment; see ``_index``), then agreement: the time index is empty
exactly when the offset index is and starts at its first offset, and the last entry of
each names an offset index entry whose position holds a batch with that base offset and
a largest timestamp not above the time index's last (the running largest timestamp: a
time index cut short is caught when a later indexed batch is newer), and some batch in
the offset index interval before the time index's last entry carries its timestamp
exactly (a made-up timestamp would become the segment's largest). They cost the split,
one pass over the entries, two header reads and one interval's headers. A failed check
returns the file and the reason; the caller logs it and recovers the segment.
``recover`` re-reads the file from a position, verifying each batch's framing, CRC
and offsets, rebuilding both indexes, and cuts the file at the first batch that fails
(a torn write or a flipped byte).

Entries between the first and the last are checked for order and range only: reading
every batch they name would cost a scan of the segment. So every scan that starts at
an offset index entry first checks that the entry's position holds a batch with the
entry's offset; one that does not is dropped with the entries after it (one WARNING)
and the scan starts from the entry before. A bad offset entry thus costs a longer scan,
never an error or a wrong batch, and no pread gets a position outside the file. A time
index timestamp cannot be checked without reading every batch before its entry: one
that passes the checks is trusted, as Kafka trusts it.

Concurrency: not thread-safe; the owning log's lock guards every call. Slices handed out
by ``read`` stay valid while the segment grows, and after ``delete``; ``truncate_to``
invalidates those reaching past the cut.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Final, TypeAlias

from tickwheel.log._config import LogConfig
from tickwheel.log._errors import LogError, LogStorageError
from tickwheel.log._index import NO_TIMESTAMP, OffsetIndex, TimeIndex
from tickwheel.log._records import FileRecordsSlice, SegmentFile
from tickwheel.log._txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from tickwheel.record import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    check_batch,
    record_timestamps,
)
from tickwheel.record import parse_header as _parse_header

LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"
OFFSET_DIGITS: Final = 20
_OFFSET_INDEX_ENTRY_BYTES: Final = 8
_TIME_INDEX_ENTRY_BYTES: Final = 12
_NS_PER_MS: Final = 1_000_000
# Relative offsets in the index files are int32.
MAX_RELATIVE_OFFSET: Final = 2**31 - 1
# Header scans read this much at a time: one index interval plus a header covers a
# lookup's scan with one pread when batches are small.
_HEADER_SCAN_BYTES: Final = 4096 + RECORD_BATCH_OVERHEAD

# (base offset, last offset, max timestamp, size in bytes) of one appended batch.
BatchEntry: TypeAlias = tuple[int, int, int, int]

_log = logging.getLogger(__name__)


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's file name for a segment file: 20-digit base offset plus ``suffix``."""
    return f"{base_offset:0{OFFSET_DIGITS}d}{suffix}"


class LogSegment:
    """A segment file and its indexes, with the running state appends need."""

    __slots__ = (
        "_bytes_since_last_index_entry",
        "_dirty",
        "_index_interval_bytes",
        "base_offset",
        "created_ms",
        "file",
        "max_timestamp_ms",
        "next_offset",
        "offset_index",
        "rolling_timestamp_ms",
        "size_bytes",
        "time_index",
        "txn_index",
    )

    def __init__(
        self,
        dir_path: str,
        base_offset: int,
        config: LogConfig,
        created_ms: int,
        file: SegmentFile,
        file_suffix: str = "",
    ) -> None:
        self.base_offset = base_offset
        self.file = file
        max_offset_entries = config.segment_index_bytes // _OFFSET_INDEX_ENTRY_BYTES
        max_time_entries = config.segment_index_bytes // _TIME_INDEX_ENTRY_BYTES
        self.offset_index = OffsetIndex(
            os.path.join(dir_path, segment_file_name(base_offset, INDEX_SUFFIX) + file_suffix),
            base_offset,
            max_offset_entries,
        )
        self.time_index = TimeIndex(
            os.path.join(dir_path, segment_file_name(base_offset, TIME_INDEX_SUFFIX) + file_suffix),
            base_offset,
            max_time_entries,
        )
        self.txn_index = TransactionIndex(
            os.path.join(dir_path, segment_file_name(base_offset, TXN_INDEX_SUFFIX) + file_suffix)
        )
        self._index_interval_bytes = config.index_interval_bytes
        self.created_ms = created_ms
        self.size_bytes = 0
        self.next_offset = base_offset
        self.max_timestamp_ms = NO_TIMESTAMP
        # The first batch's max timestamp: segment.ms counts from it (as Kafka does).
        self.rolling_timestamp_ms = NO_TIMESTAMP
        self._bytes_since_last_index_entry = 0
        self._dirty = False

    @classmethod
    def open_file(
        cls,
        dir_path: str,
        base_offset: int,
        config: LogConfig,
        created_ms: int,
        file_suffix: str = "",
    ) -> LogSegment:
        """Open (creating if absent) the segment's log file; its state is not loaded yet.

        ``file_suffix`` follows each file name: the cleaner writes a segment as
        ``<base>.log.cleaned`` (and its indexes) before it swaps it in.
        """
        path = os.path.join(dir_path, segment_file_name(base_offset, LOG_SUFFIX) + file_suffix)
        return cls(dir_path, base_offset, config, created_ms, SegmentFile(path), file_suffix)

    def change_file_suffix(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the index files, then the log file, from ``old_suffix`` to ``new_suffix``.

        The log file goes last: recovery takes a segment's ``.log`` name as the one that
        says which step a swap reached (see ``_recovery``).
        """
        for holder in (self.offset_index, self.time_index, self.file):
            new_path = holder.path.removesuffix(old_suffix) + new_suffix
            with contextlib.suppress(FileNotFoundError):
                os.replace(holder.path, new_path)
            holder.path = new_path
        self.txn_index.rename(self.txn_index.path.removesuffix(old_suffix) + new_suffix)

    def update_config(self, config: LogConfig) -> None:
        """Adopt a changed ``index.interval.bytes`` / ``segment.index.bytes``."""
        self._index_interval_bytes = config.index_interval_bytes
        self.offset_index.max_entries = config.segment_index_bytes // _OFFSET_INDEX_ENTRY_BYTES
        self.time_index.max_entries = config.segment_index_bytes // _TIME_INDEX_ENTRY_BYTES

    # -- appending ---------------------------------------------------------------------

    def append(
        self, pieces: list[bytes | memoryview], batches: list[BatchEntry], total_bytes: int
    ) -> None:
        """Write ``pieces`` (the ``batches``, ``total_bytes`` long) at the end; index them."""
        position = self.size_bytes
        fd = self.file.fileno()
        try:
            written = os.writev(fd, pieces)
            if written != total_bytes:
                _write_rest(fd, pieces, written)
        except OSError as error:
            # Leave no partial batch behind: the caller reports the failure and the
            # segment stays the longest valid prefix.
            os.ftruncate(fd, position)
            raise LogStorageError(f"append to {self.file.path} failed: {error}") from error
        for base_offset, last_offset, max_timestamp_ms, size in batches:
            self._track_batch(position, base_offset, last_offset, max_timestamp_ms, size)
            position += size
        self._dirty = True

    def _track_batch(
        self, position: int, base_offset: int, last_offset: int, max_timestamp_ms: int, size: int
    ) -> None:
        # A comparison, not a call to max(): this runs for every appended batch.
        if max_timestamp_ms > self.max_timestamp_ms:  # noqa: PLR1730
            self.max_timestamp_ms = max_timestamp_ms
        if position == 0:
            self.rolling_timestamp_ms = max_timestamp_ms
        if self._bytes_since_last_index_entry > self._index_interval_bytes:
            self.offset_index.append(base_offset, position)
            self.time_index.maybe_append(self.max_timestamp_ms, base_offset)
            self._bytes_since_last_index_entry = size
        else:
            self._bytes_since_last_index_entry += size
        self.size_bytes = position + size
        self.next_offset = last_offset + 1

    def should_roll(
        self,
        size_bytes: int,
        max_timestamp_ms: int,
        last_offset: int,
        now_ms: int,
        config: LogConfig,
    ) -> bool:
        """Whether an append of ``size_bytes`` up to ``last_offset`` needs a new segment.

        As in Kafka: the bytes would pass ``segment.bytes``; ``segment.ms`` has passed
        since the first batch (by record time when both have timestamps, else by the
        clock since the segment was created); an index is full; or a relative offset
        would overflow 32 bits.
        """
        if last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
            return True
        if self.size_bytes == 0:
            return False
        rolling_ms = self.rolling_timestamp_ms
        if rolling_ms >= 0 and max_timestamp_ms >= 0:
            waited_ms = max_timestamp_ms - rolling_ms
        else:
            waited_ms = now_ms - self.created_ms
        return (
            self.size_bytes > config.segment_bytes - size_bytes
            or waited_ms > config.segment_ms
            or len(self.offset_index.values) >= self.offset_index.max_entries
            or len(self.time_index.values) >= self.time_index.max_entries
        )

    # -- reading -----------------------------------------------------------------------

    def iter_headers(
        self, start_position: int, end_position: int, chunk_bytes: int = _HEADER_SCAN_BYTES
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from ``start_position`` to ``end_position``."""
        position = start_position
        chunk = b""
        chunk_start = position
        while position < end_position:
            at = position - chunk_start
            if at + RECORD_BATCH_OVERHEAD > len(chunk):
                chunk = self.file.read(position, min(chunk_bytes, end_position - position))
                chunk_start, at = position, 0
                if len(chunk) < RECORD_BATCH_OVERHEAD:
                    raise LogError(f"{self.file.path}: batch header at {position} is cut short")
            header = _parse_header(chunk, at)
            size = header.size_bytes
            if size < RECORD_BATCH_OVERHEAD:
                raise LogError(f"{self.file.path}: batch at {position} has length {size}")
            yield position, header
            position += size

    def _headers_from_entry(
        self, entry_offset: int, start_position: int
    ) -> Iterator[tuple[int, BatchHeader]]:
        """``iter_headers`` to the end from an offset index entry, once its batch is confirmed.

        The first header must be a batch with the entry's offset; if not, the entry and
        those after it are dropped (one WARNING) and the scan starts from the entry
        before (see the module docstring). Position 0 is the first batch, unchecked.
        """
        while start_position:
            headers = self.iter_headers(start_position, self.size_bytes)
            try:
                first = next(headers, None) if start_position > 0 else None
            except LogError:
                first = None
            if first is not None and first[1].base_offset == entry_offset:
                yield first
                yield from headers
                return
            _log.warning(
                "%s: entry (offset %d, position %d) does not hold a batch with that offset; "
                "dropping it and the entries after it",
                self.offset_index.path,
                entry_offset,
                start_position,
            )
            self.offset_index.truncate_to_position(start_position)
            self.time_index.truncate_to_offset(entry_offset)
            entry_offset, start_position = self.offset_index.lookup(entry_offset)
        yield from self.iter_headers(0, self.size_bytes)

    def _header_at(self, position: int) -> BatchHeader | None:
        """The batch header at byte ``position``, None if no batch header fits there."""
        if not 0 <= position <= self.size_bytes - RECORD_BATCH_OVERHEAD:
            return None
        header = _parse_header(self.file.read(position, RECORD_BATCH_OVERHEAD), 0)
        return header if header.size_bytes >= RECORD_BATCH_OVERHEAD else None

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= ``offset``."""
        for position, header in self._headers_from_entry(*self.offset_index.lookup(offset)):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(
        self, start_offset: int, max_bytes: int, max_position: int, min_one_message: bool
    ) -> tuple[int, FileRecordsSlice, bool] | None:
        """Batches from the one holding ``start_offset``, whole, within the limits.

        Returns (position of the first batch, the slice, whether the first batch was
        left out for exceeding ``max_bytes``), or None if no batch here reaches
        ``start_offset``.
        """
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, header = found
        batch_bytes = header.size_bytes
        limit_bytes = max(max_bytes, batch_bytes) if min_one_message else max_bytes
        end = self._batch_boundary_at_or_before(min(max_position, position + limit_bytes), position)
        incomplete = end == position and position < max_position
        return position, FileRecordsSlice(self.file, position, end - position), incomplete

    def _batch_boundary_at_or_before(self, limit: int, from_position: int) -> int:
        if limit >= self.size_bytes:
            return self.size_bytes
        entry_offset, entry_position = self.offset_index.lookup_position(limit)
        position = max(from_position, entry_position)
        if entry_position > from_position:
            headers = self._headers_from_entry(entry_offset, entry_position)
        else:
            headers = self.iter_headers(from_position, self.size_bytes)
        for start, header in headers:
            end = start + header.size_bytes
            if end > limit:
                return start
            position = end
        return position

    def find_offset_by_timestamp(
        self, timestamp_ms: int, min_offset: int
    ) -> tuple[int, int, BatchHeader] | None:
        """(timestamp, offset, batch header) of the first record at or past ``min_offset``
        whose timestamp is >= ``timestamp_ms`` (Kafka's ``searchForTimestamp``): the time
        index finds where to start, batch headers skip what is older, and the records
        of a batch that may hold the answer are decoded."""
        start_offset = max(self.time_index.offset_before(timestamp_ms), min_offset)
        for position, header in self._headers_from_entry(*self.offset_index.lookup(start_offset)):
            if header.max_timestamp < timestamp_ms or header.last_offset < min_offset:
                continue
            batch = self.file.read(position, header.size_bytes)
            for timestamp, offset in record_timestamps(batch, header):
                if timestamp >= timestamp_ms and offset >= min_offset:
                    return timestamp, offset, header
        return None

    def find_max_timestamp(self) -> tuple[int, BatchHeader] | None:
        """(offset, header) of the first record carrying the segment's largest timestamp,
        and its batch (Kafka's ``offsetOfMaxTimestamp``)."""
        for position, header in self.iter_headers(0, self.size_bytes):
            if header.max_timestamp == self.max_timestamp_ms:
                batch = self.file.read(position, header.size_bytes)
                for timestamp, offset in record_timestamps(batch, header):
                    if timestamp == header.max_timestamp:
                        return offset, header
        return None

    def largest_timestamp_ms(self) -> int:
        """The largest record timestamp, or the file's modification time if there is none."""
        if self.max_timestamp_ms >= 0:
            return self.max_timestamp_ms
        return os.stat(self.file.path).st_mtime_ns // _NS_PER_MS

    # -- truncation and durability ----------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns the bytes cut."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, header = found
        cut_bytes = self.size_bytes - position
        os.ftruncate(self.file.fileno(), position)
        os.fsync(self.file.fileno())
        self._truncate_state(position, header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        # The index files may already hold the removed entries: cut them now, so a
        # crash cannot pair them with different batches appended later.
        self.offset_index.persist(fsync=True)
        self.time_index.persist(fsync=True)
        return cut_bytes

    def _truncate_state(self, position: int, offset: int) -> None:
        """Forget everything from byte ``position`` (the batch with base ``offset``) on."""
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(offset if position else self.base_offset)
        self.size_bytes = position
        self._reload_tail()

    def flush(self) -> None:
        """fsync the log file if written since, and write and fsync both index files."""
        if self._dirty:
            os.fsync(self.file.fileno())
            self._dirty = False
        self.offset_index.persist(fsync=True)
        self.time_index.persist(fsync=True)
        self.txn_index.flush()

    def persist_indexes(self) -> None:
        """Write the index entries not yet in their files, without fsync."""
        self.offset_index.persist(fsync=False)
        self.time_index.persist(fsync=False)

    def close(self) -> None:
        """Close the log file's descriptor."""
        self.file.close()

    def delete(self) -> None:
        """Unlink the segment's files; open slices keep reading until they are dropped."""
        for path in (self.file.path, self.offset_index.path, self.time_index.path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        self.txn_index.delete()

    # -- loading and recovery ---------------------------------------------------------

    def load(self, end_offset: int | None) -> str | None:
        """Load a segment below the recovery point from its files; why it cannot be, or None.

        ``end_offset`` is the next segment's base offset, None for the last segment. On
        a failure both indexes are left empty, ready for ``recover``.
        """
        self.size_bytes = self.file.size()
        offset_index, time_index = self.offset_index, self.time_index
        problem = (
            offset_index.load()
            or time_index.load()
            or offset_index.sanity_check(self.size_bytes - RECORD_BATCH_OVERHEAD + 1, end_offset)
            or time_index.sanity_check(end_offset)
            or self._indexes_problem()
        )
        if problem is None:
            try:
                self._reload_tail()
            except LogError as error:
                problem = str(error)
        if problem is not None:
            offset_index.clear()
            time_index.clear()
        return problem

    def _indexes_problem(self) -> str | None:
        """Why the two (each sane) indexes disagree with each other or the batches, or None."""
        offset_index, time_index = self.offset_index, self.time_index
        if offset_index.keys[:1] != time_index.values[:1]:
            return f"{time_index.path}: does not start at the offset index's first offset"
        if not offset_index.keys:
            return None
        last_timestamp_ms = time_index.last_timestamp()
        for index, offset in (
            (offset_index, offset_index.last_entry()[0]),
            (time_index, self.base_offset + time_index.values[-1]),
        ):
            entry_offset, position = offset_index.lookup(offset)
            header = self._header_at(position) if entry_offset == offset else None
            if header is None or header.base_offset != offset:
                return f"{index.path}: last entry (offset {offset}) names no indexed batch"
            if header.max_timestamp > last_timestamp_ms:
                return (
                    f"{time_index.path}: last timestamp {last_timestamp_ms} is older than "
                    f"batch {offset}'s {header.max_timestamp}"
                )
        return self._last_timestamp_problem()

    def _last_timestamp_problem(self) -> str | None:
        """Why no batch carries the time index's last timestamp, or None.

        That entry was appended at an offset index entry with the running largest
        timestamp, which was first reached after the offset index entry before it (or
        the entry would have been appended there): so one batch from that previous
        entry to this one carries it exactly, and scanning that one interval tells.
        """
        offset = self.base_offset + self.time_index.values[-1]
        start_offset, start = self.offset_index.lookup(offset - 1)
        start_header = self._header_at(start)
        if start_header is None or start_header.base_offset != start_offset:
            start = 0  # That entry lies (caught at lookup time): scan from the start.
        _, end = self.offset_index.lookup(offset)
        header = self._header_at(end)
        assert header is not None  # checked by the caller: a batch starts there
        largest = max(h.max_timestamp for _, h in self.iter_headers(start, end + header.size_bytes))
        last_timestamp_ms = self.time_index.last_timestamp()
        if largest != last_timestamp_ms:
            return (
                f"{self.time_index.path}: last timestamp {last_timestamp_ms} is carried by no "
                f"batch before offset {offset}"
            )
        return None

    def _reload_tail(self) -> None:
        """Recompute end offset, timestamps and index spacing from the last index entry."""
        next_offset, max_timestamp_ms = self.base_offset, NO_TIMESTAMP
        end_position = self.size_bytes
        for position, header in self._headers_from_entry(*self.offset_index.last_entry()):
            if position + header.size_bytes > end_position:
                raise LogError(f"{self.file.path}: batch at {position} runs past the end")
            max_timestamp_ms = max(max_timestamp_ms, header.max_timestamp)
            next_offset = header.last_offset + 1
        self.next_offset = next_offset
        # Read after the scan: it may have dropped index entries.
        self.max_timestamp_ms = max(max_timestamp_ms, self.time_index.last_timestamp())
        self._bytes_since_last_index_entry = end_position - self.offset_index.last_entry()[1]
        self.rolling_timestamp_ms = NO_TIMESTAMP
        if end_position > 0:
            self.rolling_timestamp_ms = next(self.iter_headers(0, end_position))[1].max_timestamp

    def recover(self, from_position: int, from_offset: int, *, contiguous: bool = True) -> int:
        """Re-verify from byte ``from_position``; rebuild the indexes; cut a bad tail.

        ``from_offset`` is the base offset the batch at ``from_position`` must have (the
        segment's base offset from byte 0). Each batch must pass ``check_batch`` and
        start right after its predecessor -- or, unless ``contiguous``, anywhere after
        it: a compacted log has gaps where the cleaner removed whole batches. Returns
        the bytes cut.
        """
        file_size = self.file.size()
        self._truncate_state(from_position, from_offset)
        next_offset = from_offset
        position = from_position
        while position < file_size:
            header = self._verified_header(position, file_size)
            # In a log never compacted, offsets are contiguous, which also catches a
            # flipped byte in the base offset, a field the CRC does not cover.
            if (
                header is None
                or header.base_offset < next_offset
                or (contiguous and header.base_offset != next_offset)
                or header.last_offset_delta < 0
            ):
                break
            last_offset = header.last_offset
            if last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                break
            size = header.size_bytes
            self._track_batch(position, header.base_offset, last_offset, header.max_timestamp, size)
            position += size
            next_offset = last_offset + 1
        cut_bytes = file_size - position
        if cut_bytes:
            os.ftruncate(self.file.fileno(), position)
            os.fsync(self.file.fileno())
        self.size_bytes = position
        self.persist_indexes()
        return cut_bytes

    def _verified_header(self, position: int, file_size: int) -> BatchHeader | None:
        head = self.file.read(position, min(RECORD_BATCH_OVERHEAD, file_size - position))
        if len(head) < RECORD_BATCH_OVERHEAD:
            return None
        size = _parse_header(head, 0).batch_length + LOG_OVERHEAD
        if size < RECORD_BATCH_OVERHEAD or size > file_size - position:
            return None
        data = self.file.read(position, size)
        try:
            return check_batch(memoryview(data), 0, len(data))
        except LogError:
            return None


def _write_rest(fd: int, pieces: list[bytes | memoryview], written: int) -> None:
    """Finish a short ``writev`` (rare on regular files) by writing what it left."""
    remaining = b"".join(bytes(piece) for piece in pieces)[written:]
    while remaining:
        done = os.write(fd, remaining)
        remaining = remaining[done:]
