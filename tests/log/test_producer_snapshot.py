"""Producer-state snapshots: Kafka's byte layout, and how the log takes and loads them."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest

from tickwheel.log import AppendOrigin, Log, LogConfig, build_end_txn_marker
from tickwheel.log._producer_snapshot import SnapshotEntry, decode_snapshot, encode_snapshot

from .batches import TRANSACTIONAL_FLAG, make_batch
from .helpers import START_MS

Opener = Callable[..., Log]
ENTRY = SnapshotEntry(
    producer_id=42,
    producer_epoch=3,
    last_sequence=9,
    last_offset=120,
    offset_delta=4,
    timestamp=START_MS,
    coordinator_epoch=7,
    current_txn_first_offset=100,
)


def test_snapshot_bytes_are_kafkas() -> None:
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 42, 3, 9, 120, 4, START_MS, 7, 100)
    expected = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert encode_snapshot([ENTRY]) == expected
    assert len(expected) == 10 + 46
    assert decode_snapshot(expected) == [ENTRY]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-1],
        lambda data: data[:20] + bytes([data[20] ^ 1]) + data[21:],
        lambda data: b"\x00\x02" + data[2:],
    ],
)
def test_a_damaged_snapshot_is_refused(damage: Callable[[bytes], bytes]) -> None:
    with pytest.raises(ValueError, match="snapshot"):
        decode_snapshot(damage(encode_snapshot([ENTRY])))


def _idempotent(producer_id: int, sequence: int) -> bytes:
    return make_batch([b"v"], producer_id=producer_id, producer_epoch=0, base_sequence=sequence)


def test_snapshots_at_roll_and_close_are_loaded_on_open(open_log: Opener, log_dir: Path) -> None:
    log = open_log()
    log.append_as_leader(_idempotent(1, 0), 0)
    txn = make_batch(
        [b"t"], producer_id=2, producer_epoch=0, base_sequence=0, attributes=TRANSACTIONAL_FLAG
    )
    log.append_as_leader(txn, 0)
    log.roll()
    assert (log_dir / "00000000000000000002.snapshot").exists()
    # Forgotten by expiration: only a snapshot can remember that after a restart. As
    # in Kafka, a snapshot is written only once the log end moved since the last one.
    assert log.remove_expired_producers(START_MS + 10, 10) == 1
    log.append_as_leader(make_batch([b"plain"]), 0)
    log.update_high_watermark(log.log_end_offset)
    log.close()
    assert (log_dir / "00000000000000000003.snapshot").exists()
    reopened = open_log()
    assert [p.producer_id for p in reopened.active_producers()] == [2]
    assert reopened.last_stable_offset == 1
    reopened.append_as_leader(
        build_end_txn_marker(2, 0, 0, False, START_MS), 0, AppendOrigin.COORDINATOR
    )
    reopened.update_high_watermark(reopened.log_end_offset)
    assert reopened.read(0, 1 << 20, max_offset=4, collect_aborted=True).aborted_transactions == [
        (2, 1)
    ]
    reopened.close()
    # Damaged snapshots are deleted and passed over: with none left, the full replay
    # finds producer 1 again.
    for snapshot in log_dir.glob("*.snapshot"):
        snapshot.write_bytes(snapshot.read_bytes()[:-3])
    again = open_log()
    assert list(log_dir.glob("*.snapshot")) == []
    assert sorted(p.producer_id for p in again.active_producers()) == [1, 2]
    assert again.read(0, 1 << 20, max_offset=4, collect_aborted=True).aborted_transactions == [
        (2, 1)
    ]


def test_truncation_and_log_start_moves_delete_snapshots(open_log: Opener, log_dir: Path) -> None:
    log = open_log(LogConfig())
    for sequence in range(3):
        log.append_as_leader(_idempotent(1, sequence), 0)
        log.roll()
    assert sorted(path.name[:20] for path in log_dir.glob("*.snapshot")) == [
        "00000000000000000001",
        "00000000000000000002",
        "00000000000000000003",
    ]
    log.truncate_to(2)
    assert sorted(int(path.name[:20]) for path in log_dir.glob("*.snapshot")) == [1, 2]
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(2)
    assert sorted(int(path.name[:20]) for path in log_dir.glob("*.snapshot")) == [2]
    log.truncate_fully_and_start_at(10)
    assert list(log_dir.glob("*.snapshot")) == []
