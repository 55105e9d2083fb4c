"""Segment files and the zero-copy slices a read hands out.

``SegmentFile`` owns the file descriptor of one segment's ``.log`` file. A read returns a
``FileRecordsSlice`` (descriptor, position, length) that the broker passes straight to
``os.sendfile``: the record bytes go from the page cache to the socket without entering
Python. A slice keeps its ``SegmentFile`` alive, and a segment deleted by retention is
unlinked but its descriptor closed only when the last slice referring to it is gone
(``SegmentFile.__del__``), so a send in progress never reads a closed or reused
descriptor. ``Log.close()`` closes descriptors at once.

Concurrency: a ``SegmentFile`` is written only under the owning log's lock; slices only
``pread``/``sendfile`` the bytes below the size they were cut at, so any thread may read
a slice while the log appends. ``Log.truncate_to`` is the one operation that changes
such bytes: it cuts the file in place and later appends reuse the positions, so a slice
reaching past the cut then reads fewer or other bytes (see ``_log``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from tickwheel.log._errors import LogStorageError
from tickwheel.log._offset_metadata import LogOffsetMetadata

_CLOSED_FD = -1


class SegmentFile:
    """An open ``.log`` file: append-only writes, positional reads."""

    __slots__ = ("_fd", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)

    def fileno(self) -> int:
        """The open descriptor; raises ``LogStorageError`` once closed."""
        if self._fd == _CLOSED_FD:
            raise LogStorageError(f"{self.path} is closed")
        return self._fd

    def size(self) -> int:
        """The file's current size in bytes."""
        return os.fstat(self.fileno()).st_size

    def read(self, position: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``position`` (fewer only at the end of the file)."""
        fd = self.fileno()
        data = os.pread(fd, length, position)
        if len(data) == length or not data:
            return data
        parts = [data]
        done = len(data)
        while done < length:
            more = os.pread(fd, length - done, position + done)
            if not more:
                break
            parts.append(more)
            done += len(more)
        return b"".join(parts)

    # ``os.close`` is bound as a default so ``__del__`` still works at interpreter exit.
    def close(self, _os_close: Callable[[int], None] = os.close) -> None:
        """Close the descriptor; idempotent."""
        fd, self._fd = self._fd, _CLOSED_FD
        if fd != _CLOSED_FD:
            _os_close(fd)

    def __del__(self) -> None:
        self.close()


@dataclass(frozen=True, slots=True)
class FileRecordsSlice:
    """``length`` bytes of whole record batches at ``position`` of a segment file."""

    file: SegmentFile
    position: int
    length: int

    def fileno(self) -> int:
        """The descriptor to ``os.sendfile`` from."""
        return self.file.fileno()

    @property
    def path(self) -> str:
        """The segment file's path."""
        return self.file.path

    def __len__(self) -> int:
        return self.length

    def read_bytes(self) -> bytes:
        """Copy the slice's bytes into memory (for small reads and tests)."""
        return self.file.read(self.position, self.length)

    def memoryview(self) -> memoryview:
        """The slice's bytes as a memoryview over a private copy."""
        return memoryview(self.read_bytes())


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """What a read found: the fetch position, the records, and the log's bounds."""

    fetch_offset_metadata: LogOffsetMetadata
    records: FileRecordsSlice
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    last_stable_offset: int
    first_entry_incomplete: bool = False
    # read_committed reads: (producer id, first offset) of each aborted transaction
    # overlapping the read; None for other reads.
    aborted_transactions: list[tuple[int, int]] | None = None
