"""Log: appends, reads, rolling, lookups, retention, truncation, durability."""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest

from tickwheel.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
    LogAppendInfo,
    LogConfig,
    LogOffsetMetadata,
    LogStorageError,
    OffsetOutOfRangeError,
    UnexpectedAppendOffsetError,
)
from tickwheel.log._records import SegmentFile

from .batches import LOG_APPEND_TIME_FLAG, header_of, make_batch, split_batches, with_offsets
from .helpers import FakeClock

Opener = Callable[..., Log]


def _append_many(
    log: Log, count: int, *, value_bytes: int = 40, timestamp_ms: int = 1000
) -> list[bytes]:
    stored = []
    for i in range(count):
        batch = make_batch([bytes([i % 256]) * value_bytes], timestamp_ms=timestamp_ms + i)
        info = log.append_as_leader(batch, 1)
        stored.append(with_offsets(batch, info.first_offset, 1))
    return stored


def test_leader_append_reports_every_field(open_log: Opener) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"x"]), 0)
    one = make_batch([b"a", b"b"], timestamp_ms=1_000, timestamp_step_ms=5)
    two = make_batch([b"c"], timestamp_ms=900)
    info = log.append_as_leader(one + two, 3)
    assert type(info) is LogAppendInfo
    assert info == LogAppendInfo(
        first_offset=1,
        last_offset=3,
        num_messages=3,
        max_timestamp=1_005,
        log_append_time_ms=-1,
        log_start_offset=0,
        valid_bytes=len(one) + len(two),
        num_batches=2,
        duplicate=False,
    )
    end = log.log_end_offset_metadata
    assert type(end) is LogOffsetMetadata
    assert end == LogOffsetMetadata(4, 0, log.size_bytes)


def test_leader_assigns_consecutive_offsets_and_epoch(open_log: Opener) -> None:
    log = open_log()
    one = make_batch([b"a", b"b", b"c"], base_offset=999, leader_epoch=0)
    two = make_batch([b"d"], base_offset=5)
    info = log.append_as_leader(one + two, 7)
    assert (info.first_offset, info.last_offset, info.num_messages, info.num_batches) == (
        0,
        3,
        4,
        2,
    )
    assert info.valid_bytes == len(one) + len(two)
    stored = log.read(0, 10_000).records.read_bytes()
    assert stored == with_offsets(one, 0, 7) + with_offsets(two, 3, 7)
    for batch in split_batches(stored):
        assert crc32c.crc32c(batch[21:]) == struct.unpack_from(">I", batch, 17)[0]
    assert log.log_end_offset == 4
    assert log.log_end_offset_metadata.relative_position == len(stored)


def test_read_bounds_and_metadata(open_log: Opener) -> None:
    log = open_log()
    stored = _append_many(log, 5)
    size = len(stored[0])
    info = log.read(2, size * 2)
    assert info.records.read_bytes() == stored[2] + stored[3]
    assert info.fetch_offset_metadata.relative_position == 2 * size
    assert (info.log_start_offset, info.log_end_offset, info.high_watermark) == (0, 5, 0)
    # Cut at a batch boundary, never inside a batch.
    assert log.read(2, size * 2 - 1).records.read_bytes() == stored[2]
    at_end = log.read(5, 100)
    assert at_end.records.length == 0
    assert at_end.fetch_offset_metadata == log.log_end_offset_metadata
    with pytest.raises(OffsetOutOfRangeError) as raised:
        log.read(6, 100)
    assert raised.value.error_code == 1


def test_min_one_message(open_log: Opener) -> None:
    log = open_log()
    stored = _append_many(log, 2, value_bytes=500)
    assert log.read(0, 10).records.read_bytes() == stored[0]
    info = log.read(0, 10, min_one_message=False)
    assert info.records.length == 0
    assert info.first_entry_incomplete


def test_max_offset_hides_batches_at_and_above_it(open_log: Opener) -> None:
    log = open_log()
    stored = _append_many(log, 4)
    assert log.update_high_watermark(2) == 2
    assert log.read(0, 10_000, max_offset=log.high_watermark).records.read_bytes() == b"".join(
        stored[:2]
    )
    assert log.read(0, 10_000, max_offset=3).records.read_bytes() == b"".join(stored[:3])
    above = log.read(3, 10_000, max_offset=2)
    assert above.records.length == 0
    assert above.fetch_offset_metadata.message_offset == 3
    assert log.last_stable_offset == 2


