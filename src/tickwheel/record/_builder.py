"""The one way to make a v2 batch: records encoded, compressed, framed, CRC stamped.

``encode_batch`` frames a records section that is already encoded (and compressed, if
the attributes say so): it writes the 61-byte header (``_batch``) and then the CRC-32C
over the header from the attributes on and the records. Every writer of a batch comes
here: the coordinators' state records, transaction markers (``_control``), the log
cleaner's rewritten batches, the benchmarks' and tests' batches.
``build_batch`` is the builder from records (``SimpleRecord``, after Kafka's), as a
producer writes them: the first record's timestamp is the batch's base timestamp and
each record stores its delta from it; offsets count from 0.

A batch is built with base offset 0 unless told otherwise: the leader that appends it
assigns its offsets by rewriting the base offset, which the CRC does not cover.

Concurrency: pure functions; thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import crc32c

from tickwheel.record._batch import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    CONTROL_FLAG_MASK,
    CRC_FIELD,
    CRC_OFFSET,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
)
from tickwheel.record._codec import RecordHeaders, encode_headers, encode_record_fields
from tickwheel.record._compression import NO_COMPRESSION, compress


class SimpleRecord(NamedTuple):
    """A record to build a batch of: key and value (None: null), timestamp, headers."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: RecordHeaders = ()


def encode_batch(
    records: bytes,
    *,
    records_count: int,
    last_offset_delta: int,
    base_timestamp_ms: int,
    max_timestamp_ms: int,
    attributes: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """A batch of the encoded ``records`` section with this header, its CRC set.

    The header fields are written as given, so a test may forge a header that
    contradicts its records.
    """
    batch = bytearray(RECORD_BATCH_OVERHEAD + len(records))
    BATCH_HEADER.pack_into(
        batch,
        0,
        base_offset,
        RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(records),
        partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_timestamp_ms,
        max_timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    batch[RECORD_BATCH_OVERHEAD:] = records
    CRC_FIELD.pack_into(batch, CRC_OFFSET, crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def build_batch(
    records: Sequence[SimpleRecord],
    *,
    codec: int = NO_COMPRESSION,
    transactional: bool = False,
    control: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """One batch of ``records`` (at least one), compressed with ``codec``.

    Base offset 0 and partition leader epoch -1, as a producer writes them: the leader
    that appends the batch sets both.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_timestamp_ms = records[0].timestamp_ms
    encoded = b"".join(
        encode_record_fields(
            0,
            record.timestamp_ms - base_timestamp_ms,
            offset_delta,
            record.key,
            record.value,
            encode_headers(record.headers),
        )
        for offset_delta, record in enumerate(records)
    )
    attributes = codec
    if transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if control:
        attributes |= CONTROL_FLAG_MASK
    return encode_batch(
        compress(codec, encoded),
        records_count=len(records),
        last_offset_delta=len(records) - 1,
        base_timestamp_ms=base_timestamp_ms,
        max_timestamp_ms=max(record.timestamp_ms for record in records),
        attributes=attributes,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
