"""A small encoder of Kafka record batches (format v2), for benchmarks and tests.

``tickwheel.log`` never encodes records: it takes batches as opaque bytes from
producers and leaders. Whatever feeds it outside a broker -- the log benchmark, the
log's tests -- needs valid batches, and this module is the one place that makes them:
records with zig-zag varints, the 61-byte batch header, and the CRC-32C over the
header from the attributes on plus the records. No record headers; ``make_keyed_batch``
compresses with the log's codec (``tickwheel.log._record_codec``) when asked.
``kio.records`` encodes batches too, but about a thousand times slower, which would
dominate a benchmark's setup and a property test's run.

It lives in ``tickwheel.bench`` (a private module, so not a benchmark command of its
own) because the benchmark cannot import the tests; the tests import it from here.

Concurrency: pure functions; safe from any thread.
"""

from __future__ import annotations

import struct
from typing import Final

import crc32c

from tickwheel.log._record_codec import compress, write_varint

HEADER: Final = struct.Struct(">qiibIhiqqqhii")
"""The v2 batch header: base offset, length, partition leader epoch, magic, CRC,
attributes, last offset delta, base and max timestamps, producer id and epoch, base
sequence, record count."""
HEADER_BYTES: Final = HEADER.size
LOG_OVERHEAD: Final = 12
"""Bytes before the length field's count starts: base offset (8) and length (4)."""
CRC_START: Final = 21
"""The CRC covers the batch from the attributes (byte 21) to its end."""
CRC_FIELD: Final = 17
MAGIC: Final = 2
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1
DEFAULT_TIMESTAMP_MS: Final = 1_700_000_000_000
_CRC = struct.Struct(">I")
_NULL_LENGTH: Final = -1


def encode_record(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None
) -> bytes:
    """One record: attributes, deltas, key, value, no headers; length-prefixed."""
    body = bytearray(b"\x00")
    body += write_varint(timestamp_delta)
    body += write_varint(offset_delta)
    if key is None:
        body += write_varint(_NULL_LENGTH)
    else:
        body += write_varint(len(key)) + key
    body += write_varint(_NULL_LENGTH) if value is None else write_varint(len(value)) + value
    body += write_varint(0)
    return write_varint(len(body)) + bytes(body)


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
    leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    records_count: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """A v2 batch of ``values`` (keyless records), its CRC set.

    Record ``i`` has timestamp ``timestamp_ms + i * timestamp_step_ms``.
    ``records_count`` and ``last_offset_delta`` override the header's fields, to forge
    batches whose header contradicts their records.
    """
    records = b"".join(
        encode_record(i, i * timestamp_step_ms, None, value) for i, value in enumerate(values)
    )
    count = len(values) if records_count is None else records_count
    delta = len(values) - 1 if last_offset_delta is None else last_offset_delta
    max_timestamp = timestamp_ms + max(len(values) - 1, 0) * timestamp_step_ms
    header = bytearray(
        HEADER.pack(
            base_offset,
            HEADER_BYTES - LOG_OVERHEAD + len(records),
            leader_epoch,
            MAGIC,
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
    _CRC.pack_into(header, CRC_FIELD, crc32c.crc32c(bytes(header[CRC_START:]) + records))
    return bytes(header) + records


def make_keyed_batch(
    records: list[tuple[bytes | None, bytes | None]],
    *,
    codec: int = 0,
    timestamp_ms: int = DEFAULT_TIMESTAMP_MS,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """A v2 batch of ``(key, value)`` records (a None value is a tombstone), all at
    ``timestamp_ms``, compressed with ``codec`` (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
    records_bytes = b"".join(
        encode_record(i, 0, key, value) for i, (key, value) in enumerate(records)
    )
    payload = compress(codec, records_bytes)
    header = bytearray(
        HEADER.pack(
            0,
            HEADER_BYTES - LOG_OVERHEAD + len(payload),
            NO_PARTITION_LEADER_EPOCH,
            MAGIC,
            0,
            codec,
            len(records) - 1,
            timestamp_ms,
            timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    )
    _CRC.pack_into(header, CRC_FIELD, crc32c.crc32c(bytes(header[CRC_START:]) + payload))
    return bytes(header) + payload
