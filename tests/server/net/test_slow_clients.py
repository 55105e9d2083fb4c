"""Clients slow on purpose: one that reads none of its answers, one that trickles a frame.

A broker with a small bound (``socket.request.max.bytes`` and ``queued.max.request.bytes``
of 1 MiB) and ``connections.max.idle.ms`` of one second: a client that stops reading its
answers is dropped as idle (and uncounted), and a client that trickles a byte now and
then onto the pool's floor is dropped within the idle time of taking it, so it cannot
keep every other large frame waiting.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from tickwheel.bench._served import API_VERSIONS_V0, closed_within
from tickwheel.server import BackgroundBroker

MIB = 1024 * 1024
IDLE_MS = 1000
TIMEOUT_S = 10.0
# The greedy client may have queued tens of thousands of requests before it stalls: the
# broker answers each (busy, not idle) before the idle time can start.
DROP_TIMEOUT_S = 60.0

pytestmark = pytest.mark.integration


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {
        "socket.request.max.bytes": str(MIB),
        "queued.max.request.bytes": str(MIB),
        "connections.max.idle.ms": str(IDLE_MS),
    }


def _connect(broker: BackgroundBroker) -> socket.socket:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    return socket.create_connection((host, int(port)))


def _until(condition: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.05)
    return False


def test_a_client_that_reads_none_of_its_answers_is_dropped_as_idle(
    tickwheel_broker: BackgroundBroker,
) -> None:
    quotas = tickwheel_broker.broker.connection_quotas
    with _connect(tickwheel_broker) as greedy:
        greedy.setblocking(False)
        requests = API_VERSIONS_V0 * 1000
        stalled_since = time.monotonic()
        # Send until the broker stops reading (its answers fill both sides' buffers).
        while time.monotonic() - stalled_since < 0.5:
            try:
                if greedy.send(requests):
                    stalled_since = time.monotonic()
            except BlockingIOError:
                time.sleep(0.01)
        assert quotas.total == 1
        assert _until(lambda: quotas.total == 0, DROP_TIMEOUT_S), "never dropped"
    assert tickwheel_broker.broker.memory_pool.held_bytes == 0


def test_a_frame_trickled_onto_the_floor_is_dropped_within_the_idle_time(
    tickwheel_broker: BackgroundBroker,
) -> None:
    pool = tickwheel_broker.broker.memory_pool
    header = struct.pack(">hhih", 0, 9, 1, -1)
    with _connect(tickwheel_broker) as filler, _connect(tickwheel_broker) as trickler:
        filler.sendall(struct.pack(">i", MIB) + header + bytes(900 * 1024))
        assert _until(lambda: pool.held_bytes >= 900 * 1024, TIMEOUT_S)
        trickler.sendall(struct.pack(">i", MIB) + header + bytes(200 * 1024))
        assert _until(lambda: pool.floor is not None, TIMEOUT_S), "nobody took the floor"
        took_floor = time.monotonic()
        # A byte every 300 ms is activity enough for an ordinary frame, not for the floor.
        dropped = False
        while not dropped and time.monotonic() - took_floor < TIMEOUT_S:
            try:
                trickler.sendall(b"\0")
            except OSError:
                dropped = True
                break
            dropped = closed_within(trickler, 0.3)
        assert dropped, "the trickler kept the floor"
        assert time.monotonic() - took_floor < 4 * IDLE_MS / 1000
    assert _until(lambda: pool.floor is None and pool.held_bytes == 0, TIMEOUT_S)
