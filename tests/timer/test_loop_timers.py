"""``LoopTimers`` and ``Scheduler`` on a ``ManualClock``: one ``advance`` moves every timer.

The model: every task runs once, at its own expiration, seen on the clock; tasks run in
the order of their expirations whatever timer holds them; nothing runs before
``advance`` passes its time, and all that is due has run when ``advance`` returns --
also when ``advance`` is called from another thread than the loop's.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.timer import LoopTimers, ManualClock, Scheduler

Record = list[tuple[str, int]]
_WAIT_S = 10.0
_POLL_S = 0.005


def _run_on_loop(body: Callable[[LoopTimers], Awaitable[None]], clock: ManualClock) -> None:
    async def main() -> None:
        timers = LoopTimers(clock)
        timers.start()
        try:
            await body(timers)
        finally:
            timers.stop()

    asyncio.run(main())


def test_one_advance_runs_the_due_tasks_of_every_timer_in_expiration_order() -> None:
    clock = ManualClock(1_000)
    ran: Record = []

    async def body(timers: LoopTimers) -> None:
        first, second = timers.new_timer("first"), timers.new_timer("second")

        def record(name: str) -> None:
            ran.append((name, clock.now_ms()))

        def chain() -> None:
            record("first+20")
            second.schedule(5, record, "second+25")

        first.schedule(30, record, "first+30")
        second.schedule(10, record, "second+10")
        first.schedule(20, chain)
        clock.advance(29)
        assert ran == [("second+10", 1_010), ("first+20", 1_020), ("second+25", 1_025)]
        clock.advance(1)
        assert ran[-1] == ("first+30", 1_030)
        assert clock.now_ms() == 1_030

    _run_on_loop(body, clock)


@settings(max_examples=50, deadline=None)
@given(
    delays=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 5_000)), max_size=30),
    steps=st.lists(st.integers(0, 3_000), min_size=1, max_size=6),
)
def test_tasks_run_at_their_expiration_in_order_as_the_model_says(
    delays: list[tuple[int, int]], steps: list[int]
) -> None:
    clock = ManualClock(0)
    ran: list[tuple[int, int]] = []

    async def body(timers: LoopTimers) -> None:
        wheels = [timers.new_timer(f"t{i}") for i in range(3)]
        for index, (wheel, delay_ms) in enumerate(delays):
            wheels[wheel].schedule(delay_ms, lambda i=index: ran.append((i, clock.now_ms())))
        for step_ms in steps:
            clock.advance(step_ms)
            expected = sorted(
                ((i, d) for i, (_, d) in enumerate(delays) if d <= clock.now_ms()),
                key=lambda item: item[1],
            )
            # Each ran at its own expiration; in expiration order (ties in any order).
            assert sorted(ran) == sorted(expected)
            assert [at for _, at in ran] == sorted(at for _, at in ran)

    _run_on_loop(body, clock)


@pytest.fixture
def loop_in_thread() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()


def _on(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> object:
    async def call() -> object:
        return fn()

    return asyncio.run_coroutine_threadsafe(call(), loop).result()


def test_an_advance_from_another_thread_returns_once_the_loop_ran_the_tasks(
    loop_in_thread: asyncio.AbstractEventLoop,
) -> None:
    clock = ManualClock(0)
    timers = LoopTimers(clock)
    timer = timers.new_timer("t")
    threads: list[int] = []
    _on(loop_in_thread, timers.start)
    timer.schedule(100, lambda: threads.append(threading.get_ident()))
    clock.advance(99)
    assert threads == []
    clock.advance(1)
    assert threads == [loop_in_thread._thread_id]  # type: ignore[attr-defined]
    _on(loop_in_thread, timers.stop)


def test_the_scheduler_runs_a_task_every_period_and_waits_for_async_runs(
    loop_in_thread: asyncio.AbstractEventLoop,
) -> None:
    clock = ManualClock(0)
    timers = LoopTimers(clock)
    scheduler = Scheduler(timers)
    sync_runs: list[int] = []
    async_runs: list[int] = []

    async def slow() -> None:
        await asyncio.to_thread(lambda: None)  # work on another thread, as a checkpoint
        async_runs.append(clock.now_ms())

    def start() -> None:
        timers.start()
        scheduler.schedule("sync", lambda: sync_runs.append(clock.now_ms()), 100)
        scheduler.schedule("async", slow, 250, delay_ms=0)

    _on(loop_in_thread, start)
    deadline_s = time.monotonic() + _WAIT_S
    while async_runs != [0]:  # delay 0: started at once, finishing on the loop
        assert time.monotonic() < deadline_s
        time.sleep(_POLL_S)
    clock.advance(1_000)
    assert sync_runs == list(range(100, 1_001, 100))
    assert async_runs == [0, 250, 500, 750, 1_000]
    _on(loop_in_thread, lambda: asyncio.ensure_future(scheduler.shutdown()))
    clock.advance(1_000)
    assert len(sync_runs) == 10
    _on(loop_in_thread, timers.stop)


def test_a_failing_scheduled_task_is_logged_and_runs_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(0)
    runs: list[int] = []

    def fails() -> None:
        runs.append(clock.now_ms())
        raise RuntimeError("boom")

    async def body(timers: LoopTimers) -> None:
        scheduler = Scheduler(timers)
        scheduler.schedule("fails", fails, 10)
        clock.advance(30)
        await scheduler.shutdown()

    _run_on_loop(body, clock)
    assert runs == [10, 20, 30]
    assert "scheduled task fails failed" in caplog.text


def test_a_failing_async_run_is_logged_and_runs_again(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(0)
    runs: list[int] = []

    async def fails() -> None:
        runs.append(clock.now_ms())
        raise RuntimeError("boom")

    async def body(timers: LoopTimers) -> None:
        scheduler = Scheduler(timers)
        scheduler.schedule("fails-async", fails, 10)
        for _ in range(3):
            clock.advance(10)
            await asyncio.sleep(0)  # the run's task starts
            await asyncio.sleep(0)  # its done callbacks schedule the next run
        await scheduler.shutdown()

    _run_on_loop(body, clock)
    assert runs == [10, 20, 30]
    assert "scheduled task fails-async failed" in caplog.text


def test_a_run_cancelled_by_shutdown_before_it_started_is_closed() -> None:
    clock = ManualClock(0)
    started: list[int] = []
    collected: list[str] = []

    async def checkpoint() -> None:
        started.append(clock.now_ms())

    def unraisable(hook: object) -> None:
        collected.append(repr(hook))

    async def body(timers: LoopTimers) -> None:
        scheduler = Scheduler(timers)
        scheduler.schedule("checkpoint", checkpoint, 10)
        clock.advance(10)  # the run's task is created, not started
        await scheduler.shutdown()

    previous = sys.unraisablehook
    sys.unraisablehook = unraisable
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            _run_on_loop(body, clock)
            gc.collect()
    finally:
        sys.unraisablehook = previous
    assert started == []
    assert collected == []


def test_a_cancelled_schedule_runs_no_more() -> None:
    clock = ManualClock(0)
    runs: list[int] = []

    async def body(timers: LoopTimers) -> None:
        scheduler = Scheduler(timers)
        task = scheduler.schedule("t", lambda: runs.append(clock.now_ms()), 10)
        clock.advance(20)
        task.cancel()
        clock.advance(20)
        await scheduler.shutdown()

    _run_on_loop(body, clock)
    assert runs == [10, 20]


def test_on_the_system_clock_each_timer_has_its_asyncio_driver() -> None:
    async def main() -> None:
        timers = LoopTimers()
        assert not timers.manual
        timers.start()
        fired = asyncio.get_running_loop().create_future()
        timers.new_timer("late").schedule(5, fired.set_result, True)  # created after start
        assert await asyncio.wait_for(fired, 5.0)
        timers.stop()

    asyncio.run(main())
