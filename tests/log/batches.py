"""A small encoder of Kafka record batches (format v2) for the log's tests.

The log never decodes records, so the tests need valid batches to feed it: records
with zig-zag varints, a 61-byte header and a CRC-32C over byte 21 onward. ``kio.records``
would do this too, but about a thousand times slower.
"""

from __future__ import annotations

import struct

import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_BYTES = HEADER.size
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
LOG_APPEND_TIME_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
GZIP_CODEC = 1
DEFAULT_TIMESTAMP_MS = 1_700_000_000_000


def varint(value: int) -> bytes:
    """Zig-zag varint encoding, as Kafka's records use."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def encode_record(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes
) -> bytes:
    """One record: attributes, deltas, key, value, no headers; length-prefixed."""
    body = bytearray(b"\x00")
    body += varint(timestamp_delta)
    body += varint(offset_delta)
    if key is None:
        body += varint(-1)
    else:
        body += varint(len(key)) + key
    body += varint(len(value)) + value
    body += varint(0)
    return varint(len(body)) + bytes(body)


def make_batch(
    values: list[bytes],
    *,
    base_offset: int = 0,
    timestamp_ms: int = DEFAULT_TIMESTAMP_MS,
    timestamp_step_ms: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
    leader_epoch: int = -1,
    records_count: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """A valid v2 batch of ``values``; the last two arguments forge inconsistent headers."""
    records = b"".join(
        encode_record(i, i * timestamp_step_ms, None, value) for i, value in enumerate(values)
    )
    count = len(values) if records_count is None else records_count
    delta = len(values) - 1 if last_offset_delta is None else last_offset_delta
    max_timestamp = timestamp_ms + max(len(values) - 1, 0) * timestamp_step_ms
    header = bytearray(
        HEADER.pack(
            base_offset,
            HEADER_BYTES - 12 + len(records),
            leader_epoch,
            2,
            0,
            attributes,
            delta,
            timestamp_ms,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    body = bytes(header[21:]) + records
    struct.pack_into(">I", header, 17, crc32c.crc32c(body))
    return bytes(header) + records


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
