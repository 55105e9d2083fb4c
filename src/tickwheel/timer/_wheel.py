"""``TimingWheel``: one level of Kafka's hierarchical timing wheel.

A wheel of ``wheel_size`` buckets, each spanning ``tick_ms``, holds the entries that
expire within ``interval_ms = tick_ms * wheel_size`` of its ``current_time_ms`` (which is
always a multiple of ``tick_ms``). An entry too far out goes to the *overflow wheel*,
created lazily the first time it is needed, whose tick is this wheel's whole interval,
with the same size, the same task counter and the same bucket queue. Entry ``e`` lands
in bucket ``(e // tick_ms) % wheel_size``, whose expiration becomes the start of that
tick, ``(e // tick_ms) * tick_ms``: Kafka's wheel runs a task at its bucket's start.

The table of levels for Kafka's defaults (``tick_ms=1, wheel_size=20``: the
granularity and range of each) is in the ``tickwheel.timer`` docstring.

Kafka cascades: when an upper bucket expires, its entries are added again and drop to
a finer wheel, so every task runs within one *level-0* tick of its expiration. Linux's
timer wheel makes the opposite choice (no cascading; an entry fires at its coarse
bucket's edge, slack accepted) because re-inserting costs there; in Kafka -- and here --
each entry cascades at most once per level, an O(levels) cost paid only by entries
that live long enough, and most delayed operations are cancelled before that.

``add`` and ``advance_clock`` walk up the levels in a loop (no recursion): the common
case touches level 0 or 1 only.

Concurrency: not thread-safe. The owner (``SystemTimer``) holds its lock around every
call; entries may still be removed concurrently through their bucket's lock, and a task
may be unbound by ``cancel()`` at any moment -- which is why ``add`` checks the binding
after linking the entry, not before.
"""

from __future__ import annotations

import threading

from tickwheel.timer._bucket_queue import BucketQueue
from tickwheel.timer._task_list import TaskCounter, TimerTaskEntry, TimerTaskList


class TimingWheel:
    """One level of buckets; overflow goes to a lazily created coarser wheel."""

    __slots__ = (
        "_buckets",
        "_counter",
        "_expired_below_ms",
        "_lock",
        "_overflow_from_ms",
        "_overflow_wheel",
        "_queue",
        "current_time_ms",
        "interval_ms",
        "tick_ms",
        "wheel_size",
    )

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        counter: TaskCounter,
        queue: BucketQueue,
        lock: threading.RLock | None = None,
    ) -> None:
        if tick_ms < 1:
            raise ValueError(f"tick_ms must be >= 1, got {tick_ms}")
        if wheel_size < 2:
            raise ValueError(f"wheel_size must be >= 2, got {wheel_size}")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval_ms = tick_ms * wheel_size
        self._set_current_time(start_ms - start_ms % tick_ms)
        self._counter = counter
        self._queue = queue
        self._lock = threading.RLock() if lock is None else lock
        self._buckets = [TimerTaskList(counter, self._lock) for _ in range(wheel_size)]
        self._overflow_wheel: TimingWheel | None = None

    @property
    def overflow_wheel(self) -> TimingWheel | None:
        """The next coarser wheel, or None until an entry first needed it."""
        return self._overflow_wheel

    def bucket(self, index: int) -> TimerTaskList:
        """The bucket in slot ``index``."""
        return self._buckets[index]

    def add(self, entry: TimerTaskEntry) -> bool:
        """Place ``entry`` in this wheel or an overflow wheel.

        Returns False when the entry is cancelled or already expired (it expires
        before the end of the current tick); the caller then drops or runs it.
        """
        expiration_ms = entry.expiration_ms
        # Only level 0 can refuse an entry as expired: an upper wheel's time is this
        # wheel's time rounded down to its tick, so its first unexpired instant is at or
        # below where this wheel's range ends, and everything passed up lies beyond that.
        if expiration_ms < self._expired_below_ms:
            return False
        wheel = self
        while expiration_ms >= wheel._overflow_from_ms:
            overflow = wheel._overflow_wheel
            wheel = wheel._add_overflow_wheel() if overflow is None else overflow
        tick_ms = wheel.tick_ms
        virtual_id = expiration_ms // tick_ms
        bucket = wheel._buckets[virtual_id % wheel.wheel_size]
        # TimerTaskList.add and set_expiration, inlined: this is the hot path.
        if entry.list is not None:
            entry.remove()
        bucket._entries.add(entry)
        entry.list = bucket
        self._counter.value += 1
        if entry.task._entry is not entry:
            # Cancelled -- perhaps by a cancel() in another thread while we were placing
            # it. cancel() unbinds first, then unlinks the entry from the bucket it sees;
            # checking only now, after linking, means that a cancel which looked before
            # the link (and saw no bucket) is caught here, and one which looked after it
            # unlinks the entry itself under the lock. Either way no cancelled entry
            # stays counted.
            bucket._entries.remove(entry)
            entry.list = None
            self._counter.value -= 1
            return False
        bucket_expiration_ms = virtual_id * tick_ms
        if bucket.expiration_ms != bucket_expiration_ms:
            bucket.expiration_ms = bucket_expiration_ms
            self._queue.offer(bucket)
        return True

    def advance_clock(self, time_ms: int) -> None:
        """Move ``current_time_ms`` (and the overflow wheels') to the tick holding ``time_ms``."""
        wheel: TimingWheel | None = self
        while wheel is not None and time_ms >= wheel._expired_below_ms:
            wheel._set_current_time(time_ms - time_ms % wheel.tick_ms)
            time_ms = wheel.current_time_ms
            wheel = wheel._overflow_wheel

    def _set_current_time(self, current_time_ms: int) -> None:
        self.current_time_ms = current_time_ms
        # The two bounds add() compares against, kept precomputed: add is the hot path.
        self._expired_below_ms = current_time_ms + self.tick_ms
        self._overflow_from_ms = current_time_ms + self.interval_ms

    def _add_overflow_wheel(self) -> TimingWheel:
        overflow = TimingWheel(
            tick_ms=self.interval_ms,
            wheel_size=self.wheel_size,
            start_ms=self.current_time_ms,
            counter=self._counter,
            queue=self._queue,
            lock=self._lock,
        )
        self._overflow_wheel = overflow
        return overflow

    def __repr__(self) -> str:
        return (
            f"<TimingWheel tick_ms={self.tick_ms} wheel_size={self.wheel_size} "
            f"current_time_ms={self.current_time_ms}>"
        )
