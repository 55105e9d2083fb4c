"""``__transaction_state`` records: Kafka's key and value bytes, and their batches.

Key (version 0): ``int16 version | string transactional_id``. Value version 0 is what
this coordinator writes for a transaction of a version 0/1 client::

    int16 version = 0 | int64 producer_id | int16 producer_epoch
    int32 transaction_timeout_ms | int8 transaction_status
    array (int32 count, -1 = null for Empty) of (string topic, int32 array partitions)
    int64 last_update_timestamp_ms | int64 start_timestamp_ms

Version 1 holds the same fields in the flexible encoding (compact arrays and strings,
tagged fields; tags 0 PreviousProducerId, 1 NextProducerId, 2 ClientTransactionVersion
as int16; the first two only when set). It is written for a transaction of a version 2
client, so that a new leader of the partition keeps bumping its epoch and finds the
producer id an exhausted epoch moves to (Kafka writes version 1 from
transaction version 1 on). A null value is a tombstone (an expired transactional id).
Each record goes to the log in its own uncompressed, non-transactional v2 batch
(Kafka's ``TransactionLog``); ``tickwheel.coordinator._state_log`` reads them back.

Pure functions; safe from any thread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tickwheel.coordinator._batches import build_batch
from tickwheel.coordinator.transaction._metadata import (
    NO_PRODUCER_ID,
    TransactionState,
    TxnTransitMetadata,
)
from tickwheel.replica import TopicPartition

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION_0 = 0
VALUE_VERSION_1 = 1
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VALUE_HEAD = struct.Struct(">hqhib")
_TIMESTAMPS = struct.Struct(">qq")
_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2
_TV_2 = 2


class TransactionLogError(ValueError):
    """A ``__transaction_state`` record that cannot be decoded."""


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """A decoded value: one transactional id's state as last written."""

    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_last_update_timestamp: int
    txn_start_timestamp: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0


def _string(text: str) -> bytes:
    encoded = text.encode()
    return _I16.pack(len(encoded)) + encoded


def encode_key(transactional_id: str) -> bytes:
    """The record key of ``transactional_id`` (version 0)."""
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def decode_key(data: bytes) -> str | None:
    """The transactional id of a key, or None for an unknown key version (skipped)."""
    if len(data) < _I16.size * 2:
        raise TransactionLogError("truncated __transaction_state key")
    (version,) = _I16.unpack_from(data, 0)
    if version != KEY_VERSION:
        return None
    (length,) = _I16.unpack_from(data, 2)
    if length < 0 or 4 + length > len(data):
        raise TransactionLogError("bad transactional id in __transaction_state key")
    return data[4 : 4 + length].decode()


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_value(transit: TxnTransitMetadata) -> bytes:
    """The record value of a transition's target state: version 1 for a version 2
    client's transaction, else version 0."""
    state = transit.txn_state
    if state in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE):
        raise ValueError(f"{state.state_name} is never written to the log")
    flexible = transit.client_transaction_version >= _TV_2
    out = bytearray(
        _VALUE_HEAD.pack(
            VALUE_VERSION_1 if flexible else VALUE_VERSION_0,
            transit.producer_id,
            transit.producer_epoch,
            transit.txn_timeout_ms,
            state.value,
        )
    )
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(transit.topic_partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if flexible:
        out += _flexible_partitions(by_topic, empty=state is TransactionState.EMPTY)
    elif state is TransactionState.EMPTY:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(by_topic))
        for topic, partitions in by_topic.items():
            out += _string(topic) + _I32.pack(len(partitions))
            for partition in partitions:
                out += _I32.pack(partition)
    out += _TIMESTAMPS.pack(transit.txn_last_update_timestamp, transit.txn_start_timestamp)
    if flexible:
        tags = [
            (tag, _I64.pack(producer_id))
            for tag, producer_id in (
                (_TAG_PREVIOUS_PRODUCER_ID, transit.previous_producer_id),
                (_TAG_NEXT_PRODUCER_ID, transit.next_producer_id),
            )
            if producer_id != NO_PRODUCER_ID
        ]
        tags.append(
            (_TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(transit.client_transaction_version))
        )
        out += _uvarint(len(tags))
        for tag, value in tags:
            out += _uvarint(tag) + _uvarint(len(value)) + value
    return bytes(out)


