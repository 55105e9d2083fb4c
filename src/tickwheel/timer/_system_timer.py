"""``SystemTimer``: Kafka's timer -- a hierarchical timing wheel driven by a bucket queue.

``add(task)`` wraps the task in an entry expiring at ``now + delay_ms`` and puts it in
the wheel; a task with ``delay_ms <= 0``, or one the wheel refuses as already expired,
is handed to the executor at once. The wheel moves only when the clock is advanced, so
it may lag the clock while a driver waits; ``add`` first moves it to now when no queued
bucket is due yet, so that an entry lands in the level its delay calls for.
``advance_clock(timeout_ms)`` waits up to ``timeout_ms`` for the earliest bucket to
expire, then, for it and every other expired bucket, advances the wheel to the bucket's
expiration and re-adds each of its entries: re-insertion drops an entry to a finer
wheel, or -- when it is due -- collects it to run. Then the wheel itself moves to
"now" (every bucket due by now is flushed, so none is left behind), and only then are
the due tasks handed to the executor, bucket by bucket in expiration order, skipping any
task cancelled or added again in the meantime. A task that runs is unbound from its
entry first, as ``cancel()`` does: the two point at each other, and a cycle left behind
would live until the cyclic GC found it.

What drives ``advance_clock`` is not the timer's business: a ``TimerReaper`` thread
(Kafka's ExpiredOperationReaper) or an ``AsyncioTimerDriver`` on an event loop. A
driver may register a *wakeup listener*: it is called, outside the lock, with the new
earliest expiration whenever ``add`` queues a bucket earlier than all others -- the one
event that makes an armed wakeup too late. A driver thread that waits in
``advance_clock`` passes its stop flag as ``stopping``; its ``stop`` sets the flag, then
calls ``wakeup()``.

Concurrency: one re-entrant lock guards the wheels, buckets, counter and queue
(Kafka uses a read-write lock: adds share the read side, ``advance_clock`` takes the
write side; under CPython's GIL adds cannot run in parallel anyway, and one C-level
lock costs less than a Python read-write lock on every add). ``add``, ``schedule``,
``TimerTask.cancel`` and ``size`` may be called from any thread; ``advance_clock`` is
meant for one driver at a time but is safe from any thread. Tasks never run with the
lock held, so a task may add or cancel tasks of the same timer. Binding a task to a new
entry and ``cancel()``'s unbinding happen outside the lock; every check-then-unbind of a
binding (an expired task about to run) and the wheel's check after linking an entry
happen under it, so a task added, cancelled and expiring in different threads at once
never leaves a cancelled entry linked and counted in ``size``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from types import TracebackType
from typing import Any, Protocol, Self, cast

from tickwheel.timer._bucket_queue import BucketQueue
from tickwheel.timer._build import mypyc_attr
from tickwheel.timer._clock import NS_PER_MS, Clock, ManualClock, SystemClock
from tickwheel.timer._executor import Executor, InlineExecutor, ThreadExecutor
from tickwheel.timer._locks import rlock_acquire, rlock_release
from tickwheel.timer._task import CallbackTask, TimerTask
from tickwheel.timer._task_list import TaskCounter, TimerTaskEntry, TimerTaskList
from tickwheel.timer._wheel import TimingWheel

_log = logging.getLogger(__name__)

DEFAULT_TICK_MS = 1
"""Kafka's SystemTimer default: a 1 ms tick at the finest level."""

DEFAULT_WHEEL_SIZE = 20
"""Kafka's SystemTimer default: 20 buckets per level."""


class Driver(Protocol):
    """Something that calls ``advance_clock`` for a timer and can be stopped."""

    def stop(self) -> None:
        """Stop driving the timer."""
        ...


WakeupListener = Callable[[int], None]
"""Called with the earliest bucket expiration (ms) when an ``add`` lowered it."""


