"""TimerReaper and AsyncioTimerDriver: driving a SystemTimer from a thread or a loop."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tickwheel.timer import (
    AsyncioTimerDriver,
    InlineExecutor,
    ManualClock,
    SystemClock,
    SystemTimer,
    TimerReaper,
    TimerTask,
)

_WAIT_S = 10.0


def test_reaper_runs_due_tasks_and_stops() -> None:
    done = threading.Event()
    with SystemTimer("reaped", clock=SystemClock()) as timer, TimerReaper(timer, poll_ms=50):
        timer.schedule(20, done.set)
        assert done.wait(_WAIT_S)
        assert timer.size == 0


def test_an_earlier_add_wakes_the_reaper_before_its_poll_ends() -> None:
    done = threading.Event()
    with SystemTimer("woken", clock=SystemClock()) as timer:
        reaper = TimerReaper(timer, poll_ms=600_000)
        reaper.start()
        timer.schedule(10, done.set)
        assert done.wait(_WAIT_S)  # not 10 minutes
        reaper.stop()
        assert not reaper.running


def test_timer_close_stops_its_reaper() -> None:
    timer = SystemTimer("closes-reaper", clock=SystemClock())
    reaper = TimerReaper(timer, poll_ms=600_000)
    reaper.start()
    timer.close()
    assert not reaper.running


def test_reaper_on_a_manual_clock_rests_instead_of_spinning() -> None:
    clock = ManualClock(0)
    done = threading.Event()
    timer = SystemTimer("manual-reaper", clock=clock, executor=InlineExecutor())
    with timer, TimerReaper(timer, poll_ms=5):
        timer.schedule(100, done.set)
        clock.advance(100)
        assert done.wait(_WAIT_S)


def test_reaper_validates_poll() -> None:
    with SystemTimer("v", clock=ManualClock()) as timer, pytest.raises(ValueError, match="poll_ms"):
        TimerReaper(timer, poll_ms=0)


def test_threads_adding_and_cancelling_while_a_reaper_advances() -> None:
    """Bounded stress: every task either runs exactly once or was cancelled, never both."""
    threads_n, tasks_per_thread = 4, 3000
    ran: dict[int, int] = {}
    ran_lock = threading.Lock()
    all_done = threading.Event()
    expected_runs: list[set[int]] = [set() for _ in range(threads_n)]

    class Counted(TimerTask):
        def __init__(self, delay_ms: int, key: int) -> None:
            super().__init__(delay_ms)
            self.key = key

        def run(self) -> None:
            with ran_lock:
                ran[self.key] = ran.get(self.key, 0) + 1

    with SystemTimer("stress", clock=SystemClock()) as timer, TimerReaper(timer, poll_ms=20):

        def worker(n: int) -> None:
            rnd = random.Random(n)
            mine: list[Counted] = []
            for i in range(tasks_per_thread):
                task = Counted(rnd.randint(0, 200), n * tasks_per_thread + i)
                timer.add(task)
                mine.append(task)
                if rnd.random() < 0.5:
                    victim = rnd.choice(mine)
                    victim.cancel()
                    mine.remove(victim)
            expected_runs[n] = {t.key for t in mine}

        workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads_n)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        expected = set().union(*expected_runs)
        timer.schedule(400, all_done.set)
        assert all_done.wait(_WAIT_S * 3)
        while timer.size:
            assert timer.advance_clock(1000) or timer.size == 0
    assert set(ran) >= expected
    assert all(count == 1 for count in ran.values())


# ---- asyncio driver -----------------------------------------------------------------


class _CountingCallAt:
    """Wraps ``loop.call_at`` to count the driver's handles that are armed and live."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.original = loop.call_at
        self.handles: list[asyncio.TimerHandle] = []

    def __call__(
        self, when: float, callback: Callable[..., object], *args: Any, **kwargs: Any
    ) -> asyncio.TimerHandle:
        handle = self.original(when, callback, *args, **kwargs)
        if getattr(callback, "__self__", None).__class__ is AsyncioTimerDriver:
            self.handles.append(handle)
        return handle

    def live(self) -> int:
        now = self.loop.time()
        return sum(1 for h in self.handles if not h.cancelled() and h.when() > now)


@pytest.mark.asyncio
async def test_driver_runs_expirations_on_the_loop_thread() -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []
    fired = asyncio.Event()
    with SystemTimer("loop", clock=SystemClock(), executor=InlineExecutor()) as timer:
        driver = AsyncioTimerDriver(timer)
        driver.start()

        def on_expiry() -> None:
            seen.append(threading.get_ident())
            fired.set()

        timer.schedule(15, on_expiry)
        await asyncio.wait_for(fired.wait(), _WAIT_S)
        assert seen == [loop_thread]
        driver.stop()


@pytest.mark.asyncio
async def test_driver_keeps_exactly_one_call_at_and_rearms_for_earlier_adds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    counting = _CountingCallAt(loop)
    monkeypatch.setattr(loop, "call_at", counting)
    early = asyncio.Event()
    with SystemTimer("rearm", clock=SystemClock(), executor=InlineExecutor()) as timer:
        driver = AsyncioTimerDriver(timer)
        driver.start()
        assert driver.armed_expiration_ms is None
        timer.schedule(60_000, lambda: None)
        far = driver.armed_expiration_ms
        assert far is not None
        for d in (50_000, 40_000, 30_000):  # later or same bucket level: no re-arm needed
            timer.schedule(d, lambda: None)
            assert counting.live() == 1
        timer.schedule(10, early.set)
        armed = driver.armed_expiration_ms
        assert armed is not None
        assert armed < far
        assert counting.live() == 1
        await asyncio.wait_for(early.wait(), _WAIT_S)
        assert counting.live() == 1  # re-armed for the far buckets
        driver.stop()
        assert counting.live() == 0
        assert driver.armed_expiration_ms is None


@pytest.mark.asyncio
async def test_adds_from_another_thread_rearm_through_the_loop() -> None:
    fired = asyncio.Event()
    loop = asyncio.get_running_loop()
    with SystemTimer("threaded-add", clock=SystemClock(), executor=InlineExecutor()) as timer:
        driver = AsyncioTimerDriver(timer)
        driver.start()
        adder = threading.Thread(
            target=timer.schedule, args=(10, loop.call_soon_threadsafe, fired.set)
        )
        adder.start()
        adder.join()
        await asyncio.wait_for(fired.wait(), _WAIT_S)
        driver.stop()


@pytest.mark.asyncio
async def test_timer_close_stops_the_driver() -> None:
    timer = SystemTimer("close-driver", clock=SystemClock(), executor=InlineExecutor())
    driver = AsyncioTimerDriver(timer)
    driver.start()
    timer.schedule(1000, lambda: None)
    timer.close()
    assert not driver.running
    assert driver.armed_expiration_ms is None


@pytest.mark.asyncio
async def test_only_one_driver_may_listen() -> None:
    with SystemTimer("one-driver", clock=SystemClock(), executor=InlineExecutor()) as timer:
        first = AsyncioTimerDriver(timer)
        first.start()
        with pytest.raises(RuntimeError, match="wakeup listener"):
            AsyncioTimerDriver(timer).start()
        first.stop()
