"""LeaderEpochFileCache: Kafka's rules against a model, the answers against a log, the file."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tickwheel.log import LogStorageError
from tickwheel.log._leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
    MalformedCheckpointError,
    format_leader_epoch_checkpoint,
    load_leader_epoch_cache,
    parse_leader_epoch_checkpoint,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


class KafkaModel:
    """Kafka's ``LeaderEpochFileCache`` restated over a map epoch -> start offset (its TreeMap)."""

    def __init__(self) -> None:
        self.starts: dict[int, int] = {}

    def entries(self) -> list[EpochEntry]:
        return [EpochEntry(epoch, self.starts[epoch]) for epoch in sorted(self.starts)]

    def assign(self, epoch: int, start_offset: int) -> None:
        if self.starts:
            latest = max(self.starts)
            if epoch == latest and start_offset >= self.starts[latest]:
                return
        for old in sorted(self.starts, reverse=True):
            if old >= epoch or self.starts[old] >= start_offset:
                del self.starts[old]
            else:
                break
        self.starts[epoch] = start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        for old in sorted(self.starts, reverse=True):
            if self.starts[old] < end_offset:
                break
            del self.starts[old]

    def truncate_from_start(self, start_offset: int) -> None:
        removed = []
        for old in sorted(self.starts):
            if self.starts[old] > start_offset:
                break
            removed.append(old)
            del self.starts[old]
        if removed:
            self.starts[removed[-1]] = start_offset

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        if requested == UNDEFINED_EPOCH:
            return UNDEFINED
        if self.starts and max(self.starts) == requested:
            return requested, log_end_offset
        higher = [epoch for epoch in self.starts if epoch > requested]
        if not higher:
            return UNDEFINED
        lower = [epoch for epoch in self.starts if epoch <= requested]
        end_offset = self.starts[min(higher)]
        return (max(lower) if lower else requested), end_offset


# Small ranges, so that epochs and offsets meet again; assignments weigh the most.
assignments = st.tuples(st.just("assign"), st.integers(0, 3), st.integers(0, 20))
operations = st.lists(
    st.one_of(
        assignments,
        assignments,
        assignments,
        st.tuples(st.just("truncate_from_end"), st.integers(0, 25)),
        st.tuples(st.just("truncate_from_start"), st.integers(0, 25)),
    ),
    min_size=10,
    max_size=40,
)


@given(operations)
# An epoch assigned again below a newer one replaces its own older entry.
@example([("assign", 3, 10), ("assign", 5, 20), ("assign", 3, 15)])
def test_every_rule_follows_kafkas_cache(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]]
) -> None:
    directory = tmp_path_factory.mktemp("epochs")
    cache = LeaderEpochFileCache(str(directory))
    model = KafkaModel()
    for name, *args in ops:
        before = cache.entries
        changed = getattr(cache, name)(*args)
        getattr(model, name)(*args)
        assert list(cache.entries) == model.entries()
        assert changed == (cache.entries != before)
        epochs = [entry.epoch for entry in cache.entries]
        starts = [entry.start_offset for entry in cache.entries]
        assert epochs == sorted(set(epochs))
        assert starts == sorted(set(starts))
        assert cache.latest_epoch == (epochs[-1] if epochs else None)
        for requested in range(-1, 5):
            assert cache.end_offset_for(requested, 99) == model.end_offset_for(requested, 99)
        if changed:
            # Written through: the file always holds the cache.
            assert parse_leader_epoch_checkpoint(Path(cache.path).read_bytes()) == cache.entries


# A log as the epoch of each of its offsets, from offset `start`: leaders append runs of
# growing epochs; followers cut the log and take a new leader's later epochs.
log_histories = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 3), st.integers(1, 5)),
        st.tuples(st.just("truncate"), st.integers(0, 40)),
        st.tuples(st.just("delete_before"), st.integers(0, 40)),
    ),
    max_size=25,
)


