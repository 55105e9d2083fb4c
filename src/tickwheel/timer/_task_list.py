"""``TimerTaskList``: one bucket of a timing wheel, its ``TimerTaskEntry``, the ``TaskCounter``.

The pure-Python build's bucket storage. Kafka's bucket is a circular doubly linked list
of entries with a sentinel root. Here a bucket keeps its entries in a ``set``: add,
remove and membership stay O(1), and every link operation is one C-level set operation
instead of four Python attribute stores. Entries of one bucket share one expiration, so
the order in which a flush meets them carries no meaning. The linked list and a ``dict``
were measured against it (see the ``tickwheel.timer`` docstring); the API is Kafka's
either way.

The compiled build is made from ``_task_list_array.py`` instead of this module (the
build hook, ``hatch_build.py``, compiles that file as this module's twin): an array of
entries that know their index, which wins once its updates are native stores. Both have
the same classes, attributes and methods, and the timer's inlined hot paths
(``TimerTask.cancel``, ``TimingWheel.add``, ``SystemTimer.advance_clock``) use only what
both have: a bucket's ``_entries`` with ``add(entry)`` and ``remove(entry)``, its
``_counter``, and ``detach_all()``.

An entry is a task's place in one bucket: its ``list`` is the bucket holding it, or
None; it lives here, beside the bucket, because its layout is the storage's.

A bucket has an ``expiration_ms``: the start of the time span it holds, or -1 when it
holds nothing since its last flush. ``set_expiration`` reports whether the value
changed, which is exactly when the bucket must be (re)queued: so a bucket is queued
once per rotation of its wheel, however many entries it takes.

Every bucket of one timer shares one ``TaskCounter`` (Kafka's ``AtomicInteger``), which
is how ``SystemTimer.size`` counts pending tasks across all wheels in O(1).

Concurrency: a bucket shares one re-entrant ``lock`` with the timer that owns it.
``add``, ``flush``, ``set_expiration`` and the counter are only touched with that lock
held (the timer holds it around every wheel operation). ``remove`` may be called from
any thread (it is how ``TimerTask.cancel`` unlinks) and takes the lock itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from tickwheel.timer._build import mypyc_attr
from tickwheel.timer._locks import rlock_acquire, rlock_release

if TYPE_CHECKING:
    from tickwheel.timer._task import TimerTask

NO_EXPIRATION_MS = -1
"""``expiration_ms`` of a bucket that holds nothing since its last flush."""


@mypyc_attr(acyclic=True, free_list_len=1)
class TimerTaskEntry:
    """A task's membership of one bucket, with the absolute ``expiration_ms``.

    Creating an entry binds the task to it (removing the task's previous entry).
    ``list`` is the bucket holding the entry, or None.
    """

    __slots__ = ("expiration_ms", "list", "task")

    def __init__(self, task: TimerTask, expiration_ms: int) -> None:
        self.task = task
        self.expiration_ms = expiration_ms
        self.list: TimerTaskList | None = None
        old = task._entry
        if old is not None:
            old.remove()
        task._entry = self

    @property
    def cancelled(self) -> bool:
        """True when the task is bound to another entry, or to none."""
        return self.task._entry is not self

    def remove(self) -> None:
        """Unlink the entry from whatever bucket holds it (no-op when none)."""
        bucket = self.list
        while bucket is not None:
            bucket.remove(self)
            bucket = self.list

    def __repr__(self) -> str:
        return f"<TimerTaskEntry expiration_ms={self.expiration_ms} task={self.task!r}>"


class TaskCounter:
    """The number of entries in all buckets of one timer (guarded by the timer's lock)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def __repr__(self) -> str:
        return f"TaskCounter(value={self.value})"


class TimerTaskList:
    """A bucket of ``TimerTaskEntry`` with a shared counter and an expiration."""

    __slots__ = ("_counter", "_entries", "expiration_ms", "lock")

    def __init__(self, counter: TaskCounter, lock: threading.RLock | None = None) -> None:
        self._counter = counter
        self._entries: set[TimerTaskEntry] = set()
        self.expiration_ms = NO_EXPIRATION_MS
        self.lock = threading.RLock() if lock is None else lock

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the bucket's expiration; True only when the value changed."""
        changed = self.expiration_ms != expiration_ms
        self.expiration_ms = expiration_ms
        return changed

    def add(self, entry: TimerTaskEntry) -> None:
        """Append ``entry``, first removing it from any other bucket (caller holds the lock)."""
        if entry.list is not None:
            entry.remove()
        self._entries.add(entry)
        entry.list = self
        self._counter.value += 1

    def remove(self, entry: TimerTaskEntry) -> None:
        """Unlink ``entry`` if it is in this bucket; safe from any thread."""
        lock = self.lock
        rlock_acquire(lock)
        try:
            if entry.list is self:
                self._entries.remove(entry)
                entry.list = None
                self._counter.value -= 1
        finally:
            rlock_release(lock)

    def flush(self, f: Callable[[TimerTaskEntry], None]) -> None:
        """Remove every entry, calling ``f`` on each; reset the expiration.

        The entries are taken off the bucket before ``f`` sees any of them, because
        ``f`` may add an entry straight back into this bucket (a re-insertion that lands
        in the same slot of the next rotation) and we must not loop over it again.
        """
        for entry in self.detach_all():
            entry.list = None
            f(entry)

    def take_all(self) -> list[TimerTaskEntry]:
        """Remove and return every entry; reset the expiration."""
        entries = self.detach_all()
        for entry in entries:
            entry.list = None
        return list(entries)

    def detach_all(self) -> set[TimerTaskEntry]:
        """Swap out the entries and reset the expiration, leaving each ``entry.list`` set.

        For the owner's flush loops: the caller must set every returned entry's ``list``
        to None (or re-add it) before it releases the lock, so that a concurrent
        ``remove`` never looks for an entry in a bucket that no longer holds it.
        """
        entries = self._entries
        self._entries = set()
        self.expiration_ms = NO_EXPIRATION_MS
        self._counter.value -= len(entries)
        return entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[TimerTaskEntry]:
        """A snapshot of the entries, in no particular order."""
        return iter(list(self._entries))

    def __repr__(self) -> str:
        return f"<TimerTaskList expiration_ms={self.expiration_ms} entries={len(self._entries)}>"
