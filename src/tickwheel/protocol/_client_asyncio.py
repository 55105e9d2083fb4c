"""The asyncio shell of ``ClientConnection``: it only moves bytes.

``AsyncClient.open`` opens a stream to a broker, over TLS when given an
``ssl.SSLContext`` (the handshake runs as the connection opens, checking the peer's
certificate and, if the context says so, its host name). ``call`` and ``call_encoded``
run one request at a time: the frame ``ClientConnection`` makes is written and
drained, and exact reads of ``bytes_needed`` bytes go in until the response is whole.
Everything the protocol decides (correlation, framing, versions) is the core's; the
shell only moves bytes. Timeouts are the caller's (``asyncio.timeout`` around a call).

``login`` runs ``SaslLogin`` (the SASL hand-off of a SASL_PLAINTEXT or SASL_SSL
listener) over the stream and returns the session lifetime the broker granted.

Failures are the stream's (``OSError``, ``asyncio.IncompleteReadError`` when the broker
closes the connection mid-answer) or the core's ``ProtocolError``.

Concurrency: event-loop thread only; a client must not be used by two tasks at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Mapping
from typing import Any

from tickwheel.protocol._client import ClientConnection, Encoder, Response
from tickwheel.protocol._sasl_login import SaslClient, SaslLogin


class AsyncClient:
    """One asyncio connection to a broker, one request at a time."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str
    ) -> None:
        """A client over an open stream (``open`` makes one)."""
        self.protocol = ClientConnection(client_id)
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(
        cls, host: str, port: int, *, client_id: str, ssl_context: ssl.SSLContext | None = None
    ) -> AsyncClient:
        """Connect to ``host:port``, over TLS with ``ssl_context`` if given."""
        if ssl_context is None:
            reader, writer = await asyncio.open_connection(host, port)
        else:
            reader, writer = await asyncio.open_connection(
                host, port, ssl=ssl_context, server_hostname=host
            )
        return cls(reader, writer, client_id)

    async def call(self, api_key: int, api_version: int, values: Mapping[str, Any]) -> Any:
        """Send one request built from ``values``; returns kio's response body."""
        return (await self._exchange(self.protocol.send(api_key, api_version, values))).body

    async def call_encoded(self, api_key: int, api_version: int, encode: Encoder) -> Any:
        """Send the frame ``encode(correlation_id, client_id)`` makes (a request of
        ``api_key`` at ``api_version``); returns kio's response body."""
        frame = self.protocol.send_encoded(api_key, api_version, encode)
        return (await self._exchange(frame)).body

    async def login(self, client: SaslClient, *, peer: str) -> int:
        """Log in with ``client``'s SASL mechanism (``peer`` names the broker in
        errors); returns the session lifetime in ms (0: it does not expire)."""
        login = SaslLogin(self.protocol, client, peer=peer)
        frame: bytes | None = login.start()
        while frame is not None:
            frame = login.next_frame((await self._exchange(frame)).body)
        return login.lifetime_ms

    async def _exchange(self, frame: bytes) -> Response:
        self._writer.write(frame)
        await self._writer.drain()
        protocol = self.protocol
        while (response := protocol.next_response()) is None:
            protocol.receive_data(await self._reader.readexactly(protocol.bytes_needed()))
        return response

    async def close(self) -> None:
        """Close the stream and wait for it to close (its OSErrors are swallowed: a
        TLS peer may already be gone)."""
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()
