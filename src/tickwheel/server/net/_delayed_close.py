"""``hold_failed_authentication``: a failed login's answer waits on the timing wheel.

Kafka does not answer a failed authentication at once: the connection's failure
response is sent, and the connection closed, ``connection.failed.authentication.delay.ms``
(default 100) later (``Selector``'s ``DelayedAuthenticationFailureClose``), so a client
guessing passwords gets one guess per delay per connection and the broker's threads are
not tied up meanwhile. Here the wait is a ``DelayedCloseSocket`` task on the broker's
timing wheel (a ``SystemTimer`` of the broker's ``LoopTimers``, so a ``ManualClock``
decides when it fires, as it decides every other timeout); the connection's task awaits
it, never ``asyncio.sleep``. A connection closed meanwhile (the broker stopping) cancels
its task.

Concurrency: on the broker's event loop; the task runs there too (the timers' tasks run
on the loop).
"""

from __future__ import annotations

import asyncio

from tickwheel.timer import SystemTimer, TimerTask


class DelayedCloseSocket(TimerTask):
    """Fires after the delay: the held failure response may go, then the socket closes."""

    def __init__(self, delay_ms: int, due: asyncio.Future[None]) -> None:
        super().__init__(delay_ms)
        self._due = due

    def run(self) -> None:
        """Release the connection that waits."""
        if not self._due.done():
            self._due.set_result(None)


async def hold_failed_authentication(timer: SystemTimer, delay_ms: int) -> None:
    """Return once ``delay_ms`` has passed on ``timer``'s clock (at once for 0)."""
    due: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    task = DelayedCloseSocket(delay_ms, due)
    timer.add(task)
    try:
        await due
    finally:
        task.cancel()
