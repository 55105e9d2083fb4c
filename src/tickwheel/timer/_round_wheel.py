"""``RoundWheelTimer``: the single-level wheel with rounds of seed 000 (Netty's design).

One wheel of ``wheel_size`` slots (a power of two, so the slot is ``tick & mask``), each
spanning ``tick_ms``. A task due ``n`` ticks from now goes to slot ``(now_tick + n) & mask``
with ``remaining_rounds = n // wheel_size``; every time the hand passes its slot the
round count drops by one, and the task runs when the hand reaches it with no rounds left.
This is Netty's ``HashedWheelTimer``: O(1) add and cancel like Kafka's wheel, but the
hand visits *every* tick, and each visit walks every entry of the slot, including those
due many rounds later -- the cost Kafka avoids with overflow wheels and a bucket queue.
It is here to be measured against ``SystemTimer`` (``tickwheel bench timer``).

A task never runs early: it is due at the first tick at or after its expiration
(Kafka's wheel instead runs a task at the start of its bucket's tick).

Bugs of the seed's Java version that this one does not have: its unlock path called
``lock()`` again (here every lock is a ``with`` block); its ``setIndex`` ignored its
argument (here the slot is computed from the due tick and never stored); its ``remove``
rewrote the slot inside the loop over it (here a slot is taken off the wheel first and
only the entries still waiting for a later round go back); its slot index and round
count were computed from the delay alone, not from the hand's position (here both come
from the absolute due tick).

Stopping, as in the seed: ``stop(graceful=True)`` waits until every pending task has
run, then stops; ``stop()`` (forced) stops at once and returns the tasks it did not run.

Driving: ``start()`` runs a worker thread that moves the hand once per tick (Netty's
worker); or the owner calls ``advance_clock`` itself, as with ``SystemTimer`` -- with a
``ManualClock`` that is deterministic, which is how the tests and the benchmark run it.

Concurrency: one re-entrant lock guards the slots, counter and hand; ``add``,
``schedule``, ``TimerTask.cancel``, ``size`` and ``stop`` may be called from any thread.
Tasks run on the executor, never with the lock held.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from types import TracebackType
from typing import Self, cast

from tickwheel.timer._clock import Clock, SystemClock
from tickwheel.timer._executor import Executor, ThreadExecutor
from tickwheel.timer._reaper import advance_until_stopped
from tickwheel.timer._task import CallbackTask, TimerTask
from tickwheel.timer._task_list import TaskCounter, TimerTaskEntry, TimerTaskList

DEFAULT_ROUND_TICK_MS = 1
"""One hand step per millisecond, the resolution of ``SystemTimer``'s finest wheel."""

DEFAULT_ROUND_WHEEL_SIZE = 512
"""Netty's ``HashedWheelTimer`` default ``ticksPerWheel``."""


class RoundEntry(TimerTaskEntry):
    """An entry of the round wheel: also counts the rounds it must still wait."""

    __slots__ = ("remaining_rounds",)

    def __init__(self, task: TimerTask, expiration_ms: int, remaining_rounds: int) -> None:
        super().__init__(task, expiration_ms)
        self.remaining_rounds = remaining_rounds


