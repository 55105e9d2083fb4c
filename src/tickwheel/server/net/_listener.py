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

Connection quotas (``_quotas``): before each accept the listener asks its
``ConnectionQuotas`` whether it may take one more connection now; while a count limit
is reached it stops watching its socket until a connection closes, and while a creation
rate is spent it stops until the next token, so new connections wait in the kernel's
backlog, as Kafka's acceptor blocks. A socket from a host over
``max.connections.per.ip`` is closed as soon as it is accepted. Each counted socket is
uncounted exactly once: by its protocol's ``connection_lost`` (the ``on_lost`` the
factory is given), or here when its hand-over fails before the protocol heard of it.

When ``accept`` fails for want of resources (no file descriptors or buffers left),
the listener stops watching for ``ACCEPT_RETRY_DELAY_S`` instead of spinning on a
socket that stays readable, as asyncio's own server does, and keeps listening.

Concurrency: created, used and closed on one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import math
import socket
import ssl
from collections.abc import Callable

from tickwheel._ratelimit import RateLimitedLog
from tickwheel.server.net._quotas import ConnectionQuotas, ListenerQuota

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


ProtocolFactory = Callable[[Callable[[], None]], asyncio.Protocol]
"""Makes the protocol of one accepted socket, given the ``on_lost`` its
``connection_lost`` must call (asyncio calls that once, after ``connection_made``)."""


class _Uncount:
    """Uncounts one accepted socket from the quotas, once, however it ends."""

    __slots__ = ("_host", "_quota", "_quotas")

    def __init__(self, quotas: ConnectionQuotas, quota: ListenerQuota, host: str) -> None:
        self._quotas: ConnectionQuotas | None = quotas
        self._quota = quota
        self._host = host

    def __call__(self) -> None:
        quotas, self._quotas = self._quotas, None
        if quotas is not None:
            quotas.closed(self._quota, self._host)


def _nothing_to_uncount() -> None:
    """``on_lost`` of a listener without quotas."""


class Listener:
    """A listening TCP socket that hands each accepted socket's transport to a protocol."""

    def __init__(
        self,
        host: str,
        port: int,
        protocol_factory: ProtocolFactory,
        *,
        tls: ssl.SSLContext | None = None,
        name: str = "",
        quotas: tuple[ConnectionQuotas, ListenerQuota] | None = None,
    ) -> None:
        """Bind and listen on ``host:port`` (port 0: a free port); not yet accepting.

        ``tls``: serve TLS with this context; ``name``: the listener's name, for log
        lines; ``quotas``: the broker's connection quotas and this listener's share.
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
        # Each accepted socket's hand-over (and TLS handshake), with the socket, the
        # client's address and what uncounts the socket if the hand-over fails.
        self._handshakes: dict[
            asyncio.Task[object], tuple[socket.socket, str, str, Callable[[], None]]
        ] = {}
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False
        self._watching = False
        self._quotas = quotas

    @property
    def port(self) -> int:
        """The port bound (still known after ``close``)."""
        return self._port

    def start(self) -> None:
        """Start accepting connections."""
        if not self._watching and not self._closed:
            self._watching = True
            self._loop.add_reader(self._sock.fileno(), self._accept_ready)

    def _pause(self, delay_s: float) -> None:
        """Stop watching the socket for ``delay_s`` (``inf``: until ``_resume``)."""
        if self._watching:
            self._watching = False
            self._loop.remove_reader(self._sock.fileno())
        if not math.isinf(delay_s) and self._retry is None:
            self._retry = self._loop.call_later(delay_s, self._resume)

    def _accept_ready(self) -> None:
        quotas = self._quotas
        for _ in range(LISTEN_BACKLOG):
            if quotas is not None:
                wait_ms = quotas[0].accept_wait_ms(quotas[1], self._resume)
                if wait_ms > 0:
                    self._pause(wait_ms / 1000)
                    return
            try:
                conn, _ = self._sock.accept()
            except OSError as exc:
                if quotas is not None:
                    quotas[0].refund(quotas[1])
                if exc.errno in _OUT_OF_RESOURCES:
                    _log.error("accept failed (%s); retrying in %.1f s", exc, ACCEPT_RETRY_DELAY_S)
                    self._pause(ACCEPT_RETRY_DELAY_S)
                    return
                if exc.errno in _GONE_BEFORE_ACCEPT:
                    return  # Nothing (more) to accept right now.
                raise
            host, peer = _peer(conn)
            uncount: Callable[[], None] = _nothing_to_uncount
            if quotas is not None:
                if not quotas[0].admit(quotas[1], host):
                    conn.close()
                    continue
                uncount = _Uncount(quotas[0], quotas[1], host)
            conn.setblocking(False)
            _disable_nagle(conn)
            factory = functools.partial(self._protocol_factory, uncount)
            if self._tls is None:
                handover = self._loop.connect_accepted_socket(factory, conn)
            else:
                handover = self._loop.connect_accepted_socket(
                    factory,
                    conn,
                    ssl=self._tls,
                    ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S,
                    ssl_shutdown_timeout=TLS_SHUTDOWN_TIMEOUT_S,
                )
            task = self._loop.create_task(handover)
            self._handshakes[task] = (conn, host, peer, uncount)
            task.add_done_callback(self._handshake_done)

    def _handshake_done(self, task: asyncio.Task[object]) -> None:
        conn, host, peer, uncount = self._handshakes.pop(task)
        if task.cancelled() or task.exception() is not None:
            # The protocol never heard of the socket: it is closed, and uncounted, here.
            # asyncio's transport would close it only in a later turn of the loop, which a
            # broker stopping meanwhile never runs; its reader is already removed.
            conn.close()
            uncount()
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
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        self.start()

    async def close(self) -> None:
        """Stop accepting, close the socket, and wait until every accepted one is handed over."""
        if self._closed:
            return
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self._watching:
            self._watching = False
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