def _flexible_partitions(by_topic: dict[str, list[int]], *, empty: bool) -> bytes:
    """Version 1's compact array of topics (null for Empty), each with its tags."""
    if empty:
        return _uvarint(0)
    out = bytearray(_uvarint(len(by_topic) + 1))
    for topic, partitions in by_topic.items():
        encoded = topic.encode()
        out += _uvarint(len(encoded) + 1) + encoded + _uvarint(len(partitions) + 1)
        for partition in partitions:
            out += _I32.pack(partition)
        out += _uvarint(0)
    return bytes(out)


class _Reader:
    """A cursor over value bytes; raises ``TransactionLogError`` past the end."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.position = 0

    def _take(self, codec: struct.Struct) -> int:
        if self.position + codec.size > len(self._data):
            raise TransactionLogError("truncated __transaction_state value")
        (value,) = codec.unpack_from(self._data, self.position)
        self.position += codec.size
        return int(value)

    def i8(self) -> int:
        return self._take(_I8)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def raw(self, length: int) -> bytes:
        if length < 0 or self.position + length > len(self._data):
            raise TransactionLogError("truncated __transaction_state value")
        chunk = self._data[self.position : self.position + length]
        self.position += length
        return chunk

    def uvarint(self) -> int:
        shift = 0
        value = 0
        while True:
            byte = self.raw(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise TransactionLogError("unsigned varint too long")

    def string(self) -> str:
        return self.raw(self.i16()).decode()

    def compact_string(self) -> str:
        length = self.uvarint() - 1
        if length < 0:
            raise TransactionLogError("null topic name in __transaction_state value")
        return self.raw(length).decode()

    def tagged_fields(self) -> dict[int, bytes]:
        fields: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.raw(self.uvarint())
        return fields


def decode_value(data: bytes) -> TransactionLogValue:
    """Decode a value of version 0 or 1."""
    reader = _Reader(data)
    version = reader.i16()
    if version not in (VALUE_VERSION_0, VALUE_VERSION_1):
        raise TransactionLogError(f"unknown __transaction_state value version {version}")
    flexible = version == VALUE_VERSION_1
    producer_id = reader.i64()
    producer_epoch = reader.i16()
    timeout_ms = reader.i32()
    status = reader.i8()
    try:
        state = TransactionState(status)
    except ValueError as exc:
        raise TransactionLogError(f"unknown transaction status {status}") from exc
    count = reader.uvarint() - 1 if flexible else reader.i32()
    partitions: set[TopicPartition] = set()
    for _ in range(max(count, 0)):
        topic = reader.compact_string() if flexible else reader.string()
        n = reader.uvarint() - 1 if flexible else reader.i32()
        for _ in range(max(n, 0)):
            partitions.add(TopicPartition(topic, reader.i32()))
        if flexible:
            reader.tagged_fields()
    last_update, start = reader.i64(), reader.i64()
    previous = next_ = NO_PRODUCER_ID
    client_version = 0
    if flexible:
        tags = reader.tagged_fields()
        if _TAG_PREVIOUS_PRODUCER_ID in tags:
            previous = _I64.unpack(tags[_TAG_PREVIOUS_PRODUCER_ID])[0]
        if _TAG_NEXT_PRODUCER_ID in tags:
            next_ = _I64.unpack(tags[_TAG_NEXT_PRODUCER_ID])[0]
        if _TAG_CLIENT_TRANSACTION_VERSION in tags:
            client_version = _I16.unpack(tags[_TAG_CLIENT_TRANSACTION_VERSION])[0]
    return TransactionLogValue(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        txn_timeout_ms=timeout_ms,
        state=state,
        topic_partitions=frozenset(partitions),
        txn_last_update_timestamp=last_update,
        txn_start_timestamp=start,
        previous_producer_id=previous,
        next_producer_id=next_,
        client_transaction_version=client_version,
    )


def build_record_batch(transactional_id: str, value: bytes | None, timestamp_ms: int) -> bytes:
    """One v2 batch holding the id's record (``value`` None: a tombstone)."""
    return build_batch([(encode_key(transactional_id), value)], timestamp_ms)
