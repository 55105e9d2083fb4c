"""DelayedOperation: the completion gate, expiry, and the try_complete_pending retry."""

from __future__ import annotations

import threading

import pytest

from tickwheel.purgatory import DelayedOperation
from tickwheel.timer import COMPILED, TimerTask

from .helpers import FlagOperation, run_in_thread


def test_is_a_timer_task() -> None:
    assert issubclass(DelayedOperation, TimerTask)


@pytest.mark.skipif(COMPILED, reason="mypyc's classes do not enforce abc's abstract methods")
def test_is_abstract() -> None:
    with pytest.raises(TypeError):
        DelayedOperation(10)  # type: ignore[abstract]


def test_keeps_its_delay_and_lock() -> None:
    shared = threading.RLock()
    a = FlagOperation(25, lock=shared)
    b = FlagOperation(25, lock=shared)
    c = FlagOperation(25)
    d = FlagOperation(25)
    assert a.delay_ms == 25
    assert a.lock is shared
    assert b.lock is shared
    assert c.lock is not d.lock
    assert not c.is_completed


def test_force_complete_wins_once_and_calls_on_complete_once() -> None:
    op = FlagOperation(100)
    assert op.force_complete() is True
    assert op.force_complete() is False
    assert op.is_completed
    assert op.completions == 1
    assert op.expirations == 0


def test_try_complete_completes_only_when_ready() -> None:
    op = FlagOperation(100)
    assert op.maybe_try_complete() is False
    op.ready = True
    assert op.maybe_try_complete() is True
    assert op.maybe_try_complete() is False  # already completed: nothing to do
    assert op.completions == 1


def test_run_expires_then_nothing_else_completes_it() -> None:
    op = FlagOperation(100)
    op.run()
    assert op.events == ["complete", "expire"]
    op.ready = True
    assert op.maybe_try_complete() is False
    assert op.force_complete() is False
    assert op.events == ["complete", "expire"]


def test_run_after_completion_does_not_expire() -> None:
    op = FlagOperation(100, ready=True)
    assert op.maybe_try_complete() is True
    op.run()
    assert op.events == ["complete"]


def test_many_threads_force_completing_have_exactly_one_winner() -> None:
    thread_count = 8
    ops = [FlagOperation(100) for _ in range(2000)]
    wins = [0] * len(ops)
    wins_lock = threading.Lock()
    barrier = threading.Barrier(thread_count)

    def race() -> None:
        barrier.wait()
        for i, op in enumerate(ops):
            if op.force_complete():
                with wins_lock:
                    wins[i] += 1

    threads = [threading.Thread(target=race) for _ in range(thread_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wins == [1] * len(ops)
    assert all(op.completions == 1 for op in ops)


class _StaleRead(FlagOperation):
    """Reads its condition, then stalls (holding the lock) until told to go on.

    Reproduces seed 002's table: the holder's first read is stale by the time it returns.
    """

    def __init__(self) -> None:
        super().__init__(1000)
        self.entered = threading.Event()
        self.proceed = threading.Event()

    def try_complete(self) -> bool:
        self.tries += 1
        ready = self.ready
        if self.tries == 1:
            self.entered.set()
            assert self.proceed.wait(10)
        return ready and self.force_complete()


def test_a_thread_missing_the_lock_makes_the_holder_try_again() -> None:
    op = _StaleRead()
    holder, result = run_in_thread(op.maybe_try_complete)
    assert op.entered.wait(10)
    # The condition becomes true while the holder is inside try_complete with a stale
    # read; this thread misses the lock, so it does not try -- it must not block either.
    op.ready = True
    assert op.maybe_try_complete() is False
    assert op.tries == 1
    op.proceed.set()
    holder.join(10)
    # The holder saw the pending flag after unlocking and tried once more.
    assert result == [True]
    assert op.tries == 2
    assert op.completions == 1


def test_without_contention_one_try_is_enough() -> None:
    op = FlagOperation(1000)
    assert op.maybe_try_complete() is False
    assert op.tries == 1


def test_maybe_try_complete_is_reentrant_under_a_held_shared_lock() -> None:
    shared = threading.RLock()
    op = FlagOperation(1000, ready=True, lock=shared)
    with shared:
        assert op.maybe_try_complete() is True
    assert op.completions == 1


def test_repr_tells_the_state() -> None:
    op = FlagOperation(5)
    assert "pending" in repr(op)
    op.force_complete()
    assert "completed" in repr(op)
