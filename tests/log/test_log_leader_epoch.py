"""Log and its leader epoch cache: appends, truncation, log start moves, reopening, crashes."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tickwheel.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    Log,
    LogConfig,
    LogStorageError,
)
from tickwheel.log._leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    LeaderEpochFileCache,
    parse_leader_epoch_checkpoint,
)

from .batches import make_batch
from .helpers import FakeClock, crash

Opener = Callable[..., Log]
UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def _records(count: int) -> bytes:
    return make_batch([b"v"] * count)


def _file_entries(log: Log) -> tuple[EpochEntry, ...]:
    return parse_leader_epoch_checkpoint(
        (Path(log.dir_path) / LEADER_EPOCH_CHECKPOINT).read_bytes()
    )


def _epochs_0_0_1_3(log: Log) -> None:
    """Leader appends at epochs 0, 0, 1, 3 of 2, 3, 4 and 1 records: offsets 0, 2, 5, 9."""
    for epoch, count in [(0, 2), (0, 3), (1, 4), (3, 1)]:
        log.append_as_leader(_records(count), epoch)


EPOCHS_0_0_1_3 = (EpochEntry(0, 0), EpochEntry(1, 5), EpochEntry(3, 9))


def test_a_new_partition_writes_kafkas_empty_checkpoint(open_log: Opener, log_dir: Path) -> None:
    log = open_log()
    assert log.leader_epoch_entries == ()
    assert log.latest_epoch is None
    assert (log_dir / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n0\n"
    assert log.end_offset_for_epoch(0) == UNDEFINED


def test_leader_appends_record_each_new_epoch_where_it_starts(open_log: Opener) -> None:
    log = open_log()
    _epochs_0_0_1_3(log)
    assert log.leader_epoch_entries == EPOCHS_0_0_1_3
    assert log.latest_epoch == 3
    assert _file_entries(log) == EPOCHS_0_0_1_3
    assert log.end_offset_for_epoch(0) == (0, 5)
    assert log.end_offset_for_epoch(1) == (1, 9)
    assert log.end_offset_for_epoch(2) == (1, 9)
    assert log.end_offset_for_epoch(3) == (3, 10)
    assert log.end_offset_for_epoch(4) == UNDEFINED
    assert log.end_offset_for_epoch(UNDEFINED_EPOCH) == UNDEFINED


def test_the_cache_survives_a_clean_reopen(open_log: Opener) -> None:
    log = open_log()
    _epochs_0_0_1_3(log)
    log.close()
    assert open_log().leader_epoch_entries == EPOCHS_0_0_1_3


def test_the_cache_survives_a_crash(open_log: Opener) -> None:
    log = open_log()
    _epochs_0_0_1_3(log)
    crash(log)
    reopened = open_log()
    assert reopened.leader_epoch_entries == EPOCHS_0_0_1_3
    assert reopened.end_offset_for_epoch(3) == (3, 10)


def test_a_crash_that_cuts_the_tail_drops_the_epochs_it_began(
    open_log: Opener, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log()
    _epochs_0_0_1_3(log)
    log.flush()
    log.append_as_leader(_records(2), 4)
    log.append_as_leader(_records(1), 5)
    crash(log)
    # The unflushed batches of epochs 4 and 5 lose their last bytes: recovery cuts
    # the log at epoch 4's batch, and the cache with it.
    segment = sorted(log_dir.glob("*.log"))[-1]
    segment.write_bytes(segment.read_bytes()[:-5])
    with caplog.at_level(logging.WARNING):
        reopened = open_log()
    assert reopened.log_end_offset == 12
    assert reopened.leader_epoch_entries == (*EPOCHS_0_0_1_3, EpochEntry(4, 10))
    assert _file_entries(reopened) == reopened.leader_epoch_entries
    assert not [r for r in caplog.records if r.name == "tickwheel.log._leader_epoch"]


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(None, id="missing"),
        pytest.param(b"0\n3\n0 0\n1 5\n3", id="torn"),
        pytest.param(b"0\n1\n7 0\n", id="wrong"),
    ],
)
def test_open_rebuilds_a_missing_or_bad_file_from_the_batches(
    open_log: Opener, log_dir: Path, content: bytes | None
) -> None:
    log = open_log()
    _epochs_0_0_1_3(log)
    log.close()
    path = log_dir / LEADER_EPOCH_CHECKPOINT
    if content is None:
        path.unlink()
    else:
        path.write_bytes(content)
    reopened = open_log()
    assert reopened.leader_epoch_entries == EPOCHS_0_0_1_3
    assert _file_entries(reopened) == EPOCHS_0_0_1_3


def test_truncation_drops_the_epochs_past_the_new_end(open_log: Opener) -> None:
    log = open_log()
    _epochs_0_0_1_3(log)
    # Offset 7 is inside epoch 1's batch 5..8, which goes whole: the log ends at 5.
    assert log.truncate_to(7)
    assert log.log_end_offset == 5
    assert log.leader_epoch_entries == (EpochEntry(0, 0),)
    assert _file_entries(log) == (EpochEntry(0, 0),)
    assert log.end_offset_for_epoch(0) == (0, 5)
    assert log.end_offset_for_epoch(1) == UNDEFINED


def test_emptying_the_log_empties_the_cache(open_log: Opener) -> None:
    log = open_log()
    _epochs_0_0_1_3(log)
    log.truncate_fully_and_start_at(20)
    assert log.leader_epoch_entries == ()
    _epochs_0_0_1_3(log)
    log.truncate_to(0)
    assert log.leader_epoch_entries == ()
    assert _file_entries(log) == ()


def test_an_epoch_begun_without_batches_answers_until_a_truncation_drops_it(
    open_log: Opener,
) -> None:
    log = open_log()
    _epochs_0_0_1_3(log)
    # Kafka's makeLeader: the new epoch starts at the log end before any append.
    log.maybe_assign_epoch_start_offset(5, log.log_end_offset)
    assert log.leader_epoch_entries == (*EPOCHS_0_0_1_3, EpochEntry(5, 10))
    assert log.end_offset_for_epoch(3) == (3, 10)
    assert log.end_offset_for_epoch(5) == (5, 10)
    # Deposed before writing: the no-op truncation of a follower drops it, as in Kafka.
    assert not log.truncate_to(10)
    assert log.leader_epoch_entries == EPOCHS_0_0_1_3
    log.maybe_assign_epoch_start_offset(6, 10)
    log.append_as_leader(_records(1), 6)
    assert log.leader_epoch_entries == (*EPOCHS_0_0_1_3, EpochEntry(6, 10))


def test_an_epoch_start_must_be_inside_the_log(open_log: Opener) -> None:
    log = open_log()
    _epochs_0_0_1_3(log)
    with pytest.raises(ValueError, match="the log ends at 10"):
        log.maybe_assign_epoch_start_offset(5, 11)
    with pytest.raises(ValueError, match="invalid leader epoch entry"):
        log.maybe_assign_epoch_start_offset(-1, 10)


def test_follower_appends_take_each_batchs_epoch(open_log: Opener) -> None:
    log = open_log()
    batches = [
        make_batch([b"a", b"b"], base_offset=0, leader_epoch=2),
        make_batch([b"c"], base_offset=2, leader_epoch=2),
        make_batch([b"d"], base_offset=3, leader_epoch=4),
        make_batch([b"e"], base_offset=4),  # stamped by no leader: no epoch
        make_batch([b"f"], base_offset=5, leader_epoch=7),
    ]
    log.append_as_follower(b"".join(batches[:3]))
    log.append_as_follower(b"".join(batches[3:]))
    assert log.leader_epoch_entries == (EpochEntry(2, 0), EpochEntry(4, 3), EpochEntry(7, 5))
    log.close()
    assert open_log().leader_epoch_entries == (EpochEntry(2, 0), EpochEntry(4, 3), EpochEntry(7, 5))


def test_a_follower_copying_an_older_epoch_ends_the_one_it_began(open_log: Opener) -> None:
    log = open_log()
    log.append_as_follower(make_batch([b"a"], base_offset=0, leader_epoch=3))
    log.maybe_assign_epoch_start_offset(5, 1)
    log.append_as_follower(make_batch([b"b"], base_offset=1, leader_epoch=4))
    assert log.leader_epoch_entries == (EpochEntry(3, 0), EpochEntry(4, 1))


def test_delete_records_moves_the_first_epoch_up(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_bytes=200))
    _epochs_0_0_1_3(log)
    log.update_high_watermark(10)
    log.delete_records_before(6)
    assert log.leader_epoch_entries == (EpochEntry(1, 6), EpochEntry(3, 9))
    assert _file_entries(log) == log.leader_epoch_entries
    assert log.end_offset_for_epoch(0) == (0, 6)
    log.close()
    assert open_log().leader_epoch_entries == (EpochEntry(1, 6), EpochEntry(3, 9))


def test_deleting_every_record_keeps_the_latest_epoch_until_a_reopen(open_log: Opener) -> None:
    log = open_log()
    _epochs_0_0_1_3(log)
    log.update_high_watermark(10)
    log.delete_records_before(10)
    assert log.leader_epoch_entries == (EpochEntry(3, 10),)
    assert log.end_offset_for_epoch(3) == (3, 10)
    crash(log)
    # No batch holds it any more: Kafka's load, truncating at the log end, forgets it.
    assert open_log().leader_epoch_entries == ()


def test_retention_moves_the_first_epoch_up(open_log: Opener, clock: FakeClock) -> None:
    log = open_log(LogConfig(segment_bytes=200, retention_ms=1000))
    for epoch in range(4):
        log.append_as_leader(make_batch([b"x" * 60], timestamp_ms=clock.now_ms), epoch)
    log.update_high_watermark(log.log_end_offset)
    clock.advance(5000)
    log.append_as_leader(make_batch([b"x" * 60], timestamp_ms=clock.now_ms), 4)
    log.update_high_watermark(log.log_end_offset)
    assert log.apply_retention() > 0
    start = log.log_start_offset
    assert start > 0
    assert log.leader_epoch_entries[0] == EpochEntry(start, start)
    assert log.leader_epoch_entries[-1] == EpochEntry(4, 4)


def test_list_offsets_answers_the_epochs(open_log: Opener) -> None:
    log = open_log()
    for epoch, timestamp_ms in [(0, 100), (1, 200), (3, 300)]:
        log.append_as_leader(make_batch([b"v"], timestamp_ms=timestamp_ms), epoch)
    latest = log.offset_for_timestamp(LATEST_TIMESTAMP)
    earliest = log.offset_for_timestamp(EARLIEST_TIMESTAMP)
    largest = log.offset_for_timestamp(MAX_TIMESTAMP)
    found = log.offset_for_timestamp(150)
    assert latest is not None
    assert (latest.offset, latest.leader_epoch) == (3, 3)
    assert earliest is not None
    assert (earliest.offset, earliest.leader_epoch) == (0, 0)
    assert largest is not None
    assert (largest.offset, largest.leader_epoch) == (2, 3)
    assert found is not None
    assert (found.offset, found.leader_epoch) == (1, 1)


def test_list_offsets_answers_no_epoch_for_batches_without_one(open_log: Opener) -> None:
    log = open_log()
    log.append_as_follower(make_batch([b"v"], timestamp_ms=100))
    latest = log.offset_for_timestamp(LATEST_TIMESTAMP)
    earliest = log.offset_for_timestamp(EARLIEST_TIMESTAMP)
    found = log.offset_for_timestamp(50)
    assert latest is not None
    assert latest.leader_epoch == -1
    assert earliest is not None
    assert earliest.leader_epoch == -1
    assert found is not None
    assert found.leader_epoch == -1


def test_a_closed_log_refuses_the_question(open_log: Opener) -> None:
    log = open_log()
    log.close()
    with pytest.raises(LogStorageError):
        log.end_offset_for_epoch(0)
    with pytest.raises(LogStorageError):
        log.maybe_assign_epoch_start_offset(0, 0)


# -- against a model ---------------------------------------------------------------

CONFIG = LogConfig(segment_bytes=1000, index_interval_bytes=100)


class _WarningCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


class LeaderEpochModel(RuleBasedStateMachine):
    """A leader's log through appends, new epochs, truncations, deletions and restarts.

    The model is each batch's (base offset, record count, epoch). The cache must hold
    where each epoch's batches start, the first moved up to the log start, and an
    epoch begun at the log end with no batch yet until a truncation or a reopen
    drops what starts at the log end; its file must match it, and opening the log
    must never find the file at fault.
    """

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="epoch-model-")
        self.clock = FakeClock()
        self.log = self._open()
        self.batches: list[tuple[int, int, int]] = []
        self.log_start = 0
        self.epoch = 0
        # An epoch begun at the log end (makeLeader) before any batch of it.
        self.begun: EpochEntry | None = None
        # Whether a truncation or a reopen dropped what started at the log end.
        self.trimmed = False
        self.warnings = _WarningCounter()
        logging.getLogger("tickwheel.log._leader_epoch").addHandler(self.warnings)

    def _open(self) -> Log:
        return Log.open(f"{self.dir}/t-0", CONFIG, clock_ms=self.clock)

    def teardown(self) -> None:
        logging.getLogger("tickwheel.log._leader_epoch").removeHandler(self.warnings)
        self.log.close()
        shutil.rmtree(self.dir)

    @property
    def log_end(self) -> int:
        return self.batches[-1][0] + self.batches[-1][1] if self.batches else self.log_start

    @rule(bump=st.integers(0, 2), counts=st.lists(st.integers(1, 4), min_size=1, max_size=3))
    def append(self, bump: int, counts: list[int]) -> None:
        self.epoch += bump
        payload = b"".join(make_batch([b"r" * 10] * count) for count in counts)
        self.log.append_as_leader(payload, self.epoch)
        for count in counts:
            self.batches.append((self.log_end, count, self.epoch))
        self.begun = None
        self.trimmed = False

    @rule()
    def become_leader(self) -> None:
        self.epoch += 1
        self.log.maybe_assign_epoch_start_offset(self.epoch, self.log_end)
        self.begun = EpochEntry(self.epoch, self.log_end)
        self.trimmed = False

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.log_end + 1))
        fully = offset <= self.log.segment_base_offsets[0]
        self.log.truncate_to(offset)
        self.begun = None
        self.trimmed = True
        if offset >= self.log_end:
            return
        if fully:
            self.batches = []
            self.log_start = offset
            return
        self.batches = [batch for batch in self.batches if batch[0] + batch[1] <= offset]
        if self.log_end < self.log_start:
            # The cut batch held the log start: the log restarts empty there.
            self.batches = []

    @precondition(lambda self: self.log_end > self.log_start)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.log_end))
        self.log.update_high_watermark(self.log_end)
        self.log.delete_records_before(offset)
        self.log_start = offset
        self.trimmed = False

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        if clean:
            self.log.close()
        else:
            crash(self.log)
        self.log = self._open()
        self.begun = None
        self.trimmed = True

    def expected(self) -> tuple[EpochEntry, ...]:
        starts: list[EpochEntry] = []
        for base, _, epoch in self.batches:
            if not starts or epoch > starts[-1].epoch:
                starts.append(EpochEntry(epoch, base))
        if self.begun is not None:
            starts.append(self.begun)
        # The epoch covering the log start starts there; none before it remains.
        covering = [entry for entry in starts if entry.start_offset <= self.log_start]
        entries = [entry for entry in starts if entry.start_offset > self.log_start]
        if covering:
            entries.insert(0, EpochEntry(covering[-1].epoch, self.log_start))
        if self.trimmed:
            entries = [entry for entry in entries if entry.start_offset < self.log_end]
        return tuple(entries)

    @invariant()
    def the_cache_describes_the_batches(self) -> None:
        assert (self.log.log_start_offset, self.log.log_end_offset) == (
            self.log_start,
            self.log_end,
        )
        expected = self.expected()
        assert self.log.leader_epoch_entries == expected
        assert _file_entries(self.log) == expected
        oracle = LeaderEpochFileCache(self.dir, expected)
        for requested in range(-1, self.epoch + 2):
            answer = self.log.end_offset_for_epoch(requested)
            assert answer == oracle.end_offset_for(requested, self.log_end)
        assert self.warnings.count == 0


def test_leader_epochs_against_a_model() -> None:
    # The fast tier's smoke run; the long runs below are the thorough search.
    run_state_machine_as_test(
        LeaderEpochModel, settings=settings(max_examples=10, stateful_step_count=20, deadline=None)
    )


@pytest.mark.slow
def test_leader_epochs_against_a_model_long_runs() -> None:
    run_state_machine_as_test(
        LeaderEpochModel, settings=settings(max_examples=100, stateful_step_count=50, deadline=None)
    )


def test_a_new_leaders_epoch_at_the_log_end_is_fsynced_by_the_next_flush(
    open_log: Opener, log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log()
    log.append_as_leader(_records(2), 0)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    # Becoming leader at epoch 4: written at once, fsynced later.
    log.maybe_assign_epoch_start_offset(4, log.log_end_offset)
    assert _file_entries(log)[-1] == EpochEntry(4, 2)
    assert synced == []
    log.flush()
    epoch_file = str(log_dir / LEADER_EPOCH_CHECKPOINT)
    assert epoch_file in synced
    assert str(log_dir) in synced
    synced.clear()
    log.flush()
    assert epoch_file not in synced  # once
    # Every other change (here a truncation dropping epoch 5) is fsynced at once, as
    # the temporary file it writes and renames.
    log.maybe_assign_epoch_start_offset(5, log.log_end_offset)
    log.append_as_leader(_records(1), 5)
    synced.clear()
    log.truncate_to(2)
    assert epoch_file + ".tmp" in synced
