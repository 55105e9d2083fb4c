"""A minimal encoder of Kafka record batches (format v2) for the replica tests."""

from __future__ import annotations

import struct

import crc32c

from tickwheel.log import write_varint

_NO_PRODUCER = -1
TIMESTAMP_MS = 1_700_000_000_000


def _record(offset_delta: int, value: bytes) -> bytes:
    body = b"\x00" + write_varint(0) + write_varint(offset_delta) + write_varint(-1)
    body += write_varint(len(value)) + value + write_varint(0)
    return write_varint(len(body)) + body


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
