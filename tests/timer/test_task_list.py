"""TimerTaskList: expiration reporting, add/remove/flush, moving entries, shared counter."""

from __future__ import annotations

import threading

from tickwheel.timer import TaskCounter, TimerTask, TimerTaskEntry, TimerTaskList


def _entries(n: int) -> list[TimerTaskEntry]:
    return [TimerTaskEntry(TimerTask(i), i) for i in range(n)]


def test_set_expiration_reports_only_changes() -> None:
    bucket = TimerTaskList(TaskCounter())
    assert bucket.expiration_ms == -1
    assert bucket.set_expiration(40)
    assert not bucket.set_expiration(40)
    assert bucket.set_expiration(60)


def test_add_remove_and_shared_counter() -> None:
    counter = TaskCounter()
    a, b = TimerTaskList(counter), TimerTaskList(counter)
    entries = _entries(5)
    for e in entries[:3]:
        a.add(e)
    for e in entries[3:]:
        b.add(e)
    assert (len(a), len(b), counter.value) == (3, 2, 5)
    a.remove(entries[0])
    a.remove(entries[4])  # not in a: ignored
    assert (len(a), len(b), counter.value) == (2, 2, 4)
    assert entries[4].list is b


def test_adding_an_entry_moves_it_between_lists() -> None:
    counter = TaskCounter()
    a, b = TimerTaskList(counter), TimerTaskList(counter)
    (entry,) = _entries(1)
    a.add(entry)
    b.add(entry)
    assert entry.list is b
    assert (len(a), len(b), counter.value) == (0, 1, 1)


def test_flush_empties_the_bucket_calls_f_and_resets_expiration() -> None:
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    entries = _entries(4)
    for e in entries:
        bucket.add(e)
    bucket.set_expiration(100)
    seen: list[TimerTaskEntry] = []
    bucket.flush(seen.append)
    assert sorted(seen, key=id) == sorted(entries, key=id)
    assert all(e.list is None for e in entries)
    assert len(bucket) == 0
    assert counter.value == 0
    assert bucket.expiration_ms == -1


def test_flush_callback_may_add_back_into_the_same_bucket() -> None:
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    entries = _entries(3)
    for e in entries:
        bucket.add(e)
    calls: list[TimerTaskEntry] = []

    def re_add(entry: TimerTaskEntry) -> None:
        calls.append(entry)
        bucket.add(entry)

    bucket.flush(re_add)
    assert len(calls) == 3
    assert len(bucket) == 3
    assert counter.value == 3


def test_iteration_is_a_snapshot() -> None:
    bucket = TimerTaskList(TaskCounter())
    entries = _entries(3)
    for e in entries:
        bucket.add(e)
    for e in bucket:
        e.remove()
    assert len(bucket) == 0


def test_concurrent_removes_and_adds_keep_the_counter_exact() -> None:
    counter = TaskCounter()
    lock = threading.RLock()
    buckets = [TimerTaskList(counter, lock) for _ in range(4)]
    entries = _entries(2000)
    with lock:
        for i, e in enumerate(entries):
            buckets[i % 4].add(e)

    def cancel(part: list[TimerTaskEntry]) -> None:
        for e in part:
            e.task.cancel()

    def move(part: list[TimerTaskEntry]) -> None:
        for i, e in enumerate(part):
            with lock:
                buckets[i % 3].add(e)

    threads = [
        threading.Thread(target=cancel, args=(entries[0::2],)),
        threading.Thread(target=move, args=(entries[1::2],)),
        threading.Thread(target=cancel, args=(entries[1::4],)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.value == sum(len(b) for b in buckets)
    assert all(e.list is None for e in entries[0::2])
