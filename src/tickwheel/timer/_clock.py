"""Clocks: where a timer reads the time, and how it waits for time to pass.

The wheel itself never reads a clock (time is passed in, as in Kafka's
``advanceClock(timeMs)``); ``SystemTimer`` reads one injected ``Clock``:

- ``SystemClock`` -- the monotonic clock in whole milliseconds; waiting blocks on a
  ``threading.Condition`` so that an ``add`` of an earlier bucket can wake the waiter.
- ``ManualClock`` -- time moves only when ``advance(ms)`` is called (like trio's
  ``MockClock`` or Kafka's ``MockTime``); it cannot wait, so a timer on a manual clock
  never sleeps and every test built on it is deterministic.

Like Kafka's ``MockTime``, a ``ManualClock`` tells its *listeners* when time moves, so
that one ``advance`` moves every timer built on it. A listener also says when its
earliest pending work falls due (``next_expiration_ms``): ``advance(ms)`` steps the
clock to each such moment in turn and tells every listener there, so a task sees the
time it was due at, tasks of different timers run in the order of their expirations,
and a periodic task due several times within one ``advance`` runs each time. When
``advance`` returns, every task due by the new time has run (a listener that hands work
to another thread waits for it: ``LoopTimers``).

Concurrency: ``SystemClock`` is stateless and safe from any thread. ``ManualClock``'s
``now_ms`` may be called from any thread (a single attribute load); ``advance`` and the
listener registry may be called from any thread too, but one thread at a time should
drive ``advance`` (tests drive it from one). Listeners run on the thread that called
``advance``.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from tickwheel.timer._build import mypyc_attr

NS_PER_MS = 1_000_000
"""Nanoseconds per millisecond: ``SystemClock``'s conversion (``SystemTimer.add`` inlines it)."""

MS_PER_S = 1000.0
"""Milliseconds per second: the one conversion between timer ms and stdlib seconds."""


class Clock(Protocol):
    """A source of time in milliseconds, and a way to wait for it to pass."""

    def now_ms(self) -> int:
        """The current time in milliseconds (monotonic, arbitrary origin)."""
        ...

    def wait_ms(self, condition: threading.Condition, timeout_ms: int) -> bool:
        """Wait on ``condition`` (held by the caller) for up to ``timeout_ms``.

        Returns False without waiting when this clock cannot let time pass by
        waiting (a manual clock), so the caller must stop waiting.
        """
        ...


class ClockListener(Protocol):
    """Told by a ``ManualClock`` when its time moved (Kafka's ``MockTimeListener``)."""

    def next_expiration_ms(self) -> int | None:
        """When this listener's earliest pending work falls due (clock ms), or None."""
        ...

    def on_time_updated(self) -> None:
        """Run everything due by the clock's time; return once it ran."""
        ...


@mypyc_attr(allow_interpreted_subclasses=True)
class SystemClock:
    """The monotonic system clock in whole milliseconds."""

    __slots__ = ()

    def now_ms(self) -> int:
        """Milliseconds of ``time.monotonic_ns()``."""
        return time.monotonic_ns() // NS_PER_MS

    def wait_ms(self, condition: threading.Condition, timeout_ms: int) -> bool:
        """Block on ``condition`` for up to ``timeout_ms`` of real time; returns True."""
        condition.wait(timeout_ms / MS_PER_S)
        return True

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when told: ``advance(ms)``."""

    __slots__ = ("_listeners", "_listeners_lock", "_now_ms")

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms
        self._listeners: list[ClockListener] = []
        self._listeners_lock = threading.Lock()

    def now_ms(self) -> int:
        """The time set by the constructor plus every ``advance``."""
        return self._now_ms

    def add_listener(self, listener: ClockListener) -> None:
        """Tell ``listener`` from now on whenever time moves."""
        with self._listeners_lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: ClockListener) -> None:
        """Stop telling ``listener`` (no error if it was not listening)."""
        with self._listeners_lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def advance(self, ms: int) -> None:
        """Move the clock forward by ``ms`` milliseconds (``ms >= 0``).

        Steps through every listener expiration up to the new time, telling all
        listeners at each; returns once everything due by the new time has run.
        """
        if ms < 0:
            raise ValueError(f"a clock cannot go back: advance({ms})")
        target_ms = self._now_ms + ms
        notified_ms: int | None = None
        while (due_ms := self._earliest_expiration_ms()) is not None and due_ms <= target_ms:
            step_ms = max(self._now_ms, due_ms)
            if step_ms == notified_ms:
                # A listener left due work behind (it is stopping): do not spin on it.
                break
            self._now_ms = step_ms
            self._notify()
            notified_ms = step_ms
        self._now_ms = target_ms
        if notified_ms != target_ms:
            self._notify()

    def _earliest_expiration_ms(self) -> int | None:
        earliest: int | None = None
        for listener in self._snapshot():
            expiration_ms = listener.next_expiration_ms()
            if expiration_ms is not None and (earliest is None or expiration_ms < earliest):
                earliest = expiration_ms
        return earliest

    def _notify(self) -> None:
        for listener in self._snapshot():
            listener.on_time_updated()

    def _snapshot(self) -> list[ClockListener]:
        with self._listeners_lock:
            return list(self._listeners)

    def wait_ms(self, condition: threading.Condition, timeout_ms: int) -> bool:
        """Never waits (time passes only by ``advance``); returns False."""
        return False

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now_ms})"
