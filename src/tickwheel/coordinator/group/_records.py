"""The records the coordinator writes to ``__consumer_offsets``, in Kafka's own format.

Two kinds of record share the topic, told apart by the version that starts the key:

=====================  ==================================================================
key version 0 or 1     offset commit: ``group, topic, partition`` →
                       value v3 ``offset, leader_epoch, metadata, commit_timestamp``
                       (v1 ``offset, metadata, commit_timestamp, expire_timestamp`` and v2
                       ``offset, metadata, commit_timestamp`` are read too)
key version 2          group metadata: ``group`` → value v3 ``protocol_type, generation,
                       protocol, leader, current_state_timestamp, members[member_id,
                       group_instance_id, client_id, client_host, rebalance_timeout,
                       session_timeout, subscription, assignment]``
=====================  ==================================================================

Key versions 3 and up belong to the modern group types (consumer-protocol groups, and
share groups): they are not decoded here but handed on as ``OtherRecord`` (key and
value bytes) in their batch, for the loader of that group type.

A null value is a tombstone: the offset or the group was deleted. Strings are an int16
length and UTF-8 (length -1 for null), byte arrays an int32 length, all big-endian:
the same bytes Kafka's GroupMetadataManager writes, so the topic is readable by Kafka's
own tools.

Records travel in uncompressed record batches of format v2, built, walked and checked
(magic 2, CRC-32C) by ``tickwheel.record``. The log assigns offsets by rewriting the
base offset, so a batch is built with base offset 0. A transactional offset commit
(TxnOffsetCommit) is the same offset records in a batch marked transactional and
carrying the producer's id and epoch, with base sequence 0 on every batch (Kafka's
``generateOffsetRecords``); the transaction's commit or abort marker, a control batch,
follows it later in the partition. ``read_record_batches`` reads batch by batch, telling
transactional batches and markers apart (the loader needs both); ``read_batches`` is its
flat view of the offset and group records alone. A compressed batch is refused, since
this coordinator never writes one.

Pure functions over bytes; safe from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tickwheel import record
from tickwheel.coordinator._errors import CorruptOffsetsRecordError
from tickwheel.record import EndTxnMarker

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
NO_LEADER_EPOCH = -1

# Kafka writes every TxnOffsetCommit batch with this base sequence.
TXN_OFFSET_COMMIT_SEQUENCE = 0
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class OffsetKey:
    """Key of an offset commit record."""

    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetValue:
    """Value of an offset commit record."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    """Key of a group metadata record."""

    group_id: str


@dataclass(frozen=True, slots=True)
class StoredMember:
    """One member as written in a group metadata record."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    """Value of a group metadata record: the group as of its last stable generation."""

    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    current_state_timestamp_ms: int
    members: tuple[StoredMember, ...]


@dataclass(frozen=True, slots=True)
class OffsetsRecord:
    """A decoded record: its log offset, key and value (None for a tombstone)."""

    log_offset: int
    key: OffsetKey | GroupKey
    value: OffsetValue | GroupValue | None


@dataclass(frozen=True, slots=True)
class OtherRecord:
    """A record of a modern group type (key version 3 and up), as bytes."""

    log_offset: int
    key_version: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class OffsetsBatch:
    """One record batch as the loader sees it.

    ``marker`` is set for a control batch holding a transaction marker (its records are
    not offsets records, so ``records`` is empty); a control batch without a record has
    ``is_control`` and no marker.
    """

    base_offset: int
    producer_id: int
    is_transactional: bool
    is_control: bool
    marker: EndTxnMarker | None
    records: tuple[OffsetsRecord, ...]
    others: tuple[OtherRecord, ...] = ()


# --- primitive writers and a bounds-checked reader -----------------------------------


def _string(value: str | None) -> bytes:
    if value is None:
        return _INT16.pack(-1)
    encoded = value.encode()
    return _INT16.pack(len(encoded)) + encoded


def _bytes(value: bytes) -> bytes:
    return _INT32.pack(len(value)) + value


class _Reader:
    """Reads big-endian fields from a buffer, raising CorruptOffsetsRecordError on underflow."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0

    def _take(self, size: int) -> bytes:
        end = self._position + size
        if size < 0 or end > len(self._data):
            raise CorruptOffsetsRecordError("record field runs past the end of the record")
        chunk = self._data[self._position : end]
        self._position = end
        return chunk

    def int16(self) -> int:
        value: int = _INT16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _INT64.unpack(self._take(8))[0]
        return value

    def nullable_string(self) -> str | None:
        length = self.int16()
        if length == -1:
            return None
        try:
            return self._take(length).decode()
        except UnicodeDecodeError as error:
            raise CorruptOffsetsRecordError("record string is not UTF-8") from error

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise CorruptOffsetsRecordError("null where a string is required")
        return value

    def bytes(self) -> bytes:
        return self._take(self.int32())


