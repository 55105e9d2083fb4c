"""SystemTimer: expiry semantics, cancellation, size, waiting, closing, and a model test."""

from __future__ import annotations

import gc
import sys
import threading
import time
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.timer import (
    CallbackTask,
    InlineExecutor,
    ManualClock,
    SystemClock,
    SystemTimer,
    ThreadExecutor,
    TimerTask,
)

from .helpers import Recorder, step


def test_zero_and_negative_delays_run_at_once_through_the_executor(
    timer: SystemTimer, recorder: Recorder
) -> None:
    timer.schedule(0, recorder, "zero")
    timer.schedule(-7, recorder, "negative")
    assert recorder.fired == [(0, "zero"), (0, "negative")]
    assert timer.size == 0


def test_each_task_runs_exactly_at_its_expiration_with_a_1ms_tick(
    timer: SystemTimer, clock: ManualClock, recorder: Recorder
) -> None:
    delays = [1, 2, 19, 20, 21, 399, 400, 401, 1234, 7999, 8000, 8001, 20_000]
    for d in delays:
        timer.schedule(d, recorder, d)
    assert timer.size == len(delays)
    step(timer, clock, 20_001)
    assert recorder.fired == [(d, d) for d in delays]
    assert timer.size == 0


@pytest.mark.parametrize("tick_ms", [3, 10])
def test_a_coarse_tick_runs_a_task_at_its_buckets_start(tick_ms: int) -> None:
    clock = ManualClock(0)
    recorder = Recorder(clock)
    with SystemTimer("coarse", tick_ms=tick_ms, clock=clock, executor=InlineExecutor()) as timer:
        delays = list(range(1, 300, 7))
        for d in delays:
            timer.schedule(d, recorder, d)
        step(timer, clock, 300)
    fired = {label: at for at, label in recorder.fired}
    assert sorted(fired) == delays
    for d, at in fired.items():
        assert 0 <= d - at < tick_ms
        assert at == max(0, d - d % tick_ms)


def test_cancelled_tasks_never_run(
    timer: SystemTimer, clock: ManualClock, recorder: Recorder
) -> None:
    keep = timer.schedule(30, recorder, "keep")
    gone = [timer.schedule(d, recorder, d) for d in (5, 30, 500, 9000)]
    for task in gone:
        task.cancel()
    assert timer.size == 1
    step(timer, clock, 10_000)
    assert recorder.fired == [(30, "keep")]
    assert keep.timer_task_entry is None  # unbound once it ran


def test_adding_a_task_again_moves_it(
    timer: SystemTimer, clock: ManualClock, recorder: Recorder
) -> None:
    task = timer.schedule(100, recorder, "moved")
    step(timer, clock, 10)
    timer.add(task)  # again: now due at 10 + 100
    assert timer.size == 1
    step(timer, clock, 200)
    assert recorder.fired == [(110, "moved")]


def test_a_task_that_was_cancelled_can_be_added_again(
    timer: SystemTimer, clock: ManualClock, recorder: Recorder
) -> None:
    task = timer.schedule(5, recorder, "again")
    task.cancel()
    timer.add(task)
    step(timer, clock, 5)
    assert recorder.fired == [(5, "again")]


def test_size_counts_pending_tasks_across_all_wheels(
    timer: SystemTimer, clock: ManualClock
) -> None:
    tasks = [timer.schedule(d, lambda: None) for d in (5, 50, 5_000, 500_000)]
    assert timer.size == 4
    tasks[2].cancel()
    assert timer.size == 3
    step(timer, clock, 50)
    assert timer.size == 1


def test_advance_clock_reports_whether_anything_expired(
    timer: SystemTimer, clock: ManualClock, recorder: Recorder
) -> None:
    assert not timer.advance_clock(0)
    timer.schedule(10, recorder, "x")
    clock.advance(9)
    assert not timer.advance_clock(1000)  # a manual clock never waits
    clock.advance(1)
    assert timer.advance_clock(0)
    assert recorder.fired == [(10, "x")]
    assert not timer.advance_clock(0)


