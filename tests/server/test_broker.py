"""Broker lifecycle: stopping cleanly while clients are still connecting."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import threading
import warnings
from pathlib import Path

import pytest

from tickwheel.server import BackgroundBroker, Broker, BrokerConfig

pytestmark = pytest.mark.integration

STOP_ROUNDS = 15
CLIENT_THREADS = 3
CONNECT_TIMEOUT_S = 10.0


@pytest.mark.asyncio
async def test_a_socket_accepted_as_the_broker_stops_is_closed(tmp_path: Path) -> None:
    broker = Broker(
        BrokerConfig.from_properties(
            {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}
        )
    )
    await broker.start()
    # The kernel completes the handshake; the broker's loop has not accepted it yet.
    client = socket.create_connection(("127.0.0.1", broker.port))
    try:
        # Let the listener see the connection, then stop while it is being set up.
        await asyncio.sleep(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            await broker.stop()
            gc.collect()
        assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
        client.settimeout(CONNECT_TIMEOUT_S)
        # Closed before anything was read from it, the socket may be reset: also closed.
        with contextlib.suppress(ConnectionResetError):
            assert client.recv(1) == b"", "the broker closed the accepted connection"
    finally:
        client.close()


def reconnect_until(port: int, stop: threading.Event, connected: threading.Event) -> None:
    """Connect and hang up in a loop, as a client retrying a broker does."""
    while not stop.is_set():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S).close()
            connected.set()
        except OSError:
            continue


@pytest.mark.slow
def test_stopping_while_clients_reconnect_leaks_no_socket(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(STOP_ROUNDS):
            broker = BackgroundBroker(config).start()
            stop, connected = threading.Event(), threading.Event()
            clients = [
                threading.Thread(target=reconnect_until, args=(broker.port, stop, connected))
                for _ in range(CLIENT_THREADS)
            ]
            for client in clients:
                client.start()
            assert connected.wait(CONNECT_TIMEOUT_S)
            broker.stop()
            stop.set()
            for client in clients:
                client.join()
            gc.collect()
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
