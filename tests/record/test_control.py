"""Transaction markers: the 78-byte control batch, byte for byte, and its parsing."""

from __future__ import annotations

import struct

import crc32c
import pytest

from tickwheel.bench._batches import make_batch
from tickwheel.record import (
    CONTROL_FLAG_MASK,
    TRANSACTIONAL_FLAG_MASK,
    ControlType,
    EndTxnMarker,
    build_end_txn_marker,
    parse_batches,
    parse_end_txn_marker,
    parse_header,
    read_control_batch,
)


def _expected_marker(pid: int, epoch: int, coordinator_epoch: int, type_id: int, ts: int) -> bytes:
    """The plan's §3.1 table, written out field by field."""
    record = (
        bytes([0x20, 0x00, 0x00, 0x00, 0x08])
        + struct.pack(">hh", 0, type_id)
        + bytes([0x0C])
        + struct.pack(">hi", 0, coordinator_epoch)
        + bytes([0x00])
    )
    after_crc = struct.pack(">hiqqqhii", 0x30, 0, ts, ts, pid, epoch, -1, 1) + record
    return (
        struct.pack(">qiib", 0, 66, -1, 2) + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc
    )


@pytest.mark.parametrize(("commit", "type_id"), [(True, 1), (False, 0)])
def test_marker_bytes_match_kafkas_layout(commit: bool, type_id: int) -> None:
    batch = build_end_txn_marker(4242, 7, 3, commit, 1_700_000_000_123)
    assert len(batch) == 78
    assert batch == _expected_marker(4242, 7, 3, type_id, 1_700_000_000_123)
    # It passes the log's own framing and CRC checks.
    [(_, header)] = parse_batches(memoryview(batch))
    assert header.attributes == TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK
    assert header.batch_length == 66


@pytest.mark.parametrize("commit", [True, False])
def test_marker_round_trips(commit: bool) -> None:
    batch = build_end_txn_marker(1, 2, 9, commit, 5)
    marker = read_control_batch(batch, parse_header(batch, 0))
    expected_type = ControlType.COMMIT if commit else ControlType.ABORT
    assert marker == EndTxnMarker(expected_type, 9)


def test_parse_reads_the_record_key_and_value() -> None:
    assert parse_end_txn_marker(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05") == EndTxnMarker(
        ControlType.COMMIT, 5
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"\x00\x00", b"\x00\x00\x00\x00\x00\x05"),
        (b"\xff\xff\x00\x01", b"\x00\x00\x00\x00\x00\x05"),
        (b"\x00\x00\x00\x02", b"\x00\x00\x00\x00\x00\x05"),
        (b"\x00\x00\x00\x01", None),
        (b"\x00\x00\x00\x01", b"\x00\x00"),
    ],
)
def test_parse_rejects_a_bad_marker(key: bytes, value: bytes | None) -> None:
    with pytest.raises(ValueError, match=r"control record|marker"):
        parse_end_txn_marker(key, value)


def test_an_empty_control_batch_carries_no_marker() -> None:
    batch = make_batch(
        [],
        attributes=TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK,
        producer_id=1,
        producer_epoch=0,
        records_count=0,
        last_offset_delta=0,
    )
    assert read_control_batch(batch, parse_header(batch, 0)) is None


def test_a_marker_with_a_timestamp_delta_is_read_with_varints() -> None:
    # Another writer may give the record a timestamp delta: 300, a two-byte varint.
    record_body = (
        bytes([0x00, 0xD8, 0x04, 0x00, 0x08])
        + struct.pack(">hh", 0, 1)
        + bytes([0x0C])
        + struct.pack(">hi", 0, 11)
        + bytes([0x00])
    )
    record = bytes([len(record_body) * 2]) + record_body
    after_crc = struct.pack(">hiqqqhii", 0x30, 0, 5, 305, 1, 0, -1, 1) + record
    batch = (
        struct.pack(">qiib", 0, 49 + len(record), -1, 2)
        + struct.pack(">I", crc32c.crc32c(after_crc))
        + after_crc
    )
    [(_, header)] = parse_batches(memoryview(batch))
    assert read_control_batch(batch, header) == EndTxnMarker(ControlType.COMMIT, 11)


def test_a_control_batch_without_a_key_is_refused() -> None:
    batch = make_batch(
        [b"\x00\x00\x00\x00\x00\x07"],
        attributes=TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK,
        producer_id=1,
        producer_epoch=0,
    )
    with pytest.raises(ValueError, match="control record key"):
        read_control_batch(batch, parse_header(batch, 0))
