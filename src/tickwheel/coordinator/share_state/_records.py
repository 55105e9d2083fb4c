"""``__share_group_state`` records: Kafka's ShareSnapshot key and value bytes.

Kafka's share coordinator writes two record types to ``__share_group_state``, told apart
by the key's version: a ShareSnapshot (key version 0), the share-partition's whole state,
and a ShareUpdate (key version 1), a delta on the last snapshot. This coordinator
always writes the whole state, so it writes snapshots only; a key of another version is
reported as unknown and skipped by the loader. The formats::

    key   (version 0, not flexible): int16 version | string group_id | uuid topic_id
                                     | int32 partition
    value (version 0, flexible):     int16 version | uint16 snapshot_epoch
                                     | int32 state_epoch | int32 leader_epoch
                                     | int64 start_offset
                                     | compact array of (int64 first_offset,
                                       int64 last_offset, int8 delivery_state,
                                       int16 delivery_count, tagged fields)
                                     | tagged fields

A null value is a tombstone: the share-partition's state was deleted (DeleteGroups,
DeleteShareGroupOffsets). The snapshot epoch counts the snapshots of a key, wrapping at
2^16 as Kafka's uint16 does.

Pure functions; safe from any thread.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from tickwheel.coordinator._batches import build_batch
from tickwheel.protocol import uvarint
from tickwheel.share_delivery import (
    PersisterStateBatch,
    RecordState,
    ShareGroupState,
    SharePartitionKey,
)

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
SNAPSHOT_KEY_VERSION = 0
SNAPSHOT_VALUE_VERSION = 0
_SNAPSHOT_EPOCH_MODULUS = 1 << 16
_I16 = struct.Struct(">h")
_KEY_TAIL = struct.Struct(">16si")
_VALUE_HEAD = struct.Struct(">hHiiq")
_BATCH = struct.Struct(">qqbh")
_NO_TAGGED_FIELDS = b"\x00"


class ShareStateRecordError(ValueError):
    """A ``__share_group_state`` key or value that does not decode."""


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    """A share-partition's state as one snapshot record holds it."""

    snapshot_epoch: int
    state: ShareGroupState


def next_snapshot_epoch(previous: int) -> int:
    """The snapshot epoch after ``previous`` (-1: none yet), wrapping like a uint16."""
    return (previous + 1) % _SNAPSHOT_EPOCH_MODULUS


def encode_key(key: SharePartitionKey) -> bytes:
    """The ShareSnapshot key of ``key``."""
    group = key.group_id.encode()
    return (
        _I16.pack(SNAPSHOT_KEY_VERSION)
        + _I16.pack(len(group))
        + group
        + _KEY_TAIL.pack(key.topic_id.bytes, key.partition)
    )


def decode_key(data: bytes) -> SharePartitionKey | None:
    """The share-partition a key names; None for a key of another version (a
    ShareUpdate, which this coordinator never writes). ShareStateRecordError if broken."""
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version != SNAPSHOT_KEY_VERSION:
            return None
        (length,) = _I16.unpack_from(data, _I16.size)
        start = 2 * _I16.size
        if length < 0 or start + length + _KEY_TAIL.size != len(data):
            raise ShareStateRecordError(f"a share snapshot key of {len(data)} bytes is malformed")
        group_id = data[start : start + length].decode()
        topic_id, partition = _KEY_TAIL.unpack_from(data, start + length)
    except (struct.error, UnicodeDecodeError) as exc:
        raise ShareStateRecordError(f"a share snapshot key does not decode: {exc}") from exc
    return SharePartitionKey(group_id, uuid.UUID(bytes=topic_id), partition)


def _read_uvarint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data):
            raise ShareStateRecordError("a varint runs past the end of the value")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
        if shift > 28:
            raise ShareStateRecordError("a varint is longer than five bytes")


def _skip_tagged_fields(data: bytes, position: int) -> int:
    count, position = _read_uvarint(data, position)
    for _ in range(count):
        _tag, position = _read_uvarint(data, position)
        size, position = _read_uvarint(data, position)
        position += size
    if position > len(data):
        raise ShareStateRecordError("a tagged field runs past the end of the value")
    return position


def encode_value(snapshot: ShareSnapshot) -> bytes:
    """The ShareSnapshot value of ``snapshot``."""
    state = snapshot.state
    parts = [
        _VALUE_HEAD.pack(
            SNAPSHOT_VALUE_VERSION,
            snapshot.snapshot_epoch,
            state.state_epoch,
            state.leader_epoch,
            state.start_offset,
        ),
        uvarint(len(state.state_batches) + 1),
    ]
    for batch in state.state_batches:
        parts.append(
            _BATCH.pack(
                batch.first_offset,
                batch.last_offset,
                int(batch.delivery_state),
                batch.delivery_count,
            )
        )
        parts.append(_NO_TAGGED_FIELDS)
    parts.append(_NO_TAGGED_FIELDS)
    return b"".join(parts)


def decode_value(data: bytes) -> ShareSnapshot:
    """The snapshot a ShareSnapshot value holds; ShareStateRecordError if it is broken."""
    try:
        version, snapshot_epoch, state_epoch, leader_epoch, start_offset = _VALUE_HEAD.unpack_from(
            data, 0
        )
        if version != SNAPSHOT_VALUE_VERSION:
            raise ShareStateRecordError(f"share snapshot value version {version} is unknown")
        count_plus_one, position = _read_uvarint(data, _VALUE_HEAD.size)
        if count_plus_one == 0:
            raise ShareStateRecordError("a share snapshot has a null batch array")
        batches = []
        for _ in range(count_plus_one - 1):
            first, last, state, delivery_count = _BATCH.unpack_from(data, position)
            position = _skip_tagged_fields(data, position + _BATCH.size)
            batches.append(PersisterStateBatch(first, last, RecordState(state), delivery_count))
        position = _skip_tagged_fields(data, position)
    except struct.error as exc:
        raise ShareStateRecordError(f"a share snapshot value is cut short: {exc}") from exc
    except ValueError as exc:
        if isinstance(exc, ShareStateRecordError):
            raise
        raise ShareStateRecordError(f"a share snapshot value is malformed: {exc}") from exc
    if position != len(data):
        raise ShareStateRecordError(f"{len(data) - position} bytes follow a share snapshot")
    return ShareSnapshot(
        snapshot_epoch,
        ShareGroupState(state_epoch, leader_epoch, start_offset, tuple(batches)),
    )


def build_record_batch(
    key: SharePartitionKey, snapshot: ShareSnapshot | None, timestamp_ms: int
) -> bytes:
    """One v2 batch holding the snapshot of ``key`` (None: its tombstone)."""
    value = None if snapshot is None else encode_value(snapshot)
    return build_batch([(encode_key(key), value)], timestamp_ms)
