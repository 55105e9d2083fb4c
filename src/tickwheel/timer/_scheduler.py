"""``Scheduler``: Kafka's ``KafkaScheduler`` on a timing wheel -- named periodic tasks.

A broker's maintenance runs periodically: retention and flushing, checkpoints, the
offsets-retention check, the idle-connection check. Kafka runs each on its
``KafkaScheduler`` (``schedule(name, fun, delayMs, periodMs)``); here each is a task on
one ``SystemTimer`` from a ``LoopTimers``, so on a ``ManualClock`` they move with every
other timer of the broker, and on the system clock they cost one armed ``call_at``.

A run's action may return an awaitable (a checkpoint written on a worker thread): it
becomes an asyncio task that the ``LoopTimers`` tracks, and the next run is scheduled
``period_ms`` after it finished, so runs of one task never overlap (like Kafka's
``scheduleWithFixedDelay``). An action that raises is logged and runs again at its next
period: a bug in one round of maintenance does not end the maintenance.

Concurrency: event-loop thread only; ``schedule`` after the ``LoopTimers`` started (or
before: the task is then pending until it starts).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine

from tickwheel.timer._loop_timers import LoopTimers
from tickwheel.timer._task import TimerTask

_log = logging.getLogger(__name__)

Action = Callable[[], Awaitable[None] | None]
"""What a scheduled task runs: synchronous, or returning an awaitable to wait for."""

SCHEDULER_TIMER = "Scheduler"


class _PeriodicTask(TimerTask):
    """Runs ``action``, then adds itself back ``period_ms`` after it finished."""

    __slots__ = ("_action", "_name", "_scheduler", "cancelled", "period_ms")

    def __init__(self, scheduler: Scheduler, name: str, action: Action, period_ms: int) -> None:
        super().__init__(period_ms)
        self._scheduler = scheduler
        self._name = name
        self._action = action
        self.period_ms = period_ms
        self.cancelled = False

    def cancel(self) -> bool:
        """Stop the task for good, even while a run is in progress."""
        self.cancelled = True
        return super().cancel()

    def run(self) -> None:
        try:
            pending = self._action()
        except Exception:
            _log.exception("scheduled task %s failed", self._name)
            pending = None
        if pending is None:
            self._scheduler._again(self)
        else:
            self._scheduler._await(self, pending)

    async def finish(self, pending: Awaitable[None]) -> None:
        """Await the run's awaitable, then schedule the next run in the same step (a
        ManualClock advanced from another thread meanwhile does not delay it)."""
        try:
            await pending
        except Exception:
            _log.exception("scheduled task %s failed", self._name)
        self._scheduler._again(self)

    def __repr__(self) -> str:
        return f"<scheduled {self._name} every {self.period_ms} ms>"


def _close_unstarted(pending: Awaitable[None], _run: asyncio.Future[None]) -> None:
    """Close a run's coroutine once its task is done: a no-op if it ran, and no "never
    awaited" warning if the task was cancelled (shutdown) before it started."""
    if isinstance(pending, Coroutine):
        pending.close()


class Scheduler:
    """Periodic named tasks on one timer of a ``LoopTimers``."""

    def __init__(self, timers: LoopTimers, name: str = SCHEDULER_TIMER) -> None:
        self._timers = timers
        self._timer = timers.new_timer(name)
        self._running: set[asyncio.Future[None]] = set()
        self._closed = False

    def schedule(
        self, name: str, action: Action, period_ms: int, *, delay_ms: int | None = None
    ) -> TimerTask:
        """Run ``action`` after ``delay_ms`` (default ``period_ms``; 0: now), then every
        ``period_ms`` after each run finished (``period_ms`` is at least 1).

        Returns the task: its ``cancel()`` ends the schedule.
        """
        task = _PeriodicTask(self, name, action, max(period_ms, 1))
        if delay_ms is not None and delay_ms <= 0:
            # What ``SystemTimer.add`` would do, without its ``cancel()`` of the task
            # (which here means "never again").
            task.run()
        else:
            task.delay_ms = task.period_ms if delay_ms is None else delay_ms
            self._timer.add(task)
        return task

    def _again(self, task: _PeriodicTask) -> None:
        if not (self._closed or task.cancelled):
            task.delay_ms = task.period_ms
            self._timer.add(task)

    def _await(self, task: _PeriodicTask, pending: Awaitable[None]) -> None:
        running = asyncio.get_running_loop().create_task(task.finish(pending))
        self._running.add(running)
        running.add_done_callback(self._running.discard)
        running.add_done_callback(functools.partial(_close_unstarted, pending))
        self._timers.track(running)

    async def shutdown(self) -> None:
        """Cancel every pending task and the runs in progress; wait for them to end."""
        self._closed = True
        self._timer.close()
        running = list(self._running)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
