"""Control batches: the COMMIT and ABORT markers that end a transaction in a partition.

A transaction marker (Kafka's ``EndTransactionMarker``, written by
``MemoryRecords.writeEndTransactionalMarker``) is a v2 batch with the transactional and
control attribute bits set, the producer's id and epoch, base sequence -1 and one
record. The record's key is the control record key (int16 version 0, int16 type: 0
ABORT, 1 COMMIT) and its value the marker (int16 version 0, int32 coordinator epoch).
Built with base offset 0 and leader epoch -1, uncompressed, the batch is 78 bytes: the
61-byte header and a 17-byte record. The leader assigns its offset like any batch's.

Readers decode the record with real varint parsing, since another writer may set a
non-zero timestamp delta. An empty control batch (records count 0, as Kafka's cleaner
leaves one) carries no marker. Other control types (KRaft's 2..6) never appear in a
partition log here; reading one is an error.

Concurrency: pure functions over immutable values; thread-safe.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Final

from tickwheel.record._batch import (
    CONTROL_FLAG_MASK,
    NO_PARTITION_LEADER_EPOCH,
    NO_SEQUENCE,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
)
from tickwheel.record._builder import encode_batch
from tickwheel.record._codec import decode_records, encode_record_fields

CONTROL_KEY_VERSION: Final = 0
END_TXN_MARKER_VERSION: Final = 0
_CONTROL_KEY: Final = struct.Struct(">hh")
_MARKER_VALUE: Final = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    """The control record types of a transaction marker (Kafka's ``ControlRecordType``)."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True)
class EndTxnMarker:
    """A decoded transaction marker: commit or abort, and the coordinator's epoch."""

    control_type: ControlType
    coordinator_epoch: int


def build_end_txn_marker(
    producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, timestamp_ms: int
) -> bytes:
    """One 78-byte control batch ending ``producer_id``'s transaction (base offset 0)."""
    control_type = ControlType.COMMIT if commit else ControlType.ABORT
    record = encode_record_fields(
        0,
        0,
        0,
        _CONTROL_KEY.pack(CONTROL_KEY_VERSION, control_type),
        _MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch),
    )
    return encode_batch(
        record,
        records_count=1,
        last_offset_delta=0,
        base_timestamp_ms=timestamp_ms,
        max_timestamp_ms=timestamp_ms,
        attributes=TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK,
        partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
    )


def parse_end_txn_marker(record_key: bytes, record_value: bytes | None) -> EndTxnMarker:
    """The marker in a control batch's record; raises ``ValueError`` on a bad one."""
    if len(record_key) < _CONTROL_KEY.size:
        raise ValueError(f"control record key of {len(record_key)} bytes is too short")
    key_version, type_id = _CONTROL_KEY.unpack_from(record_key)
    if key_version < 0:
        raise ValueError(f"invalid control record key version {key_version}")
    try:
        control_type = ControlType(type_id)
    except ValueError:
        raise ValueError(f"control record type {type_id} is not a transaction marker") from None
    if record_value is None or len(record_value) < _MARKER_VALUE.size:
        raise ValueError("transaction marker value is missing or too short")
    value_version, coordinator_epoch = _MARKER_VALUE.unpack_from(record_value)
    if value_version < 0:
        raise ValueError(f"invalid transaction marker version {value_version}")
    return EndTxnMarker(control_type, coordinator_epoch)


def read_control_batch(batch: bytes | memoryview, header: BatchHeader) -> EndTxnMarker | None:
    """The marker of a whole control ``batch``; None for an empty one.

    Raises ``ValueError`` if its record is not a transaction marker (the caller maps
    it to its own error).
    """
    if header.records_count == 0:
        return None
    records = decode_records(batch, header)
    if not records or records[0].key is None:
        raise ValueError("control batch without a control record key")
    return parse_end_txn_marker(bytes(records[0].key), records[0].value)
