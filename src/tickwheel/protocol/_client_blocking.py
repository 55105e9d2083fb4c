"""The blocking-socket shell of ``ClientConnection``: it only moves bytes.

``BlockingClient`` opens a TCP connection (``socket.create_connection`` with the
caller's timeout, which then bounds every read and write), over TLS when given an
``ssl.SSLContext`` (the handshake runs as the connection opens), and runs one request
at a time: the frame ``ClientConnection`` makes goes out with ``sendall``, and reads of
exactly ``bytes_needed`` bytes go in until a response is whole. Everything the
protocol decides (correlation, framing, versions, the steps of ``SaslLogin``) is the
core's.

Failures are the socket's: ``OSError`` (``TimeoutError`` when the timeout passes,
``ConnectionError`` when the broker closes the connection mid-answer), and the core's
``ProtocolError`` when the answer is out of step; the caller words them for its user.

Concurrency: a ``BlockingClient`` belongs to one thread.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from typing import Any

from tickwheel.protocol._client import ClientConnection, Response, ResponseClass
from tickwheel.protocol._sasl_login import SaslClient, SaslLogin
from tickwheel.protocol._schemas import response_schema


class BlockingClient:
    """One blocking connection to a broker, one request at a time."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        timeout_s: float,
        response_class: ResponseClass = response_schema,
        no_delay: bool = False,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """Connect to ``host:port`` (raises ``OSError`` if it cannot), over TLS with
        ``ssl_context`` if given; ``no_delay`` turns Nagle's algorithm off."""
        self.address = f"{host}:{port}"
        self.protocol = ClientConnection(client_id, response_class=response_class)
        sock = socket.create_connection((host, port), timeout=timeout_s)
        if no_delay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            try:
                sock = ssl_context.wrap_socket(sock, server_hostname=host)
            except BaseException:
                sock.close()
                raise
        self._sock = sock

    def ask_versions(self) -> None:
        """Send ApiVersions v0 and keep the answer (``protocol.version`` reads it);
        closes the connection if that fails (it is of no use without the answer)."""
        try:
            self._exchange(self.protocol.send_api_versions())
        except BaseException:
            self.close()
            raise

    def call(self, api_key: int, api_version: int, values: Mapping[str, Any]) -> Any:
        """Send one request built from ``values``; returns kio's response body."""
        return self._exchange(self.protocol.send(api_key, api_version, values)).body

    def login(self, client: SaslClient, *, peer: str) -> int:
        """Log in with ``client``'s SASL mechanism (``peer`` names the broker in
        errors); returns the session lifetime in ms (0: it does not expire)."""
        login = SaslLogin(self.protocol, client, peer=peer)
        frame: bytes | None = login.start()
        while frame is not None:
            frame = login.next_frame(self._exchange(frame).body)
        return login.lifetime_ms

    def _exchange(self, frame: bytes) -> Response:
        self._sock.sendall(frame)
        protocol = self.protocol
        while (response := protocol.next_response()) is None:
            chunk = self._sock.recv(protocol.bytes_needed())
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            protocol.receive_data(chunk)
        return response

    def close(self) -> None:
        """Close the socket (idempotent)."""
        self._sock.close()
