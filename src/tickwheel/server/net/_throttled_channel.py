"""``wait_unmuted``: a throttled client's connection stays muted on the timing wheel.

Kafka delays a throttled channel with a ``DelayQueue`` of ``ThrottledChannel`` entries
that its quota managers' threads drain, unmuting each channel when its throttle time is
up (KIP-219). Here the wait is one ``ThrottledChannel`` task on the broker's timing
wheel (a ``SystemTimer`` of the broker's ``LoopTimers``, so a ``ManualClock`` decides
when it fires): the connection's task, having written the throttled answer, awaits it
before it reads the next request. A connection closed meanwhile cancels its task.

Concurrency: on the broker's event loop; the task runs there too.
"""

from __future__ import annotations

import asyncio
from typing import Final

from tickwheel.timer import SystemTimer, TimerTask

THROTTLE_TIMER: Final = "ThrottledChannel"
"""The name of the broker's timer throttled channels wait on."""


class ThrottledChannel(TimerTask):
    """Fires when a channel's throttle time is up: the connection reads again."""

    def __init__(self, delay_ms: int, unmuted: asyncio.Future[None]) -> None:
        super().__init__(delay_ms)
        self._unmuted = unmuted

    def run(self) -> None:
        """Unmute the connection that waits."""
        if not self._unmuted.done():
            self._unmuted.set_result(None)


async def wait_unmuted(timer: SystemTimer, delay_ms: int) -> None:
    """Return once ``delay_ms`` has passed on ``timer``'s clock."""
    unmuted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    task = ThrottledChannel(delay_ms, unmuted)
    timer.add(task)
    try:
        await unmuted
    finally:
        task.cancel()
