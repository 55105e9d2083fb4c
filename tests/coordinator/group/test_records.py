"""``__consumer_offsets`` records: Kafka's key/value layouts in v2 batches, round-tripped."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.coordinator import CorruptOffsetsRecordError
from tickwheel.coordinator._batches import build_batch
from tickwheel.coordinator.group._records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    StoredMember,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    read_batches,
)

names = st.text(max_size=20)
int32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
offset_keys = st.builds(OffsetKey, names, names, int32)
offset_values = st.builds(OffsetValue, int64, int32, names, int64)
members = st.builds(
    StoredMember,
    names,
    st.none() | names,
    names,
    names,
    int32,
    int32,
    st.binary(max_size=30),
    st.binary(max_size=30),
)
group_values = st.builds(
    GroupValue,
    names,
    int32,
    st.none() | names,
    st.none() | names,
    int64,
    st.lists(members, max_size=4).map(tuple),
)


def test_offset_key_matches_kafkas_layout() -> None:
    # version 1, group "g", topic "t", partition 3: int16s for lengths, big-endian.
    assert encode_offset_key(OffsetKey("g", "t", 3)) == (
        b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    )


def test_offset_value_v3_layout() -> None:
    encoded = encode_offset_value(OffsetValue(42, 7, "m", 1000))
    assert encoded == struct.pack(">hqih1sq", 3, 42, 7, 1, b"m", 1000)


def test_offset_value_v1_is_read() -> None:
    v1 = struct.pack(">hqh2sqq", 1, 5, 2, b"md", 123, 456)
    assert decode_offset_value(v1) == OffsetValue(5, -1, "md", 123)


@given(st.lists(st.tuples(offset_keys, st.none() | offset_values), min_size=1, max_size=5))
def test_offset_records_round_trip_through_a_batch(
    entries: list[tuple[OffsetKey, OffsetValue | None]],
) -> None:
    batch = build_batch(
        [(encode_offset_key(k), None if v is None else encode_offset_value(v)) for k, v in entries],
        timestamp_ms=1,
    )
    records = list(read_batches(batch))
    assert [(r.key, r.value) for r in records] == entries
    assert [r.log_offset for r in records] == list(range(len(entries)))


@given(st.text(max_size=20), group_values)
def test_group_records_round_trip(group_id: str, value: GroupValue) -> None:
    batch = build_batch([(encode_group_key(GroupKey(group_id)), encode_group_value(value))], 5)
    (record,) = read_batches(batch)
    assert record.key == GroupKey(group_id)
    assert record.value == value


def test_a_partial_trailing_batch_is_ignored() -> None:
    batch = build_batch([(encode_group_key(GroupKey("g")), None)], 0)
    assert len(list(read_batches(batch + batch[:20]))) == 1


def test_corruption_is_detected() -> None:
    batch = bytearray(build_batch([(encode_group_key(GroupKey("g")), None)], 0))
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptOffsetsRecordError, match="CRC"):
        list(read_batches(bytes(batch)))


def test_unknown_key_version_is_refused() -> None:
    with pytest.raises(CorruptOffsetsRecordError, match="key version 9"):
        decode_key(b"\x00\x09")


@given(st.binary(max_size=64))
def test_garbage_keys_raise_only_the_coordinators_error(data: bytes) -> None:
    with contextlib.suppress(CorruptOffsetsRecordError):
        decode_key(data)


def test_undecodable_records_and_batches_are_reported_and_skipped() -> None:
    good = (
        encode_offset_key(OffsetKey("g", "t", 0)),
        encode_offset_value(OffsetValue(5, -1, "", 0)),
    )
    records = build_batch([(b"\x00\x01garbage", b"x"), good], timestamp_ms=0)
    broken = bytearray(build_batch([good], timestamp_ms=0))
    broken[-1] ^= 0xFF
    skipped: list[tuple[int, str]] = []
    read = list(
        read_batches(
            records + bytes(broken) + records,
            on_undecodable=lambda offset, error: skipped.append((offset, str(error))),
        )
    )
    assert [(r.key, r.value) for r in read] == [
        (OffsetKey("g", "t", 0), OffsetValue(5, -1, "", 0))
    ] * 2
    assert [offset for offset, _ in skipped] == [0, 0, 0]
    assert "CRC" in skipped[1][1]
    with pytest.raises(CorruptOffsetsRecordError):
        list(read_batches(records))