# --- keys and values -----------------------------------------------------------------


def encode_offset_key(key: OffsetKey) -> bytes:
    """Encode an offset commit key (version 1)."""
    return (
        _INT16.pack(OFFSET_COMMIT_KEY_VERSION)
        + _string(key.group_id)
        + _string(key.topic)
        + _INT32.pack(key.partition)
    )


def encode_offset_value(value: OffsetValue) -> bytes:
    """Encode an offset commit value (version 3)."""
    return (
        _INT16.pack(OFFSET_COMMIT_VALUE_VERSION)
        + _INT64.pack(value.offset)
        + _INT32.pack(value.leader_epoch)
        + _string(value.metadata)
        + _INT64.pack(value.commit_timestamp_ms)
    )


def encode_group_key(key: GroupKey) -> bytes:
    """Encode a group metadata key (version 2)."""
    return _INT16.pack(GROUP_METADATA_KEY_VERSION) + _string(key.group_id)


def encode_group_value(value: GroupValue) -> bytes:
    """Encode a group metadata value (version 3)."""
    parts = [
        _INT16.pack(GROUP_METADATA_VALUE_VERSION),
        _string(value.protocol_type),
        _INT32.pack(value.generation_id),
        _string(value.protocol_name),
        _string(value.leader_id),
        _INT64.pack(value.current_state_timestamp_ms),
        _INT32.pack(len(value.members)),
    ]
    for member in value.members:
        parts += [
            _string(member.member_id),
            _string(member.group_instance_id),
            _string(member.client_id),
            _string(member.client_host),
            _INT32.pack(member.rebalance_timeout_ms),
            _INT32.pack(member.session_timeout_ms),
            _bytes(member.subscription),
            _bytes(member.assignment),
        ]
    return b"".join(parts)


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    """Decode a record key of either kind."""
    reader = _Reader(data)
    version = reader.int16()
    if version in {0, OFFSET_COMMIT_KEY_VERSION}:
        return OffsetKey(reader.string(), reader.string(), reader.int32())
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupKey(reader.string())
    raise CorruptOffsetsRecordError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(data: bytes) -> OffsetValue:
    """Decode an offset commit value of version 1, 2 or 3."""
    reader = _Reader(data)
    version = reader.int16()
    if version in {1, 2}:
        offset = reader.int64()
        metadata = reader.string()
        commit_timestamp_ms = reader.int64()
        return OffsetValue(offset, NO_LEADER_EPOCH, metadata, commit_timestamp_ms)
    if version == OFFSET_COMMIT_VALUE_VERSION:
        return OffsetValue(reader.int64(), reader.int32(), reader.string(), reader.int64())
    raise CorruptOffsetsRecordError(f"unknown offset commit value version {version}")


def decode_group_value(data: bytes) -> GroupValue:
    """Decode a group metadata value of version 3."""
    reader = _Reader(data)
    version = reader.int16()
    if version != GROUP_METADATA_VALUE_VERSION:
        raise CorruptOffsetsRecordError(f"unknown group metadata value version {version}")
    protocol_type = reader.string()
    generation_id = reader.int32()
    protocol_name = reader.nullable_string()
    leader_id = reader.nullable_string()
    timestamp_ms = reader.int64()
    members = tuple(
        StoredMember(
            member_id=reader.string(),
            group_instance_id=reader.nullable_string(),
            client_id=reader.string(),
            client_host=reader.string(),
            rebalance_timeout_ms=reader.int32(),
            session_timeout_ms=reader.int32(),
            subscription=reader.bytes(),
            assignment=reader.bytes(),
        )
        for _ in range(reader.int32())
    )
    return GroupValue(protocol_type, generation_id, protocol_name, leader_id, timestamp_ms, members)


