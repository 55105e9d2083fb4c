"""``MemoryPool``: the request bytes all of a broker's connections may hold at once.

Kafka's ``queued.max.request.bytes``: a connection reserves the size a frame announces
before reading its body and releases it once the request is answered; a reservation
that does not fit waits, and the connection reads nothing more meanwhile (see
``_connection``), as Kafka mutes a channel when its memory pool runs out.

Concurrency: one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio

UNBOUNDED = -1
"""``queued.max.request.bytes`` for no bound (Kafka's default)."""


class MemoryPool:
    """Kafka's ``queued.max.request.bytes``: request bytes held at once, all connections.

    ``reserve(size)`` grants a frame's bytes when they fit in what is free, or when
    nothing is held at all: a frame larger than the whole pool (when the pool is set
    below ``socket.request.max.bytes``) is still read, alone, as Kafka's non-strict
    pool lets one allocation overdraw it. So the bytes held never exceed the larger
    of the capacity and one frame, and the pool can never deadlock: the connections
    holding memory finish their requests without needing more. A reservation that
    does not fit waits; every release grants each waiter that now fits, in arrival
    order but skipping those that do not, so small requests pass a large one that
    waits (a large one may wait as long as small ones keep the pool busy; Kafka's
    pool has the same property). ``UNBOUNDED`` (-1) grants everything at once.

    Concurrency: one event loop; not thread-safe.
    """

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes != UNBOUNDED and capacity_bytes < 1:
            raise ValueError(f"queued.max.request.bytes must be positive or -1: {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self.held_bytes = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def waiting(self) -> int:
        """Reservations waiting for memory."""
        return len(self._waiters)

    def _fits(self, size_bytes: int) -> bool:
        return (
            self.capacity_bytes == UNBOUNDED
            or self.held_bytes == 0
            or self.held_bytes + size_bytes <= self.capacity_bytes
        )

    async def reserve(self, size_bytes: int) -> None:
        """Hold ``size_bytes``, waiting until they fit; ``release`` them when done."""
        if self._fits(size_bytes):
            self.held_bytes += size_bytes
            return
        granted = asyncio.get_running_loop().create_future()
        waiter = (size_bytes, granted)
        self._waiters.append(waiter)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                # Granted, then cancelled before this task resumed: give it back.
                self.release(size_bytes)
            else:
                self._waiters.remove(waiter)
            raise

    def release(self, size_bytes: int) -> None:
        """Give back ``size_bytes`` reserved earlier; grants the waiters that now fit."""
        self.held_bytes -= size_bytes
        still_waiting = []
        for waiter in self._waiters:
            size, granted = waiter
            # A cancelled waiter stays listed until its task takes it out.
            if not granted.cancelled() and self._fits(size):
                self.held_bytes += size
                granted.set_result(None)
            else:
                still_waiting.append(waiter)
        self._waiters = still_waiting
