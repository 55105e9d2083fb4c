"""TimerTask and TimerTaskEntry: binding, cancellation, moving."""

from __future__ import annotations

import pytest

from tickwheel.timer import CallbackTask, TaskCounter, TimerTask, TimerTaskEntry, TimerTaskList


def test_a_new_entry_binds_the_task() -> None:
    task = TimerTask(10)
    entry = TimerTaskEntry(task, 10)
    assert task.timer_task_entry is entry
    assert not entry.cancelled


def test_binding_a_new_entry_cancels_and_unlinks_the_old_one() -> None:
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    task = TimerTask(10)
    old = TimerTaskEntry(task, 10)
    bucket.add(old)
    new = TimerTaskEntry(task, 20)
    assert old.cancelled
    assert old.list is None
    assert not new.cancelled
    assert len(bucket) == 0
    assert counter.value == 0


def test_cancel_unlinks_and_is_idempotent() -> None:
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    task = TimerTask(10)
    entry = TimerTaskEntry(task, 10)
    bucket.add(entry)
    assert task.cancel() is True
    assert entry.cancelled
    assert entry.list is None
    assert len(bucket) == 0
    assert counter.value == 0
    assert task.cancel() is False
    assert counter.value == 0


def test_cancel_of_an_unscheduled_task_does_nothing() -> None:
    task = TimerTask(5)
    assert task.cancel() is False
    assert task.timer_task_entry is None


def test_entry_remove_without_a_list_is_a_no_op() -> None:
    entry = TimerTaskEntry(TimerTask(1), 1)
    entry.remove()
    assert entry.list is None


def test_plain_task_run_must_be_overridden() -> None:
    with pytest.raises(NotImplementedError):
        TimerTask(1).run()


def test_callback_task_calls_fn() -> None:
    seen: list[str] = []
    task = CallbackTask(5, lambda: seen.append("x"))
    task.run()
    assert seen == ["x"]
    assert task.delay_ms == 5
