"""The sparse offset and time indexes of one segment: sorted arrays, bisected.

Every ``index.interval.bytes`` of appended batches, the segment adds one entry to each
index. The entries live in memory as ``array`` columns sorted on both columns, so a
lookup is a ``bisect`` (O(log n)) followed by a short forward scan of batch headers in
the segment file (at most about ``index.interval.bytes``). The files hold the same
entries in Kafka's big-endian layout, offsets relative to the segment's base offset:

- ``.index``: 8-byte entries, relative offset (int32) and file position (int32) of a
  batch's first byte; the key is the batch's *base* offset (Kafka keys its entries on
  the last offset; either serves a "largest entry at or below" lookup).
- ``.timeindex``: 12-byte entries, the largest timestamp (int64) among the batches up
  to and including an indexed batch, and that batch's relative base offset (int32),
  added only when that largest timestamp grows.

Files are written lazily: ``persist()`` appends the entries added since the last call
(the segment calls it when it is flushed or rolled), and cuts the file first when the
index was truncated. Until then the file may lag the memory; recovery never trusts an
index file for data above the recovery point and rebuilds it from the segment instead.

Concurrency: not thread-safe; the owning log's lock guards every call.
"""

from __future__ import annotations

import bisect
import itertools
import os
import struct
from array import array
from typing import Final

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32: Final = "i"
_INT64: Final = "q"
NO_TIMESTAMP: Final = -1


class _SparseIndex:
    """Two parallel sorted columns (``keys``, ``values``) mirrored to a file."""

    def __init__(self, path: str, entry: struct.Struct, key_type: str, max_entries: int) -> None:
        self.path = path
        self._entry = entry
        self.keys: array[int] = array(key_type)
        self.values: array[int] = array(_INT32)
        self.max_entries = max_entries
        self._persisted_entries = 0
        # Whether the file differs from the entries (a new index has no file yet), and
        # whether it was written since its last fsync: flushes skip unneeded syscalls.
        self._file_stale = True
        self._file_unsynced = False

    def __len__(self) -> int:
        return len(self.values)

    def _truncate_entries(self, count: int) -> None:
        if count < len(self.values):
            del self.keys[count:]
            del self.values[count:]
            self._persisted_entries = min(self._persisted_entries, count)
            self._file_stale = True

    def load(self) -> bool:
        """Read the file's entries; False if it is missing or torn."""
        try:
            with open(self.path, "rb") as file:
                data = file.read()
        except FileNotFoundError:
            return False
        if len(data) % self._entry.size:
            return False
        entries = list(self._entry.iter_unpack(data))
        self.keys = array(self.keys.typecode, [key for key, _ in entries])
        self.values = array(_INT32, [value for _, value in entries])
        self._persisted_entries = len(self.values)
        self._file_stale = False
        return _strictly_increasing(self.keys) and _strictly_increasing(self.values)

    def persist(self, *, fsync: bool) -> None:
        """Write the entries not yet in the file; fsync the file if asked."""
        if not self._file_stale and not (fsync and self._file_unsynced):
            return
        count = len(self.values)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if self._file_stale:
                start = self._persisted_entries
                os.ftruncate(fd, start * self._entry.size)
                if count > start:
                    pack = self._entry.pack
                    data = b"".join(pack(self.keys[i], self.values[i]) for i in range(start, count))
                    os.pwrite(fd, data, start * self._entry.size)
                self._persisted_entries = count
                self._file_stale = False
                self._file_unsynced = True
            if fsync:
                os.fsync(fd)
                self._file_unsynced = False
        finally:
            os.close(fd)


class OffsetIndex(_SparseIndex):
    """Sparse map from a batch's base offset to its byte position in the segment."""

    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        super().__init__(path, _OFFSET_ENTRY, _INT32, max_entries)
        self.base_offset = base_offset

    def append(self, offset: int, position: int) -> None:
        """Index the batch with base ``offset`` starting at byte ``position``."""
        # Both columns appended here, with no helper call: every indexed batch passes here.
        self.keys.append(offset - self.base_offset)
        self.values.append(position)
        self._file_stale = True

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below ``offset``, else (base, 0)."""
        i = bisect.bisect_right(self.keys, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.keys[i], self.values[i]

    def lookup_position(self, position: int) -> int:
        """Position of the last entry at or below byte ``position``, else 0."""
        i = bisect.bisect_right(self.values, position) - 1
        return self.values[i] if i >= 0 else 0

    def last_position(self) -> int:
        """Position of the last entry, 0 when empty."""
        return self.values[-1] if self.values else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop the entries at or beyond byte ``position``."""
        self._truncate_entries(bisect.bisect_left(self.values, position))

    def fits(self, file_size_bytes: int) -> bool:
        """Whether every entry points inside a file of this size (a load sanity check)."""
        return not self.values or (self.keys[0] >= 0 and self.values[-1] < file_size_bytes)


class TimeIndex(_SparseIndex):
    """Sparse map from the largest timestamp so far to the base offset of a batch."""

    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        super().__init__(path, _TIME_ENTRY, _INT64, max_entries)
        self.base_offset = base_offset

    def maybe_append(self, max_timestamp_ms: int, offset: int) -> None:
        """Add an entry if ``max_timestamp_ms`` exceeds the last entry's timestamp."""
        keys = self.keys
        if not keys or max_timestamp_ms > keys[-1]:
            keys.append(max_timestamp_ms)
            self.values.append(offset - self.base_offset)
            self._file_stale = True

    def last_timestamp(self) -> int:
        """Timestamp of the last entry, ``NO_TIMESTAMP`` when empty."""
        return self.keys[-1] if self.keys else NO_TIMESTAMP

    def offset_before(self, timestamp_ms: int) -> int:
        """Offset of the last entry whose timestamp is below ``timestamp_ms``, else base."""
        i = bisect.bisect_left(self.keys, timestamp_ms) - 1
        return self.base_offset + self.values[i] if i >= 0 else self.base_offset

    def truncate_to_offset(self, offset: int) -> None:
        """Drop the entries for batches at or beyond ``offset``."""
        self._truncate_entries(bisect.bisect_left(self.values, offset - self.base_offset))

    def fits(self, next_offset: int) -> bool:
        """Whether every entry names an offset of this segment (a load sanity check)."""
        return not self.values or (
            self.values[0] >= 0 and self.base_offset + self.values[-1] < next_offset
        )


def _strictly_increasing(column: array[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(column))
