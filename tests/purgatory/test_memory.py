"""Memory stays bounded: completed operations do not pile up in other keys' lists.

Kafka replaced its first purgatory because operations completed through one key stayed
referenced from the lists of their other keys until they timed out: a million requests
that complete in milliseconds but time out after 30 s held gigabytes. Here a million
operations, each watched under 3 keys and completed through one of them long before
its timeout, must leave ``watched``, ``num_delayed`` and the interpreter's allocated
memory back near where they started -- once with the reaper thread purging (Kafka's
mode), measured by pymalloc's block count, and once more with the purge riding on the
calls (event-loop mode) under tracemalloc, which is exact but too slow for a million.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc

import pytest

from tickwheel.purgatory import (
    DEFAULT_PURGE_INTERVAL,
    PURGE_SHARDS_PER_STEP,
    SHARD_COUNT,
    DelayedOperationPurgatory,
    GroupJoinKey,
    TopicPartitionOperationKey,
)

from .helpers import CountingTimer, FlagOperation, ManualPurgatory

TIMEOUT_MS = 60_000
PARTITIONS = 1000
GROUPS = 100
# Stale entries a purge may leave: the interval's worth of operations under their two
# other keys, plus one pass of purge steps.
STALE_ENTRIES_MAX = 2 * (DEFAULT_PURGE_INTERVAL + SHARD_COUNT // PURGE_SHARDS_PER_STEP)


def _run(purgatory: DelayedOperationPurgatory[FlagOperation], start: int, count: int) -> None:
    """Operations ``start .. start+count``: watch under 3 keys, complete through the first."""
    for i in range(start, start + count):
        op = FlagOperation(TIMEOUT_MS)
        own = f"request-{i}"
        keys = [
            own,
            TopicPartitionOperationKey("orders", i % PARTITIONS),
            GroupJoinKey(f"g{i % GROUPS}"),
        ]
        purgatory.try_complete_else_watch(op, keys)
        op.ready = True
        purgatory.check_and_complete(own)


def _allocated_blocks() -> int:
    gc.collect()
    return sys.getallocatedblocks()


@pytest.mark.slow
def test_a_million_operations_completed_early_leave_nothing_behind_threaded() -> None:
    total = 1_000_000
    chunk = 50_000
    warmup = 20_000
    timer = CountingTimer("memory")
    with DelayedOperationPurgatory[FlagOperation]("memory", timer) as purgatory:
        _run(purgatory, 0, warmup)
        assert timer.wait_for_advances(2)
        start_blocks = _allocated_blocks()
        start_watched = purgatory.watched
        peak_watched = 0
        for start in range(warmup, warmup + total, chunk):
            _run(purgatory, start, chunk)
            peak_watched = max(peak_watched, purgatory.watched)
        # The reaper's step after the next return of advance_clock began after the last
        # completion: once two have returned, the purge has run if it was due.
        assert timer.wait_for_advances(2)
        end_watched = purgatory.watched
        end_blocks = _allocated_blocks()
        assert purgatory.num_delayed == 0
    assert start_watched <= STALE_ENTRIES_MAX
    assert end_watched <= STALE_ENTRIES_MAX
    # Between two reaper steps (200 ms) only so many operations can pile up.
    assert peak_watched < total // 4
    # Each leaked operation would hold several blocks (the operation, its lock, its
    # list slots): a million of them would be millions of blocks.
    assert end_blocks - start_blocks < 50_000


@pytest.mark.slow
def test_operations_completed_early_leave_nothing_behind_event_loop_mode_traced() -> None:
    total = 100_000
    env = ManualPurgatory()
    purgatory = env.purgatory
    _run(purgatory, 0, 10_000)
    gc.collect()
    tracemalloc.start()
    try:
        start_bytes, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        _run(purgatory, 10_000, total)
        gc.collect()
        end_bytes, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert purgatory.num_delayed == 0
    assert purgatory.watched <= STALE_ENTRIES_MAX
    # A leak would be hundreds of bytes per operation: tens of megabytes here.
    assert end_bytes - start_bytes < 1_000_000
    assert peak_bytes - start_bytes < 5_000_000
    purgatory.shutdown()
