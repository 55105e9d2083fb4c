"""``queued.max.request.bytes``: the bytes of request frames a broker holds at once.

The pool on its own first (grants, waits, releases, cancellation), then a broker that
8 clients each announce a 24 MiB frame to and send half of it: the pool keeps what it
holds within its capacity, the connections beyond it wait, and another client is
served meanwhile.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator

import pytest

from server.wire import WireClient, host_port
from tickwheel.server import BackgroundBroker
from tickwheel.server.net._memory_pool import UNBOUNDED, MemoryPool

MIB = 1024 * 1024
HOLDERS = 8
FRAME_BYTES = 24 * MIB
POOL_BYTES = 100 * MIB
API_VERSIONS = 18
TIMEOUT_S = 30.0


@pytest.mark.asyncio
async def test_reservations_that_fit_are_granted_at_once() -> None:
    pool = MemoryPool(100)
    await pool.reserve(60)
    await pool.reserve(40)
    assert (pool.held_bytes, pool.waiting) == (100, 0)


@pytest.mark.asyncio
async def test_a_reservation_that_does_not_fit_waits_for_a_release() -> None:
    pool = MemoryPool(100)
    await pool.reserve(80)
    waiting = asyncio.create_task(pool.reserve(30))
    await asyncio.sleep(0)  # let it start waiting
    assert (pool.waiting, waiting.done()) == (1, False)
    pool.release(80)
    await waiting
    assert (pool.held_bytes, pool.waiting) == (30, 0)


@pytest.mark.asyncio
async def test_small_reservations_pass_a_large_one_that_waits() -> None:
    pool = MemoryPool(100)
    await pool.reserve(50)
    large = asyncio.create_task(pool.reserve(90))
    small = asyncio.create_task(pool.reserve(20))
    await asyncio.sleep(0)
    assert small.done(), "20 bytes fit beside the 50 held, whatever waits before them"
    assert not large.done()
    pool.release(50)
    pool.release(20)
    await large
    assert pool.held_bytes == 90


@pytest.mark.asyncio
async def test_a_frame_larger_than_the_pool_is_read_alone() -> None:
    pool = MemoryPool(100)
    await pool.reserve(500)  # nothing held: granted, as Kafka's non-strict pool does
    second = asyncio.create_task(pool.reserve(1))
    await asyncio.sleep(0)
    assert not second.done()
    pool.release(500)
    await second
    assert pool.held_bytes == 1


@pytest.mark.asyncio
async def test_a_cancelled_wait_leaves_nothing_behind() -> None:
    pool = MemoryPool(100)
    await pool.reserve(100)
    waiting = asyncio.create_task(pool.reserve(10))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert pool.waiting == 0
    pool.release(100)
    assert pool.held_bytes == 0


@pytest.mark.asyncio
async def test_a_grant_to_a_cancelled_waiter_is_given_back() -> None:
    pool = MemoryPool(100)
    await pool.reserve(100)
    waiting = asyncio.create_task(pool.reserve(10))
    await asyncio.sleep(0)
    pool.release(100)  # grants the 10 bytes ...
    waiting.cancel()  # ... to a task cancelled before it resumes
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert (pool.held_bytes, pool.waiting) == (0, 0)


@pytest.mark.asyncio
async def test_unbounded_grants_everything() -> None:
    pool = MemoryPool(UNBOUNDED)
    for _ in range(3):
        await pool.reserve(2**40)
    assert pool.held_bytes == 3 * 2**40


@pytest.mark.parametrize("capacity", [0, -2])
def test_a_capacity_must_be_positive_or_unbounded(capacity: int) -> None:
    with pytest.raises(ValueError, match=r"queued\.max\.request\.bytes"):
        MemoryPool(capacity)


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"queued.max.request.bytes": str(POOL_BYTES)}


@pytest.fixture
def holders(tickwheel_broker: BackgroundBroker) -> Iterator[list[socket.socket]]:
    """Sockets that each announced a 24 MiB Produce and sent as much of its first half
    as the broker took."""
    header = struct.pack(">hhih", 0, 3, 1, -1)  # Produce v3, correlation id 1, no client id
    half = struct.pack(">i", FRAME_BYTES) + header + bytes(FRAME_BYTES // 2 - len(header))
    sockets = []
    try:
        for _ in range(HOLDERS):
            sock = socket.create_connection(host_port(tickwheel_broker.bootstrap_servers))
            sock.settimeout(0.2)
            sockets.append(sock)
            # A broker that stops reading fills the kernel's buffers; that is the point.
            try:
                sock.sendall(half)
            except TimeoutError:
                continue
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.integration
def test_frames_held_across_connections_stay_within_the_pool(
    tickwheel_broker: BackgroundBroker, holders: list[socket.socket]
) -> None:
    pool = tickwheel_broker.broker.memory_pool
    admitted = POOL_BYTES // FRAME_BYTES
    deadline = time.monotonic() + TIMEOUT_S
    # The broker reads the holders' prefixes as their bytes arrive: wait until it has.
    while (pool.waiting, pool.held_bytes) != (HOLDERS - admitted, admitted * FRAME_BYTES):
        assert time.monotonic() < deadline, (pool.waiting, pool.held_bytes)
        time.sleep(0.05)
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        body = client.call(
            API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
    finally:
        client.close()
    assert body.api_keys, "a small request fits beside the held frames"
    # (Its own 25 bytes may still be held a moment after its answer left.)
    assert admitted * FRAME_BYTES <= pool.held_bytes <= POOL_BYTES
    assert pool.waiting == HOLDERS - admitted
