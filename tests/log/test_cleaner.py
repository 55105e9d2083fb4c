"""The log cleaner on real logs, driven directly with a manual clock."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import crc32c
import pytest

from tickwheel.bench._batches import make_keyed_batch
from tickwheel.log import AppendOrigin, InvalidRecordError, Log, LogConfig, build_end_txn_marker
from tickwheel.log._cleaner import (
    DELETE_HORIZON_FLAG_MASK,
    CleanerConfig,
    LogCleaner,
    clean,
    cleaning_job,
    plan_cleaning,
    swap_cleaned,
    write_cleaned,
)
from tickwheel.record import COMPRESSION_CODEC_MASK, decode_records, parse_header

from .batches import split_batches
from .helpers import START_MS, FakeClock, crash

COMPACT = LogConfig(
    cleanup_policy="compact",
    segment_bytes=4096,
    min_cleanable_dirty_ratio=0.0,
    delete_retention_ms=1000,
)
Records = list[tuple[int, bytes | None, bytes | None]]


def read_all(log: Log) -> Records:
    """Every record of the log as (offset, key, value), oldest first."""
    out: Records = []
    for batch in read_batches(log):
        header = parse_header(batch, 0)
        for record in decode_records(batch, header):
            out.append((header.base_offset + record.offset_delta, record.key, record.value))
    return out


def read_batches(log: Log) -> list[bytes]:
    """Every batch of the log, across segments."""
    batches: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30).records.read_bytes()
        if not data:
            break
        batches += split_batches(data)
        offset = parse_header(batches[-1], 0).last_offset + 1
    return batches


def latest(records: Records) -> dict[bytes, bytes]:
    """The latest live value of each key, applying records in offset order."""
    view: dict[bytes, bytes] = {}
    for _, key, value in records:
        assert key is not None
        if value is None:
            view.pop(key, None)
        else:
            view[key] = value
    return view


def test_1001_records_over_10_keys_compact_to_10(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log.open(tmp_path / "t-0", COMPACT, clock_ms=clock)
    for i in range(1001):
        log.append_as_leader(make_keyed_batch([(b"k%d" % (i % 10), b"v%d" % i)]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    before = read_all(log)
    stats = clean(log, clock())
    assert stats is not None
    after = read_all(log)
    assert len(before) == 1001
    assert [offset for offset, _, _ in after] == list(range(991, 1001))
    assert latest(after) == latest(before)
    assert log.cleaned_offset == 1001
    assert log.log_end_offset == 1001
    # Offsets are never renumbered: every record keeps the offset it had.
    assert set(after) <= set(before)
    assert stats.bytes_written < stats.bytes_read
    # Nothing dirty is left: a second pass has nothing to do.
    assert clean(log, clock()) is None
    log.close()
    reopened = Log.open(tmp_path / "t-0", COMPACT, clock_ms=clock)
    assert read_all(reopened) == after
    assert reopened.cleaned_offset == 1001
    reopened.close()


def test_active_segment_and_high_watermark_bound_the_dirty_section(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log.open(tmp_path / "t-0", COMPACT, clock_ms=clock)
    for i in range(20):
        log.append_as_leader(make_keyed_batch([(b"k", b"%d" % i)]), 0)
        if i % 5 == 4:
            log.roll()
    log.update_high_watermark(10)
    plan = plan_cleaning(log.cleaning_view(), clock())
    assert plan.first_uncleanable_offset == 10
    clean(log, clock())
    records = read_all(log)
    # Below the high watermark only the latest record of k (offset 9) is left.
    assert [offset for offset, _, _ in records] == [9, *range(10, 20)]
    log.close()


def test_tombstones_stay_for_delete_retention_after_their_first_cleaning(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log.open(tmp_path / "t-0", COMPACT, clock_ms=clock)
    log.append_as_leader(make_keyed_batch([(b"a", b"1"), (b"b", b"1")]), 0)
    log.append_as_leader(make_keyed_batch([(b"a", None)]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean(log, clock())
    assert read_all(log) == [(1, b"b", b"1"), (2, b"a", None)]
    batches = read_batches(log)
    horizon = parse_header(batches[-1], 0)
    assert horizon.attributes & DELETE_HORIZON_FLAG_MASK
    assert horizon.base_timestamp == clock() + COMPACT.delete_retention_ms
    # New dirty data forces another pass before the horizon: the tombstone stays.
    log.append_as_leader(make_keyed_batch([(b"c", b"1")]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clock.advance(COMPACT.delete_retention_ms - 1)
    clean(log, clock())
    assert (2, b"a", None) in read_all(log)
    # Past the horizon the next pass drops it.
    log.append_as_leader(make_keyed_batch([(b"d", b"1")]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clock.advance(1)
    clean(log, clock())
    assert [key for _, key, _ in read_all(log)] == [b"b", b"c", b"d"]
    log.close()


def test_min_compaction_lag_keeps_young_segments_and_max_lag_forces(tmp_path: Path) -> None:
    clock = FakeClock()
    config = LogConfig(
        cleanup_policy="compact",
        min_cleanable_dirty_ratio=1.0,
        min_compaction_lag_ms=10_000,
        max_compaction_lag_ms=60_000,
    )
    log = Log.open(tmp_path / "t-0", config, clock_ms=clock)
    for i in range(4):
        log.append_as_leader(make_keyed_batch([(b"k", b"%d" % i)], timestamp_ms=clock()), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    # Too young for min.compaction.lag.ms: nothing is cleanable.
    assert plan_cleaning(log.cleaning_view(), clock()).dirty_bytes == 0
    clock.advance(10_001)
    plan = plan_cleaning(log.cleaning_view(), clock())
    # Old enough, but a ratio can never exceed 1.0: not cleanable until overdue.
    assert plan.dirty_bytes > 0
    assert not plan.cleanable
    assert clean(log, clock()) is None
    clock.advance(50_000)
    assert plan_cleaning(log.cleaning_view(), clock()).overdue
    assert clean(log, clock()) is not None
    assert read_all(log) == [(3, b"k", b"3")]
    log.close()


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_cleaned_and_keep_their_codec(tmp_path: Path, codec: int) -> None:
    clock = FakeClock()
    log = Log.open(tmp_path / "t-0", COMPACT, clock_ms=clock)
    for round_ in range(3):
        batch = [(b"k%d" % i, b"v%d-%d" % (i, round_) * 20) for i in range(8)]
        log.append_as_leader(make_keyed_batch(batch, codec=codec), 0)
    log.append_as_leader(make_keyed_batch([(b"k0", b"new"), (b"k1", b"new")], codec=codec), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    before = read_all(log)
    clean(log, clock())
    after = read_all(log)
    assert latest(after) == latest(before)
    assert len(after) == 8
    for batch in read_batches(log):
        header = parse_header(batch, 0)
        if header.records_count:
            assert header.attributes & COMPRESSION_CODEC_MASK == codec
    log.close()


def test_a_compacted_log_refuses_records_without_a_key(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", COMPACT)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(make_keyed_batch([(b"k", b"v"), (None, b"v")]), 0)
    assert log.log_end_offset == 0
    log.close()


def test_an_idempotent_producers_last_batch_survives_empty(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log.open(tmp_path / "t-0", COMPACT, clock_ms=clock)
    for sequence in range(3):
        batch = make_keyed_batch(
            [(b"p", b"%d" % sequence)], producer_id=7, producer_epoch=0, base_sequence=sequence
        )
        log.append_as_leader(batch, 0)
    log.append_as_leader(make_keyed_batch([(b"p", b"plain")]), 0)
    log.append_as_leader(make_keyed_batch([(b"q", b"last")]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean(log, clock())
    headers = [parse_header(b, 0) for b in read_batches(log)]
    producer_batches = [h for h in headers if h.producer_id == 7]
    assert [(h.base_offset, h.records_count, h.base_sequence) for h in producer_batches] == [
        (2, 0, 2)
    ]
    # The producer's sequence survived: its next batch must follow sequence 2.
    follow = make_keyed_batch([(b"p", b"3")], producer_id=7, producer_epoch=0, base_sequence=3)
    assert log.append_as_leader(follow, 0).first_offset == 5
    log.close()


def test_small_cleaned_segments_merge_up_to_segment_bytes(tmp_path: Path) -> None:
    clock = FakeClock()
    config = LogConfig(cleanup_policy="compact", segment_bytes=2000, min_cleanable_dirty_ratio=0.0)
    log = Log.open(tmp_path / "t-0", config, clock_ms=clock)
    for i in range(60):
        log.append_as_leader(make_keyed_batch([(b"k%d" % (i % 3), b"x" * 60)]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segment_base_offsets) == 5
    # Groups are made from the sizes before cleaning (as Kafka does): full segments
    # stay apart the first time, and the small cleaned ones merge on the next pass.
    clean(log, clock())
    assert len(log.segment_base_offsets) == 5
    log.append_as_leader(make_keyed_batch([(b"k0", b"y")]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean(log, clock())
    assert log.segment_base_offsets == [0, 61]
    assert [offset for offset, _, _ in read_all(log)] == [58, 59, 60]
    log.close()


def test_retention_leaves_a_compact_only_log_alone(tmp_path: Path) -> None:
    clock = FakeClock()
    for policy, kept in (("compact", 4), ("compact,delete", 1), ("delete", 1)):
        config = LogConfig(cleanup_policy=policy, segment_bytes=200, retention_ms=1000)
        log = Log.open(tmp_path / f"{policy}-0", config, clock_ms=clock)
        for i in range(3):
            log.append_as_leader(make_keyed_batch([(b"k", b"%d" % i)], timestamp_ms=clock()), 0)
            log.roll()
        log.update_high_watermark(log.log_end_offset)
        log.apply_retention(clock() + 10_000)
        assert len(log.segment_base_offsets) == kept, policy
        log.close()


def test_config_validation() -> None:
    with pytest.raises(ValueError, match=r"cleanup\.policy"):
        LogConfig(cleanup_policy="compact,shred")
    with pytest.raises(ValueError, match=r"dirty\.ratio"):
        LogConfig(min_cleanable_dirty_ratio=1.5)
    with pytest.raises(ValueError, match="must not exceed"):
        LogConfig(min_compaction_lag_ms=10, max_compaction_lag_ms=5)
    config = LogConfig.from_properties(
        {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.25"}
    )
    assert (config.compacted, config.retention_deletes) == (True, True)
    assert config.min_cleanable_dirty_ratio == 0.25


def test_log_cleaner_threads_clean_and_stop(tmp_path: Path) -> None:
    clock = FakeClock()
    logs = []
    for partition in range(2):
        log = Log.open(tmp_path / f"t-{partition}", COMPACT, clock_ms=clock)
        for i in range(50):
            log.append_as_leader(make_keyed_batch([(b"k%d" % (i % 2), b"v")]), 0)
        log.roll()
        log.update_high_watermark(log.log_end_offset)
        logs.append(log)
    cleaner = LogCleaner(CleanerConfig(threads=2, backoff_ms=60_000), lambda: logs, clock_ms=clock)
    assert cleaner.clean_once()
    assert cleaner.metrics.cleaner_recopy_percent < 100
    assert cleaner.metrics.max_dirty_percent == 100
    cleaner.start()
    # The threads clean the other log, then back off; stop interrupts the backoff.
    for log in logs:
        while log.cleaned_offset < log.log_end_offset:
            os.sched_yield()
    cleaner.stop()
    assert [len(read_all(log)) for log in logs] == [2, 2]
    for log in logs:
        log.close()


def test_a_crash_after_the_swap_started_finishes_it_on_open(tmp_path: Path) -> None:
    clock = FakeClock(START_MS)
    log = Log.open(tmp_path / "t-0", COMPACT, clock_ms=clock)
    for i in range(30):
        log.append_as_leader(make_keyed_batch([(b"k%d" % (i % 4), b"%d" % i)]), 0)
        if i % 10 == 9:
            log.roll()
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    before = latest(read_all(log))
    directory = tmp_path / "t-0"
    # A swap cut after the cleaned log file became a .swap and one old segment went.
    clean(log, clock())
    cleaned = (directory / "00000000000000000000.log").read_bytes()
    crash(log)
    (directory / "00000000000000000000.log").unlink()
    (directory / "00000000000000000000.log.swap").write_bytes(cleaned)
    (directory / "00000000000000000010.log").write_bytes(b"")
    reopened = Log.open(directory, COMPACT, clock_ms=clock)
    assert latest(read_all(reopened)) == before
    assert reopened.segment_base_offsets == [0, 30]
    assert not list(directory.glob("*.swap"))
    reopened.close()


def test_a_slice_read_before_a_swap_keeps_its_bytes(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log.open(tmp_path / "t-0", COMPACT, clock_ms=clock)
    for i in range(20):
        log.append_as_leader(make_keyed_batch([(b"k", b"%d" % i)]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    in_flight = log.read(0, 1 << 20).records
    before = in_flight.read_bytes()
    clean(log, clock())
    # The old segment was unlinked by the swap; the slice still reads its file.
    assert in_flight.read_bytes() == before
    assert len(read_all(log)) == 1
    log.close()


def test_a_compacted_follower_accepts_the_leaders_gaps(tmp_path: Path) -> None:
    clock = FakeClock()
    leader = Log.open(tmp_path / "l-0", COMPACT, clock_ms=clock)
    for i in range(10):
        leader.append_as_leader(make_keyed_batch([(b"k%d" % (i % 2), b"%d" % i)]), 0)
    leader.roll()
    leader.update_high_watermark(leader.log_end_offset)
    clean(leader, clock())
    follower = Log.open(tmp_path / "f-0", COMPACT, clock_ms=clock)
    for batch in read_batches(leader):
        follower.append_as_follower(batch)
    assert read_all(follower) == read_all(leader)
    assert follower.log_end_offset == leader.log_end_offset
    leader.close()
    follower.close()


def test_a_followers_gaps_survive_a_restart_after_compaction_is_turned_off(
    tmp_path: Path,
) -> None:
    """The gaps a compacted leader left are not corruption, even once the topic is
    ``delete`` again: the follower wrote its cleaner checkpoint before the first gap,
    and recovery keeps every segment."""
    clock = FakeClock()
    leader = Log.open(tmp_path / "l-0", COMPACT, clock_ms=clock)
    for i in range(40):
        leader.append_as_leader(make_keyed_batch([(b"k%d" % (i % 2), b"%d" % i)]), 0)
        if i % 10 == 9:
            leader.roll()
    leader.update_high_watermark(leader.log_end_offset)
    clean(leader, clock())
    follower = Log.open(tmp_path / "f-0", COMPACT, clock_ms=clock)
    for batch in read_batches(leader):
        follower.append_as_follower(batch)
    replicated = read_all(follower)
    assert [offset for offset, _, _ in replicated] != list(range(len(replicated)))  # gaps
    assert (tmp_path / "f-0" / "cleaner-offset-checkpoint").exists()
    follower.close()
    leader.close()
    reopened = Log.open(tmp_path / "f-0", LogConfig(segment_bytes=4096), clock_ms=clock)
    assert read_all(reopened) == replicated
    assert reopened.log_end_offset == 40
    reopened.close()


def test_the_cleaner_checkpoint_never_passes_the_log_end(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", COMPACT, clock_ms=FakeClock())
    for i in range(5):
        log.append_as_leader(make_keyed_batch([(b"k", b"%d" % i)]), 0)
    log.mark_cleaned(9)  # a truncation since the plan cut the log below that
    assert log.cleaned_offset == 5
    log.close()


def test_a_swap_is_refused_when_the_segments_changed_since_the_plan(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log.open(tmp_path / "t-0", COMPACT, clock_ms=clock)
    for i in range(30):
        log.append_as_leader(make_keyed_batch([(b"k%d" % (i % 3), b"%d" % i)]), 0)
        if i % 10 == 9:
            log.roll()
    log.update_high_watermark(log.log_end_offset)
    plan = plan_cleaning(log.cleaning_view(), clock())
    written = write_cleaned(cleaning_job(plan, clock(), 1 << 20, 0.9, 1 << 16))
    assert written.groups == ((0, 10, 20),)
    # DeleteRecords removes the first segment while the cleaning was off the lock.
    log.delete_records_before(10)
    assert swap_cleaned(log, plan, written) is None  # nothing swapped: the caller backs off
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    assert log.cleaned_offset == 0
    assert [offset for offset, _, _ in read_all(log)] == list(range(10, 30))
    log.close()


def test_stop_kills_a_worker_in_the_middle_of_a_cleaning(tmp_path: Path) -> None:
    clock = FakeClock()
    config = LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    log = Log.open(tmp_path / "t-0", config, clock_ms=clock)
    value = b"v" * 1000
    for i in range(4000):
        batch = [(b"k%d" % ((i * 16 + j) % 5000), value) for j in range(16)]
        log.append_as_leader(make_keyed_batch(batch), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    before = read_all(log)
    cleaner = LogCleaner(CleanerConfig(backoff_ms=60_000), lambda: [log], clock_ms=clock)
    cleaner.start()
    deadline = time.monotonic() + 30
    while not cleaner._workers:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    started = time.monotonic()
    cleaner.stop()
    assert time.monotonic() - started < 5
    # A worker killed by stop is no failure of the log.
    assert cleaner.metrics.uncleanable_partitions_count == 0
    # Cut or not, the log holds the same latest values; leftover .cleaned files go on open.
    assert latest(read_all(log)) == latest(before)
    log.close()
    reopened = Log.open(tmp_path / "t-0", config, clock_ms=clock)
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    reopened.close()


def test_a_worker_whose_broker_died_exits(tmp_path: Path) -> None:
    """A SIGKILLed broker leaves its cleaner worker an orphan: the worker exits by
    itself rather than go on writing ``.cleaned`` files into a recovered log. Here its
    stdin stays open (a forked child of the dead parent holds it), as when the job was
    already sent, so only the orphan check can end it."""
    parent_code = (
        "import os, sys, time\n"
        "from tickwheel.log._cleaner import _start_worker\n"
        "worker = _start_worker()\n"
        "holder = os.fork()\n"
        "if holder == 0:\n"
        "    time.sleep(60)\n"
        "    os._exit(0)\n"
        "print(worker.pid, holder, flush=True)\n"
        "time.sleep(60)\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True
    ) as parent:
        try:
            assert parent.stdout is not None
            worker_pid, holder_pid = map(int, parent.stdout.readline().split())
        finally:
            parent.kill()
    try:
        deadline = time.monotonic() + 10
        while _alive(worker_pid):
            assert time.monotonic() < deadline, "the orphaned worker is still running"
            time.sleep(0.05)
    finally:
        os.kill(holder_pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _transactional(batch: bytes) -> bytes:
    """``batch`` with the transactional attribute set and its CRC recomputed."""
    patched = bytearray(batch)
    patched[22] |= 0x10
    struct.pack_into(">I", patched, 17, crc32c.crc32c(bytes(patched[21:])))
    return bytes(patched)


def test_the_lso_bounds_cleaning_and_aborted_records_never_shadow(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log.open(tmp_path / "t-0", COMPACT, clock_ms=clock)
    log.append_as_leader(make_keyed_batch([(b"k", b"committed")]), 0)
    aborted = make_keyed_batch(
        [(b"k", b"aborted")], producer_id=7, producer_epoch=0, base_sequence=0
    )
    log.append_as_leader(_transactional(aborted), 0)
    log.append_as_leader(
        build_end_txn_marker(7, 0, 0, False, START_MS), 0, AppendOrigin.COORDINATOR
    )
    log.roll()
    open_txn = make_keyed_batch([(b"j", b"open")], producer_id=8, producer_epoch=0, base_sequence=0)
    log.append_as_leader(_transactional(open_txn), 0)
    log.append_as_leader(make_keyed_batch([(b"j", b"later")]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3
    plan = plan_cleaning(log.cleaning_view(), clock())
    assert plan.first_uncleanable_offset == 3
    clean(log, clock())
    records = read_all(log)
    # The aborted value did not shadow the committed one: both stay (read_committed
    # readers skip the aborted one), and the open transaction's segment is untouched.
    assert [(offset, value) for offset, _, value in records] == [
        (0, b"committed"),
        (1, b"aborted"),
        (2, b"\x00" * 6),  # the ABORT marker's value: version 0, coordinator epoch 0
        (3, b"open"),
        (4, b"later"),
    ]
    assert log.read(0, 1 << 20, max_offset=3, collect_aborted=True).aborted_transactions == [(7, 1)]
    log.close()
