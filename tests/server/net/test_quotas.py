"""Connection quotas (``max.connections``, per-IP, creation rates) and idle connections.

``ConnectionQuotas`` on a manual clock first (token buckets, counts, the inter-broker
listener's exemption), then a broker with a client and an inter-broker listener: a
listener at its limit holds new connections back until one closes, the inter-broker
listener gets in past the broker-wide limit by closing the least recently active client
connection, and a connection that goes quiet in the middle of a frame is closed by
``connections.max.idle.ms``.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from tickwheel.bench._served import API_VERSIONS_V0, closed_within
from tickwheel.server import BackgroundBroker
from tickwheel.server.net._quotas import (
    NO_LIMIT,
    ConnectionQuotas,
    QuotaConfigError,
    QuotaSettings,
    parse_per_ip_overrides,
)
from tickwheel.timer import ManualClock

TIMEOUT_S = 10.0
HELD_BACK_S = 0.5
IDLE_MS = 1000
CLIENT_LIMIT = 3


def quotas(clock: ManualClock, **settings: int) -> ConnectionQuotas:
    return ConnectionQuotas(QuotaSettings(**settings), clock)  # type: ignore[arg-type]


def never() -> None:
    raise AssertionError("no slot was expected to free")


def test_a_creation_rate_takes_a_seconds_worth_then_one_per_interval() -> None:
    clock = ManualClock(start_ms=0)
    limits = quotas(clock, max_connection_creation_rate=10)
    listener = limits.add_listener("CLIENTS", NO_LIMIT, NO_LIMIT, inter_broker=False)
    for _ in range(10):
        assert limits.accept_wait_ms(listener, never) == 0
    assert limits.accept_wait_ms(listener, never) == pytest.approx(100)
    clock.advance(100)
    assert limits.accept_wait_ms(listener, never) == 0
    assert limits.refused["CLIENTS", "max.connection.creation.rate"] == 1


def test_the_inter_broker_listener_keeps_only_its_own_rate_and_passes_the_count() -> None:
    clock = ManualClock(start_ms=0)
    limits = quotas(clock, max_connection_creation_rate=1, max_connections=1)
    clients = limits.add_listener("CLIENTS", NO_LIMIT, NO_LIMIT, inter_broker=False)
    brokers = limits.add_listener("BROKERS", NO_LIMIT, NO_LIMIT, inter_broker=True)
    closed: list[str] = []
    limits.close_excess = lambda: closed.append("lru") is None
    assert limits.accept_wait_ms(clients, never) == 0
    assert limits.admit(clients, "10.0.0.1")
    slot_freed: list[str] = []
    assert limits.accept_wait_ms(clients, lambda: slot_freed.append("clients")) == float("inf")
    for _ in range(3):
        assert limits.accept_wait_ms(brokers, never) == 0
        assert limits.admit(brokers, "10.0.0.2")
    assert closed == ["lru"] * 3, "each inter-broker connection past the limit closes one"
    limits.closed(clients, "10.0.0.1")
    assert slot_freed == ["clients"]


def test_a_listener_limit_and_the_per_ip_limit_count_apart() -> None:
    clock = ManualClock(start_ms=0)
    limits = quotas(clock, max_connections_per_ip=2)
    listener = limits.add_listener("CLIENTS", 3, NO_LIMIT, inter_broker=False)
    assert limits.admit(listener, "10.0.0.1")
    assert limits.admit(listener, "10.0.0.1")
    assert not limits.admit(listener, "10.0.0.1"), "a third from one host is refused"
    assert limits.connections_from("10.0.0.1") == 2
    assert limits.admit(listener, "10.0.0.2")
    assert limits.accept_wait_ms(listener, lambda: None) == float("inf")
    limits.closed(listener, "10.0.0.1")
    assert limits.accept_wait_ms(listener, never) == 0
    assert limits.refused["CLIENTS", "max.connections.per.ip"] == 1


def test_overrides_name_hosts_and_bad_ones_are_refused() -> None:
    assert parse_per_ip_overrides("127.0.0.1:5,[::1]:0") == {"127.0.0.1": 5, "::1": 0}
    for bad in ("127.0.0.1:x", ":5", "127.0.0.1", "127.0.0.1:-1", "no-such-host.invalid:3"):
        with pytest.raises(QuotaConfigError, match=r"max\.connections\.per\.ip\.overrides"):
            parse_per_ip_overrides(bad)


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {
        "listeners": "CLIENTS://127.0.0.1:0,BROKERS://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENTS:PLAINTEXT,BROKERS:PLAINTEXT",
        "inter.broker.listener.name": "BROKERS",
        "max.connections": str(CLIENT_LIMIT),
        "connections.max.idle.ms": str(IDLE_MS),
    }


def _answered(sock: socket.socket, timeout_s: float) -> bool:
    """Whether ``sock`` gets its ApiVersions answered within ``timeout_s``."""
    sock.settimeout(timeout_s)
    sock.sendall(API_VERSIONS_V0)
    try:
        return len(sock.recv(4)) == 4
    except TimeoutError:
        return False


@pytest.mark.integration
def test_max_connections_holds_back_and_the_inter_broker_listener_gets_in(
    tickwheel_broker: BackgroundBroker,
) -> None:
    clients = tickwheel_broker.endpoint("CLIENTS")
    brokers = tickwheel_broker.endpoint("BROKERS")
    held = [socket.create_connection((clients.host, clients.port)) for _ in range(CLIENT_LIMIT)]
    try:
        for sock in held:
            assert _answered(sock, TIMEOUT_S)
        waiting = socket.create_connection((clients.host, clients.port))
        held.append(waiting)
        assert not _answered(waiting, HELD_BACK_S), "past max.connections: held back"
        held.pop(0).close()
        assert _answered(waiting, TIMEOUT_S), "taken once a connection closed"
        # The inter-broker listener is exempt: it gets in, and the least recently active
        # client connection (the oldest one answered) makes room.
        oldest = held[0]
        follower = socket.create_connection((brokers.host, brokers.port))
        held.append(follower)
        assert _answered(follower, TIMEOUT_S)
        assert closed_within(oldest, TIMEOUT_S)
    finally:
        for sock in held:
            sock.close()


@pytest.mark.integration
def test_a_connection_quiet_in_the_middle_of_a_frame_is_closed_when_idle(
    tickwheel_broker: BackgroundBroker,
) -> None:
    clients = tickwheel_broker.endpoint("CLIENTS")
    with socket.create_connection((clients.host, clients.port)) as quiet:
        quiet.sendall(struct.pack(">ihhih", 104_857_600, 0, 9, 1, -1) + bytes(1024))
        started = time.monotonic()
        assert closed_within(quiet, TIMEOUT_S)
        assert time.monotonic() - started >= IDLE_MS / 1000 / 2
    with socket.create_connection((clients.host, clients.port)) as fresh:
        assert _answered(fresh, TIMEOUT_S), "the broker's other work did not notice"
