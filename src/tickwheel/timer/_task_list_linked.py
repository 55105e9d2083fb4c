"""The compiled build's ``TimerTaskList``: Kafka's doubly linked bucket, with its entry.

The build hook (``hatch_build.py``) compiles this file as the twin of ``_task_list.py``
(``tickwheel.timer._mypyc._task_list``); it is never imported as itself, and it has the
same classes, attributes and methods, so the rest of the core and the same tests run on
either. Only the storage differs: here a bucket's ``_entries`` is an ``EntryChain``, a
doubly linked list threaded through the entries' own ``prev``/``next`` links (Kafka's
``TimerTaskList``, with head and tail pointers instead of a sentinel root); in the
pure-Python build it is a ``set``.

Why two storages. Compiled, a link update is a native store: appending touches the tail
entry, unlinking the two neighbours, with no hashing and no table, and nothing for the
cyclic GC to traverse (the entries are untracked and the chain holds two pointers, where a
set of a million entries is traversed slot by slot). Interpreted, the same updates are
Python attribute stores and the set's single C call is cheaper: the linked list was
9-10% more instructions per operation in the pure-Python build, and 3% (churn) to 12%
(add and fire) fewer in the compiled one (docs/benchmarks.md, "Compiled core").

An entry's links are cleared whenever it leaves a chain (unlinked, or detached by a
flush), so untracked entries never keep each other alive.

Concurrency: as ``_task_list.py``'s: the timer's re-entrant lock guards every bucket and
chain; ``TimerTaskList.remove`` takes it itself.
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
    ``list`` is the bucket holding the entry, or None; ``prev`` and ``next`` are its
    neighbours in that bucket's chain.
    """

    __slots__ = ("expiration_ms", "list", "next", "prev", "task")

    def __init__(self, task: TimerTask, expiration_ms: int) -> None:
        self.task = task
        self.expiration_ms = expiration_ms
        self.list: TimerTaskList | None = None
        self.prev: TimerTaskEntry | None = None
        self.next: TimerTaskEntry | None = None
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
class EntryChain:
    """The entries of one bucket, linked through their ``prev``/``next``, oldest first.

    ``add`` and ``remove`` are the two methods of a ``set`` that the timer's hot paths
    call on a bucket's ``_entries``; the caller holds the lock, adds only an entry that is
    in no chain and removes only one that is in this chain.
    """

    __slots__ = ("head", "size", "tail")

    def __init__(self) -> None:
        self.head: TimerTaskEntry | None = None
        self.tail: TimerTaskEntry | None = None
        self.size = 0

    def add(self, entry: TimerTaskEntry) -> None:
        """Append ``entry`` at the tail."""
        tail = self.tail
        entry.prev = tail
        entry.next = None
        if tail is None:
            self.head = entry
        else:
            tail.next = entry
        self.tail = entry
        self.size += 1

    def remove(self, entry: TimerTaskEntry) -> None:
        """Unlink ``entry``, joining its neighbours, and clear its links."""
        prev = entry.prev
        next_ = entry.next
        if prev is None:
            self.head = next_
        else:
            prev.next = next_
            entry.prev = None
        if next_ is None:
            self.tail = prev
        else:
            next_.prev = prev
            entry.next = None
        self.size -= 1

    def take(self) -> list[TimerTaskEntry]:
        """Empty the chain: its entries, oldest first, with their links cleared."""
        entries: list[TimerTaskEntry] = []
        entry = self.head
        while entry is not None:
            entries.append(entry)
            next_ = entry.next
            entry.prev = None
            entry.next = None
            entry = next_
        self.head = None
        self.tail = None
        self.size = 0
        return entries

    def snapshot(self) -> list[TimerTaskEntry]:
        """The entries, oldest first, left in place."""
        entries: list[TimerTaskEntry] = []
        entry = self.head
        while entry is not None:
            entries.append(entry)
            entry = entry.next
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
        self._entries = EntryChain()
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
        return self._entries.size

    def __iter__(self) -> Iterator[TimerTaskEntry]:
        """A snapshot of the entries, oldest first."""
        return iter(self._entries.snapshot())

    def __repr__(self) -> str:
        return f"<TimerTaskList expiration_ms={self.expiration_ms} entries={self._entries.size}>"
