"""``Listener``: the broker's listening socket, with an accept path it fully owns.

``loop.create_server`` hides the sockets it has accepted but not yet wrapped in a
transport: a stop in between could neither close them nor close the server (Python
3.11's ``Server`` asserts when a transport attaches to a closed server, and that
socket is then never closed). So the listener is a plain socket whose readability
the listener watches itself (``loop.add_reader`` on its own descriptor). Each socket
it accepts is wrapped by ``loop.connect_accepted_socket`` in a task that the listener
keeps until the wrapping is done. ``close`` stops watching, closes the listening
socket and then awaits those tasks: when it returns, every accepted socket has
reached its protocol's ``connection_made`` (whose owner decides to serve or close
it), with no counting of loop iterations.

Every accepted socket gets ``TCP_NODELAY``, as Kafka's acceptor sets it. asyncio sets
it only on sockets whose ``proto`` is ``IPPROTO_TCP``, and an accepted socket here has
``proto`` 0: with Nagle on, an answer written while the previous one is still
unacknowledged (an acks=all produce answered a few ms after its request) waited for
the client's delayed ACK or next request, a whole send interval at a steady pace.

When ``accept`` fails for want of resources (no file descriptors or buffers left),
the listener stops watching for ``ACCEPT_RETRY_DELAY_S`` instead of spinning on a
socket that stays readable, as asyncio's own server does, and keeps listening.

Concurrency: created, used and closed on one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import Callable

_log = logging.getLogger(__name__)

LISTEN_BACKLOG = 100
"""Pending connections the kernel queues (asyncio's ``create_server`` default)."""
ACCEPT_RETRY_DELAY_S = 1.0
"""Pause after ``accept`` ran out of resources (asyncio's ``ACCEPT_RETRY_DELAY``)."""
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_GONE_BEFORE_ACCEPT = frozenset({errno.ECONNABORTED, errno.EAGAIN, errno.EWOULDBLOCK})


def _disable_nagle(conn: socket.socket) -> None:
    """Send each response as soon as it is written (``TCP_NODELAY``); see above."""
    if conn.family in (socket.AF_INET, socket.AF_INET6):
        # A peer that reset the connection already: its protocol finds out soon enough.
        with contextlib.suppress(OSError):
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Listener:
    """A listening TCP socket that hands each accepted socket's transport to a protocol."""

    def __init__(
        self, host: str, port: int, protocol_factory: Callable[[], asyncio.Protocol]
    ) -> None:
        """Bind and listen on ``host:port`` (port 0: a free port); not yet accepting."""
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        self._sock = socket.create_server(address, family=family, backlog=LISTEN_BACKLOG)
        self._sock.setblocking(False)
        self._port: int = self._sock.getsockname()[1]
        self._protocol_factory = protocol_factory
        self._loop = asyncio.get_running_loop()
        self._handshakes: set[asyncio.Task[object]] = set()
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def port(self) -> int:
        """The port bound (still known after ``close``)."""
        return self._port

    def start(self) -> None:
        """Start accepting connections."""
        self._loop.add_reader(self._sock.fileno(), self._accept_ready)

    def _accept_ready(self) -> None:
        for _ in range(LISTEN_BACKLOG):
            try:
                conn, _ = self._sock.accept()
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    _log.error("accept failed (%s); retrying in %.1f s", exc, ACCEPT_RETRY_DELAY_S)
                    self._loop.remove_reader(self._sock.fileno())
                    self._retry = self._loop.call_later(ACCEPT_RETRY_DELAY_S, self._resume)
                    return
                if exc.errno in _GONE_BEFORE_ACCEPT:
                    return  # Nothing (more) to accept right now.
                raise
            conn.setblocking(False)
            _disable_nagle(conn)
            task = self._loop.create_task(
                self._loop.connect_accepted_socket(self._protocol_factory, conn)
            )
            self._handshakes.add(task)
            task.add_done_callback(self._handshake_done)

    def _handshake_done(self, task: asyncio.Task[object]) -> None:
        self._handshakes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.warning("could not set up an accepted connection: %r", task.exception())

    def _resume(self) -> None:
        self._retry = None
        if not self._closed:
            self.start()

    async def close(self) -> None:
        """Stop accepting, close the socket, and wait until every accepted one is handed over."""
        if self._closed:
            return
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        # Not cancelled: a cancelled handshake could drop a socket it already holds.
        await asyncio.gather(*self._handshakes, return_exceptions=True)