def test_high_watermark_is_clamped_and_keeps_its_position(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    stored = _append_many(log, 6)
    assert log.update_high_watermark(100) == 6
    assert log.high_watermark_metadata == log.log_end_offset_metadata
    assert not log.maybe_increment_high_watermark(3)
    log.update_high_watermark(3)
    metadata = log.high_watermark_metadata
    base = max(b for b in log.segment_base_offsets if b <= 3)
    assert metadata.segment_base_offset == base
    position = sum(len(s) for s in stored[base:3])
    assert metadata.relative_position == position
    assert log.maybe_increment_high_watermark(4)
    assert log.high_watermark == 4


def test_segments_roll_by_bytes(open_log: Opener, log_dir: Path) -> None:
    log = open_log(LogConfig(segment_bytes=500))
    stored = _append_many(log, 20)
    per_segment = 500 // len(stored[0])
    assert log.segment_base_offsets == list(range(0, 20, per_segment))
    for base in log.segment_base_offsets:
        name = f"{base:020d}"
        assert (log_dir / f"{name}.log").stat().st_size <= 500
    for offset in range(20):
        assert split_batches(log.read(offset, 1).records.read_bytes()) == [stored[offset]]


def test_segments_roll_by_record_time(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_ms=1000))
    for timestamp in (0, 500, 1000, 1001, 1500, 2002):
        log.append_as_leader(make_batch([b"v"], timestamp_ms=timestamp), 0)
    # Kafka rolls when a batch is more than segment.ms newer than the segment's first.
    assert log.segment_base_offsets == [0, 3, 5]


def test_segments_roll_by_clock_without_timestamps(open_log: Opener, clock: FakeClock) -> None:
    log = open_log(LogConfig(segment_ms=1000))
    log.append_as_leader(make_batch([b"v"], timestamp_ms=-1), 0)
    clock.advance(1001)
    log.append_as_leader(make_batch([b"v"], timestamp_ms=-1), 0)
    assert log.segment_base_offsets == [0, 1]


def test_segments_roll_when_the_index_is_full(open_log: Opener) -> None:
    # Room for 3 offset entries but only 2 time entries (12 bytes each).
    log = open_log(LogConfig(segment_index_bytes=24, index_interval_bytes=0))
    _append_many(log, 7)
    # The first batch of a segment is never indexed: three batches fill two entries.
    assert log.segment_base_offsets == [0, 3, 6]


def test_explicit_roll_and_empty_active_segment(open_log: Opener) -> None:
    log = open_log()
    _append_many(log, 2)
    assert log.roll() == 2
    assert log.roll() == 2
    assert log.segment_base_offsets == [0, 2]
    assert log.log_end_offset_metadata.segment_base_offset == 2
    assert log.read(2, 100).records.length == 0


def test_fetch_metadata_sees_a_roll(open_log: Opener) -> None:
    log = open_log()
    _append_many(log, 2)
    fetch = log.read(2, 100).fetch_offset_metadata
    _append_many(log, 1)
    assert fetch.on_same_segment(log.log_end_offset_metadata)
    assert log.log_end_offset_metadata.position_diff(fetch) > 0
    log.roll()
    assert fetch.on_older_segment(log.log_end_offset_metadata)


def test_offset_for_timestamp(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_bytes=400, index_interval_bytes=50))
    timestamps = [100, 200, 150, 300, 300, 450, 400, 500, 600, 550]
    for i, timestamp in enumerate(timestamps):
        log.append_as_leader(make_batch([bytes([i]) * 30], timestamp_ms=timestamp), i)
    assert len(log.segment_base_offsets) > 2
    for target in range(50, 700, 25):
        expected = next((i for i, t in enumerate(timestamps) if t >= target), None)
        found = log.offset_for_timestamp(target)
        if expected is None:
            assert found is None
        else:
            assert found is not None
            assert (found.offset, found.timestamp, found.leader_epoch) == (
                expected,
                timestamps[expected],
                expected,
            )
    latest = log.offset_for_timestamp(LATEST_TIMESTAMP)
    earliest = log.offset_for_timestamp(EARLIEST_TIMESTAMP)
    largest = log.offset_for_timestamp(MAX_TIMESTAMP)
    assert latest is not None
    assert latest.offset == 10
    assert earliest is not None
    assert earliest.offset == 0
    assert largest is not None
    assert (largest.offset, largest.timestamp) == (8, 600)