@given(log_histories)
def test_answers_match_the_log_the_cache_describes(
    tmp_path_factory: pytest.TempPathFactory, history: list[tuple[Any, ...]]
) -> None:
    cache = LeaderEpochFileCache(str(tmp_path_factory.mktemp("epochs")))
    start = 0
    epoch_at: list[int] = []  # epoch_at[i] is the epoch of offset start + i
    epoch = 0
    for name, value, *rest in history:
        if name == "append":
            epoch += value
            for _ in range(rest[0]):
                cache.assign(epoch, start + len(epoch_at))
                epoch_at.append(epoch)
        elif name == "truncate" and start + value < start + len(epoch_at):
            del epoch_at[value:]
            cache.truncate_from_end(start + value)
        elif name == "delete_before" and value < len(epoch_at):
            del epoch_at[:value]
            start += value
            cache.truncate_from_start(start)
    log_end = start + len(epoch_at)
    held = sorted(set(epoch_at))
    for requested in range(-1, epoch + 3):
        answer = cache.end_offset_for(requested, log_end)
        later = [i for i, e in enumerate(epoch_at) if e > requested]
        if requested == UNDEFINED_EPOCH or not held or (requested > held[-1]):
            assert answer == UNDEFINED
        elif requested == held[-1]:
            assert answer == (requested, log_end)
        else:
            # Ends where the first later epoch's records start; answered with the
            # newest epoch held at or below it, or itself when older than all.
            floor = max((e for e in held if e <= requested), default=requested)
            assert answer == (floor, start + later[0])
    assert [entry.epoch for entry in cache.entries] == held


def test_a_newer_epoch_at_the_latest_start_replaces_it(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(str(tmp_path))
    cache.assign(0, 0)
    cache.assign(1, 10)
    assert cache.assign(2, 10)
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(2, 10))


def test_a_newer_epoch_below_the_latest_start_supersedes_the_entries_it_overlaps(
    tmp_path: Path,
) -> None:
    cache = LeaderEpochFileCache(str(tmp_path), [EpochEntry(0, 0), EpochEntry(1, 10)])
    cache.assign(2, 5)
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(2, 5))