def test_advance_clock_jumps_straight_to_the_due_buckets(
    timer: SystemTimer, clock: ManualClock, recorder: Recorder
) -> None:
    for d in (3, 700, 9_000):
        timer.schedule(d, recorder, d)
    clock.advance(10_000)
    assert timer.advance_clock(0)
    assert sorted(label for _, label in recorder.fired) == [3, 700, 9_000]  # type: ignore[type-var]


def test_next_expiration_follows_the_earliest_bucket(timer: SystemTimer) -> None:
    assert timer.next_expiration_ms() is None
    timer.schedule(500, lambda: None)
    assert timer.next_expiration_ms() == 400  # level-1 bucket [400, 420)
    timer.schedule(7, lambda: None)
    assert timer.next_expiration_ms() == 7


def test_a_task_may_add_and_cancel_tasks_of_its_own_timer(
    timer: SystemTimer, clock: ManualClock, recorder: Recorder
) -> None:
    victim = timer.schedule(20, recorder, "victim")

    def chain() -> None:
        victim.cancel()
        timer.schedule(5, recorder, "chained")

    timer.schedule(10, chain)
    step(timer, clock, 30)
    assert recorder.fired == [(15, "chained")]


def test_a_failing_task_does_not_stop_the_others(
    timer: SystemTimer, clock: ManualClock, recorder: Recorder
) -> None:
    def boom() -> None:
        raise RuntimeError("boom")

    timer.schedule(5, boom)
    timer.schedule(5, recorder, "after")
    step(timer, clock, 5)
    assert recorder.fired == [(5, "after")]


def test_schedule_passes_arguments(
    timer: SystemTimer, clock: ManualClock, recorder: Recorder
) -> None:
    timer.schedule(2, recorder, "with-args")
    timer.schedule(2, lambda: recorder("no-args"))
    step(timer, clock, 2)
    assert sorted(recorder.fired) == [(2, "no-args"), (2, "with-args")]  # type: ignore[type-var]


def test_subclassed_task_runs(timer: SystemTimer, clock: ManualClock) -> None:
    class Flag(TimerTask):
        def __init__(self, delay_ms: int) -> None:
            super().__init__(delay_ms)
            self.ran = 0

        def run(self) -> None:
            self.ran += 1

    task = Flag(3)
    timer.add(task)
    step(timer, clock, 10)
    assert task.ran == 1


def test_close_stops_the_executor_and_refuses_adds(clock: ManualClock) -> None:
    executor = ThreadExecutor("executor-closing")
    timer = SystemTimer("closing", clock=clock, executor=executor)
    with timer:
        done = threading.Event()
        timer.schedule(0, done.set)
        assert done.wait(5)
    assert timer.closed
    with pytest.raises(RuntimeError, match="closed"):
        timer.schedule(1, lambda: None)
    with pytest.raises(RuntimeError, match="shut down"):
        executor.execute(lambda: None)
    timer.close()  # idempotent


def test_close_unbinds_pending_tasks_so_they_are_freed(clock: ManualClock) -> None:
    timer = SystemTimer("closing", clock=clock, executor=InlineExecutor())
    tasks = [timer.schedule(delay_ms, lambda: None) for delay_ms in (1, 50, 5_000, 500_000)]
    assert all(task.timer_task_entry is not None for task in tasks)
    timer.close()
    assert all(task.timer_task_entry is None for task in tasks)
    assert timer.size == 0
    task = tasks[0]
    del tasks
    # Only this frame holds the task (and getrefcount's argument): its entry let go.
    assert sys.getrefcount(task) == 2


def test_a_timer_dropped_without_close_lets_its_pending_tasks_go(clock: ManualClock) -> None:
    # The compiled build keeps entries out of the cyclic GC, so a pending task and its
    # entry would outlive a timer dropped without close(); the timer's __del__ unbinds them.
    timer = SystemTimer("dropped", clock=clock, executor=InlineExecutor())
    tasks = [timer.schedule(delay_ms, lambda: None) for delay_ms in (1, 50, 5_000, 500_000)]
    del timer
    gc.collect()
    assert all(task.timer_task_entry is None for task in tasks)
    task = tasks[0]
    del tasks
    assert sys.getrefcount(task) == 2


