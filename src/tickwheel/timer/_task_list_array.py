"""The compiled build's ``TimerTaskList``: a bucket as an array of entries that know their index.

The build hook (``hatch_build.py``) compiles this file as the twin of ``_task_list.py``
(``tickwheel.timer._mypyc._task_list``); it is never imported as itself, and it has the
same classes, attributes and methods, so the rest of the core and the same tests run on
either. Only the storage differs: here a bucket's ``_entries`` is an ``EntryArray``, a
``list`` of entries in which each entry keeps its own position (``index``): adding
appends, removing moves the last entry into the hole (O(1), order not kept -- entries of
one bucket share one expiration, so order carries no meaning), a flush takes the list
whole. In the pure-Python build the bucket is a ``set``.

Why a storage of its own. Compiled, each of these steps is a few native loads and
stores. Three storages were compiled and run side by side (docs/benchmarks.md,
"Compiled core"): the ``set``, Kafka's doubly linked list threaded through the entries
(``prev``/``next``), and this array. The linked list took fewer instructions than the set
(no hashing, nothing for the cyclic GC to traverse) and churned faster, but fired no
faster: a flush walks the chain one dependent pointer load after another, where the
array's (and the set's) entry addresses are all known up front. The array is as cheap
to churn as the list and the fastest to fire. Interpreted, the set's single C call beats
either.

Concurrency: as ``_task_list.py``'s: the timer's re-entrant lock guards every bucket;
``TimerTaskList.remove`` takes it itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, final

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
    ``list`` is the bucket holding the entry, or None; ``index`` its position in that
    bucket's array (meaningless while ``list`` is None).
    """

    __slots__ = ("expiration_ms", "index", "list", "task")

    def __init__(self, task: TimerTask, expiration_ms: int) -> None:
        self.task = task
        self.expiration_ms = expiration_ms
        self.list: TimerTaskList | None = None
        self.index = 0
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


@final
class EntryArray:
    """The entries of one bucket, each at its own ``index``.

    ``add`` and ``remove`` are the two methods of a ``set`` that the timer's hot paths
    call on a bucket's ``_entries``; the caller holds the lock, adds only an entry that is
    in no bucket and removes only one that is in this array.
    """

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: list[TimerTaskEntry] = []

    def add(self, entry: TimerTaskEntry) -> None:
        """Append ``entry``."""
        entries = self.entries
        entry.index = len(entries)
        entries.append(entry)

    def remove(self, entry: TimerTaskEntry) -> None:
        """Take ``entry`` out, moving the last entry into its place."""
        entries = self.entries
        last = entries.pop()
        if last is not entry:
            index = entry.index
            entries[index] = last
            last.index = index

    def take(self) -> list[TimerTaskEntry]:
        """Empty the array: its entries, in no particular order."""
        entries = self.entries
        self.entries = []
        return entries


class TaskCounter:
    """The number of entries in all buckets of one timer (guarded by the timer's lock)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def __repr__(self) -> str:
        return f"TaskCounter(value={self.value})"


@final
class TimerTaskList:
    """A bucket of ``TimerTaskEntry`` with a shared counter and an expiration."""

    __slots__ = ("_counter", "_entries", "expiration_ms", "lock")

    def __init__(self, counter: TaskCounter, lock: threading.RLock | None = None) -> None:
        self._counter = counter
        self._entries = EntryArray()
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
        return entries

    def detach_all(self) -> list[TimerTaskEntry]:
        """Take out the entries and reset the expiration, leaving each ``entry.list`` set.

        For the owner's flush loops: the caller must set every returned entry's ``list``
        to None (or re-add it) before it releases the lock, so that a concurrent
        ``remove`` never looks for an entry in a bucket that no longer holds it.
        """
        entries = self._entries.take()
        self.expiration_ms = NO_EXPIRATION_MS
        self._counter.value -= len(entries)
        return entries

    def __len__(self) -> int:
        return len(self._entries.entries)

    def __iter__(self) -> Iterator[TimerTaskEntry]:
        """A snapshot of the entries, in no particular order."""
        return iter(list(self._entries.entries))

    def __repr__(self) -> str:
        return f"<TimerTaskList expiration_ms={self.expiration_ms} entries={len(self)}>"
