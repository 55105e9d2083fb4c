"""Kafka record batches (format v2) made to order, for benchmarks and tests.

``tickwheel.log`` never encodes records: it takes batches as opaque bytes from
producers and leaders. Whatever feeds it outside a broker -- the log benchmark, the
log's tests -- needs valid batches; these helpers make them with the record format's
own builder (``tickwheel.record.encode_batch``), adding what only benchmarks and tests
want: keyless records with evenly stepped timestamps, and header fields that may be
forged to contradict the records. ``kio.records`` encodes batches too, but about a
thousand times slower, which would dominate a benchmark's setup and a property test's
run.

It lives in ``tickwheel.bench`` (a private module, so not a benchmark command of its
own) because the benchmark cannot import the tests; the tests import it from here.

Concurrency: pure functions; safe from any thread.
"""

from __future__ import annotations

from typing import Final

from tickwheel.record import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    CRC_OFFSET,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    SimpleRecord,
    build_batch,
    encode_batch,
    encode_record_fields,
)

HEADER: Final = BATCH_HEADER
"""The v2 batch header: base offset, length, partition leader epoch, magic, CRC,
attributes, last offset delta, base and max timestamps, producer id and epoch, base
sequence, record count."""
HEADER_BYTES: Final = RECORD_BATCH_OVERHEAD
CRC_START: Final = ATTRIBUTES_OFFSET
"""The CRC covers the batch from the attributes (byte 21) to its end."""
CRC_FIELD: Final = CRC_OFFSET
DEFAULT_TIMESTAMP_MS: Final = 1_700_000_000_000


def encode_record(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None
) -> bytes:
    """One record: attributes, deltas, key, value, no headers; length-prefixed."""
    return encode_record_fields(0, timestamp_delta, offset_delta, key, value)


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
    return encode_batch(
        records,
        records_count=len(values) if records_count is None else records_count,
        last_offset_delta=len(values) - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp_ms=timestamp_ms,
        max_timestamp_ms=timestamp_ms + max(len(values) - 1, 0) * timestamp_step_ms,
        attributes=attributes,
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


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
    return build_batch(
        [SimpleRecord(key, value, timestamp_ms) for key, value in records],
        codec=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
