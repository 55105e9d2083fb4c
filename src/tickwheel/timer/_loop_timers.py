"""``LoopTimers``: the timers of one component on an event loop, and what drives them.

A broker's parts each own ``SystemTimer``\\ s (a purgatory's, the scheduler's) whose
tasks run on the event loop (``InlineExecutor``). ``new_timer(name)`` creates one on the
component's clock; what drives it depends on that clock:

- On a ``SystemClock`` (the default), each timer gets its ``AsyncioTimerDriver``: one
  ``loop.call_at`` armed for its earliest bucket, as before there was a choice.
- On a ``ManualClock``, no ``call_at`` is armed (loop time and clock time have nothing
  in common). ``start`` registers this object as one of the clock's listeners: when a
  test calls ``clock.advance(ms)``, each step of the clock expires every due bucket of
  every timer here, on the loop. Called on the loop's thread, that happens inline;
  called from another thread (a test driving a ``BackgroundBroker``), the step is handed
  to the loop and ``advance`` blocks until it ran -- and until the asyncio tasks those
  timer tasks started and handed to ``track`` (a checkpoint written on a worker thread)
  have finished, so that the next step sees their effects.

New timers plug in by calling ``new_timer``: nothing else changes for a manual clock.

Concurrency: ``new_timer``, ``start``, ``stop`` and ``track`` on the loop's thread
(``new_timer`` also before ``start``; a timer created after it is driven at once).
``next_expiration_ms`` and ``on_time_updated`` are the clock's, called from whatever
thread calls ``advance``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

from tickwheel.timer._asyncio_driver import AsyncioTimerDriver
from tickwheel.timer._clock import Clock, ManualClock, SystemClock
from tickwheel.timer._executor import InlineExecutor
from tickwheel.timer._system_timer import SystemTimer


class LoopTimers:
    """``SystemTimer``\\ s on one clock whose tasks run on one event loop."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = SystemClock() if clock is None else clock
        self._manual = self.clock if isinstance(self.clock, ManualClock) else None
        self._timers: list[SystemTimer] = []
        self._drivers: list[AsyncioTimerDriver] = []
        self._in_flight: set[asyncio.Future[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread_id: int | None = None
        self._running = False

    @property
    def manual(self) -> bool:
        """True when the clock is a ``ManualClock`` (time moves only by ``advance``)."""
        return self._manual is not None

    @property
    def timers(self) -> tuple[SystemTimer, ...]:
        """Every timer created here."""
        return tuple(self._timers)

    def new_timer(self, name: str) -> SystemTimer:
        """A timer on this clock whose tasks run on the loop (driven once started)."""
        timer = SystemTimer(name, clock=self.clock, executor=InlineExecutor())
        self._timers.append(timer)
        if self._manual is None:
            driver = AsyncioTimerDriver(timer)
            self._drivers.append(driver)
            if self._running:
                driver.start()
        return timer

    def start(self) -> None:
        """Start driving the timers (call on the loop's thread)."""
        if self._running:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread_id = threading.get_ident()
        self._running = True
        for driver in self._drivers:
            driver.start()
        if self._manual is not None:
            self._manual.add_listener(self)

    def stop(self) -> None:
        """Stop driving the timers; pending tasks stay in them."""
        if not self._running:
            return
        self._running = False
        if self._manual is not None:
            self._manual.remove_listener(self)
        for driver in self._drivers:
            driver.stop()

    def track(self, task: asyncio.Future[None]) -> None:
        """Make a manual ``advance`` from another thread wait for ``task`` too."""
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    # -- the ManualClock's listener -------------------------------------------------

    def next_expiration_ms(self) -> int | None:
        """The earliest bucket expiration of all the timers, or None."""
        earliest: int | None = None
        for timer in self._timers:
            expiration_ms = timer.next_expiration_ms()
            if expiration_ms is not None and (earliest is None or expiration_ms < earliest):
                earliest = expiration_ms
        return earliest

    def on_time_updated(self) -> None:
        """Expire every due task on the loop; from another thread, wait until done."""
        loop = self._loop
        if not self._running or loop is None or loop.is_closed():
            return
        if threading.get_ident() == self._loop_thread_id:
            self._expire_due()
            return
        done = asyncio.run_coroutine_threadsafe(self._expire_and_settle(), loop)
        try:
            done.result()
        except concurrent.futures.CancelledError:
            # The loop shut down meanwhile: nothing is left to run.
            return

    def _expire_due(self) -> None:
        for timer in self._timers:
            if not timer.closed:
                timer.advance_clock(0)

    async def _expire_and_settle(self) -> None:
        if not self._running:
            return
        self._expire_due()
        while self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)

    def __repr__(self) -> str:
        return f"<LoopTimers clock={self.clock!r} timers={[t.name for t in self._timers]}>"