def test_the_latest_epoch_again_at_a_later_offset_changes_nothing(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(str(tmp_path), [EpochEntry(3, 7)])
    assert not cache.assign(3, 20)
    assert cache.entries == (EpochEntry(3, 7),)
    assert not (tmp_path / LEADER_EPOCH_CHECKPOINT).exists()


def test_an_older_epoch_ends_the_newer_entries_as_kafka_does(tmp_path: Path) -> None:
    # A follower that began epoch 5 as leader at 100 and wrote nothing copies epoch 4
    # batches from the new leader to offset 100: the cache follows the batches.
    cache = LeaderEpochFileCache(str(tmp_path), [EpochEntry(3, 50), EpochEntry(5, 100)])
    cache.assign(4, 100)
    assert cache.entries == (EpochEntry(3, 50), EpochEntry(4, 100))


def test_truncate_from_start_keeps_the_epoch_covering_the_new_start(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(
        str(tmp_path), [EpochEntry(0, 0), EpochEntry(1, 10), EpochEntry(3, 20)]
    )
    cache.truncate_from_start(15)
    assert cache.entries == (EpochEntry(1, 15), EpochEntry(3, 20))
    cache.truncate_from_start(20)
    assert cache.entries == (EpochEntry(3, 20),)


def test_kafkas_end_offset_examples(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(
        str(tmp_path), [EpochEntry(2, 10), EpochEntry(4, 30), EpochEntry(7, 45)]
    )
    assert cache.end_offset_for(7, 60) == (7, 60)  # the latest: the log end
    assert cache.end_offset_for(4, 60) == (4, 45)
    assert cache.end_offset_for(5, 60) == (4, 45)  # an epoch this log never had
    assert cache.end_offset_for(1, 60) == (1, 10)  # older than all: the first start
    assert cache.end_offset_for(8, 60) == UNDEFINED
    assert cache.end_offset_for(UNDEFINED_EPOCH, 60) == UNDEFINED
    assert LeaderEpochFileCache(str(tmp_path)).end_offset_for(0, 60) == UNDEFINED


def test_negative_epochs_and_offsets_are_refused(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(str(tmp_path))
    with pytest.raises(ValueError, match="invalid leader epoch entry"):
        cache.assign(-1, 0)
    with pytest.raises(ValueError, match="invalid leader epoch entry"):
        cache.assign(0, -5)


def test_a_failed_write_is_a_storage_error(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(str(tmp_path / "gone"))
    with pytest.raises(LogStorageError, match=LEADER_EPOCH_CHECKPOINT):
        cache.assign(0, 0)


# -- the file ------------------------------------------------------------------------


def test_written_in_kafkas_format_by_rename(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(str(tmp_path))
    cache.assign(0, 0)
    inode = os.stat(cache.path).st_ino
    cache.assign(3, 1234)
    assert Path(cache.path).read_bytes() == b"0\n2\n0 0\n3 1234\n"
    assert os.stat(cache.path).st_ino != inode
    assert sorted(os.listdir(tmp_path)) == [LEADER_EPOCH_CHECKPOINT]
    cache.clear()
    assert Path(cache.path).read_bytes() == b"0\n0\n"


epoch_lists = st.lists(
    st.tuples(st.integers(1, 2**31 - 1), st.integers(1, 2**62)), max_size=20
).map(
    lambda steps: [
        EpochEntry(sum(e for e, _ in steps[: i + 1]), sum(o for _, o in steps[: i + 1]))
        for i in range(len(steps))
    ]
)


@given(epoch_lists)
def test_the_format_round_trips(entries: list[EpochEntry]) -> None:
    assert parse_leader_epoch_checkpoint(format_leader_epoch_checkpoint(entries)) == tuple(entries)


def test_kafkas_empty_file_for_a_new_partition_reads_as_no_entries() -> None:
    assert parse_leader_epoch_checkpoint(b"") == ()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"0\n2\n0 0\n3 12", id="last-line-cut"),
        pytest.param(b"0\n2\n0 0\n", id="fewer-entries"),
        pytest.param(b"0\n1\n0 0\n3 12\n", id="more-entries"),
        pytest.param(b"1\n1\n0 0\n", id="version-1"),
        pytest.param(b"0\n", id="no-count"),
        pytest.param(b"0\n-1\n", id="negative-count"),
        pytest.param(b"0\n1\n0\n", id="one-field"),
        pytest.param(b"0\n1\n0 0 0\n", id="three-fields"),
        pytest.param(b"0\n1\n-1 0\n", id="negative-epoch"),
        pytest.param(b"0\n1\n0 +5\n", id="signed-offset"),
        pytest.param(b"0\n1\n0  5\n", id="two-spaces"),
        pytest.param(b"0\n2\n3 0\n2 5\n", id="epochs-decrease"),
        pytest.param(b"0\n2\n1 5\n2 5\n", id="offsets-repeat"),
    ],
)
def test_anything_but_kafkas_exact_format_is_malformed(data: bytes) -> None:
    with pytest.raises(MalformedCheckpointError):
        parse_leader_epoch_checkpoint(data)


# -- loading -------------------------------------------------------------------------

BATCH_EPOCHS = [EpochEntry(0, 0), EpochEntry(2, 40), EpochEntry(5, 90)]


def _load(directory: Path, log_start: int = 0, log_end: int = 120) -> LeaderEpochFileCache:
    return load_leader_epoch_cache(str(directory), BATCH_EPOCHS, log_start, log_end)


def test_a_missing_file_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    cache = _load(tmp_path)
    assert cache.entries == tuple(BATCH_EPOCHS)
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n3\n0 0\n2 40\n5 90\n"


def test_a_matching_file_is_kept_as_it_is(tmp_path: Path) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n3\n0 0\n2 40\n5 90\n")
    inode = os.stat(tmp_path / LEADER_EPOCH_CHECKPOINT).st_ino
    assert _load(tmp_path).entries == tuple(BATCH_EPOCHS)
    assert os.stat(tmp_path / LEADER_EPOCH_CHECKPOINT).st_ino == inode


def test_the_first_epoch_starts_at_the_log_start(tmp_path: Path) -> None:
    cache = _load(tmp_path, log_start=50)
    assert cache.entries == (EpochEntry(2, 50), EpochEntry(5, 90))


def test_entries_past_a_crash_cut_tail_go_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Epoch 6 began at 120 (its batches or a makeLeader), then the crash cut the log
    # there; the old first entry is also below a log start that moved meanwhile.
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n4\n0 0\n2 40\n5 90\n6 120\n")
    with caplog.at_level(logging.WARNING):
        cache = _load(tmp_path, log_start=10)
    assert cache.entries == (EpochEntry(0, 10), EpochEntry(2, 40), EpochEntry(5, 90))
    assert parse_leader_epoch_checkpoint((tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes()) == (
        cache.entries
    )
    assert not caplog.records


def test_a_torn_file_is_rebuilt_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n3\n0 0\n2 4")
    with caplog.at_level(logging.WARNING):
        cache = _load(tmp_path)
    assert cache.entries == tuple(BATCH_EPOCHS)
    assert "last line is cut short" in caplog.text
    assert parse_leader_epoch_checkpoint((tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes()) == (
        cache.entries
    )


def test_a_file_that_disagrees_with_the_batches_is_rewritten_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n2\n0 0\n5 40\n")
    with caplog.at_level(logging.WARNING):
        cache = _load(tmp_path)
    assert cache.entries == tuple(BATCH_EPOCHS)
    assert "the log's batches say" in caplog.text