def test_log_append_time(open_log: Opener, clock: FakeClock) -> None:
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(make_batch([b"a", b"b"], timestamp_ms=5), 2)
    assert info.log_append_time_ms == clock.now_ms
    stored = log.read(0, 1000).records.read_bytes()
    header = header_of(stored)
    assert header[5] & LOG_APPEND_TIME_FLAG
    assert header[8] == clock.now_ms
    assert header[7] == 5
    assert crc32c.crc32c(stored[21:]) == header[4]


def test_follower_appends_carried_offsets(open_log: Opener) -> None:
    log = open_log()
    first = make_batch([b"a", b"b"], base_offset=0, leader_epoch=3)
    second = make_batch([b"c"], base_offset=2, leader_epoch=4)
    info = log.append_as_follower(first + second)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 2, 3)
    assert log.read(0, 1000).records.read_bytes() == first + second
    assert log.read(2, 1000).records.read_bytes() == second


@pytest.mark.parametrize("base_offset", [2, 4])
def test_follower_rejects_offsets_that_do_not_follow(open_log: Opener, base_offset: int) -> None:
    log = open_log()
    log.append_as_follower(make_batch([b"a", b"b", b"c"], base_offset=0))
    with pytest.raises(UnexpectedAppendOffsetError) as raised:
        log.append_as_follower(make_batch([b"x", b"y"], base_offset=base_offset))
    assert (raised.value.first_offset, raised.value.last_offset) == (base_offset, base_offset + 1)
    assert log.log_end_offset == 3


def test_follower_restarts_inside_a_leader_batch(open_log: Opener) -> None:
    # The leader's log start fell inside a batch: Kafka's replica restarts its log at
    # the batch's base offset and appends it.
    log = open_log()
    log.truncate_fully_and_start_at(5)
    batch = make_batch([b"a", b"b", b"c"], base_offset=4)
    with pytest.raises(UnexpectedAppendOffsetError) as raised:
        log.append_as_follower(batch)
    log.truncate_fully_and_start_at(raised.value.first_offset)
    assert log.append_as_follower(batch).last_offset == 6


