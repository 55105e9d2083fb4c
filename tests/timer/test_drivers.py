"""TimerReaper and AsyncioTimerDriver: driving a SystemTimer from a thread or a loop."""

from __future__ import annotations

import asyncio
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
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
_LONG_POLL_MS = 30_000
_STOP_ROUNDS = 300
_SWITCH_INTERVAL_S = 1e-6
_CLOCK_STEP_S = 0.001


class _SignallingClock(SystemClock):
    """A system clock that tells the test when a timer starts waiting on it."""

    def __init__(self) -> None:
        self.waiting = threading.Event()

    def wait_ms(self, condition: threading.Condition, timeout_ms: int) -> bool:
        self.waiting.set()
        return super().wait_ms(condition, timeout_ms)


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


@pytest.fixture
def fine_grained_switching() -> Iterator[None]:
    """Switch threads as often as CPython allows, to open every race window."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    yield
    sys.setswitchinterval(previous)


@pytest.mark.usefixtures("fine_grained_switching")
def test_reaper_stop_never_waits_out_the_poll() -> None:
    """Stopped at every point of its loop -- just started, about to wait, waiting."""
    with SystemTimer("stops", clock=SystemClock(), executor=InlineExecutor()) as timer:
        for _ in range(_STOP_ROUNDS):
            reaper = TimerReaper(timer, poll_ms=_LONG_POLL_MS)
            reaper.start()
            started_s = time.monotonic()
            reaper.stop()
            # A stop that missed the reaper's wait would take _LONG_POLL_MS.
            assert time.monotonic() - started_s < _WAIT_S
            assert not reaper.running


class _StopsItsReaper(SystemClock):
    """A system clock that stops the reaper the first time the reaper thread reads it.

    That read comes after the reaper checked its stop flag and before the timer begins
    to wait: the window in which a stop used to be missed.
    """

    def __init__(self, reaper_thread_name: str) -> None:
        self.reaper_thread_name = reaper_thread_name
        self.reaper: TimerReaper | None = None

    def now_ms(self) -> int:
        reaper = self.reaper
        if reaper is not None and threading.current_thread().name == self.reaper_thread_name:
            self.reaper = None
            reaper.stop()
        return super().now_ms()


def test_a_stop_between_the_reapers_check_and_its_wait_ends_the_wait() -> None:
    clock = _StopsItsReaper("ExpirationReaper-stop-window")
    with SystemTimer("stop-window", clock=clock, executor=InlineExecutor()) as timer:
        reaper = TimerReaper(timer, poll_ms=_LONG_POLL_MS)
        clock.reaper = reaper
        reaper.start()
        # Join the thread without calling stop() again (its wakeup would rescue a wait
        # that missed the first one).
        for thread in threading.enumerate():
            if thread.name == clock.reaper_thread_name:
                thread.join(_WAIT_S)
        assert not reaper.running  # not after _LONG_POLL_MS
        assert clock.reaper is None  # the stop did land in the window


def test_a_reaper_woken_early_goes_back_to_waiting_on_the_timer() -> None:
    """After a wakeup that expired nothing, an earlier add is still served at once."""
    clock = _SignallingClock()
    done = threading.Event()
    timer = SystemTimer("woken-early", clock=clock, executor=InlineExecutor())
    with timer, TimerReaper(timer, poll_ms=_LONG_POLL_MS):
        assert clock.waiting.wait(_WAIT_S)
        # Let the clock move past the start of the reaper's step, so that the step
        # reads as one that waited (as a step cut short by a wakeup has).
        waiting_ms = clock.now_ms()
        while clock.now_ms() == waiting_ms:
            time.sleep(_CLOCK_STEP_S)
        timer.wakeup()
        timer.schedule(5, done.set)
        assert done.wait(_WAIT_S)  # not after a rest of _LONG_POLL_MS


def test_reaper_validates_poll() -> None:
    with SystemTimer("v", clock=ManualClock()) as timer, pytest.raises(ValueError, match="poll_ms"):
        TimerReaper(timer, poll_ms=0)


def test_threads_adding_and_cancelling_while_a_reaper_advances() -> None:
    """Bounded stress: every task either runs exactly once or was cancelled, never both.

    Delays start at 1 ms (a task with delay 0 runs inside ``add``, before any cancel).
    A cancel that comes too late -- the reaper already took the task to run -- returns
    False, and the task must then run; one that returns True must keep it from running.
    """
    threads_n, tasks_per_thread = 4, 3000
    ran: dict[int, int] = {}
    ran_lock = threading.Lock()
    all_done = threading.Event()
    cancelled_keys: list[set[int]] = [set() for _ in range(threads_n)]

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
                task = Counted(rnd.randint(1, 200), n * tasks_per_thread + i)
                timer.add(task)
                mine.append(task)
                if rnd.random() < 0.5:
                    victim = rnd.choice(mine)
                    mine.remove(victim)
                    if victim.cancel():
                        cancelled_keys[n].add(victim.key)

        workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads_n)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        expected = set(range(threads_n * tasks_per_thread)) - set().union(*cancelled_keys)
        timer.schedule(400, all_done.set)
        assert all_done.wait(_WAIT_S * 3)
        while timer.size:
            assert timer.advance_clock(1000) or timer.size == 0
    assert set(ran) == expected
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