@mypyc_attr(allow_interpreted_subclasses=True)
class SystemTimer:
    """A hierarchical timing wheel with a bucket queue, a clock and an executor."""

    def __init__(
        self,
        name: str,
        *,
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        start_ms: int | None = None,
        clock: Clock | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.name = name
        # Closed until fully built: ``__del__`` of a timer whose construction failed has
        # nothing to release.
        self._closed = True
        self._clock: Clock = SystemClock() if clock is None else clock
        # ``add`` reads the time of this package's own clocks without a call: through the
        # ``Clock`` protocol the compiled build makes a Python-level method call (about a
        # fifth of a compiled add), and the pure-Python build saves a frame. Exact types
        # only, so a subclass that overrides ``now_ms`` is always called.
        self._manual_clock = self._clock if type(self._clock) is ManualClock else None
        self._system_clock = type(self._clock) is SystemClock
        self._executor: Executor = (
            ThreadExecutor(f"executor-{name}") if executor is None else executor
        )
        self._lock = threading.RLock()
        self._condition = threading.Condition(self._lock)
        self._counter = TaskCounter()
        self._queue = BucketQueue()
        self._wheel = TimingWheel(
            tick_ms=tick_ms,
            wheel_size=wheel_size,
            start_ms=self._clock.now_ms() if start_ms is None else start_ms,
            counter=self._counter,
            queue=self._queue,
            lock=self._lock,
        )
        self._run_inline = isinstance(self._executor, InlineExecutor)
        self._waiters = 0
        self._wakeups = 0
        self._wakeup_listener: WakeupListener | None = None
        self._drivers: list[Driver] = []
        self._closed = False

    @property
    def clock(self) -> Clock:
        """The clock this timer reads."""
        return self._clock

    @property
    def executor(self) -> Executor:
        """Where expired tasks run."""
        return self._executor

    @property
    def wheel(self) -> TimingWheel:
        """The finest wheel (level 0); coarser ones hang off ``overflow_wheel``."""
        return self._wheel

    @property
    def size(self) -> int:
        """The number of pending tasks, across all wheels."""
        return self._counter.value

    @property
    def closed(self) -> bool:
        """True after ``close()``."""
        return self._closed

    def add(self, task: TimerTask) -> None:
        """Run ``task`` ``task.delay_ms`` from now (at once if ``delay_ms <= 0``).

        Adding a pending task again moves it to its new expiration.
        Raises RuntimeError once the timer is closed.
        """
        if self._closed:
            raise RuntimeError(f"SystemTimer {self.name!r} is closed")
        delay_ms = task.delay_ms
        if delay_ms <= 0:
            # Due now: the wheel may lag the clock (it moves when advanced), so do not ask it.
            # cancel() takes a pending task off its bucket, as a new binding would.
            task.cancel()
            self._executor.execute(task.run)
            return
        manual_clock = self._manual_clock
        if manual_clock is not None:
            now_ms = manual_clock._now_ms
        elif self._system_clock:
            now_ms = time.monotonic_ns() // NS_PER_MS
        else:
            now_ms = self._clock.now_ms()
        entry = TimerTaskEntry(task, delay_ms + now_ms)
        # acquire/release rather than ``with``: see the ``tickwheel.timer`` docstring.
        rlock_acquire(self._lock)
        try:
            if now_ms >= self._wheel._expired_below_ms:
                self._catch_up(now_ms)
            # Placed, or refused as expired but no longer bound (cancelled or added
            # again): nothing to run. Refused and still bound: unbind it, it runs now.
            # The check and the unbind are one step under the lock, as is
            # TimingWheel.add's check after linking: so an entry of the same task that
            # another thread adds meanwhile ends up bound and linked, or dropped --
            # never linked and counted but unbound.
            nothing_to_run = self._wheel.add(entry) or task._entry is not entry
            if not nothing_to_run:
                task._entry = None  # no task <-> entry cycle left behind
        finally:
            rlock_release(self._lock)
        if self._queue.head_lowered:
            self._head_lowered()
        if not nothing_to_run:
            self._executor.execute(task.run)

    def _catch_up(self, now_ms: int) -> None:
        # Called with the lock held, when the wheel lags ``now_ms`` by a tick or more
        # (it moves only when the clock is advanced, and a driver may be waiting for a
        # later bucket). Moving it to now first puts an entry in the level its delay
        # calls for -- a 5 ms delay in level 0 -- instead of a coarser bucket whose start
        # is already near, which would expire once just to cascade the entry down. Safe
        # only while no queued bucket is due by now: the slots of the span the wheel
        # skips are then all empty (see the end of ``advance_clock``).
        head_ms = self._queue.peek_expiration_ms()
        if head_ms is None or head_ms > now_ms:
            self._wheel.advance_clock(now_ms)

    def _head_lowered(self) -> None:
        # An add queued a bucket earlier than every other: wake a waiting reaper and
        # tell the driver (the listener runs outside the lock).
        with self._lock:
            queue = self._queue
            if not queue.head_lowered:
                return
            queue.head_lowered = False
            if self._waiters:
                self._condition.notify_all()
            head_ms = queue.peek_expiration_ms()
            listener = self._wakeup_listener
        if listener is not None and head_ms is not None:
            listener(head_ms)

    def schedule(self, delay_ms: int, fn: Callable[..., object], *args: object) -> TimerTask:
        """Call ``fn(*args)`` ``delay_ms`` from now; returns the task (to ``cancel()`` it)."""
        task = CallbackTask(delay_ms, partial(fn, *args) if args else fn)
        self.add(task)
        return task

    def next_expiration_ms(self) -> int | None:
        """When the earliest pending bucket expires (clock ms), or None when idle."""
        # acquire/release rather than ``with``: drivers call it once per expiry.
        rlock_acquire(self._lock)
        try:
            return self._queue.peek_expiration_ms()
        finally:
            rlock_release(self._lock)

    def advance_clock(self, timeout_ms: int, *, stopping: threading.Event | None = None) -> bool:
        """Expire every bucket that is due, waiting up to ``timeout_ms`` for the first.

        Returns True when at least one bucket expired. With a clock that cannot wait
        (``ManualClock``) it never blocks: it expires what is due at the clock's time.
        The wait also ends early on ``wakeup()``, on ``close()``, and -- for a driver
        that passes its stop flag as ``stopping`` -- once that event is set and
        ``wakeup()`` called, even if both happened just before the wait began.
        """
        due: list[TimerTaskEntry] = []
        clock = self._clock
        queue = self._queue
        wheel = self._wheel
        rlock_acquire(self._lock)
        try:
            now_ms = clock.now_ms()
            bucket = queue.poll(now_ms)
            if bucket is None and timeout_ms > 0:
                bucket = self._wait_for_bucket(now_ms + timeout_ms, stopping)
                now_ms = clock.now_ms()
            expired = bucket is not None
            while bucket is not None:
                wheel.advance_clock(bucket.expiration_ms)
                # Kafka's bucket.flush(addTimerTaskEntry), unrolled for speed: an entry
                # that expires within the current tick is one the wheel would refuse as
                # expired, so it is collected without the call (every entry of a level-0
                # bucket is such an entry). A refused entry may be a cancelled one: the
                # run below checks the binding of each.
                expired_below_ms = wheel._expired_below_ms
                for entry in bucket.detach_all():
                    entry.list = None
                    if entry.expiration_ms < expired_below_ms or not wheel.add(entry):
                        due.append(entry)
                bucket = queue.poll(now_ms)
            # Every bucket due by now is flushed, so the wheel may move to now as well
            # (no queued bucket is that early): a later add then sees "expired" exactly.
            wheel.advance_clock(now_ms)
            queue.head_lowered = False
            if not due:
                return expired
            if self._run_inline:
                self._run_inline_locked(due)
                return True
            runnable = self._unbind_due(due)
        finally:
            rlock_release(self._lock)
        execute = self._executor.execute
        for task in runnable:
            execute(task.run)
        return True

    # A due task runs only if it is still bound to the collected entry: cancelled or
    # added again since, it must not. It is unbound before it runs, as cancel() does (the
    # task and its entry point at each other, and a cycle left behind would wait for the
    # cyclic GC). The check and the unbind happen under the lock, as TimingWheel.add
    # re-checks the binding after linking under it: so an entry of the same task that
    # another thread adds meanwhile ends up bound and linked, or dropped -- never linked
    # and counted but unbound.

    def _unbind_due(self, due: list[TimerTaskEntry]) -> list[TimerTask]:
        # Called with the lock held: the tasks to hand to the executor.
        runnable: list[TimerTask] = []
        for entry in due:
            task = entry.task
            if task._entry is entry:
                task._entry = None
                runnable.append(task)
        return runnable

    def _run_inline_locked(self, due: list[TimerTaskEntry]) -> None:
        # Called with the lock held. What InlineExecutor.execute does, without a call
        # and a bound method per task; the lock is released around each task, which may
        # add or cancel tasks (one cancelled by a task that ran before it is skipped).
        lock = self._lock
        for entry in due:
            task = entry.task
            if task._entry is entry:
                task._entry = None
                rlock_release(lock)
                try:
                    task.run()
                except Exception:
                    _log.exception("timer task %r failed", task)
                finally:
                    rlock_acquire(lock)

    def _wait_for_bucket(
        self, deadline_ms: int, stopping: threading.Event | None
    ) -> TimerTaskList | None:
        # Called with the lock held; the condition releases it while waiting, and an
        # ``add`` that queues an earlier bucket (or ``close``, or ``wakeup``) wakes us.
        # ``stopping`` is read under the lock before every wait, and a driver sets it
        # before its ``wakeup`` takes the lock to notify: so either we see it set, or we
        # are already waiting when the notification comes -- a stop is never missed.
        clock = self._clock
        queue = self._queue
        wakeups = self._wakeups
        self._waiters += 1
        try:
            while not self._closed and self._wakeups == wakeups:
                now_ms = clock.now_ms()
                head_ms = queue.peek_expiration_ms()
                if head_ms is not None and head_ms <= now_ms:
                    return queue.poll(now_ms)
                if now_ms >= deadline_ms or (stopping is not None and stopping.is_set()):
                    return None
                wake_ms = deadline_ms if head_ms is None else min(deadline_ms, head_ms)
                if not clock.wait_ms(self._condition, wake_ms - now_ms):
                    return None
            return None
        finally:
            self._waiters -= 1

    def wakeup(self) -> None:
        """Make every ``advance_clock`` now waiting return at once (False unless due).

        A call that has not started waiting yet is not affected: a driver that must
        stop waits with ``advance_clock(timeout_ms, stopping=event)`` and sets the
        event before calling ``wakeup``.
        """
        with self._lock:
            self._wakeups += 1
            self._condition.notify_all()

    def set_wakeup_listener(self, listener: WakeupListener | None) -> None:
        """Register the one driver callback told when ``add`` lowers the earliest expiration."""
        with self._lock:
            if listener is not None and self._wakeup_listener is not None:
                raise RuntimeError(f"SystemTimer {self.name!r} already has a wakeup listener")
            self._wakeup_listener = listener

    def attach(self, driver: Driver) -> None:
        """Remember ``driver`` so that ``close()`` stops it."""
        with self._lock:
            self._drivers.append(driver)

    def detach(self, driver: Driver) -> None:
        """Forget ``driver`` (it stopped on its own)."""
        with self._lock:
            if driver in self._drivers:
                self._drivers.remove(driver)

    def close(self) -> None:
        """Stop the drivers, then the executor; pending tasks never run.

        Pending tasks are taken off the wheel and unbound, as ``cancel()`` would: the
        compiled build keeps entries out of the cyclic GC (they are most of its work),
        so a task and its entry pointing at each other would otherwise outlive the timer.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            drivers = list(self._drivers)
            self._condition.notify_all()
            self._unbind_pending()
        for driver in drivers:
            driver.stop()
        self._executor.shutdown()

    def __del__(self) -> None:
        # A timer dropped without close(): its pending tasks are unbound as close() would,
        # or the compiled build's untracked entries would keep them, their entries and the
        # buckets alive for good (the cyclic GC cannot see those cycles). Drivers and the
        # executor are left to close(): a running driver holds the timer, so a timer that
        # is being dropped has none. A collection that ran while this thread was inside
        # one of the timer's own methods (the lock held) leaves the tasks bound: unbinding
        # then would take entries from under that method.
        if self._closed or cast(Any, self._lock)._is_owned():
            return
        with self._lock:
            self._unbind_pending()

    def _unbind_pending(self) -> None:
        # Called with the lock held: take every entry off the wheels, unbinding its task.
        wheel: TimingWheel | None = self._wheel
        while wheel is not None:
            for bucket in wheel._buckets:
                for entry in bucket.take_all():
                    task = entry.task
                    if task._entry is entry:
                        task._entry = None
            wheel = wheel._overflow_wheel

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<SystemTimer {self.name!r} size={self.size} closed={self._closed}>"
