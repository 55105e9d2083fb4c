"""Clocks: where a timer reads the time, and how it waits for time to pass.

The wheel itself never reads a clock (time is passed in, as in Kafka's
``advanceClock(timeMs)``); ``SystemTimer`` reads one injected ``Clock``:

- ``SystemClock`` -- the monotonic clock in whole milliseconds; waiting blocks on a
  ``threading.Condition`` so that an ``add`` of an earlier bucket can wake the waiter.
- ``ManualClock`` -- time moves only when ``advance(ms)`` is called (like trio's
  ``MockClock`` or Kafka's ``MockTime``); it cannot wait, so a timer on a manual clock
  never sleeps and every test built on it is deterministic.

Concurrency: ``SystemClock`` is stateless and safe from any thread. ``ManualClock`` keeps
one integer; ``advance`` and ``now_ms`` may be called from any thread (a single attribute
store/load), but tests normally drive it from one thread.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

_NS_PER_MS = 1_000_000

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


class SystemClock:
    """The monotonic system clock in whole milliseconds."""

    __slots__ = ()

    def now_ms(self) -> int:
        """Milliseconds of ``time.monotonic_ns()``."""
        return time.monotonic_ns() // _NS_PER_MS

    def wait_ms(self, condition: threading.Condition, timeout_ms: int) -> bool:
        """Block on ``condition`` for up to ``timeout_ms`` of real time; returns True."""
        condition.wait(timeout_ms / MS_PER_S)
        return True

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when told: ``advance(ms)``."""

    __slots__ = ("_now_ms",)

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms

    def now_ms(self) -> int:
        """The time set by the constructor plus every ``advance``."""
        return self._now_ms

    def advance(self, ms: int) -> None:
        """Move the clock forward by ``ms`` milliseconds (``ms >= 0``)."""
        if ms < 0:
            raise ValueError(f"a clock cannot go back: advance({ms})")
        self._now_ms += ms

    def wait_ms(self, condition: threading.Condition, timeout_ms: int) -> bool:
        """Never waits (time passes only by ``advance``); returns False."""
        return False

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now_ms})"
