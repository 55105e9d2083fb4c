"""Executors: where expired timer tasks run.

Kafka hands every expired ``TimerTask`` to a one-thread executor ("executor-<name>") so
that a slow task never holds up the thread that advances the clock. ``ThreadExecutor``
is that executor and the default of ``SystemTimer``. ``InlineExecutor`` runs each task
at once on the calling thread: for deterministic tests, and for the event loop, where
the loop thread both advances the clock and runs the expirations.

An exception raised by a task is logged (as Kafka's executor thread does) and never
stops the tasks after it.

Concurrency: ``execute`` may be called from any thread. ``ThreadExecutor`` runs tasks
one at a time, in submission order, on its own daemon thread; ``shutdown`` runs the
tasks already submitted, then stops the thread and waits for it (unless called from
that thread). ``InlineExecutor`` has no state.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Protocol

_log = logging.getLogger(__name__)


class Executor(Protocol):
    """Runs expired tasks somewhere other than the timer's own bookkeeping."""

    def execute(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` now or later; never raises what ``fn`` raises."""
        ...

    def shutdown(self) -> None:
        """Stop accepting tasks; release any thread."""
        ...


class InlineExecutor:
    """Runs each task immediately on the calling thread."""

    __slots__ = ()

    def execute(self, fn: Callable[[], None]) -> None:
        """Call ``fn()``; log what it raises."""
        try:
            fn()
        except Exception:
            _log.exception("timer task %r failed", fn)

    def shutdown(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return "InlineExecutor()"


class ThreadExecutor:
    """One named daemon worker thread running tasks in submission order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._closed = False
        self._worker = threading.Thread(target=self._work, name=name, daemon=True)
        self._worker.start()

    def execute(self, fn: Callable[[], None]) -> None:
        """Queue ``fn`` for the worker thread; raises RuntimeError after ``shutdown``."""
        if self._closed:
            raise RuntimeError(f"executor {self.name!r} is shut down")
        self._tasks.put(fn)

    def shutdown(self) -> None:
        """Run the queued tasks, then stop the worker thread and wait for it."""
        if self._closed:
            return
        self._closed = True
        self._tasks.put(None)
        if threading.current_thread() is not self._worker:
            self._worker.join()

    def _work(self) -> None:
        while (fn := self._tasks.get()) is not None:
            try:
                fn()
            except Exception:
                _log.exception("timer task %r failed on %s", fn, self.name)

    def __repr__(self) -> str:
        return f"ThreadExecutor(name={self.name!r})"
