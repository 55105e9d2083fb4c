"""``TimerReaper``: Kafka's expiration reaper -- a thread that keeps a timer's clock moving.

Kafka's purgatory runs an ``ExpiredOperationReaper`` (a ``ShutdownableThread``) whose loop
is ``timer.advanceClock(200)``: wait up to 200 ms for a bucket to expire, expire what is
due, repeat. The wait ends early when an ``add`` queues an earlier bucket, so the poll
interval bounds only how long ``stop()`` may take -- not how late a task runs.
``stop()`` here wakes the waiting thread at once instead of waiting out the poll.

With a clock that cannot wait (``ManualClock``) ``advance_clock`` returns at once; the
reaper then rests ``poll_ms`` of real time on its stop event between calls instead of
spinning.

Concurrency: ``start`` and ``stop`` may be called from any thread (``stop`` from the
reaper thread itself -- e.g. inside a task run by an inline executor -- does not join).
The thread only calls ``timer.advance_clock``.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Self

from tickwheel.timer._system_timer import SystemTimer

DEFAULT_POLL_MS = 200
"""Kafka's reaper polls ``advanceClock(200L)``."""

_MS_PER_S = 1000.0


class TimerReaper:
    """A daemon thread calling ``timer.advance_clock(poll_ms)`` until stopped."""

    def __init__(self, timer: SystemTimer, poll_ms: int = DEFAULT_POLL_MS) -> None:
        if poll_ms < 1:
            raise ValueError(f"poll_ms must be >= 1, got {poll_ms}")
        self.timer = timer
        self.poll_ms = poll_ms
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"ExpirationReaper-{timer.name}", daemon=True
        )

    @property
    def running(self) -> bool:
        """True while the reaper thread is alive."""
        return self._thread.is_alive()

    def start(self) -> None:
        """Start the reaper thread; the timer's ``close()`` will stop it."""
        self.timer.attach(self)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (unless called from it)."""
        self._stopping.set()
        self.timer.wakeup()
        self.timer.detach(self)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        poll_s = self.poll_ms / _MS_PER_S
        while not self._stopping.is_set():
            started_s = time.monotonic()
            if not self.timer.advance_clock(self.poll_ms):
                rest_s = poll_s - (time.monotonic() - started_s)
                if rest_s > 0:
                    self._stopping.wait(rest_s)

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
