"""Listener: every socket it accepted is handed to its protocol before ``close`` returns."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tickwheel.server._listener import Listener

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

    listener = Listener("127.0.0.1", 0, Closing)
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
    listener = Listener("127.0.0.1", 0, asyncio.Protocol)
    listener.start()
    await listener.close()
    await listener.close()