def _decode_value(
    key: OffsetKey | GroupKey, value: bytes | None
) -> OffsetValue | GroupValue | None:
    if value is None:
        return None
    if isinstance(key, OffsetKey):
        return decode_offset_value(value)
    return decode_group_value(value)


UndecodableCallback = Callable[[int, CorruptOffsetsRecordError], None]
"""Told the offset of what was skipped (a record, or a batch's base offset) and why."""


def read_batches(
    data: bytes, *, on_undecodable: UndecodableCallback | None = None
) -> Iterator[OffsetsRecord]:
    """The offset and group records of the v2 batches in ``data``, in log order.

    Control batches are skipped; see ``read_record_batches`` for the rest.
    """
    for batch in read_record_batches(data, on_undecodable=on_undecodable):
        yield from batch.records


def read_record_batches(
    data: bytes, *, on_undecodable: UndecodableCallback | None = None
) -> Iterator[OffsetsBatch]:
    """Decode the v2 batches in ``data``, in log order.

    A trailing partial batch (a read cut at ``max_bytes``) is ignored; the caller reads
    on from the offset after the last batch returned. Without ``on_undecodable`` a
    record or batch that does not decode raises ``CorruptOffsetsRecordError``; with it,
    an undecodable record is reported and skipped, and so is the rest of a batch whose
    header or record framing is broken (or a control batch that is no transaction marker).
    """
    view = memoryview(data)
    for position, header in record.iter_batches(data):
        base_offset = header.base_offset
        end = position + header.size_bytes
        records: list[OffsetsRecord | OtherRecord] = []
        is_control = bool(header.attributes & record.CONTROL_FLAG_MASK)
        marker = None
        try:
            try:
                record.check_batch(view, position, header.size_bytes)
            except record.RecordError as error:
                raise CorruptOffsetsRecordError(str(error)) from error
            if header.attributes & record.COMPRESSION_CODEC_MASK:
                raise CorruptOffsetsRecordError(
                    "compressed __consumer_offsets batches are not read"
                )
            batch = data[position:end]
            if is_control:
                marker = _read_marker(batch, header)
            else:
                # extend keeps the records read before a broken one raises.
                records.extend(_read_records(batch, header, on_undecodable))
        except CorruptOffsetsRecordError as exc:
            if on_undecodable is None:
                raise
            on_undecodable(base_offset, exc)
            is_control, marker = False, None
        yield OffsetsBatch(
            base_offset,
            header.producer_id,
            bool(header.attributes & record.TRANSACTIONAL_FLAG_MASK),
            is_control,
            marker,
            tuple(r for r in records if isinstance(r, OffsetsRecord)),
            tuple(r for r in records if isinstance(r, OtherRecord)),
        )


def _raw_records(
    batch: bytes, header: record.BatchHeader
) -> Iterator[tuple[int, bytes, bytes | None]]:
    """Each record's offset, key and value (None: null), framing checked."""
    try:
        decoded = record.decode_records(batch, header)
    except record.RecordError as error:
        raise CorruptOffsetsRecordError(str(error)) from error
    for each in decoded:
        if each.key is None:
            raise CorruptOffsetsRecordError("__consumer_offsets record without a key")
        yield header.base_offset + each.offset_delta, each.key, each.value


def _read_marker(batch: bytes, header: record.BatchHeader) -> EndTxnMarker | None:
    try:
        return record.read_control_batch(batch, header)
    except (record.RecordError, ValueError) as error:
        raise CorruptOffsetsRecordError(str(error)) from error


def _read_records(
    batch: bytes, header: record.BatchHeader, on_undecodable: UndecodableCallback | None
) -> Iterator[OffsetsRecord | OtherRecord]:
    for offset, key_bytes, value_bytes in _raw_records(batch, header):
        if len(key_bytes) >= _INT16.size:
            (key_version,) = _INT16.unpack_from(key_bytes)
            if key_version > GROUP_METADATA_KEY_VERSION:
                yield OtherRecord(offset, key_version, key_bytes, value_bytes)
                continue
        try:
            key = decode_key(key_bytes)
            value = _decode_value(key, value_bytes)
        except CorruptOffsetsRecordError as exc:
            if on_undecodable is None:
                raise
            on_undecodable(offset, exc)
            continue
        yield OffsetsRecord(offset, key, value)
