"""Listener: every socket it accepted is handed to its protocol before ``close`` returns."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tickwheel.server.net._listener import Listener

CLIENTS = 20


@pytest.mark.asyncio
async def test_close_waits_until_every_accepted_socket_is_handed_over() -> None:
    created: list[asyncio.Protocol] = []
    connected: list[asyncio.BaseTransport] = []
    first_accepted = asyncio.Event()

    class Closing(asyncio.Protocol):
        def __init__(self) -> None:
            created.append(self)
            first_accepted.set()

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            connected.append(transport)
            transport.close()

    listener = Listener("127.0.0.1", 0, lambda _on_lost: Closing())
    listener.start()
    clients = [socket.create_connection(("127.0.0.1", listener.port)) for _ in range(CLIENTS)]
    try:
        await first_accepted.wait()
        # The first protocol exists, its transport not yet: close must wait for it.
        await listener.close()
        assert created
        assert len(connected) == len(created)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", listener.port)).close()
    finally:
        for client in clients:
            client.close()


@pytest.mark.asyncio
async def test_close_is_idempotent() -> None:
    listener = Listener("127.0.0.1", 0, lambda _on_lost: asyncio.Protocol())
    listener.start()
    await listener.close()
    await listener.close()


@pytest.mark.asyncio
async def test_accepted_sockets_send_without_nagle() -> None:
    """Every accepted socket has TCP_NODELAY, as Kafka's acceptor sets it: a response
    written while an earlier one is unacknowledged leaves at once, not at the client's
    next ACK (the delayed-ACK stall of acks=all produces)."""
    nodelay: list[int] = []
    accepted = asyncio.Event()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            nodelay.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()
            accepted.set()

    listener = Listener("127.0.0.1", 0, lambda _on_lost: Probe())
    listener.start()
    client = socket.create_connection(("127.0.0.1", listener.port))
    try:
        await asyncio.wait_for(accepted.wait(), 5)
        assert nodelay == [1]
    finally:
        client.close()
        await listener.close()
