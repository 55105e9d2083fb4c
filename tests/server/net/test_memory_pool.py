"""``queued.max.request.bytes``: the request bytes a broker holds at once.

The pool on its own first: its four rules, cancellation, and a state-machine test that
holds any sequence of requests, releases and cancellations against a model of the
pool (the bound, no lost wake-up, every waiter served once the frames before it are
released). Then brokers: frames held as their bytes arrive, with a bound and without.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from server.wire import WireClient, host_port
from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker
from tickwheel.server.net._memory_pool import (
    SLICE_BYTES,
    UNBOUNDED,
    FrameHold,
    MemoryPool,
    PoolAccount,
    PoolWait,
)

MIB = 1024 * 1024
HOLDERS = 8
FRAME_BYTES = 24 * MIB
POOL_BYTES = 100 * MIB
API_VERSIONS = ApiKey.API_VERSIONS
TIMEOUT_S = 30.0
SENT_BYTES = FRAME_BYTES * 3 // 4


def frame_of(account: PoolAccount | None = None) -> FrameHold:
    return FrameHold(PoolAccount() if account is None else account)


def test_a_slice_that_fits_is_held_at_once() -> None:
    pool = MemoryPool(4 * SLICE_BYTES)
    first, second = frame_of(), frame_of()
    assert pool.try_hold(first, SLICE_BYTES)
    assert pool.try_hold(second, SLICE_BYTES)
    assert pool.held_bytes == 2 * SLICE_BYTES
    pool.release(first)
    pool.release(second)
    assert pool.held_bytes == 0


def test_a_connections_first_slice_is_never_held_back() -> None:
    """A small request of a connection with nothing else held passes a full pool."""
    pool = MemoryPool(SLICE_BYTES)
    hog = frame_of()
    assert pool.try_hold(hog, SLICE_BYTES)
    assert pool.try_hold(hog, SLICE_BYTES)  # the floor: the pool is now past its capacity
    waiting = frame_of()
    assert pool.try_hold(waiting, SLICE_BYTES)  # its own first slice
    assert not pool.try_hold(waiting, 1), "a second slice waits: the floor is taken"
    for _ in range(3):
        assert pool.try_hold(frame_of(), SLICE_BYTES)


def test_one_frame_at_a_time_takes_the_floor_and_it_passes_in_arrival_order() -> None:
    pool = MemoryPool(2 * SLICE_BYTES)
    floor, second, third = frame_of(), frame_of(), frame_of()
    for frame in (floor, second, third):
        assert pool.try_hold(frame, SLICE_BYTES)  # every connection's first slice
    assert pool.try_hold(floor, SLICE_BYTES), "no floor yet and nobody waits: taken"
    assert pool.floor is floor
    assert pool.try_hold(floor, 10 * SLICE_BYTES), "the floor's frame goes past the capacity"
    granted: list[str] = []
    pool.wait_hold(second, SLICE_BYTES, lambda: granted.append("second"))
    pool.wait_hold(third, SLICE_BYTES, lambda: granted.append("third"))
    assert pool.waiting == 2
    pool.release(floor)
    assert granted == ["second"], "the floor goes to the oldest waiter alone"
    assert pool.floor is second
    pool.release(second)
    assert granted == ["second", "third"]


def test_small_requests_pass_a_large_one_that_waits() -> None:
    pool = MemoryPool(3 * SLICE_BYTES)
    floor, large = frame_of(), frame_of()
    assert pool.try_hold(floor, SLICE_BYTES)
    assert pool.try_hold(floor, 3 * SLICE_BYTES)  # the floor
    assert pool.try_hold(large, SLICE_BYTES)
    pool.wait_hold(large, SLICE_BYTES, lambda: None)
    for _ in range(5):
        assert pool.try_hold(frame_of(), 100), "a new connection's small request waits for nobody"


@pytest.mark.asyncio
async def test_hold_waits_for_a_release_and_a_cancelled_wait_leaves_nothing_behind() -> None:
    pool = MemoryPool(SLICE_BYTES)
    floor, other = frame_of(), frame_of()
    assert pool.try_hold(floor, SLICE_BYTES)
    assert pool.try_hold(floor, SLICE_BYTES)
    assert pool.try_hold(other, SLICE_BYTES)
    waiting = asyncio.create_task(pool.hold(other, SLICE_BYTES))
    await asyncio.sleep(0)
    assert (pool.waiting, waiting.done()) == (1, False)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert pool.waiting == 0
    pool.release(other)
    pool.release(floor)
    assert pool.held_bytes == 0
    granted = asyncio.create_task(pool.hold(frame_of(), 3 * SLICE_BYTES))
    await granted
    assert pool.held_bytes == 3 * SLICE_BYTES


def test_unbounded_grants_everything() -> None:
    pool = MemoryPool(UNBOUNDED)
    account = PoolAccount()
    for _ in range(3):
        assert pool.try_hold(frame_of(account), 2**40)
    assert pool.held_bytes == 3 * 2**40


@pytest.mark.parametrize("capacity", [0, -2])
def test_a_capacity_must_be_positive_or_unbounded(capacity: int) -> None:
    with pytest.raises(ValueError, match=r"queued\.max\.request\.bytes"):
        MemoryPool(capacity)


CAPACITY = 4 * SLICE_BYTES
MAX_FRAME = 12 * SLICE_BYTES  # the model's socket.request.max.bytes


class PoolModel(RuleBasedStateMachine):
    """Any interleaving of requests, releases and cancellations against the rules."""

    accounts = Bundle("accounts")
    frames = Bundle("frames")

    def __init__(self) -> None:
        super().__init__()
        self.pool = MemoryPool(CAPACITY)
        self.all_accounts: list[PoolAccount] = []
        # Each frame's bytes granted, by the model's own count.
        self.granted: dict[int, int] = {}
        self.frame_by_id: dict[int, FrameHold] = {}
        self.waits: dict[int, tuple[PoolWait, int]] = {}

    @rule(target=accounts)
    def connect(self) -> PoolAccount:
        account = PoolAccount()
        self.all_accounts.append(account)
        return account

    @rule(target=frames, account=accounts)
    def open_frame(self, account: PoolAccount) -> FrameHold:
        frame = FrameHold(account)
        self.frame_by_id[id(frame)] = frame
        self.granted[id(frame)] = 0
        return frame

    def _grant(self, frame: FrameHold, size: int) -> None:
        self.granted[id(frame)] += size

    @rule(frame=frames, size=st.integers(1, 2 * SLICE_BYTES))
    def request(self, frame: FrameHold, size: int) -> None:
        if id(frame) in self.waits or self.granted[id(frame)] + size > MAX_FRAME:
            return  # a frame reads one slice at a time, and is at most MAX_FRAME
        first_small = frame.account.held_bytes == 0 and size <= SLICE_BYTES
        if self.pool.try_hold(frame, size):
            self._grant(frame, size)
            return
        assert not first_small, "a connection's first small slice never waits"
        assert self.pool.floor is not None or self.pool.waiting, "refused with the floor free"

        def granted() -> None:
            del self.waits[id(frame)]
            self._grant(frame, size)

        self.waits[id(frame)] = (self.pool.wait_hold(frame, size, granted), size)

    @rule(frame=consumes(frames))
    def release(self, frame: FrameHold) -> None:
        if id(frame) in self.waits:
            waiter, _ = self.waits.pop(id(frame))
            self.pool.cancel_wait(waiter)
        self.pool.release(frame)
        self.granted[id(frame)] = 0

    @precondition(lambda self: self.waits)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        frame_id = data.draw(st.sampled_from(sorted(self.waits)))
        waiter, _ = self.waits.pop(frame_id)
        self.pool.cancel_wait(waiter)

    @invariant()
    def accounts_match_grants(self) -> None:
        assert self.pool.held_bytes == sum(self.granted.values())
        for frame_id, frame in self.frame_by_id.items():
            assert frame.held_bytes == self.granted[frame_id]

    @invariant()
    def bound_holds(self) -> None:
        bound = CAPACITY + MAX_FRAME + len(self.all_accounts) * SLICE_BYTES
        assert self.pool.held_bytes <= bound

    @invariant()
    def no_lost_wake_up(self) -> None:
        if self.waits:
            assert self.pool.floor is not None, "waiters, and nobody holds the floor"
        for frame_id, (_, size) in self.waits.items():
            frame = self.frame_by_id[frame_id]
            assert frame is not self.pool.floor
            assert self.pool.held_bytes + size > CAPACITY
            assert not (frame.account.held_bytes == 0 and size <= SLICE_BYTES)

    def teardown(self) -> None:
        # Liveness: release every frame that does not wait, and every waiter is served.
        for _ in range(len(self.frame_by_id) + 1):
            if not self.waits:
                break
            for frame_id, frame in self.frame_by_id.items():
                if frame_id not in self.waits:
                    self.pool.release(frame)
                    self.granted[frame_id] = 0
        assert not self.waits, "a waiter was never served"


TestPoolModel = PoolModel.TestCase


def _produce_prefix(frame_bytes: int) -> bytes:
    header = struct.pack(">hhih", 0, 3, 1, -1)  # Produce v3, correlation id 1, no client id
    return struct.pack(">i", frame_bytes) + header


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"queued.max.request.bytes": str(POOL_BYTES)}


@pytest.fixture
def holders(tickwheel_broker: BackgroundBroker) -> Iterator[list[socket.socket]]:
    """Sockets that each announced a 24 MiB Produce and sent as much of its first three
    quarters (more than the pool takes, all together) as the broker took."""
    part = _produce_prefix(FRAME_BYTES)
    part += bytes(SENT_BYTES - len(part) + 4)
    sockets = []
    try:
        for _ in range(HOLDERS):
            sock = socket.create_connection(host_port(tickwheel_broker.bootstrap_servers))
            sock.settimeout(0.2)
            sockets.append(sock)
            # A broker that stops reading fills the kernel's buffers; that is the point.
            try:
                sock.sendall(part)
            except TimeoutError:
                continue
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def _api_versions_answered(bootstrap: str) -> bool:
    client = WireClient(bootstrap)
    try:
        body = client.call(
            API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
    finally:
        client.close()
    return bool(body.api_keys)


@pytest.mark.integration
def test_partly_sent_frames_hold_what_arrived_within_the_bound(
    tickwheel_broker: BackgroundBroker, holders: list[socket.socket]
) -> None:
    pool = tickwheel_broker.broker.memory_pool
    bound = POOL_BYTES + FRAME_BYTES + HOLDERS * SLICE_BYTES
    deadline = time.monotonic() + TIMEOUT_S
    # The broker reads the frames as their bytes arrive until the pool is full.
    while not pool.waiting:
        assert time.monotonic() < deadline, (pool.waiting, pool.held_bytes)
        time.sleep(0.05)
    assert POOL_BYTES - HOLDERS * SLICE_BYTES < pool.held_bytes <= bound
    assert pool.held_bytes <= HOLDERS * SENT_BYTES, "only bytes that arrived are held"
    assert _api_versions_answered(tickwheel_broker.bootstrap_servers), (
        "a small request is served beside the held frames"
    )
    assert pool.held_bytes <= bound


@pytest.mark.integration
def test_an_announced_frame_holds_nothing_until_its_bytes_arrive(
    tickwheel_broker: BackgroundBroker,
) -> None:
    """The outage this pool was rebuilt for: 100 MB announced, 1 KB sent, then quiet."""
    sock = socket.create_connection(host_port(tickwheel_broker.bootstrap_servers))
    try:
        sock.sendall(_produce_prefix(POOL_BYTES) + bytes(1024))
        assert _api_versions_answered(tickwheel_broker.bootstrap_servers)
        assert tickwheel_broker.broker.memory_pool.held_bytes < SLICE_BYTES
    finally:
        sock.close()
