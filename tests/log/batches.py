"""Kafka record batches (format v2) for the log's tests.

The log never decodes records, so the tests need valid batches to feed it; the encoder
is ``tickwheel.bench._batches``, shared with the log benchmark. This module re-exports
its ``make_batch`` and adds what only the tests need: attribute flags, and helpers that
patch, read and split stored batches.
"""

from __future__ import annotations

import struct

from tickwheel.bench._batches import HEADER, make_batch

__all__ = [
    "CONTROL_FLAG",
    "GZIP_CODEC",
    "LOG_APPEND_TIME_FLAG",
    "TRANSACTIONAL_FLAG",
    "header_of",
    "make_batch",
    "split_batches",
    "with_offsets",
]

LOG_APPEND_TIME_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
GZIP_CODEC = 1


def with_offsets(batch: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """The batch as a leader stores it: base offset and leader epoch patched in."""
    patched = bytearray(batch)
    struct.pack_into(">q", patched, 0, base_offset)
    struct.pack_into(">i", patched, 12, leader_epoch)
    return bytes(patched)


def header_of(batch: bytes, position: int = 0) -> tuple[int, ...]:
    """The 13 header fields of the batch at ``position``."""
    return HEADER.unpack_from(batch, position)


def split_batches(data: bytes) -> list[bytes]:
    """Cut concatenated batches apart by their length fields."""
    out = []
    position = 0
    while position < len(data):
        size = struct.unpack_from(">i", data, position + 8)[0] + 12
        out.append(data[position : position + size])
        position += size
    return out
