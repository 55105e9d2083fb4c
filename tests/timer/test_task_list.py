"""TimerTaskList: expiration reporting, add/remove/flush, moving entries, shared counter.

The same tests run on both builds' storage (a ``set`` in pure Python, Kafka's linked list
compiled): ``./run test`` runs them once more with ``TICKWHEEL_PURE_PYTHON=1``.
"""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

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


# One step against three buckets and six entries: (operation, bucket, entry). Adds are
# drawn more often than the rest, so that buckets fill and removals meet entries that an
# earlier removal moved.
_STEPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["add", "add", "add", "remove", "cancel", "cancel", "rebind", "take_all", "flush"]
        ),
        st.integers(0, 2),
        st.integers(0, 5),
    ),
    max_size=60,
)


def test_removing_in_any_order_keeps_every_other_entry() -> None:
    # Head, middle and tail removals, then removals of the entries those moved.
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    entries = _entries(6)
    for e in entries:
        bucket.add(e)
    for i in (0, 3, 5, 1, 4, 2):
        bucket.remove(entries[i])
        assert entries[i].list is None
        left = {id(e) for e in entries if e.list is bucket}
        assert {id(e) for e in bucket} == left
        assert len(bucket) == counter.value == len(left)


@settings(max_examples=400, deadline=None)
@given(steps=_STEPS)
def test_buckets_behave_as_sets_of_entries(steps: list[tuple[str, int, int]]) -> None:
    # The reference model: which bucket holds each entry. Removing from the middle, the
    # head or the tail of a linked bucket, moving, re-binding and flushing must all leave
    # the buckets holding exactly the model's entries, counted once each.
    counter = TaskCounter()
    buckets = [TimerTaskList(counter) for _ in range(3)]
    tasks = [TimerTask(i) for i in range(6)]
    entries = [TimerTaskEntry(task, i) for i, task in enumerate(tasks)]
    holder: dict[int, int] = {}  # entry index -> bucket index
    for op, b, e in steps:
        bucket, entry = buckets[b], entries[e]
        if op == "add":
            if entry.cancelled:
                entries[e] = entry = TimerTaskEntry(tasks[e], e)
            bucket.add(entry)
            holder[e] = b
        elif op == "remove":
            bucket.remove(entry)
            if holder.get(e) == b:
                del holder[e]
        elif op == "cancel":
            tasks[e].cancel()
            holder.pop(e, None)
        elif op == "rebind":  # a new entry for the task unlinks the old one
            entries[e] = TimerTaskEntry(tasks[e], e)
            holder.pop(e, None)
        elif op == "take_all":
            taken = bucket.take_all()
            assert {id(x) for x in taken} == {id(entries[i]) for i, h in holder.items() if h == b}
            holder = {i: h for i, h in holder.items() if h != b}
        else:  # flush: every entry taken out and added straight back
            bucket.flush(bucket.add)
        for i, x in enumerate(buckets):
            expected = {id(entries[j]) for j, h in holder.items() if h == i}
            assert {id(y) for y in x} == expected
            assert len(x) == len(expected)
        assert counter.value == len(holder)
        for j, x in enumerate(entries):
            assert x.list is (buckets[holder[j]] if j in holder else None)
