"""Watchers: the operations waiting under one key, and the shard that holds them.

``Watchers`` is Kafka's per-key queue of delayed operations (the shape of trio's
``ParkingLot``): a plain list in arrival order. An operation watched under three keys
sits in three of them. A completed operation is not removed from every list at once --
only from the list whose check completed it -- so lists may hold *stale* (completed)
operations until that key's next check or the purgatory's purge filters them out.

``WatcherShard`` is one of the purgatory's 512 shards (Kafka's ``WatcherList``): a
lock and a dict key -> ``Watchers``. A ``Watchers`` that becomes empty is removed from
its shard at once, so the dict holds only keys with something waiting; a purge that
removes many keys also rebuilds the dict, because a CPython dict never gives back the
table it grew to.

Concurrency: a ``Watchers`` and its list are only read or changed with its shard's
``lock`` held: every ``WatcherShard`` method takes it, and so does the purgatory's hot
path, which appends to a list (creating its ``Watchers`` if needed) itself. The lock is
never held while calling an operation's code or the timer, so ``try_complete`` and
``on_complete`` may re-enter the purgatory freely. Checks run on a snapshot taken under
the lock; operations watched after the snapshot are tried by the thread that watched
them (see ``DelayedOperationPurgatory.try_complete_else_watch``), so no event is missed.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Final, Generic, TypeVar

from tickwheel.purgatory._operation import DelayedOperation
from tickwheel.timer._locks import lock_acquire, lock_release

T = TypeVar("T", bound=DelayedOperation)

COMPACT_MIN_KEYS: Final = 64
"""A purge rebuilds a shard's dict only past this many removed keys (cheap otherwise)."""


class Watchers(Generic[T]):
    """The operations watched under one key, oldest first (shard lock held for all calls)."""

    __slots__ = ("key", "operations")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.operations: list[T] = []

    def remove_completed(self) -> int:
        """Drop every completed operation; returns how many were dropped.

        In place, keeping the order: a purge walks every list, so it allocates no copy.
        """
        operations = self.operations
        kept = 0
        for operation in operations:
            if not operation._completed:
                operations[kept] = operation
                kept += 1
        dropped = len(operations) - kept
        if dropped:
            del operations[kept:]
        return dropped

    def __repr__(self) -> str:
        return f"<Watchers key={self.key!r} operations={len(self.operations)}>"


class WatcherShard(Generic[T]):
    """A lock and the ``Watchers`` of the keys that hash to this shard."""

    __slots__ = ("lock", "watchers_by_key")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.watchers_by_key: dict[Hashable, Watchers[T]] = {}

    def snapshot(self, key: Hashable) -> tuple[Watchers[T], list[T]] | None:
        """The key's ``Watchers`` and a copy of its operations; None if nothing waits."""
        lock_acquire(self.lock)
        try:
            watchers = self.watchers_by_key.get(key)
            if watchers is None:
                return None
            return watchers, watchers.operations[:]
        finally:
            lock_release(self.lock)

    def remove_completed(self, watchers: Watchers[T]) -> None:
        """Drop the completed operations of ``watchers``, and the key if it is left empty.

        Nothing to do once ``watchers`` has left the shard: ``take_all`` gave its list to
        a caller, who owns it now.
        """
        lock_acquire(self.lock)
        try:
            if self.watchers_by_key.get(watchers.key) is watchers:
                watchers.remove_completed()
                if not watchers.operations:
                    del self.watchers_by_key[watchers.key]
        finally:
            lock_release(self.lock)

    def take_all(self, key: Hashable) -> list[T]:
        """Remove the key's ``Watchers`` and return its operations."""
        with self.lock:
            watchers = self.watchers_by_key.pop(key, None)
        return [] if watchers is None else watchers.operations

    def count_watched(self) -> int:
        """Entries in all lists of this shard (an operation counts once per key)."""
        with self.lock:
            return sum(len(w.operations) for w in self.watchers_by_key.values())

    def purge_completed(self) -> int:
        """Drop completed operations from every list and empty keys; returns entries dropped."""
        with self.lock:
            by_key = self.watchers_by_key
            purged = 0
            emptied: list[Hashable] = []
            for key, watchers in by_key.items():
                purged += watchers.remove_completed()
                if not watchers.operations:
                    emptied.append(key)
            for key in emptied:
                del by_key[key]
            if len(emptied) >= COMPACT_MIN_KEYS:
                self.watchers_by_key = dict(by_key)
            return purged
