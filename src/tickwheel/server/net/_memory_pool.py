"""``MemoryPool``: the request bytes all of a broker's connections hold at once.

Kafka's ``queued.max.request.bytes`` (-1, its default: no bound). Memory is held for
bytes that have *arrived*, never for bytes a size prefix merely announces: a connection
reads a frame in slices of at most ``SLICE_BYTES`` and holds each slice in the pool once
it has it (``FrameHold``), until the request is answered. A client that announces 100 MB
and sends 1 KB holds 1 KB.

Who waits when the pool is full. Each request for ``n`` more bytes of a frame is
granted at once when one of these holds, checked in this order:

1. the pool is unbounded;
2. *a connection's own slice*: the frame is the only one its connection holds, it holds
   nothing yet, and ``n <= SLICE_BYTES`` -- so a small request (at most one slice) from
   a connection with nothing else in flight is never held back, whatever the others do;
3. *it fits*: ``held_bytes + n <= capacity_bytes``;
4. *the floor*: no frame holds the floor and no request waits before this one; the frame
   takes the floor, and every later slice of that frame is granted beyond the capacity
   until the frame's bytes are released.

Otherwise the request waits in arrival order, and every release grants each waiter that
now passes (1)-(3), and hands a free floor to the first waiter still waiting. So when
the bound is reached, the connections that wait are the ones reading large frames (or a
connection's second request while its first is still held): a new small request of
another client is never among them.

Why the bound holds: bytes granted by (3) never take the pool past its capacity, the
floor is one frame (at most ``socket.request.max.bytes``), and (2) adds at most one
slice per connection -- which its socket's read buffer holds anyway. So ``held_bytes``
never exceeds ``capacity_bytes + socket.request.max.bytes + connections * SLICE_BYTES``.

Why it cannot deadlock or starve: a request waits only while the floor is taken. The
floor's frame never waits on the pool, so it either finishes arriving (its request is
then handled, which every handler bounds by its timeout, and its bytes come back before
its answer is written) or it does not finish within ``connections.max.idle.ms`` of
taking the floor, and then the connection is closed as idle, which releases them too
(bytes trickled onto the floor do not count as activity; a connection that waits on
the pool is not idle). Either way the floor comes back in bounded
time and goes to the oldest waiter, so every waiter reaches it in turn, whatever later
requests fit and pass it meanwhile (Kafka's non-strict pool lets one allocation overdraw
it for the same reason). The price, stated plainly: while a quiet client's frame holds
the floor, other *large* frames that do not fit wait until that client is closed.

Concurrency: one event loop; not thread-safe. ``try_hold``, ``release`` and the
waiters' wake-ups run synchronously on the loop; ``hold`` is the awaiting form.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Final

UNBOUNDED: Final = -1
"""``queued.max.request.bytes`` for no bound (Kafka's default)."""

SLICE_BYTES: Final = 64 * 1024
"""The most a connection reads of a frame before it holds the bytes in the pool: a
frame of at most this size is read whole, a larger one slice by slice. The size of
asyncio's stream buffer, so a waiting connection's socket stops being read at once."""


class PoolAccount:
    """One connection's share of the pool: the bytes its frames hold."""

    __slots__ = ("held_bytes",)

    def __init__(self) -> None:
        self.held_bytes = 0


class FrameHold:
    """The bytes one frame holds in the pool, from its first slice until ``release``."""

    __slots__ = ("account", "held_bytes")

    def __init__(self, account: PoolAccount) -> None:
        self.account = account
        self.held_bytes = 0


class PoolWait:
    """A request for bytes that waits for the pool (``wait_hold``)."""

    __slots__ = ("frame", "on_grant", "size_bytes")

    def __init__(self, frame: FrameHold, size_bytes: int, on_grant: Callable[[], None]) -> None:
        self.frame = frame
        self.size_bytes = size_bytes
        self.on_grant = on_grant


class MemoryPool:
    """Kafka's ``queued.max.request.bytes``: request bytes held at once, all connections."""

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes != UNBOUNDED and capacity_bytes < 1:
            raise ValueError(f"queued.max.request.bytes must be positive or -1: {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self.held_bytes = 0
        self._floor: FrameHold | None = None
        self._waiters: collections.deque[PoolWait] = collections.deque()

    @property
    def waiting(self) -> int:
        """Requests for bytes waiting for the pool."""
        return len(self._waiters)

    @property
    def floor(self) -> FrameHold | None:
        """The frame allowed past the capacity until it is released, if any."""
        return self._floor

    def _passes(self, frame: FrameHold, size_bytes: int) -> bool:
        """Rules (1)-(3) of the module docstring, and a frame that holds the floor."""
        account = frame.account
        return (
            self.capacity_bytes == UNBOUNDED
            or frame is self._floor
            or (account.held_bytes == 0 and size_bytes <= SLICE_BYTES)
            or self.held_bytes + size_bytes <= self.capacity_bytes
        )

    def _grant(self, frame: FrameHold, size_bytes: int) -> None:
        frame.held_bytes += size_bytes
        frame.account.held_bytes += size_bytes
        self.held_bytes += size_bytes

    def try_hold(self, frame: FrameHold, size_bytes: int) -> bool:
        """Hold ``size_bytes`` more for ``frame`` if the pool grants them now."""
        if not self._passes(frame, size_bytes):
            if self._floor is not None or self._waiters:
                return False
            self._floor = frame
        self._grant(frame, size_bytes)
        return True

    def wait_hold(
        self, frame: FrameHold, size_bytes: int, on_grant: Callable[[], None]
    ) -> PoolWait:
        """Queue a request ``try_hold`` refused; ``on_grant`` runs once it is held."""
        waiter = PoolWait(frame, size_bytes, on_grant)
        self._waiters.append(waiter)
        return waiter

    def cancel_wait(self, waiter: PoolWait) -> None:
        """Forget a queued request (its connection is closing); no-op once granted."""
        try:
            self._waiters.remove(waiter)
        except ValueError:
            return
        self._grant_waiters()

    async def hold(self, frame: FrameHold, size_bytes: int) -> None:
        """Hold ``size_bytes`` more for ``frame``, waiting until the pool grants them."""
        if self.try_hold(frame, size_bytes):
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not granted.done():
                granted.set_result(None)

        waiter = self.wait_hold(frame, size_bytes, wake)
        try:
            await granted
        except asyncio.CancelledError:
            # Granted or not, the frame's owner releases the frame as it closes.
            self.cancel_wait(waiter)
            raise

    def release(self, frame: FrameHold) -> None:
        """Give back every byte ``frame`` holds (idempotent); grants what now passes."""
        size_bytes = frame.held_bytes
        if frame is self._floor:
            self._floor = None
        if size_bytes == 0:
            if self._floor is None and self._waiters:
                self._grant_waiters()
            return
        frame.held_bytes = 0
        frame.account.held_bytes -= size_bytes
        self.held_bytes -= size_bytes
        self._grant_waiters()

    def _grant_waiters(self) -> None:
        """Grant every waiter that passes, in arrival order; then the floor, if free,
        to the oldest one still waiting."""
        if not self._waiters:
            return
        still_waiting: collections.deque[PoolWait] = collections.deque()
        granted: list[PoolWait] = []
        for waiter in self._waiters:
            if self._passes(waiter.frame, waiter.size_bytes):
                self._grant(waiter.frame, waiter.size_bytes)
                granted.append(waiter)
            elif self._floor is None:
                self._floor = waiter.frame
                self._grant(waiter.frame, waiter.size_bytes)
                granted.append(waiter)
            else:
                still_waiting.append(waiter)
        self._waiters = still_waiting
        for waiter in granted:
            waiter.on_grant()
