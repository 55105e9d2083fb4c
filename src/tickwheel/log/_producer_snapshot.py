"""Producer-state snapshots: ``<offset>.snapshot`` files in Kafka's format.

A snapshot holds every producer's state as of a log offset (the log end when it was
taken; the file name, 20 digits). Layout (Kafka's ``ProducerSnapshot`` message,
big-endian)::

    0   int16  version (1)
    2   uint32 CRC-32C of every byte from offset 6 to the end
    6   int32  entry count
    10  46 bytes per producer: int64 producer id, int16 epoch, int32 last sequence,
        int64 last offset, int32 offset delta (of the last batch), int64 timestamp,
        int32 coordinator epoch, int64 first offset of its open transaction (-1: none)

Only each producer's last batch survives a snapshot, as in Kafka. A file is written to
``<name>.tmp``, fsynced and renamed into place (``write_atomically``), so a crash leaves
the old file or the new one, never part of one; a file whose version, size or CRC is
wrong is refused (``ValueError``) and the caller falls back to an older snapshot or a
full replay.

Concurrency: pure functions over files the owning log's lock guards.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable
from typing import Final, NamedTuple

import crc32c

from tickwheel.log._checkpoint import write_atomically

SNAPSHOT_SUFFIX: Final = ".snapshot"
SNAPSHOT_VERSION: Final = 1
_HEADER: Final = struct.Struct(">hIi")
_ENTRY: Final = struct.Struct(">qhiqiqiq")
_CRC_START: Final = 6
_OFFSET_DIGITS: Final = 20


class SnapshotEntry(NamedTuple):
    """One producer in a snapshot."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def snapshot_name(offset: int) -> str:
    """The file name of the snapshot at ``offset``."""
    return f"{offset:0{_OFFSET_DIGITS}d}{SNAPSHOT_SUFFIX}"


def encode_snapshot(entries: list[SnapshotEntry]) -> bytes:
    """A snapshot file's bytes."""
    body = struct.pack(">i", len(entries)) + b"".join(_ENTRY.pack(*entry) for entry in entries)
    crc = crc32c.crc32c(body)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc) + body


def decode_snapshot(data: bytes) -> list[SnapshotEntry]:
    """The entries of a snapshot file's bytes; ``ValueError`` if it is not a good one."""
    if len(data) < _HEADER.size:
        raise ValueError(f"snapshot of {len(data)} bytes is too short")
    version, crc, count = _HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise ValueError(f"snapshot version {version} is not {SNAPSHOT_VERSION}")
    if crc32c.crc32c(data[_CRC_START:]) != crc:
        raise ValueError("snapshot CRC mismatch")
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise ValueError(f"snapshot of {len(data)} bytes cannot hold {count} entries")
    return [
        SnapshotEntry(*_ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size))
        for i in range(count)
    ]


def write_snapshot(dir_path: str, offset: int, entries: list[SnapshotEntry]) -> None:
    """Write (atomically, fsynced) the snapshot at ``offset``."""
    write_atomically(dir_path, snapshot_name(offset), encode_snapshot(entries))


def read_snapshot(dir_path: str, offset: int) -> list[SnapshotEntry]:
    """The snapshot at ``offset``; ``ValueError`` if bad, ``OSError`` if unreadable."""
    with open(os.path.join(dir_path, snapshot_name(offset)), "rb") as file:
        return decode_snapshot(file.read())


def snapshot_offsets(dir_path: str) -> list[int]:
    """The offsets of the snapshots in ``dir_path``, ascending."""
    offsets = []
    for name in os.listdir(dir_path):
        stem, _, suffix = name.partition(".")
        if "." + suffix == SNAPSHOT_SUFFIX and len(stem) == _OFFSET_DIGITS and stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def delete_snapshots(dir_path: str, doomed: Callable[[int], bool]) -> None:
    """Delete the snapshots whose offset ``doomed`` accepts."""
    for offset in snapshot_offsets(dir_path):
        if doomed(offset):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(dir_path, snapshot_name(offset)))
