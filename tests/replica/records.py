"""A minimal encoder of Kafka record batches (format v2) for the replica tests."""

from __future__ import annotations

import struct

import crc32c

_NO_PRODUCER = -1
TIMESTAMP_MS = 1_700_000_000_000


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _record(offset_delta: int, value: bytes) -> bytes:
    body = b"\x00" + _varint(0) + _varint(offset_delta) + _varint(-1)
    body += _varint(len(value)) + value + _varint(0)
    return _varint(len(body)) + body


def batch(
    *values: bytes,
    timestamp_ms: int = TIMESTAMP_MS,
    producer_id: int = _NO_PRODUCER,
    producer_epoch: int = _NO_PRODUCER,
    base_sequence: int = _NO_PRODUCER,
) -> bytes:
    """One uncompressed batch of ``values`` (no keys), base offset 0, all at one time."""
    records = b"".join(_record(i, v) for i, v in enumerate(values))
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0,
            len(values) - 1,
            timestamp_ms,
            timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            len(values),
        )
        + records
    )
    crc = crc32c.crc32c(after_crc)
    # base offset, batch length (from the leader epoch on), leader epoch, magic 2, crc.
    head = struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), 0, 2, crc)
    return head + after_crc


def batch_of_size(size_bytes: int) -> bytes:
    """A one-record batch of at least ``size_bytes`` bytes in all."""
    return batch(b"v" * max(size_bytes - 70, 1))
