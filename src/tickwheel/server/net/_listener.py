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

A TLS listener (``tls`` given: SSL and SASL_SSL) wraps each accepted socket in TLS
inside that same task (``connect_accepted_socket(..., ssl=...)``): the protocol hears
of the socket only once the handshake is done. A handshake that fails (a PLAINTEXT
client, a client certificate the trust store does not vouch for, none where one is
required, or no handshake within ``TLS_HANDSHAKE_TIMEOUT_S``) closes that socket alone,
with one WARNING line per client host, rate-limited. ``close`` cancels handshakes still
under way (the cancelled task closes its socket) instead of waiting out slow clients.
Closing a TLS connection waits at most ``TLS_SHUTDOWN_TIMEOUT_S`` for the client's
close_notify.

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
import ssl
from collections.abc import Callable

from tickwheel._ratelimit import RateLimitedLog

_log = logging.getLogger(__name__)
# Failed TLS handshakes, one key per client host (a client that keeps reconnecting with
# the wrong settings gets one line with a count).
_handshake_failures = RateLimitedLog(_log)

LISTEN_BACKLOG = 100
"""Pending connections the kernel queues (asyncio's ``create_server`` default)."""
ACCEPT_RETRY_DELAY_S = 1.0
"""Pause after ``accept`` ran out of resources (asyncio's ``ACCEPT_RETRY_DELAY``)."""
TLS_HANDSHAKE_TIMEOUT_S = 10.0
"""How long a client may take to complete its TLS handshake before it is disconnected."""
TLS_SHUTDOWN_TIMEOUT_S = 2.0
"""How long closing a TLS connection waits for the client's close_notify before the socket
is dropped (asyncio waits 30 s by default; Kafka does not wait): a peer that never
answers must not hold up the broker's shutdown."""
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
        self,
        host: str,
        port: int,
        protocol_factory: Callable[[], asyncio.Protocol],
        *,
        tls: ssl.SSLContext | None = None,
        name: str = "",
    ) -> None:
        """Bind and listen on ``host:port`` (port 0: a free port); not yet accepting.

        ``tls``: serve TLS with this context; ``name``: the listener's name, for log lines.
        """
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        self._sock = socket.create_server(address, family=family, backlog=LISTEN_BACKLOG)
        self._sock.setblocking(False)
        self._port: int = self._sock.getsockname()[1]
        self._protocol_factory = protocol_factory
        self._loop = asyncio.get_running_loop()
        self._tls = tls
        self._name = name
        # Each accepted socket's hand-over (and TLS handshake), with the client's address.
        self._handshakes: dict[asyncio.Task[object], tuple[str, str]] = {}
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
            if self._tls is None:
                handover = self._loop.connect_accepted_socket(self._protocol_factory, conn)
            else:
                handover = self._loop.connect_accepted_socket(
                    self._protocol_factory,
                    conn,
                    ssl=self._tls,
                    ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S,
                    ssl_shutdown_timeout=TLS_SHUTDOWN_TIMEOUT_S,
                )
            task = self._loop.create_task(handover)
            self._handshakes[task] = _peer(conn)
            task.add_done_callback(self._handshake_done)

    def _handshake_done(self, task: asyncio.Task[object]) -> None:
        host, peer = self._handshakes.pop(task)
        if task.cancelled() or task.exception() is None:
            return
        error = task.exception()
        if self._tls is not None and isinstance(error, (OSError, TimeoutError)):
            # ssl.SSLError is an OSError; so is a client that left mid-handshake.
            _handshake_failures.log(
                logging.WARNING,
                host,
                "TLS handshake with %s on listener %s failed (%s); closed its connection "
                "(is the client configured with security.protocol=SSL and the right "
                "certificates?)",
                peer,
                self._name,
                _describe(error),
            )
            return
        _log.warning("could not set up an accepted connection: %r", error)

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
        handshakes = list(self._handshakes)
        if self._tls is not None:
            # A TLS handshake may wait for a slow client; cancelled, it closes its socket.
            for task in handshakes:
                task.cancel()
        # A plain hand-over is not cancelled: it could drop a socket it already holds.
        await asyncio.gather(*handshakes, return_exceptions=True)


def _peer(conn: socket.socket) -> tuple[str, str]:
    """The client's host and ``host:port``, for log lines."""
    try:
        address = conn.getpeername()
    except OSError:
        return "unknown", "unknown"
    if isinstance(address, tuple):
        return str(address[0]), f"{address[0]}:{address[1]}"
    return str(address), str(address)


def _describe(error: BaseException) -> str:
    if isinstance(error, ssl.SSLError) and error.reason:
        return error.reason
    if isinstance(error, TimeoutError):
        return f"no handshake within {TLS_HANDSHAKE_TIMEOUT_S:g} s"
    return str(error) or type(error).__name__
