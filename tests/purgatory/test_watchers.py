"""Watchers and WatcherShard: per-key lists, stale entries, empty keys, compaction."""

from __future__ import annotations

from tickwheel.purgatory._watchers import COMPACT_MIN_KEYS, Watchers, WatcherShard

from .helpers import FlagOperation


def _shard_with(ops_by_key: dict[str, list[FlagOperation]]) -> WatcherShard[FlagOperation]:
    shard: WatcherShard[FlagOperation] = WatcherShard()
    for key, ops in ops_by_key.items():
        watchers: Watchers[FlagOperation] = Watchers(key)
        watchers.operations.extend(ops)
        shard.watchers_by_key[key] = watchers
    return shard


def test_snapshot_is_a_copy_and_none_for_unknown_keys() -> None:
    ops = [FlagOperation(10), FlagOperation(10)]
    shard = _shard_with({"k": ops})
    assert shard.snapshot("other") is None
    snapshot = shard.snapshot("k")
    assert snapshot is not None
    watchers, copy = snapshot
    assert copy == ops
    copy.clear()
    assert watchers.operations == ops


def test_remove_completed_keeps_order_and_drops_an_emptied_key() -> None:
    a, b, c = FlagOperation(10), FlagOperation(10), FlagOperation(10)
    shard = _shard_with({"k": [a, b, c]})
    watchers = shard.watchers_by_key["k"]
    b.force_complete()
    shard.remove_completed(watchers)
    assert watchers.operations == [a, c]
    a.force_complete()
    c.force_complete()
    shard.remove_completed(watchers)
    assert "k" not in shard.watchers_by_key


def test_remove_completed_spares_a_newer_watchers_of_the_same_key() -> None:
    old = _shard_with({"k": [FlagOperation(10)]})
    stale = old.watchers_by_key.pop("k")
    stale.operations[0].force_complete()
    newer: Watchers[FlagOperation] = Watchers("k")
    newer.operations.append(FlagOperation(10))
    old.watchers_by_key["k"] = newer
    old.remove_completed(stale)
    assert old.watchers_by_key["k"] is newer


def test_remove_completed_leaves_a_taken_list_to_its_owner() -> None:
    # A check's snapshot outlives a cancel_for_key: the list it took is the caller's now.
    a, b = FlagOperation(10), FlagOperation(10)
    shard = _shard_with({"k": [a, b]})
    snapshot = shard.snapshot("k")
    assert snapshot is not None
    taken = shard.take_all("k")
    a.force_complete()
    shard.remove_completed(snapshot[0])
    assert taken == [a, b]


def test_take_all_removes_the_key() -> None:
    ops = [FlagOperation(10)]
    shard = _shard_with({"k": ops})
    assert shard.take_all("k") == ops
    assert shard.take_all("k") == []
    assert shard.count_watched() == 0


def test_purge_counts_dropped_entries_and_compacts_after_many_empty_keys() -> None:
    live = FlagOperation(10)
    dead = {f"d{i}": [FlagOperation(10)] for i in range(COMPACT_MIN_KEYS)}
    shard = _shard_with({"live": [live, FlagOperation(10)], **dead})
    for ops in dead.values():
        ops[0].force_complete()
    shard.watchers_by_key["live"].operations[1].force_complete()
    table = shard.watchers_by_key
    assert shard.purge_completed() == COMPACT_MIN_KEYS + 1
    assert list(shard.watchers_by_key) == ["live"]
    assert shard.watchers_by_key["live"].operations == [live]
    assert shard.watchers_by_key is not table  # rebuilt, so the grown table is freed
    assert shard.count_watched() == 1
