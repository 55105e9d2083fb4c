"""``TimerReaper``: Kafka's expiration reaper -- a thread that keeps a timer's clock moving.

Kafka's purgatory runs an ``ExpiredOperationReaper`` (a ``ShutdownableThread``) whose loop
is ``timer.advanceClock(200)``: wait up to 200 ms for a bucket to expire, expire what is
due, repeat. The wait ends early when an ``add`` queues an earlier bucket, so the poll
interval does not bound how late a task runs. ``stop()`` here does not wait out the
poll either: it sets the stop flag, which the thread hands to every
``advance_clock(poll_ms, stopping=...)``, then calls ``timer.wakeup()``. The timer reads
the flag under its lock before each wait, so a stop that lands after the loop's own
check of the flag but before the wait begins still ends it at once.

With a clock that cannot wait (``ManualClock``) ``advance_clock`` returns at once. So
when a step expired nothing and the timer's clock did not move across it, the step did
not wait, and the reaper rests ``poll_ms`` of real time on its stop event before the
next instead of spinning (as the purgatory's reaper does). A step that waited -- and was
perhaps cut short by a ``wakeup`` -- goes straight back to waiting on the timer, where
an earlier ``add`` can wake it.

Concurrency: ``start`` and ``stop`` may be called from any thread (``stop`` from the
reaper thread itself -- e.g. inside a task run by an inline executor -- does not join).
The thread only calls ``timer.advance_clock``.

``advance_until_stopped`` is the loop itself, shared with ``RoundWheelTimer``'s worker.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from types import TracebackType
from typing import Self

from tickwheel.timer._clock import MS_PER_S, Clock
from tickwheel.timer._system_timer import SystemTimer

DEFAULT_POLL_MS = 200
"""Kafka's reaper polls ``advanceClock(200L)``."""


def advance_until_stopped(
    advance: Callable[[int], bool], clock: Clock, poll_ms: int, stopping: threading.Event
) -> None:
    """Call ``advance(poll_ms)`` until ``stopping`` is set, never spinning.

    ``advance`` expires what is due, waiting up to ``poll_ms`` on ``clock`` first, and
    returns whether anything expired. After a step that expired nothing while ``clock``
    stood still -- it could not wait -- rest ``poll_ms`` of real time on ``stopping``.
    """
    rest_s = poll_ms / MS_PER_S
    while not stopping.is_set():
        before_ms = clock.now_ms()
        if not advance(poll_ms) and clock.now_ms() == before_ms:
            stopping.wait(rest_s)


class TimerReaper:
    """A daemon thread calling ``timer.advance_clock(poll_ms)`` until stopped."""

    def __init__(self, timer: SystemTimer, poll_ms: int = DEFAULT_POLL_MS) -> None:
        if poll_ms < 1:
            raise ValueError(f"poll_ms must be >= 1, got {poll_ms}")
        self.timer = timer
        self.poll_ms = poll_ms
        self._stopping = threading.Event()
        self._worker = threading.Thread(
            target=self._run, name=f"ExpirationReaper-{timer.name}", daemon=True
        )

    @property
    def running(self) -> bool:
        """True while the reaper thread is alive."""
        return self._worker.is_alive()

    def start(self) -> None:
        """Start the reaper thread; the timer's ``close()`` will stop it."""
        self.timer.attach(self)
        self._worker.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (unless called from it)."""
        self._stopping.set()
        self.timer.wakeup()
        self.timer.detach(self)
        if self._worker.is_alive() and threading.current_thread() is not self._worker:
            self._worker.join()

    def _run(self) -> None:
        stopping = self._stopping
        advance = partial(self.timer.advance_clock, stopping=stopping)
        advance_until_stopped(advance, self.timer.clock, self.poll_ms, stopping)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<TimerReaper timer={self.timer.name!r} poll_ms={self.poll_ms}>"