def test_truncate_to(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    stored = _append_many(log, 12)
    log.update_high_watermark(12)
    assert log.truncate_to(5)
    assert log.log_end_offset == 5
    assert log.high_watermark == 5
    assert all(base < 5 for base in log.segment_base_offsets)
    data = b"".join(
        log.read(base, 100_000).records.read_bytes() for base in log.segment_base_offsets
    )
    assert data == b"".join(stored[:5])
    assert not log.truncate_to(7)
    again = _append_many(log, 1)
    assert header_of(again[0])[0] == 5


def test_truncate_inside_a_batch_removes_the_whole_batch(open_log: Opener) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a", b"b"]), 0)
    log.append_as_leader(make_batch([b"c", b"d", b"e"]), 0)
    log.truncate_to(3)
    assert log.log_end_offset == 2


def test_truncate_fully(open_log: Opener) -> None:
    log = open_log()
    _append_many(log, 3)
    log.truncate_fully_and_start_at(40)
    assert (log.log_start_offset, log.log_end_offset, log.segment_base_offsets) == (40, 40, [40])
    assert log.append_as_leader(make_batch([b"z"]), 0).first_offset == 40


def test_delete_records_before(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    _append_many(log, 12)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(3)
    log.update_high_watermark(12)
    assert log.delete_records_before(7) == 7
    assert log.segment_base_offsets[0] <= 7 < log.segment_base_offsets[0] + 5
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 100)
    assert header_of(log.read(7, 1).records.read_bytes())[0] == 7
    assert log.delete_records_before(2) == 7


def test_retention_by_bytes_and_time(open_log: Opener, clock: FakeClock) -> None:
    log = open_log(LogConfig(segment_bytes=300, retention_bytes=700, retention_ms=-1))
    stored = _append_many(log, 20, timestamp_ms=clock.now_ms)
    assert log.apply_retention() == 0  # nothing is below the high watermark yet
    # 108-byte batches, two to a 300-byte segment: ten segments of 216 bytes.
    assert {len(batch) for batch in stored} == {108}
    assert log.segment_base_offsets == list(range(0, 20, 2))
    log.update_high_watermark(20)
    # As in Kafka, a segment goes only if the log stays at least retention.bytes without
    # it: six go (2160 - 6 * 216 = 864 >= 700), a seventh would leave 648.
    assert log.apply_retention() == 6
    assert log.segment_base_offsets == [12, 14, 16, 18]
    assert log.size_bytes == 4 * 216
    assert log.log_start_offset == 12
    assert log.read(log.log_start_offset, 1).records.read_bytes() == stored[log.log_start_offset]

    log.update_config(LogConfig(segment_bytes=300, retention_ms=1000))
    clock.advance(10_000)
    assert log.apply_retention() == 4
    # Everything expired: the active segment was rolled and the log is empty at its end.
    assert log.segment_base_offsets == [20]
    assert (log.log_start_offset, log.log_end_offset) == (20, 20)


def test_slice_survives_segment_deletion(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_bytes=300, retention_bytes=0))
    stored = _append_many(log, 10)
    info = log.read(0, 10_000)
    log.update_high_watermark(10)
    assert log.apply_retention() > 0
    assert log.log_start_offset > 0
    assert info.records.read_bytes() == b"".join(
        stored[: len(split_batches(info.records.read_bytes()))]
    )


def test_truncation_invalidates_slices_reaching_past_the_cut_and_only_those(
    open_log: Opener,
) -> None:
    # Two 108-byte batches to a segment: segments at offsets 0, 2, 4 and 6.
    log = open_log(LogConfig(segment_bytes=300))
    stored = _append_many(log, 7)
    assert log.segment_base_offsets == [0, 2, 4, 6]
    below = log.read(2, 10_000).records  # batches 2-3, a segment below the cut
    across = log.read(4, 10_000).records  # batches 4-5, the segment cut at offset 5
    above = log.read(6, 10_000).records  # batch 6, a segment deleted whole
    assert across.read_bytes() == stored[4] + stored[5]

    assert log.truncate_to(5)
    assert log.segment_base_offsets == [0, 2, 4]
    # The slice reaching past the cut reads fewer bytes than it was cut for...
    assert across.read_bytes() == stored[4]
    replacement = make_batch([b"new!" * 10], timestamp_ms=5000)
    assert log.append_as_leader(replacement, 2).first_offset == 5
    # ... and, once the log grows again, other batches at the same positions.
    assert across.read_bytes() == stored[4] + with_offsets(replacement, 5, 2)
    # The others keep their bytes: an unchanged segment, and an unlinked file.
    assert below.read_bytes() == stored[2] + stored[3]
    assert above.read_bytes() == stored[6]


def test_records_can_be_sent_with_sendfile(open_log: Opener) -> None:
    log = open_log()
    stored = _append_many(log, 5)
    records = log.read(1, 10_000).records
    left, right = socket.socketpair()
    with left, right:
        sent = os.sendfile(left.fileno(), records.fileno(), records.position, records.length)
        assert sent == records.length
        received = b""
        while len(received) < sent:
            received += right.recv(65536)
    assert received == b"".join(stored[1:])


def test_flush_messages_advances_the_recovery_point(open_log: Opener, log_dir: Path) -> None:
    log = open_log(LogConfig(flush_messages=3))
    _append_many(log, 2)
    assert log.recovery_point == 0
    _append_many(log, 1)
    assert log.recovery_point == 3
    checkpoint = (log_dir / "recovery-point-offset-checkpoint").read_text()
    assert checkpoint == "0\n1\ntopic 0 3\n"


