"""``DelayedOperation``: a request that waits for an event or a timeout, whichever is first.

A delayed operation is a ``TimerTask`` (its ``delay_ms`` is the timeout) with three
hooks a subclass implements:

- ``try_complete()`` checks the condition it waits for; when met, it returns
  ``force_complete()``, otherwise False.
- ``on_complete()`` does the completing (sends the response); it runs exactly once,
  whoever completes the operation.
- ``on_expiration()`` runs after ``on_complete`` when the timeout did the completing.

``force_complete()`` is the one gate: it flips ``completed`` from False to True
atomically, so among any number of racing callers (an event on each of several keys,
and the timer) exactly one wins; the winner un-times the operation (``cancel()``) and
calls ``on_complete``. ``run()`` -- what the timer calls at expiry -- is
``if force_complete(): on_expiration()``.

``maybe_try_complete()`` is the thread-safe retry of Kafka 2.x (seed 002). Calling
``try_complete`` under the operation's lock keeps two threads from checking at once;
but a thread that finds the lock taken must not simply give up, or this can happen::

    time  condition  thread A (holds the lock)        thread B
    1     false      reads the condition: false
    2     true                                        makes it true, tries the lock: taken
    3     true       returns False                    returns False -> wake-up lost

So a thread that misses the lock sets ``try_complete_pending``; the holder clears the
flag before it tries and reads it after it unlocks, and tries again if it is set. Of
several threads that miss the lock while one holds it, only the first to set the flag
loops again (it competes for the lock once more); the others leave, because someone is
now certain to try after them. The loop ends when the operation is completed or no
retry is pending.

The lock may be shared by several operations, and is re-entrant (Kafka's
``ReentrantLock``): all the ``DelayedProduce`` of a request share one, all the group
operations of a consumer group share the group's lock, and ``try_complete`` may be
called by a thread that already holds it. Only a thread inside ``maybe_try_complete``
honours the pending flag, so a thread that changes state while holding a shared lock
for other work should call ``check_and_complete`` before it lets go (the call
re-enters the lock), as Kafka's group coordinator does.

Concurrency: every method may be called from any thread. ``_completed`` and
``_try_complete_pending`` are read without a lock (a single attribute load); their
read-modify-writes (compare-and-set of ``_completed``, get-and-set of the pending flag)
take the module's ``_FLAG_LOCK``, a plain lock held for a few bytecodes only, because
CPython has no atomic compare-and-set on attributes. ``try_complete`` runs with
``lock`` held; ``on_complete`` and ``on_expiration`` run on the completing thread with
whatever locks it holds (the operation's lock when completed through
``maybe_try_complete``, none when the timer expires it).
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable
from typing import Final

from tickwheel.timer._build import mypyc_attr
from tickwheel.timer._locks import lock_acquire, lock_release
from tickwheel.timer._task import TimerTask

_RLOCK: Final = type(threading.RLock())
"""The C ``RLock`` type that ``threading.RLock()`` returns, called without that Python-level
factory function in between (an interpreted call per operation)."""

_FLAG_LOCK = threading.Lock()
"""Makes the compare-and-set of ``_completed`` and the get-and-set of
``_try_complete_pending`` atomic, for every operation (critical sections of a few
bytecodes, so one lock for all costs less than one lock object per operation)."""


@mypyc_attr(allow_interpreted_subclasses=True)
class DelayedOperation(TimerTask, abc.ABC):
    """An operation completed by an event (``try_complete``) or by its timeout (``run``)."""

    __slots__ = ("_completed", "_expiration_hook", "_lock", "_try_complete_pending")

    def __init__(self, delay_ms: int, *, lock: threading.RLock | None = None) -> None:
        super().__init__(delay_ms)
        self._completed = False
        self._try_complete_pending = False
        self._lock = _RLOCK() if lock is None else lock
        # Set by the purgatory that times this operation: it counts expirations.
        self._expiration_hook: Callable[[], None] | None = None

    @abc.abstractmethod
    def try_complete(self) -> bool:
        """Check the condition; when met return ``force_complete()``, otherwise False.

        Called with ``lock`` held.
        """

    @abc.abstractmethod
    def on_complete(self) -> None:
        """Complete the operation; called exactly once, by whoever completes it."""

    @abc.abstractmethod
    def on_expiration(self) -> None:
        """Called after ``on_complete`` when the timeout completed the operation."""

    @property
    def lock(self) -> threading.RLock:
        """The re-entrant lock ``try_complete`` runs under (maybe shared with others)."""
        return self._lock

    @property
    def is_completed(self) -> bool:
        """True once some caller has won ``force_complete``."""
        return self._completed

    def force_complete(self) -> bool:
        """Complete now unless already completed; True only for the one caller that did.

        The winner un-times the operation and calls ``on_complete``.
        """
        lock_acquire(_FLAG_LOCK)
        try:
            if self._completed:
                return False
            self._completed = True
        finally:
            lock_release(_FLAG_LOCK)
        self.cancel()
        self.on_complete()
        return True

    def maybe_try_complete(self) -> bool:
        """Thread-safe ``try_complete``: True if this call completed the operation.

        Never blocks on ``lock``: when another thread holds it, that thread is made to
        try once more instead (see the module docstring).
        """
        lock = self._lock
        done = False
        while True:
            if lock.acquire(False):
                try:
                    self._try_complete_pending = False
                    done = self.try_complete()
                finally:
                    lock.release()
                # Set by a thread that missed the lock while we were trying: the
                # condition may have changed after we read it, so try again.
                retry = self._try_complete_pending
            else:
                lock_acquire(_FLAG_LOCK)
                try:
                    # Only the first thread to set the flag retries: if it was already
                    # set, the holder is bound to see it and try again after us.
                    retry = not self._try_complete_pending
                    self._try_complete_pending = True
                finally:
                    lock_release(_FLAG_LOCK)
            if self._completed or not retry:
                return done

    def run(self) -> None:
        """Expiry: complete the operation and, if that did it, call ``on_expiration``."""
        if self.force_complete():
            hook = self._expiration_hook
            if hook is not None:
                hook()
            self.on_expiration()

    def __repr__(self) -> str:
        state = "completed" if self._completed else "pending"
        return f"<{type(self).__name__} delay_ms={self.delay_ms} {state}>"
