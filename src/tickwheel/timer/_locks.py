"""How the core's hot paths take its own locks: through the lock types' method descriptors.

``rlock_acquire(lock)`` is ``lock.acquire()``, ``lock_release(lock)`` is
``lock.release()``, and so on, for the ``threading.RLock`` and ``threading.Lock`` objects
the timer and the purgatory make themselves. The pure-Python build runs the same calls
as the method calls (the interpreter looks the method up once either way). The compiled
build calls a method of a Python object through the C API, which looks it up on the
object's type at every call, and compiles ``with lock:`` into lookups and calls of
``__enter__`` and ``__exit__``; through a descriptor held in a module constant it does
neither (about a tenth of a compiled cancel + add, and of a purgatory request).

A lock handed in by a caller (a ``DelayedOperation``'s ``lock``) is not necessarily one
of these types, so it is taken by its own methods.

Concurrency: constants; the locks themselves are what they always are.
"""

from __future__ import annotations

import threading
from typing import Final

_RLOCK: Final = type(threading.RLock())
_LOCK: Final = type(threading.Lock())

rlock_acquire: Final = _RLOCK.acquire
"""``RLock.acquire``: ``rlock_acquire(lock)`` blocks until ``lock`` is held."""

rlock_release: Final = _RLOCK.release
"""``RLock.release``: ``rlock_release(lock)``."""

lock_acquire: Final = _LOCK.acquire
"""``Lock.acquire``: ``lock_acquire(lock)`` blocks until ``lock`` is held."""

lock_release: Final = _LOCK.release
"""``Lock.release``: ``lock_release(lock)``."""