def test_a_timer_whose_construction_failed_has_nothing_to_release(clock: ManualClock) -> None:
    with pytest.raises(ValueError, match="wheel_size"):
        SystemTimer("invalid", clock=clock, executor=InlineExecutor(), wheel_size=1)
    gc.collect()  # __del__ of the half-built timer ran without raising (pytest would warn)


def test_default_executor_runs_tasks_on_a_named_worker_thread(clock: ManualClock) -> None:
    names: list[str] = []
    done = threading.Event()
    with SystemTimer("named", clock=clock) as timer:

        def record() -> None:
            names.append(threading.current_thread().name)
            done.set()

        timer.schedule(5, record)
        clock.advance(5)
        assert timer.advance_clock(0)
        assert done.wait(5)
    assert names == ["executor-named"]


def test_advance_clock_waits_at_most_its_timeout_on_a_real_clock() -> None:
    with SystemTimer("waits", clock=SystemClock(), executor=InlineExecutor()) as timer:
        started = time.monotonic()
        assert not timer.advance_clock(30)
        elapsed_s = time.monotonic() - started
    assert 0.025 <= elapsed_s < 2.0


class _SignallingClock(SystemClock):
    """A system clock that tells the test when a timer starts waiting on it."""

    def __init__(self) -> None:
        self.waiting = threading.Event()

    def wait_ms(self, condition: threading.Condition, timeout_ms: int) -> bool:
        self.waiting.set()
        return super().wait_ms(condition, timeout_ms)


@pytest.mark.parametrize("lag_ms", [0, 17])
def test_a_waiting_advance_clock_is_woken_by_an_earlier_add(lag_ms: int) -> None:
    """One wait runs the task, even when the wheel lags the clock (it started earlier).

    With a lag of 17 ms a 5 ms task used to land in a level-1 bucket starting 3 ms ahead,
    whose expiry only cascaded it: the wait returned True with nothing run. That is what
    made this test flaky when more than 15 ms passed between SystemTimer() and schedule().
    """
    fired = threading.Event()
    clock = _SignallingClock()
    start_ms = clock.now_ms() - lag_ms
    with SystemTimer("woken", clock=clock, start_ms=start_ms, executor=InlineExecutor()) as timer:
        result: list[bool] = []
        waiter = threading.Thread(target=lambda: result.append(timer.advance_clock(60_000)))
        waiter.start()
        assert clock.waiting.wait(10)
        timer.schedule(5, fired.set)
        waiter.join(timeout=10)
        assert result == [True]
        assert fired.is_set()


def test_an_add_after_the_clock_ran_ahead_of_the_wheel_takes_one_expiry(
    timer: SystemTimer, clock: ManualClock, recorder: Recorder
) -> None:
    """The wheel moves only when the clock is advanced; an add first brings it to now."""
    clock.advance(17)  # nobody advanced the timer meanwhile
    timer.schedule(5, recorder, "late")
    assert timer.next_expiration_ms() == 22  # its own level-0 bucket, not level 1's [20, 40)
    expired_at_ms = []
    for _ in range(10):
        clock.advance(1)
        if timer.advance_clock(0):
            expired_at_ms.append(clock.now_ms())
    assert expired_at_ms == [22]
    assert recorder.fired == [(22, "late")]


def test_the_wheel_does_not_move_past_a_bucket_that_is_due(
    timer: SystemTimer, clock: ManualClock, recorder: Recorder
) -> None:
    """A bucket due but not yet expired keeps the wheel where it is until it expires.

    Moved to 10 while the bucket for 3 waits, the wheel would put an entry due at 23 in
    that same slot and re-queue a bucket that is queued already.
    """
    timer.schedule(3, recorder, "due")
    clock.advance(10)
    timer.schedule(13, recorder, "same slot one rotation later")
    assert timer.wheel.current_time_ms == 0
    step(timer, clock, 15)
    assert recorder.fired == [(11, "due"), (23, "same slot one rotation later")]