class RoundWheelTimer:
    """A single-level hashed wheel whose tasks carry a round count."""

    def __init__(
        self,
        name: str = "round-wheel",
        *,
        tick_ms: int = DEFAULT_ROUND_TICK_MS,
        wheel_size: int = DEFAULT_ROUND_WHEEL_SIZE,
        start_ms: int | None = None,
        clock: Clock | None = None,
        executor: Executor | None = None,
    ) -> None:
        if tick_ms < 1:
            raise ValueError(f"tick_ms must be >= 1, got {tick_ms}")
        if wheel_size < 1 or wheel_size & (wheel_size - 1):
            raise ValueError(f"wheel_size must be a power of two, got {wheel_size}")
        self.name = name
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self._mask = wheel_size - 1
        self._clock: Clock = SystemClock() if clock is None else clock
        self._executor: Executor = (
            ThreadExecutor(f"executor-{name}") if executor is None else executor
        )
        self._start_ms = self._clock.now_ms() if start_ms is None else start_ms
        self._lock = threading.RLock()
        self._drained = threading.Condition(self._lock)
        self._counter = TaskCounter()
        self._slots = [TimerTaskList(self._counter, self._lock) for _ in range(wheel_size)]
        # The next tick the hand will process; tick k happens at start_ms + k * tick_ms.
        self._next_tick = 1
        self._wake = threading.Condition(self._lock)
        self._graceful_waiters = 0
        self._stopping = threading.Event()
        self._worker: threading.Thread | None = None
        self._stopped = False

    @property
    def size(self) -> int:
        """The number of pending tasks."""
        return self._counter.value

    @property
    def clock(self) -> Clock:
        """The clock this timer reads."""
        return self._clock

    def add(self, task: TimerTask) -> None:
        """Run ``task`` ``task.delay_ms`` from now (at once if ``delay_ms <= 0``)."""
        if self._stopped:
            raise RuntimeError(f"RoundWheelTimer {self.name!r} is stopped")
        expiration_ms = task.delay_ms + self._clock.now_ms()
        if task.delay_ms <= 0:
            # cancel() takes a pending task off its slot, as a new binding would.
            task.cancel()
            self._executor.execute(task.run)
            return
        # The first tick whose time is at or after the expiration (never early).
        due_tick = -((self._start_ms - expiration_ms) // self.tick_ms)
        with self._lock:
            due_tick = max(due_tick, self._next_tick)
            rounds = (due_tick - self._next_tick) // self.wheel_size
            entry = RoundEntry(task, expiration_ms, rounds)
            self._slots[due_tick & self._mask].add(entry)

    def schedule(self, delay_ms: int, fn: Callable[..., object], *args: object) -> TimerTask:
        """Call ``fn(*args)`` ``delay_ms`` from now; returns the task (to ``cancel()`` it)."""
        task = CallbackTask(delay_ms, partial(fn, *args) if args else fn)
        self.add(task)
        return task

    def advance_clock(self, timeout_ms: int = 0) -> bool:
        """Move the hand through every tick that is due; True when a task expired.

        Waits up to ``timeout_ms`` for the next tick when none is due yet (never with a
        ``ManualClock``).
        """
        clock = self._clock
        due: list[TimerTaskEntry] = []
        with self._lock:
            now_ms = clock.now_ms()
            next_tick_ms = self._start_ms + self._next_tick * self.tick_ms
            if now_ms < next_tick_ms and timeout_ms > 0 and not self._stopping.is_set():
                clock.wait_ms(self._wake, min(timeout_ms, next_tick_ms - now_ms))
                now_ms = clock.now_ms()
            last_tick = (now_ms - self._start_ms) // self.tick_ms
            tick = self._next_tick
            slots = self._slots
            mask = self._mask
            while tick <= last_tick:
                slot = slots[tick & mask]
                if len(slot):
                    for entry in slot.take_all():
                        round_entry = cast(RoundEntry, entry)
                        if round_entry.remaining_rounds <= 0:
                            due.append(entry)
                        else:
                            round_entry.remaining_rounds -= 1
                            slot.add(entry)
                tick += 1
            self._next_tick = tick
            # Cancels do not signal, so a graceful stop is re-checked on every hand move.
            if self._graceful_waiters and self._counter.value == 0:
                self._drained.notify_all()
        execute = self._executor.execute
        for entry in due:
            task = entry.task
            # Cancelled or added again after it was collected: it must not run.
            if task._entry is entry:
                # Unbind (no task <-> entry cycle left for the cyclic GC).
                task._entry = None
                execute(task.run)
        return bool(due)

    def start(self) -> None:
        """Start the worker thread that moves the hand once per tick."""
        with self._lock:
            if self._stopped:
                raise RuntimeError(f"RoundWheelTimer {self.name!r} is stopped")
            if self._worker is not None:
                return
            self._worker = threading.Thread(
                target=self._work, name=f"RoundWheelTimer-{self.name}", daemon=True
            )
        self._worker.start()

    def stop(self, *, graceful: bool = False, timeout_s: float | None = None) -> list[TimerTask]:
        """Stop the timer; returns the pending tasks that will never run.

        Graceful: first wait (up to ``timeout_s``, forever if None) until every pending
        task has been handed to the executor -- something must be moving the hand, the
        worker of ``start()`` or the owner's ``advance_clock`` -- and let the executor
        finish them. Forced (the default): stop at once.
        """
        if graceful:
            with self._lock:
                self._graceful_waiters += 1
                try:
                    self._drained.wait_for(lambda: self._counter.value == 0, timeout_s)
                finally:
                    self._graceful_waiters -= 1
        with self._lock:
            self._stopped = True
            self._stopping.set()
            self._wake.notify_all()
            self._drained.notify_all()
            worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join()
        unrun: list[TimerTask] = []
        with self._lock:
            for slot in self._slots:
                for entry in slot.take_all():
                    task = entry.task
                    if task._entry is entry:
                        task._entry = None
                        unrun.append(task)
        self._executor.shutdown()
        return unrun

    def _work(self) -> None:
        # The reaper's loop: a step waits for the next tick; one that could not wait
        # (ManualClock) rests a tick instead of spinning. ``stop`` sets ``_stopping`` and
        # notifies under the lock, and ``advance_clock`` checks it under the lock before
        # waiting, so a stop is never missed.
        advance_until_stopped(self.advance_clock, self._clock, self.tick_ms, self._stopping)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<RoundWheelTimer {self.name!r} size={self.size} stopped={self._stopped}>"
