"""``__transaction_state`` records: Kafka's key and value bytes (v0 written, v0/v1 read)."""

from __future__ import annotations

import struct

import pytest

from tickwheel.coordinator._state_log import iter_records
from tickwheel.coordinator.transaction import (
    TransactionLogError,
    TransactionState,
    TxnTransitMetadata,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from tickwheel.coordinator.transaction._log import build_record_batch
from tickwheel.replica import TopicPartition

ONGOING = TxnTransitMetadata(
    producer_id=7,
    previous_producer_id=-1,
    next_producer_id=-1,
    producer_epoch=3,
    last_producer_epoch=-1,
    txn_timeout_ms=60_000,
    txn_state=TransactionState.ONGOING,
    topic_partitions=frozenset({TopicPartition("t", 1), TopicPartition("t", 0)}),
    txn_start_timestamp=500,
    txn_last_update_timestamp=1_000,
)


def test_key_bytes() -> None:
    assert encode_key("tx") == b"\x00\x00" + b"\x00\x02" + b"tx"
    assert decode_key(encode_key("tx")) == "tx"
    assert decode_key(b"\x00\x01\x00\x02tx") is None  # unknown key version: skipped
    with pytest.raises(TransactionLogError):
        decode_key(b"\x00")


def test_value_v0_bytes() -> None:
    expected = (
        b"\x00\x00"  # version 0
        + struct.pack(">q", 7)
        + struct.pack(">h", 3)
        + struct.pack(">i", 60_000)
        + b"\x01"  # Ongoing
        + struct.pack(">i", 1)  # one topic
        + b"\x00\x01t"
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">qq", 1_000, 500)
    )
    assert encode_value(ONGOING) == expected
    decoded = decode_value(expected)
    assert (decoded.producer_id, decoded.producer_epoch, decoded.state) == (
        7,
        3,
        TransactionState.ONGOING,
    )
    assert decoded.topic_partitions == ONGOING.topic_partitions
    assert (decoded.txn_last_update_timestamp, decoded.txn_start_timestamp) == (1_000, 500)


def test_empty_writes_null_partitions() -> None:
    empty = TxnTransitMetadata(
        **{
            **{n: getattr(ONGOING, n) for n in ONGOING.__dataclass_fields__},
            "txn_state": TransactionState.EMPTY,
            "topic_partitions": frozenset(),
            "txn_start_timestamp": -1,
        }
    )
    data = encode_value(empty)
    assert data[17:21] == struct.pack(">i", -1)
    assert decode_value(data).topic_partitions == frozenset()


@pytest.mark.parametrize("state", [TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE])
def test_states_never_written(state: TransactionState) -> None:
    fields = {n: getattr(ONGOING, n) for n in ONGOING.__dataclass_fields__}
    with pytest.raises(ValueError, match="never written"):
        encode_value(TxnTransitMetadata(**{**fields, "txn_state": state}))


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def test_value_v1_flexible_with_tagged_fields() -> None:
    data = (
        b"\x00\x01"
        + struct.pack(">qhib", 8, 0, 30_000, 2)  # PrepareCommit
        + _uvarint(2)  # compact array: one topic
        + _uvarint(4)
        + b"abc"
        + _uvarint(2)
        + struct.pack(">i", 5)
        + _uvarint(0)  # the topic's tagged fields
        + struct.pack(">qq", 2_000, 1_500)
        + _uvarint(3)  # three top-level tags
        + _uvarint(0)
        + _uvarint(8)
        + struct.pack(">q", 4)  # PreviousProducerId
        + _uvarint(1)
        + _uvarint(8)
        + struct.pack(">q", 9)  # NextProducerId
        + _uvarint(2)
        + _uvarint(2)
        + struct.pack(">h", 1)  # ClientTransactionVersion
    )
    decoded = decode_value(data)
    assert decoded.state is TransactionState.PREPARE_COMMIT
    assert decoded.topic_partitions == frozenset({TopicPartition("abc", 5)})
    assert (decoded.previous_producer_id, decoded.next_producer_id) == (4, 9)
    assert (decoded.txn_last_update_timestamp, decoded.txn_start_timestamp) == (2_000, 1_500)


def test_bad_values_raise() -> None:
    with pytest.raises(TransactionLogError, match="version"):
        decode_value(b"\x00\x02" + bytes(30))
    with pytest.raises(TransactionLogError, match="truncated"):
        decode_value(encode_value(ONGOING)[:-3])
    with pytest.raises(TransactionLogError, match="status"):
        decode_value(b"\x00\x00" + struct.pack(">qhib", 1, 0, 1, 9) + bytes(20))


def test_batches_round_trip_with_tombstones() -> None:
    data = build_record_batch("tx", encode_value(ONGOING), 1_000) + build_record_batch(
        "tx", None, 2_000
    )
    records = list(iter_records(data))
    assert [(key, value is None) for _, key, value in records] == [
        (encode_key("tx"), False),
        (encode_key("tx"), True),
    ]
    # A partial trailing batch (a read cut short) is ignored.
    assert len(list(iter_records(data[:-5]))) == 1
