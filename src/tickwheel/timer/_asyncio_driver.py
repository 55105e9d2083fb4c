"""``AsyncioTimerDriver``: drive a ``SystemTimer`` from an asyncio event loop.

In event-loop mode there is no reaper thread: the driver keeps exactly one
``loop.call_at`` armed for the earliest bucket of the timer. When it fires, the driver
calls ``advance_clock(0)`` on the loop thread -- with an ``InlineExecutor`` the expired
tasks run right there -- and arms the next bucket. Between firings the timer tells the
driver (through its wakeup listener) whenever an ``add`` queues a bucket earlier than
every other; the driver then replaces the armed handle only if the new bucket is
earlier than it. So there is one armed handle however many tasks are pending, and
adding a task costs the loop nothing unless it moves the earliest wakeup.

The timer's clock and the loop's clock need not be the same: the driver converts the
bucket's remaining time (timer clock) into a loop deadline (``loop.time()``).

Concurrency: ``start`` must be called on the loop's thread (from a coroutine or a
callback); ``stop`` may be called from any thread. Expirations run on the loop thread.
Adds from other threads are allowed: their wakeups reach the loop through
``call_soon_threadsafe``; adds on the loop thread re-arm directly, without locks or
thread hops.
"""

from __future__ import annotations

import asyncio
import threading

from tickwheel.timer._clock import MS_PER_S
from tickwheel.timer._system_timer import SystemTimer


class AsyncioTimerDriver:
    """Keeps one ``loop.call_at`` armed for the timer's earliest bucket."""

    def __init__(self, timer: SystemTimer, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.timer = timer
        self._loop = loop
        self._loop_thread_id: int | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._armed_ms: int | None = None
        self._running = False

    @property
    def running(self) -> bool:
        """True between ``start`` and ``stop``."""
        return self._running

    @property
    def armed_expiration_ms(self) -> int | None:
        """The bucket expiration (timer clock) the armed ``call_at`` is for, or None."""
        return self._armed_ms

    def start(self) -> None:
        """Arm for the earliest bucket and follow the timer's adds (call on the loop thread)."""
        if self._running:
            return
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        self._loop_thread_id = threading.get_ident()
        self._running = True
        self.timer.set_wakeup_listener(self._on_wakeup)
        self.timer.attach(self)
        self._arm_for_head()

    def stop(self) -> None:
        """Disarm and stop following the timer; pending tasks stay in the timer."""
        if not self._running:
            return
        self._running = False
        self.timer.set_wakeup_listener(None)
        self.timer.detach(self)
        handle = self._handle
        self._handle = None
        self._armed_ms = None
        if handle is not None:
            loop = self._loop
            if threading.get_ident() == self._loop_thread_id or loop is None or loop.is_closed():
                handle.cancel()
            else:
                loop.call_soon_threadsafe(handle.cancel)

    def _on_wakeup(self, expiration_ms: int) -> None:
        loop = self._loop
        if threading.get_ident() == self._loop_thread_id:
            self._arm(expiration_ms)
        elif loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._arm, expiration_ms)

    def _arm(self, expiration_ms: int) -> None:
        loop = self._loop
        if not self._running or loop is None:
            return
        armed_ms = self._armed_ms
        if armed_ms is not None and armed_ms <= expiration_ms:
            return
        if self._handle is not None:
            self._handle.cancel()
        delay_ms = max(0, expiration_ms - self.timer.clock.now_ms())
        self._handle = loop.call_at(loop.time() + delay_ms / MS_PER_S, self._fire)
        self._armed_ms = expiration_ms

    def _arm_for_head(self) -> None:
        head_ms = self.timer.next_expiration_ms()
        if head_ms is not None:
            self._arm(head_ms)

    def _fire(self) -> None:
        self._handle = None
        self._armed_ms = None
        if not self._running:
            return
        self.timer.advance_clock(0)
        if self._running:
            self._arm_for_head()

    def __repr__(self) -> str:
        return f"<AsyncioTimerDriver timer={self.timer.name!r} armed_ms={self._armed_ms}>"
