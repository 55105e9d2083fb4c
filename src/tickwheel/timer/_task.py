"""``TimerTask``: what runs at expiry, bound to at most one ``TimerTaskEntry`` at a time.

As in Kafka, a task is bound to at most one entry at a time: adding a task to a timer
wraps it in a new ``TimerTaskEntry``, and binding the new entry removes the old one,
so adding a task again *moves* it. An entry is cancelled exactly when its task no
longer points at it (``task.cancel()`` or a newer binding), which lets the timer drop
a cancelled entry lazily if it meets one while cascading. The entry -- the task's place
in a bucket -- belongs to the bucket's module (``_task_list``), whose storage differs
between the two builds.

Concurrency: ``cancel()`` may be called from any thread at any time; ``cancel()`` racing
with the timer taking the task to run is won by exactly one of them, and its result says
which. It loops until the entry's ``list`` is None because another thread may be moving
the entry from one bucket to another between our read of ``list`` and the bucket's lock
(membership is re-checked under the lock). Binding a task to a new entry is done by the
timer that adds it; two threads adding the *same* task to timers at the same moment is a
caller race (one binding wins, the other entry is dropped as cancelled).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tickwheel.timer._build import mypyc_attr
from tickwheel.timer._locks import rlock_acquire, rlock_release

if TYPE_CHECKING:
    from tickwheel.timer._task_list import TimerTaskEntry


@mypyc_attr(allow_interpreted_subclasses=True)
class TimerTask:
    """Work to run once, ``delay_ms`` after it is added to a timer.

    Subclass and override ``run()``. ``cancel()`` removes the task from its bucket in
    O(1); a cancelled task never runs (unless it is added again).
    """

    __slots__ = ("_entry", "delay_ms")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self._entry: TimerTaskEntry | None = None

    def run(self) -> None:
        """What happens at expiry; subclasses override it."""
        raise NotImplementedError(f"{type(self).__name__} must override run()")

    def cancel(self) -> bool:
        """Unbind the task from its entry and unlink the entry from its bucket.

        Returns True when the task was pending: it will not run (unless added again).
        False when there was nothing to cancel: never added, cancelled already, or
        already taken to run -- as ``java.util.TimerTask.cancel`` reports.
        """
        entry = self._entry
        if entry is None:
            return False
        # Unbind first: from this moment the entry reads as cancelled, so a concurrent
        # flush drops it even if it has already taken it off the list. No call lies
        # between the read of the binding and this unbind, so under the GIL no other
        # thread runs between them, and the timer's own check-then-unbind of a task it
        # is about to run holds its lock: exactly one of the two takes the binding.
        self._entry = None
        # TimerTaskList.remove, inlined: cancel is the hot path of a purgatory.
        # acquire/release rather than ``with``: see the ``tickwheel.timer`` docstring.
        bucket = entry.list
        while bucket is not None:
            lock = bucket.lock
            rlock_acquire(lock)
            try:
                if entry.list is bucket:
                    bucket._entries.remove(entry)
                    entry.list = None
                    bucket._counter.value -= 1
                    return True
            finally:
                rlock_release(lock)
            bucket = entry.list
        return True

    @property
    def timer_task_entry(self) -> TimerTaskEntry | None:
        """The entry the task is bound to, or None when not pending."""
        return self._entry

    def __repr__(self) -> str:
        return f"<{type(self).__name__} delay_ms={self.delay_ms}>"


class CallbackTask(TimerTask):
    """A ``TimerTask`` that calls ``fn()``: what ``SystemTimer.schedule`` returns.

    One slot for the callable (arguments are bound with ``functools.partial`` by
    ``schedule``): a million pending timers are a million of these.
    """

    __slots__ = ("fn",)

    def __init__(self, delay_ms: int, fn: Callable[[], object]) -> None:
        self.delay_ms = delay_ms
        self._entry = None
        self.fn = fn

    def run(self) -> None:
        """Call the callback."""
        self.fn()

    def __repr__(self) -> str:
        return f"<CallbackTask delay_ms={self.delay_ms} fn={self.fn!r}>"
