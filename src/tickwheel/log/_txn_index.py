"""``TransactionIndex``: a segment's aborted transactions, in Kafka's ``.txnindex`` format.

One file per segment (``<base offset>.txnindex``), created when the first ABORT marker
lands in the segment. Entries of 34 bytes, big-endian, in increasing ``last_offset``
(Kafka's ``AbortedTxn``)::

    0   int16  version (0)
    2   int64  producer id
    10  int64  first offset of the aborted transaction in this partition
    18  int64  last offset: the ABORT marker's
    26  int64  the last stable offset right after the transaction completed

A read_committed fetch collects the entries that overlap the offsets it returns
(``collect``), so consumers can drop the aborted batches; the last stable offset
field lets it stop early: an entry whose LSO is at or past the fetch's upper bound
means no later entry can overlap.

The entries live in memory (they are few); the file mirrors them: appends write
through (fsynced by ``flush``), a truncation cuts the file, and ``Log.open`` rebuilds
every segment's entries from the log's markers and rewrites a file that disagrees
(a torn tail, a missing file), so the file never needs trusting on its own.

Concurrency: not thread-safe; the owning log's lock guards every call.
"""

from __future__ import annotations

import contextlib
import os
import struct
from typing import Final, NamedTuple

from tickwheel.log._checkpoint import fsync_file

TXN_INDEX_SUFFIX: Final = ".txnindex"
ABORTED_TXN_VERSION: Final = 0
_ENTRY: Final = struct.Struct(">hqqqq")
ENTRY_BYTES: Final = _ENTRY.size


class AbortedTxn(NamedTuple):
    """One aborted transaction of a partition (Kafka's ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        """The 34-byte index entry."""
        return _ENTRY.pack(ABORTED_TXN_VERSION, *self)


def parse_entries(data: bytes) -> list[AbortedTxn]:
    """The whole entries of a ``.txnindex`` file's bytes (a torn tail is dropped)."""
    whole = len(data) - len(data) % ENTRY_BYTES
    return [
        AbortedTxn(*_ENTRY.unpack_from(data, position)[1:])
        for position in range(0, whole, ENTRY_BYTES)
    ]


class TransactionIndex:
    """The aborted transactions whose ABORT marker lies in one segment."""

    __slots__ = ("entries", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []

    def read_file(self, base_offset: int, end_offset: int | None) -> list[AbortedTxn] | None:
        """The file's entries if they check out (whole, markers increasing and inside
        [``base_offset``, ``end_offset``)), else None; no file is no entries."""
        try:
            with open(self.path, "rb") as file:
                data = file.read()
        except FileNotFoundError:
            return []
        if len(data) % ENTRY_BYTES:
            return None
        entries = parse_entries(data)
        previous = base_offset - 1
        for entry in entries:
            if entry.last_offset <= previous or (
                end_offset is not None and entry.last_offset >= end_offset
            ):
                return None
            previous = entry.last_offset
        return entries

    def append(self, entry: AbortedTxn) -> None:
        """Add an entry; its marker must come after every entry's (as Kafka checks)."""
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {entry.last_offset} does not follow "
                f"{self.entries[-1].last_offset} in {self.path}"
            )
        self.entries.append(entry)
        with open(self.path, "ab") as file:
            file.write(entry.to_bytes())

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [``fetch_offset``, ``upper_bound_offset``), and whether the
        search is complete (an entry's LSO reached the upper bound)."""
        found: list[AbortedTxn] = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or past ``offset``."""
        kept = [entry for entry in self.entries if entry.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._write_all()

    def replace(self, entries: list[AbortedTxn]) -> None:
        """Set the entries (rebuilt from the log) and rewrite the file if it disagrees."""
        self.entries = list(entries)
        try:
            with open(self.path, "rb") as file:
                on_disk: bytes | None = file.read()
        except FileNotFoundError:
            on_disk = None
        wanted = b"".join(entry.to_bytes() for entry in self.entries)
        if on_disk != wanted and (on_disk is not None or wanted):
            self._write_all()

    def _write_all(self) -> None:
        if not self.entries:
            self.delete()
            return
        with open(self.path, "wb") as file:
            file.write(b"".join(entry.to_bytes() for entry in self.entries))
            file.flush()
            os.fsync(file.fileno())

    def flush(self) -> None:
        """fsync the file, if there is one."""
        if not self.entries:
            return
        fsync_file(self.path)

    def rename(self, path: str) -> None:
        """Move the file (the cleaner's suffix changes)."""
        if self.entries and os.path.exists(self.path):
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        """Unlink the file."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
