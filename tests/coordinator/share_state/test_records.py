"""``__share_group_state`` records: Kafka's ShareSnapshot key and value, both ways."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.coordinator._state_log import iter_records
from tickwheel.coordinator.share_state import (
    ShareSnapshot,
    ShareStateRecordError,
    build_record_batch,
    coordinator_key,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from tickwheel.coordinator.share_state._records import next_snapshot_epoch
from tickwheel.share_delivery import (
    PersisterStateBatch,
    RecordState,
    ShareGroupState,
    SharePartitionKey,
)

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
KEYS = st.builds(
    SharePartitionKey,
    st.text(max_size=40),
    st.uuids(),
    st.integers(0, (1 << 31) - 1),
)
BATCHES = st.builds(
    PersisterStateBatch,
    INT64,
    INT64,
    st.sampled_from(list(RecordState)),
    st.integers(-(1 << 15), (1 << 15) - 1),
)
SNAPSHOTS = st.builds(
    ShareSnapshot,
    st.integers(0, (1 << 16) - 1),
    st.builds(
        ShareGroupState,
        INT32,
        INT32,
        INT64,
        st.lists(BATCHES, max_size=300).map(tuple),
    ),
)


@given(KEYS)
def test_keys_round_trip(key: SharePartitionKey) -> None:
    assert decode_key(encode_key(key)) == key


@given(SNAPSHOTS)
def test_values_round_trip(snapshot: ShareSnapshot) -> None:
    assert decode_value(encode_value(snapshot)) == snapshot


def test_the_key_is_kafkas_snapshot_key_bytes() -> None:
    topic_id = uuid.UUID(int=1)
    encoded = encode_key(SharePartitionKey("g", topic_id, 7))
    assert encoded == b"\x00\x00" + b"\x00\x01g" + topic_id.bytes + b"\x00\x00\x00\x07"


def test_the_value_is_kafkas_flexible_snapshot_value() -> None:
    state = ShareGroupState(3, 5, 100, (PersisterStateBatch(100, 104, RecordState.ARCHIVED, 2),))
    encoded = encode_value(ShareSnapshot(9, state))
    assert encoded == (
        b"\x00\x00"  # version 0
        + b"\x00\x09"  # uint16 snapshot epoch
        + b"\x00\x00\x00\x03"  # state epoch
        + b"\x00\x00\x00\x05"  # leader epoch
        + (100).to_bytes(8, "big")  # start offset
        + b"\x02"  # compact array of one batch
        + (100).to_bytes(8, "big")
        + (104).to_bytes(8, "big")
        + b"\x04"  # archived
        + b"\x00\x02"  # delivery count
        + b"\x00"  # the batch's tagged fields
        + b"\x00"  # the value's tagged fields
    )


def test_a_share_update_key_is_not_a_snapshot() -> None:
    update_key = b"\x00\x01" + encode_key(SharePartitionKey("g", uuid.UUID(int=2), 0))[2:]
    assert decode_key(update_key) is None


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"\x00\x00\x00",
        b"\x00\x01" + b"\x00" * 22,  # an unknown value version
        encode_value(ShareSnapshot(0, ShareGroupState(0, 0, 0, ()))) + b"\x00",
        encode_value(ShareSnapshot(0, ShareGroupState(0, 0, 0, ())))[:-2] + b"\x00\x00",
    ],
)
def test_broken_values_are_refused(value: bytes) -> None:
    with pytest.raises(ShareStateRecordError):
        decode_value(value)


def test_an_unknown_delivery_state_is_refused() -> None:
    good = encode_value(
        ShareSnapshot(
            0, ShareGroupState(0, 0, 0, (PersisterStateBatch(0, 0, RecordState.ARCHIVED, 1),))
        )
    )
    state_at = 2 + 2 + 4 + 4 + 8 + 1 + 8 + 8
    bad = good[:state_at] + b"\x03" + good[state_at + 1 :]
    with pytest.raises(ShareStateRecordError):
        decode_value(bad)


@pytest.mark.parametrize("key", [b"", b"\x00\x00\x00\x05ab", b"\x00\x00\x00\x00" + b"\x00" * 5])
def test_broken_keys_are_refused(key: bytes) -> None:
    with pytest.raises(ShareStateRecordError):
        decode_key(key)


def test_a_batch_holds_the_snapshot_or_its_tombstone() -> None:
    key = SharePartitionKey("group", uuid.uuid4(), 3)
    snapshot = ShareSnapshot(1, ShareGroupState(0, 0, 42, ()))
    batches = build_record_batch(key, snapshot, 1_000) + build_record_batch(key, None, 2_000)
    records = list(iter_records(batches))
    assert [(decode_key(k), v is None) for _offset, k, v in records] == [
        (key, False),
        (key, True),
    ]
    assert decode_value(records[0][2] or b"") == snapshot


def test_snapshot_epochs_wrap_like_a_uint16() -> None:
    assert next_snapshot_epoch(-1) == 0
    assert next_snapshot_epoch(41) == 42
    assert next_snapshot_epoch((1 << 16) - 1) == 0


def test_placement_hashes_kafkas_coordinator_key() -> None:
    topic_id = uuid.UUID("d2a6e1f4-6a3b-4c1e-9f7a-2b8c5d0e1f3a")
    key = SharePartitionKey("sg", topic_id, 0)
    assert coordinator_key(key) == "sg:0qbh9Go7TB6feiuMXQ4fOg:0"
    # Java 17's "sg:0qbh9Go7TB6feiuMXQ4fOg:0".hashCode() is 1083084950.
    assert partition_for(key, 50) == 1083084950 % 50
