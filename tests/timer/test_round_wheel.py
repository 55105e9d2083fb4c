"""RoundWheelTimer: slot and round arithmetic, exact firing, cancel, graceful and forced stop."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.timer import InlineExecutor, ManualClock, RoundWheelTimer, SystemClock, TimerTask

from .helpers import Recorder, step


def _wheel(clock: ManualClock, wheel_size: int = 8, tick_ms: int = 1) -> RoundWheelTimer:
    return RoundWheelTimer(
        "rounds", tick_ms=tick_ms, wheel_size=wheel_size, clock=clock, executor=InlineExecutor()
    )


@pytest.mark.parametrize("size", [0, 3, 6, 100])
def test_wheel_size_must_be_a_power_of_two(size: int) -> None:
    with pytest.raises(ValueError, match="power of two"):
        RoundWheelTimer(wheel_size=size, clock=ManualClock(), executor=InlineExecutor())


def test_tick_must_be_positive() -> None:
    with pytest.raises(ValueError, match="tick_ms"):
        RoundWheelTimer(tick_ms=0, clock=ManualClock(), executor=InlineExecutor())


@pytest.mark.parametrize(
    ("delay_ms", "rounds"), [(1, 0), (7, 0), (8, 0), (9, 1), (16, 1), (17, 2), (100, 12)]
)
def test_round_count_and_exact_firing(delay_ms: int, rounds: int) -> None:
    clock = ManualClock(0)
    recorder = Recorder(clock)
    wheel = _wheel(clock)
    task = wheel.schedule(delay_ms, recorder, delay_ms)
    entry = task.timer_task_entry
    assert entry is not None
    assert entry.remaining_rounds == rounds  # type: ignore[attr-defined]
    step(wheel, clock, delay_ms - 1)
    assert recorder.fired == []
    step(wheel, clock, 1)
    assert recorder.fired == [(delay_ms, delay_ms)]
    assert wheel.size == 0


def test_slot_and_rounds_are_computed_from_the_hands_position() -> None:
    clock = ManualClock(0)
    recorder = Recorder(clock)
    wheel = _wheel(clock)
    step(wheel, clock, 13)  # the hand is past slot 13 & 7 == 5
    wheel.schedule(10, recorder, "late")
    step(wheel, clock, 20)
    assert recorder.fired == [(23, "late")]


def test_a_coarse_tick_never_runs_a_task_early() -> None:
    clock = ManualClock(0)
    recorder = Recorder(clock)
    wheel = _wheel(clock, tick_ms=10)
    for d in (1, 10, 11, 95):
        wheel.schedule(d, recorder, d)
    step(wheel, clock, 200)
    assert sorted(recorder.fired) == [(10, 1), (10, 10), (20, 11), (100, 95)]  # type: ignore[type-var]


def test_zero_delay_runs_at_once_and_cancel_prevents_running() -> None:
    clock = ManualClock(0)
    recorder = Recorder(clock)
    wheel = _wheel(clock)
    wheel.schedule(0, recorder, "now")
    doomed = wheel.schedule(5, recorder, "doomed")
    doomed.cancel()
    assert wheel.size == 0
    step(wheel, clock, 50)
    assert recorder.fired == [(0, "now")]


def test_forced_stop_returns_the_tasks_it_did_not_run() -> None:
    clock = ManualClock(0)
    recorder = Recorder(clock)
    wheel = _wheel(clock)
    tasks = [wheel.schedule(d, recorder, d) for d in (3, 30, 300)]
    step(wheel, clock, 10)
    unrun = wheel.stop()
    assert set(map(id, unrun)) == {id(tasks[1]), id(tasks[2])}
    assert recorder.fired == [(3, 3)]
    assert all(t.timer_task_entry is None for t in unrun)
    with pytest.raises(RuntimeError, match="stopped"):
        wheel.schedule(1, recorder, "late")


def test_graceful_stop_waits_for_every_pending_task() -> None:
    ran: list[int] = []
    wheel = RoundWheelTimer("graceful", wheel_size=16, clock=SystemClock())
    wheel.start()
    for d in (5, 20, 40):
        wheel.schedule(d, lambda d=d: ran.append(d))
    assert wheel.stop(graceful=True, timeout_s=30) == []
    assert sorted(ran) == [5, 20, 40]


def test_graceful_stop_gives_up_after_its_timeout_and_returns_the_rest() -> None:
    clock = ManualClock(0)
    wheel = _wheel(clock)
    task = wheel.schedule(5, lambda: None)
    unrun = wheel.stop(graceful=True, timeout_s=0.01)  # nothing moves a manual clock
    assert unrun == [task]


def test_worker_thread_runs_tasks() -> None:
    done = threading.Event()
    with RoundWheelTimer("worker", wheel_size=64, clock=SystemClock()) as wheel:
        wheel.start()
        wheel.schedule(10, done.set)
        assert done.wait(10)


@settings(max_examples=100, deadline=None)
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.integers(0, 5), st.integers(-1, 60)),
            st.tuples(st.just("cancel"), st.integers(0, 5), st.just(0)),
            st.tuples(st.just("advance"), st.integers(1, 30), st.just(0)),
        ),
        max_size=40,
    )
)
def test_round_wheel_matches_a_sorted_list_model(ops: list[tuple[str, int, int]]) -> None:
    clock = ManualClock(0)
    wheel = _wheel(clock, wheel_size=4)
    fired: list[tuple[int, int]] = []
    expected: list[tuple[int, int]] = []
    model: list[tuple[int, int]] = []
    tasks: dict[int, TimerTask] = {}
    for op, arg, delay_ms in ops:
        if op == "add":
            if arg in tasks:
                tasks[arg].cancel()
            tasks[arg] = wheel.schedule(delay_ms, lambda i=arg: fired.append((clock.now_ms(), i)))
            model[:] = [m for m in model if m[1] != arg]
            if delay_ms <= 0:
                expected.append((clock.now_ms(), arg))
            else:
                model.append((clock.now_ms() + delay_ms, arg))
                model.sort()
        elif op == "cancel":
            if arg in tasks:
                tasks[arg].cancel()
            model[:] = [m for m in model if m[1] != arg]
        else:
            for _ in range(arg):
                clock.advance(1)
                wheel.advance_clock(0)
                while model and model[0][0] <= clock.now_ms():
                    expected.append((clock.now_ms(), model.pop(0)[1]))
        assert wheel.size == len(model)
        assert sorted(fired) == sorted(expected)