def test_flush_ms_and_rolled_segments_flush_on_maybe_flush(
    open_log: Opener, clock: FakeClock
) -> None:
    log = open_log(LogConfig(flush_ms=1000))
    _append_many(log, 2)
    assert not log.maybe_flush()
    clock.advance(1000)
    assert log.maybe_flush()
    assert log.recovery_point == 2
    log.roll()
    assert log.maybe_flush()
    assert not log.maybe_flush()


def test_reopen_keeps_everything(open_log: Opener) -> None:
    config = LogConfig(segment_bytes=300, index_interval_bytes=50)
    log = open_log(config)
    stored = _append_many(log, 12)
    log.update_high_watermark(9)
    log.delete_records_before(7)
    bases = log.segment_base_offsets
    log.close()
    reopened = open_log(config)
    assert (reopened.log_start_offset, reopened.log_end_offset, reopened.high_watermark) == (
        7,
        12,
        9,
    )
    assert reopened.segment_base_offsets == bases
    assert reopened.recovery_point == 12
    for offset in range(7, 12):
        assert split_batches(reopened.read(offset, 1).records.read_bytes()) == [stored[offset]]


def test_closed_log_raises(open_log: Opener) -> None:
    log = open_log()
    log.close()
    log.close()
    with pytest.raises(LogStorageError) as raised:
        log.append_as_leader(make_batch([b"a"]), 0)
    assert raised.value.error_code == 56
    with pytest.raises(LogStorageError):
        log.read(0, 1)


def test_lookups_read_a_bounded_number_of_headers(
    open_log: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lookups bisect the sparse index and then read at most one index interval of
    # headers: the number of preads does not grow with the segment.
    log = open_log(LogConfig(index_interval_bytes=1024))
    stored = _append_many(log, 3000, value_bytes=30)
    reads: list[tuple[int, int]] = []
    real_read = SegmentFile.read

    def counting_read(self: SegmentFile, position: int, length: int) -> bytes:
        reads.append((position, length))
        return real_read(self, position, length)

    monkeypatch.setattr(SegmentFile, "read", counting_read)
    for offset in (0, 1, 1499, 2999):
        reads.clear()
        info = log.read(offset, len(stored[0]) * 3)
        assert split_batches(info.records.read_bytes()[: 3 * len(stored[0])])[0] == stored[offset]
        # One header scan for the start and one for the end boundary, plus read_bytes.
        assert len(reads) <= 3
    reads.clear()
    found = log.offset_for_timestamp(1000 + 2500)
    assert found is not None
    assert found.offset == 2500
    assert len(reads) <= 2


def test_concurrent_appends_and_reads_see_whole_batches(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_bytes=5000))
    done = threading.Event()
    errors: list[BaseException] = []

    def append() -> None:
        try:
            _append_many(log, 500)
        except BaseException as error:  # reported by the main thread
            errors.append(error)
        finally:
            done.set()

    writer = threading.Thread(target=append)
    writer.start()
    checked = 0

    def check_new_batches() -> int:
        """Check the batches from ``checked`` on; return the offset after them."""
        next_offset = checked
        for batch in split_batches(log.read(checked, 10_000).records.read_bytes()):
            header = header_of(batch)
            assert header[0] == next_offset
            assert crc32c.crc32c(batch[21:]) == header[4]
            next_offset = header[0] + header[6] + 1
        return next_offset

    # Read while the writer appends: every read sees whole, valid batches in order.
    while not done.is_set():
        checked = check_new_batches()
    writer.join()
    while checked < log.log_end_offset:
        checked = check_new_batches()
    assert not errors
    assert checked == 500


def test_retention_by_time_uses_file_time_without_timestamps(
    open_log: Opener, clock: FakeClock, log_dir: Path
) -> None:
    log = open_log(LogConfig(segment_bytes=300, retention_ms=60_000))
    for _ in range(10):
        log.append_as_leader(make_batch([b"x" * 40], timestamp_ms=-1), 0)
    log.update_high_watermark(10)
    first = log_dir / f"{0:020d}.log"
    modified_s = first.stat().st_mtime
    assert log.apply_retention(int(modified_s * 1000) + 30_000) == 0
    assert log.apply_retention(int(modified_s * 1000) + 61_000) > 0
