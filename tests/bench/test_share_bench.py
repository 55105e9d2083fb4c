"""``tickwheel bench share``: its heap peer behaves as a lazy-deletion heap, bad arguments
are refused, and a tiny run goes through every part's code paths against real brokers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tickwheel.bench import share
from tickwheel.timer import ManualClock


def _lock(heap: share.HeapLocks, offset: int, records: int = 1) -> share.HeapLock:
    lock = share.HeapLock(heap, offset, offset + records - 1, "m", lambda lock: None)
    heap.add(lock, share.LOCK_DURATION_MS)
    return lock


def test_heap_locks_pop_cancelled_heads_and_keep_inner_ones_until_a_rebuild() -> None:
    heap = share.HeapLocks(ManualClock(0))
    locks = [_lock(heap, offset) for offset in range(4 * share.HEAP_COMPACT_MIN)]
    locks[0].release_one()
    entries = len(locks) - 1
    assert len(heap._heap) == entries  # the head went at once
    for released, lock in enumerate(locks[2:], 1):
        lock.release_one()
        if released * 2 > entries:
            break
        assert len(heap._heap) == entries  # inner entries stay, flagged
    # More than half flagged: rebuilt with the live ones only.
    live = [lock.first_offset for lock in locks if not lock.cancelled]
    assert sorted(entry[2].first_offset for entry in heap._heap) == live


def test_a_heap_lock_is_cancelled_by_its_last_release() -> None:
    heap = share.HeapLocks(ManualClock(0))
    lock = _lock(heap, 10, records=3)
    cancelled = []
    for _ in range(3):
        lock.release_one()
        cancelled.append(lock.cancelled)
    assert cancelled == [False, False, True]
    assert heap._heap == []


@pytest.mark.parametrize(
    "argv",
    [
        ["--parts", "queue,nothing"],
        ["--rounds", "0"],
        ["--outstanding", "10", "--locks", "10"],
        ["--process-ms", "-1"],
    ],
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    assert share.main(argv) == 2


@pytest.mark.integration
def test_a_tiny_run_measures_every_part(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "share.json"
    status = share.main(
        [
            "--rounds",
            "1",
            "--records",
            "40",
            "--share-consumers",
            "2",
            "--process-ms",
            "1",
            "--locks",
            "2000",
            "--outstanding",
            "500",
            "--churn-records",
            "2000",
            "--churn-batch",
            "100",
            "--churn-consumers",
            "2",
            "--log-parent",
            str(tmp_path),
            "--out",
            str(out),
        ]
    )
    assert status == 0
    medians = json.loads(out.read_text())["medians"]
    assert set(medians) == set(share.FIGURES)
    assert medians["share_records_per_s"] > 0 < medians["classic_records_per_s"]
    # A ShareFetch takes whole producer batches (at most 100 records each) until it holds
    # 100 records, under one lock; only the last may hold fewer.
    assert 50 <= medians["records_per_lock"] < 200
    printed = capsys.readouterr().out
    assert "share / classic" in printed
    assert "wheel lock bookkeeping / broker ShareFetch+ShareAcknowledge CPU" in printed
