"""Control records: the commit/abort markers that end a transaction in a partition.

A control batch (attributes bit 5) holds one record whose key is ``version int16, type
int16`` (type 0 ABORT, 1 COMMIT; Kafka's ``ControlRecordType``) and whose value is
``version int16, coordinator_epoch int32`` (Kafka's ``EndTransactionMarker``), big-endian.
Readers accept any key or value version with at least those fields, as Kafka does.

Pure functions over bytes; safe from any thread.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch


class ControlType(enum.IntEnum):
    """The control record types a transaction marker carries."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """A decoded transaction marker."""

    control_type: ControlType
    coordinator_epoch: int


def parse_end_txn_marker(record_key: bytes, record_value: bytes | None) -> EndTxnMarker:
    """Decode the single record of a control batch; ValueError if it is not a txn marker."""
    if len(record_key) < _KEY.size:
        raise ValueError(f"control record key of {len(record_key)} bytes, expected >= 4")
    _key_version, raw_type = _KEY.unpack_from(record_key)
    try:
        control_type = ControlType(raw_type)
    except ValueError:
        raise ValueError(f"control record type {raw_type} is not a transaction marker") from None
    if record_value is None or len(record_value) < _VALUE.size:
        raise ValueError("transaction marker value shorter than 6 bytes")
    _value_version, coordinator_epoch = _VALUE.unpack_from(record_value)
    return EndTxnMarker(control_type, coordinator_epoch)