def test_a_task_cancelled_by_one_that_ran_before_it_in_the_same_expiry_does_not_run(
    timer: SystemTimer, clock: ManualClock
) -> None:
    """Both are due at 5; whichever runs first cancels the other, and cancel says it won."""
    ran: list[str] = []
    cancel_results: list[bool] = []
    tasks: dict[str, CallbackTask] = {}

    def run_and_cancel_the_other(name: str) -> None:
        ran.append(name)
        other = "second" if name == "first" else "first"
        cancel_results.append(tasks[other].cancel())

    for name in ("first", "second"):
        tasks[name] = CallbackTask(5, partial(run_and_cancel_the_other, name))
        timer.add(tasks[name])
    step(timer, clock, 5)
    assert len(ran) == 1
    assert cancel_results == [True]
    assert [task.cancel() for task in tasks.values()] == [False, False]
    assert timer.size == 0


def test_wakeup_makes_a_waiting_advance_clock_return() -> None:
    clock = _SignallingClock()
    with SystemTimer("wakeup", clock=clock, executor=InlineExecutor()) as timer:
        result: list[bool] = []
        waiter = threading.Thread(target=lambda: result.append(timer.advance_clock(60_000)))
        waiter.start()
        assert clock.waiting.wait(10)
        timer.wakeup()
        waiter.join(timeout=10)
        assert result == [False]


# ---- model-based test ---------------------------------------------------------------

_OPS = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 7), st.integers(-2, 600)),
    st.tuples(st.just("add"), st.integers(0, 7), st.integers(600, 30_000)),
    st.tuples(st.just("cancel"), st.integers(0, 7), st.just(0)),
    st.tuples(st.just("advance"), st.integers(1, 40), st.just(0)),
    st.tuples(st.just("jump"), st.integers(1, 12_000), st.just(0)),
)


@settings(max_examples=150, deadline=None)
@given(tick_ms=st.sampled_from([1, 1, 4, 20]), ops=st.lists(_OPS, max_size=60))
def test_matches_a_sorted_list_model(tick_ms: int, ops: list[tuple[str, int, int]]) -> None:
    """Random add/cancel/advance against a sorted list of (fire_at_ms, task id).

    The model: a task added at ``now`` with expiration ``e`` is due at ``e`` truncated to
    the tick (its level-0 bucket's start), or at once if that is not after ``now``; each
    ``advance_clock`` runs every due task, reported at the clock's time.
    """
    clock = ManualClock(0)
    fired: list[tuple[int, int]] = []
    model: list[tuple[int, int]] = []  # sorted (fire_at_ms, id)
    expected: list[tuple[int, int]] = []
    tasks: dict[int, TimerTask] = {}

    def run_due() -> None:
        now = clock.now_ms()
        while model and model[0][0] <= now:
            expected.append((now, model.pop(0)[1]))

    with SystemTimer("model", tick_ms=tick_ms, clock=clock, executor=InlineExecutor()) as timer:
        for op, arg, delay_ms in ops:
            if op == "add":
                task = tasks.get(arg)
                if task is None:
                    task = tasks[arg] = timer.schedule(
                        delay_ms, lambda i=arg: fired.append((clock.now_ms(), i))
                    )
                else:
                    task.delay_ms = delay_ms
                    timer.add(task)
                model[:] = [m for m in model if m[1] != arg]
                now = clock.now_ms()
                expiration_ms = now + delay_ms
                fire_at = expiration_ms - expiration_ms % tick_ms
                if fire_at <= now:
                    expected.append((now, arg))
                else:
                    model.append((fire_at, arg))
                    model.sort()
            elif op == "cancel":
                if arg in tasks:
                    tasks[arg].cancel()
                model[:] = [m for m in model if m[1] != arg]
            elif op == "advance":
                for _ in range(arg):
                    clock.advance(1)
                    timer.advance_clock(0)
                    run_due()
            else:
                clock.advance(arg)
                timer.advance_clock(0)
                run_due()
            assert timer.size == len(model)
            assert sorted(fired) == sorted(expected)
