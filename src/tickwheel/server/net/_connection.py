"""``Connection``: one client's TCP connection, answered strictly in order.

The loop reads one frame (4-byte size, then the request), dispatches it, writes the
response, and only then reads the next: a request that waits in a purgatory keeps
the connection muted until it is answered, which is what Kafka does
(``Selector.mute``), so responses always leave in request order. acks=0 produces
are answered with nothing; a handler that raises ``CloseConnectionError`` (a failed
acks=0 produce) gets the connection closed instead.

Produce requests are the one exception to the muting: a Produce is dispatched as soon as
it is read, even while earlier Produces of the connection wait in the Produce purgatory
for their acks=all, and each answer waits for the one before it, so the responses still
leave in request order. Muted, an acks=all producer sending one message per request
could go no faster than one replication round trip per request (a follower fetch, the
append, the follower's next fetch), and past that rate its latency would grow with the
rate. Piped, every append made meanwhile rides on the same follower fetches, so one
round trip acknowledges them all. The appends keep the request order: a Produce handler
appends before its first ``await`` and each dispatch is a task started in read order,
whose first steps the event loop runs in the order they were scheduled (FIFO). With no
Produce in flight (none piped, no answerer at work), the reader runs the handler's first
steps itself (``coroutine.send``), appending in its own step: an answer the handler has
at once (acks=1, acks=all with the leader alone in the ISR) is written by the reader,
with no task started; a handler that waits in the purgatory is handed to a task
(``_resume``) that the answerer waits on like any piped one, and that passes a
cancellation on to the handler. That saves the dispatch task, the answerer and their
event-loop steps of a one-message producer's every request. Any other request waits
until the Produces before it are answered and is then served muted; on a SASL listener
only an authenticated connection's Produces are piped. At most ``MAX_PIPED_PRODUCES``
are in flight per connection (the reader waits for the answerer), beside the memory
pool's bound on their bytes. One answerer task writes the piped responses: whatever is
ready when the oldest is goes out in one write, so the produces that one high-watermark
move completed cost one system call, not one each.

Fetch responses arrive as chunks: fixed fields as ``bytes``, records as the log's
``FileRecordsSlice``. A small slice is read (``pread``) and written with the bytes
around it; a slice of at least ``SENDFILE_MIN_BYTES`` goes from the page cache to the
socket with ``loop.sendfile`` (``os.sendfile``), never through Python memory. A
response whose client has gone (the transport is closing) is dropped quietly.
Through TLS (an SSL or SASL_SSL listener) the kernel cannot send the file: the bytes
must be encrypted in user space, so every slice is read (``pread``) and written, one
slice at a time (a slice is at most a partition's max bytes), rather than through
asyncio's own sendfile fallback, which reads 256 KiB pieces on a worker thread and
drains each, several times slower; Python 3.11 has no kernel TLS.

Memory: a frame is read whole when it is at most ``SLICE_BYTES``, and slice by slice
as its bytes arrive when it is larger; each slice is held in the broker's
``MemoryPool`` (``queued.max.request.bytes``) once it has arrived, never before, and
the frame's bytes go back once its request is handled, before its answer is written.
While the pool holds a slice back, the connection reads nothing more (asyncio's stream
stops reading the socket once its small buffer is full), as Kafka mutes a channel when
its memory pool runs out; the pool's docstring tells who waits and why nobody waits
forever. A connection that waits for the pool is busy (the broker holds it back); one
that waits for its client, to send the rest of a frame, the next one, or to read its
answers, is idle, and ``connections.max.idle.ms`` drops it. Bytes trickled onto the
pool's floor do not count as activity (see ``_read_frame``). Frames before SASL
authentication are read outside the pool.

Before a client on a SASL listener has authenticated, a frame may announce at most
``sasl.server.max.receive.size`` bytes (Kafka's pre-authentication limit); a larger one
closes the connection at once, with one rate-limited WARNING.

Clients that send garbage: a request that breaks its schema is answered
INVALID_REQUEST where the API has a top-level error code (the connection goes on),
and otherwise closes the connection; so do a frame larger than
``socket.request.max.bytes``, an unknown API key, an unadvertised version, and a TLS
handshake sent to this PLAINTEXT listener. Each is one WARNING line with the client's
address and the reason, rate-limited per client host (``RateLimitedLog``), never a
traceback: the broker and its other connections go on. An unexpected error in a
handler is a bug: it is logged with its traceback and closes only this connection.

Each connection has an id; while it serves a request, ``current_connection_id()``
(``_connection_id``) tells the handler which connection it is on, and when it closes its
``on_closed`` callback hears the id (share sessions belong to the
connection that opened them). Its ``Session`` (``tickwheel.security``) is current in the
same way: the principal, client host and listener that authorization reads.

On a SASL listener (``sasl``) the connection carries its ``SaslServerAuthenticator``
(current to the SaslHandshake and SaslAuthenticate handlers) and asks it before each
request: until the client has authenticated only ApiVersions, SaslHandshake and
SaslAuthenticate are served, and any other request fails the login unanswered (one
rate-limited WARNING); any request but a re-authentication once the session's lifetime
has run out closes the connection at once. When authentication fails, the failure's
response (if any) waits ``connection.failed.authentication.delay.ms`` on the timing
wheel (``_delayed_close``), then goes, then the connection closes.

A throttled client (client quotas, ``tickwheel.server.quotas``) is answered at once with
its ``throttle_time_ms``; the quota manager marks the connection's ``ChannelThrottle``
(a context variable, like the connection id), and the reader, before it reads the next
frame, waits until the throttle time is up on a ``ThrottledChannel`` task of the timing
wheel (``_throttled_channel``), as Kafka mutes the channel (KIP-219). Produces already
piped are answered meanwhile. A muted connection has nothing to answer, so a stopping
broker does not wait for it; as in Kafka, its idle time runs from its last activity
(a throttle longer than ``connections.max.idle.ms`` drops it).

Concurrency: each connection runs as one task on the broker's event loop; the
``MemoryPool`` is shared by the broker's connections on that loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import struct
from collections.abc import Callable, Coroutine, Generator
from typing import Any, cast

from tickwheel._ratelimit import RateLimitedLog
from tickwheel.log import FileRecordsSlice
from tickwheel.protocol import (
    SIZE_PREFIX_BYTES,
    FetchResponseFrame,
    FrameTooLargeError,
    InvalidRequestError,
    MalformedFrameError,
    ProtocolError,
    TlsHandshakeError,
    peek_request_key,
    read_frame_size,
)
from tickwheel.security import (
    ANONYMOUS,
    PLAINTEXT,
    SaslServerAuthenticator,
    Session,
    enter_authenticator,
    enter_session,
)
from tickwheel.server.apis import PRODUCE, CloseConnectionError, Response
from tickwheel.server.config._listeners import ListenerSpec
from tickwheel.server.net._connection_id import enter_connection, new_connection_id
from tickwheel.server.net._delayed_close import hold_failed_authentication
from tickwheel.server.net._dispatch import Dispatcher
from tickwheel.server.net._memory_pool import SLICE_BYTES, FrameHold, MemoryPool, PoolAccount
from tickwheel.server.net._sasl import SaslListener
from tickwheel.server.net._throttled_channel import wait_unmuted
from tickwheel.server.quotas import ChannelThrottle, enter_channel
from tickwheel.timer import Clock, SystemClock, SystemTimer

_log = logging.getLogger(__name__)
# Misbehaving clients, one key per client host: a client that reconnects and sends
# the same garbage again gets one line with a count, not one line per connection.
_client_errors = RateLimitedLog(_log)

SENDFILE_MIN_BYTES = 64 * 1024
"""Slices smaller than this are read and written: a ``loop.sendfile`` call costs more
than copying a few pages, and it waits for the write buffer to empty first."""


MAX_PIPED_PRODUCES = 64
"""Produce requests of one connection dispatched and not yet answered, at most."""


def _shrunk(records: FileRecordsSlice, got_bytes: int) -> CloseConnectionError:
    return CloseConnectionError(
        f"a fetched slice shrank from {records.length} to {got_bytes} bytes before it was "
        "sent (the log was truncated under it); the frame is broken, so the connection closes"
    )


def _client_gone() -> ConnectionResetError:
    return ConnectionResetError("the client closed the connection before its answer was sent")


def _slice_bytes(records: FileRecordsSlice) -> bytes:
    """The slice's bytes, all of them: a log truncated since the read breaks the frame."""
    data = records.read_bytes()
    if len(data) != records.length:
        raise _shrunk(records, len(data))
    return data


class _SliceFile:
    """The file-like view of a slice that ``loop.sendfile`` needs (fileno, seek, mode).

    ``sendfile`` seeks the file to the end of what it sent; the log reads and writes
    by position, never by file offset, so the seek is a no-op here.
    """

    mode = "rb"

    def __init__(self, records: FileRecordsSlice) -> None:
        self._records = records

    def fileno(self) -> int:
        return self._records.fileno()

    def seek(self, position: int) -> int:
        return position


class _Resumed:
    """The rest of a coroutine that was started by hand and is waiting on ``waiting``
    (what it yielded), to be awaited by the task that takes it over: the task waits on
    ``waiting``, then resumes the coroutine, and passes it whatever the task is sent or
    thrown (a cancellation reaches the handler as it would in its own task)."""

    def __init__(self, coroutine: Coroutine[Any, None, Response], waiting: object) -> None:
        self._coroutine = coroutine
        self._waiting = waiting

    def __await__(self) -> Generator[object, None, Response]:
        coroutine = self._coroutine
        waiting = self._waiting
        while True:
            try:
                yield waiting
            except BaseException as exc:  # each belongs to the coroutine
                try:
                    waiting = coroutine.throw(exc)
                except StopIteration as done:
                    return cast(Response, done.value)
            else:
                try:
                    waiting = coroutine.send(None)
                except StopIteration as done:
                    return cast(Response, done.value)


async def _resume(coroutine: Coroutine[Any, None, Response], waiting: object) -> Response:
    return await _Resumed(coroutine, waiting)


class ConnectionProtocol(asyncio.StreamReaderProtocol):
    """The listener's protocol: hands each socket to ``on_accept`` once it is connected,
    and calls ``on_lost`` once it is gone (the listener's connection count).

    ``asyncio.start_server`` would start a task per connection itself, one loop
    iteration later; a broker stopping in between could then neither see nor close
    that socket. Here the broker gets the reader and writer inside ``connection_made``.
    """

    def __init__(
        self,
        on_accept: Callable[[asyncio.StreamReader, asyncio.StreamWriter], None],
        on_lost: Callable[[], None],
    ) -> None:
        # StreamReaderProtocol keeps only a weak reference to its reader.
        self._reader = asyncio.StreamReader()
        super().__init__(self._reader)
        self._on_accept = on_accept
        self._on_lost = on_lost

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._on_lost()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        writer = asyncio.StreamWriter(
            cast(asyncio.WriteTransport, transport),
            self,
            self._reader,
            asyncio.get_running_loop(),
        )
        self._on_accept(self._reader, writer)


class Connection:
    """Reads requests, dispatches them one at a time, writes the responses."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_request_bytes: int,
        memory_pool: MemoryPool,
        clock: Clock | None = None,
        on_closed: Callable[[int], None] | None = None,
        listener: ListenerSpec | None = None,
        sasl: SaslListener | None = None,
        throttle_timer: SystemTimer | None = None,
    ) -> None:
        self.connection_id = new_connection_id()
        self._on_closed = on_closed
        self._dispatcher = dispatcher
        self._reader = reader
        self._writer = writer
        self._max_request_bytes = max_request_bytes
        self._memory_pool = memory_pool
        self._loop = asyncio.get_running_loop()
        # The broker's clock, which decides when the connection counts as idle.
        self._clock: Clock = SystemClock() if clock is None else clock
        peername = writer.get_extra_info("peername")
        if isinstance(peername, tuple):
            self.client_host = str(peername[0])
            self.peer = f"{peername[0]}:{peername[1]}"
        else:
            self.client_host = self.peer = str(peername)
        self.last_active_ms = self._clock.now_ms()
        self._serving = False
        # This connection's bytes in the memory pool, and whether it waits for the pool.
        self._pool_account = PoolAccount()
        self._waiting_for_pool = False
        # Piped Produces not yet answered, oldest first, and the task that answers them.
        self._piped: collections.deque[asyncio.Task[Response]] = collections.deque()
        self._answerer: asyncio.Task[None] | None = None
        # Set each time the answerer wrote (the reader may be waiting for room).
        self._answered = asyncio.Event()
        # The error that ended a piped Produce: it closes the connection as ``run`` would.
        self._piped_failure: Exception | None = None
        # A TLS transport cannot sendfile: its bytes are encrypted in user space.
        self._sendfile_ok = writer.get_extra_info("sslcontext") is None
        self.listener = ListenerSpec(PLAINTEXT, PLAINTEXT, "", 0) if listener is None else listener
        self.session = Session(
            ANONYMOUS, self.client_host, self.listener.name, self.listener.security_protocol
        )
        self._sasl = sasl
        # Until when client quotas keep the connection muted, and the timer it waits on
        # (None: the broker enforces no client quota, nothing mutes it).
        self.channel_throttle = ChannelThrottle()
        self._throttle_timer = throttle_timer
        self.authenticator: SaslServerAuthenticator | None = (
            None if sasl is None else sasl.new_authenticator(self.session)
        )

    @property
    def busy(self) -> bool:
        """Whether a request is being served (the connection is not idle)."""
        # A connection whose answers wait for its client to read them is idle: a client
        # that stops reading is closed like one that stops writing, as in Kafka.
        return (
            self._serving or self._waiting_for_pool or any(not task.done() for task in self._piped)
        )

    async def run(self) -> None:
        """Serve until the client leaves, sends something unanswerable, or ``close``."""
        enter_connection(self.connection_id)
        enter_session(self.session)
        enter_authenticator(self.authenticator)
        enter_channel(self.channel_throttle)
        try:
            await self._serve_requests()
        except Exception as exc:
            self._report(exc)
        finally:
            self.close()
            for task in self._piped:
                task.cancel()
            if self._answerer is not None:
                self._answerer.cancel()
            if self._on_closed is not None:
                self._on_closed(self.connection_id)

    def _report(self, exc: Exception) -> None:
        """Log why the connection closes (a client that left needs no line)."""
        if isinstance(exc, (asyncio.IncompleteReadError, ConnectionError)):
            return
        if isinstance(exc, TlsHandshakeError):
            self._warn(
                "TLS handshake on a PLAINTEXT listener from %s; "
                "is the client configured with security.protocol=SSL?",
                self.peer,
            )
        elif isinstance(exc, ProtocolError):
            self._warn("closing connection from %s: %s", self.peer, exc)
        elif isinstance(exc, CloseConnectionError):
            _log.info("closing connection from %s: %s", self.peer, exc)
        else:
            _log.error(
                "unexpected error serving %s; closing its connection", self.peer, exc_info=exc
            )

    async def _serve_requests(self) -> None:
        """Read and serve frames until the connection ends."""
        while True:
            await self._wait_unmuted()
            prefix = await self._reader.readexactly(SIZE_PREFIX_BYTES)
            size = read_frame_size(prefix, self._max_request_bytes)
            authenticator = self.authenticator
            if (
                authenticator is not None
                and not authenticator.authenticated
                and self._sasl is not None
                and size > self._sasl.max_receive_bytes
            ):
                raise FrameTooLargeError(
                    f"a frame of {size} bytes before SASL authentication exceeds "
                    f"sasl.server.max.receive.size={self._sasl.max_receive_bytes}"
                )
            hold = FrameHold(self._pool_account)
            try:
                if authenticator is not None and not authenticator.authenticated:
                    # Bounded by sasl.server.max.receive.size and read outside the pool, as
                    # Kafka's authenticator reads it: clients that have not logged in
                    # cannot take the memory of those that have.
                    frame = await self._reader.readexactly(size)
                else:
                    frame = await self._read_frame(size, hold)
                if self._pipes(frame):
                    # Its task gives the frame's bytes back when it is done.
                    await self._pipe(frame, hold)
                    continue
                await self._answer_piped()
                await self._serve(frame, hold)
            except BaseException:
                self._memory_pool.release(hold)  # idempotent
                raise

    async def _wait_unmuted(self) -> None:
        """Wait while a client quota keeps the connection muted."""
        timer = self._throttle_timer
        while timer is not None:
            muted_ms = self.channel_throttle.muted_until_ms - self._clock.now_ms()
            if muted_ms <= 0:
                return
            await wait_unmuted(timer, muted_ms)

    async def _read_frame(self, size: int, hold: FrameHold) -> bytes:
        """The frame's ``size`` bytes, each slice held in the pool once it has arrived."""
        reader = self._reader
        if size <= SLICE_BYTES:
            frame = await reader.readexactly(size)
            if not self._memory_pool.try_hold(hold, size):
                await self._wait_for_pool(hold, size)
            return frame
        # One buffer grown in place (a large one is remapped, not copied) and copied once
        # into the frame: joining slices would hold the frame twice, and leave the heap
        # as full as the slices were once the frame is gone.
        arrived = bytearray()
        remaining = size
        while remaining:
            piece = await reader.read(min(remaining, SLICE_BYTES))
            if not piece:
                raise asyncio.IncompleteReadError(b"", size)
            if hold is not self._memory_pool.floor:
                # The frame on the floor must finish arriving within
                # connections.max.idle.ms of taking it: a client that trickles bytes
                # must not keep the floor from every other large frame.
                self.last_active_ms = self._clock.now_ms()
            if not self._memory_pool.try_hold(hold, len(piece)):
                await self._wait_for_pool(hold, len(piece))
            arrived += piece
            remaining -= len(piece)
        return bytes(arrived)

    async def _wait_for_pool(self, hold: FrameHold, size: int) -> None:
        self._waiting_for_pool = True
        try:
            await self._memory_pool.hold(hold, size)
        finally:
            self._waiting_for_pool = False
            self.last_active_ms = self._clock.now_ms()

    def _pipes(self, frame: bytes) -> bool:
        """Whether ``frame`` is a Produce that may be dispatched before earlier answers."""
        try:
            api_key = peek_request_key(frame).api_key
        except struct.error:
            return False  # _serve refuses it
        authenticator = self.authenticator
        return api_key == PRODUCE.api_key and (
            authenticator is None
            or (authenticator.authenticated and authenticator.admit(api_key) is None)
        )

    async def _pipe(self, frame: bytes, hold: FrameHold) -> None:
        """Dispatch a Produce now; the answerer writes its response in turn. With no
        Produce in flight, the handler runs here, in the reader's step, and a response
        it has at once is written here too: no task is started unless it waits."""
        if self._piped_failure is not None:
            # A piped Produce failed: the answerer closes the connection after the
            # answers before it; nothing read after it is served, as when muted.
            self._memory_pool.release(hold)
            return
        self.last_active_ms = self._clock.now_ms()
        if not self._piped and (self._answerer is None or self._answerer.done()):
            handling = self._dispatch_piped(frame)
            try:
                waiting = handling.send(None)
            except StopIteration as done:
                self._memory_pool.release(hold)
                response: Response = done.value
                if response is not None:
                    self._serving = True
                    try:
                        await self._send(response)
                    finally:
                        self._serving = False
                    self.last_active_ms = self._clock.now_ms()
                return
            except BaseException:
                self._memory_pool.release(hold)
                raise
            piped = self._loop.create_task(_resume(handling, waiting))
            # A task cancelled before its first step never resumes the handler: close
            # it, so that its cleanup runs (a no-op once it has finished).
            piped.add_done_callback(lambda _: handling.close())
        else:
            while len(self._piped) >= MAX_PIPED_PRODUCES:
                self._answered.clear()
                await self._answered.wait()
            piped = self._loop.create_task(self._dispatch_piped(frame))
        # Released when the task is done, however it ends: a task cancelled before its
        # first step (the connection closing) never enters the handler's own cleanup.
        piped.add_done_callback(lambda _: self._memory_pool.release(hold))
        self._piped.append(piped)
        if self._answerer is None or self._answerer.done():
            self._answerer = self._loop.create_task(self._answer())
            self._answerer.add_done_callback(self._answerer_done)

    async def _dispatch_piped(self, frame: bytes) -> Response:
        """Serve a piped Produce; its frame's memory is released by the caller."""
        try:
            if self._piped_failure is not None:
                return None  # read before an earlier piped Produce failed: not served
            return await self._dispatch(frame)
        except Exception as exc:
            if self._piped_failure is None:
                self._piped_failure = exc
            raise

    async def _answer(self) -> None:
        """Write the piped responses in request order until none is left: every one
        ready when the oldest is goes out in the same write (one system call for the
        produces a high-watermark move completed together)."""
        while self._piped:
            oldest = self._piped[0]
            if not oldest.done():
                await asyncio.wait([oldest])
            ready: list[bytes] = []
            while self._piped and self._piped[0].done():
                task = self._piped.popleft()
                if ready and (task.cancelled() or task.exception() is not None):
                    # The answers before a failed request still go out, then it raises.
                    await self._send(b"".join(ready))
                    ready.clear()
                response = task.result()
                if isinstance(response, bytes):
                    ready.append(response)
                elif response is not None:
                    if ready:
                        await self._send(b"".join(ready))
                        ready.clear()
                    await self._send(response)
            if ready:
                await self._send(b"".join(ready))
            self.last_active_ms = self._clock.now_ms()
            self._answered.set()

    def _answerer_done(self, task: asyncio.Task[None]) -> None:
        self._answered.set()
        if task.cancelled():
            return
        failure = task.exception()
        if isinstance(failure, Exception):
            # Answered up to the failed request: report it and close the connection, so
            # the reader's next read ends.
            if self._piped_failure is None:
                self._piped_failure = failure
            self._report(failure)
            self.close()

    async def _answer_piped(self) -> None:
        """Wait until every piped Produce is answered; ``ConnectionAbortedError`` if one
        failed (the answerer reported it and closed the connection)."""
        if self._answerer is not None and not self._answerer.done():
            await asyncio.wait([self._answerer])
        if self._piped_failure is not None:
            raise ConnectionAbortedError("a piped Produce failed")

    async def _dispatch(self, frame: bytes) -> Response:
        """The handler's response; INVALID_REQUEST where the API has one."""
        try:
            return await self._dispatcher.dispatch(frame)
        except InvalidRequestError as exc:
            if exc.response is None:
                raise
            self._warn("answering INVALID_REQUEST to %s: %s", self.peer, exc)
            return exc.response

    async def _serve(self, frame: bytes, hold: FrameHold) -> None:
        self._serving = True
        self.last_active_ms = self._clock.now_ms()
        authenticator = self.authenticator
        response: Response = None
        try:
            if authenticator is None or self._admit(authenticator, frame):
                response = await self._dispatch(frame)
        finally:
            # Handled: the request's bytes go back before its answer is written, as Kafka
            # frees a request's buffer once it is handled (a client slow to read its
            # answer must not keep them).
            self._memory_pool.release(hold)
        if authenticator is not None and authenticator.failed:
            await self._fail_authentication(authenticator, response)
        self._serving = False
        self.last_active_ms = self._clock.now_ms()
        if response is not None:
            await self._send(response)
        self.last_active_ms = self._clock.now_ms()

    def _admit(self, authenticator: SaslServerAuthenticator, frame: bytes) -> bool:
        """Whether the connection's SASL state allows the request. An expired session
        closes at once; a request before login fails the login (Kafka's
        IllegalSaslStateException), so the connection closes after the delay."""
        try:
            api_key = peek_request_key(frame).api_key
        except struct.error:
            raise MalformedFrameError("a frame too short for a request header") from None
        refusal = authenticator.admit(api_key)
        if refusal is None:
            return True
        if authenticator.authenticated:
            raise CloseConnectionError(refusal)
        authenticator.refuse(refusal)
        self._warn(
            "closing connection from %s on SASL listener %s: %s; is the client configured "
            "with security.protocol=%s and a sasl.mechanism?",
            self.peer,
            self.listener.name,
            refusal,
            self.listener.security_protocol,
        )
        return False

    async def _fail_authentication(
        self, authenticator: SaslServerAuthenticator, response: Response
    ) -> None:
        """Hold the failure's response on the timing wheel, send it, close."""
        sasl = self._sasl
        assert sasl is not None
        await hold_failed_authentication(sasl.close_timer, sasl.failed_authentication_delay_ms)
        if response is not None:
            await self._send(response)
        raise CloseConnectionError(
            f"SASL authentication of {self.peer} failed: {authenticator.failure}"
        )

    def _warn(self, msg: str, *args: object) -> None:
        _client_errors.log(logging.WARNING, self.client_host, msg, *args)

    def close(self) -> None:
        """Close the socket (the ``run`` loop ends at its next read)."""
        self._writer.close()

    @property
    def closing(self) -> bool:
        """Whether the socket is closed or being closed."""
        return self._writer.transport.is_closing()

    def abort(self) -> None:
        """Drop the socket now, unsent bytes and all (a client that stopped reading)."""
        self._writer.transport.abort()

    async def wait_closed(self) -> None:
        """Wait until the socket is closed, after ``close``."""
        # What a client can make of the end of its socket is not the broker's error:
        # ConnectionError, TimeoutError (a TLS client never answered our close_notify
        # within the listener's TLS_SHUTDOWN_TIMEOUT_S, and asyncio dropped the socket)
        # and ssl.SSLError (APPLICATION_DATA_AFTER_CLOSE_NOTIFY: a TLS client kept
        # writing after our close_notify) are all OSErrors. Raised here, one would stop
        # a broker's shutdown half-way.
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()

    async def _send(self, response: Response) -> None:
        if self._writer.transport.is_closing():
            raise _client_gone()
        if isinstance(response, bytes):
            self._writer.write(response)
        elif isinstance(response, FetchResponseFrame):
            await self._send_chunks(response)
        await self._writer.drain()

    async def _sendfile(self, records: FileRecordsSlice) -> None:
        transport = self._writer.transport
        if transport.is_closing():
            raise _client_gone()
        try:
            sent_bytes = await self._loop.sendfile(
                transport,
                # sendfile uses only fileno, seek and mode, not the whole IO[bytes].
                _SliceFile(records),  # type: ignore[arg-type]
                records.position,
                records.length,
                fallback=False,
            )
        except asyncio.SendfileNotAvailableError:
            # A transport without sendfile (not plain TCP on Linux): copy instead.
            self._writer.write(_slice_bytes(records))
            return
        except (RuntimeError, OSError) as exc:
            # The client went away while the file was being sent.
            if transport.is_closing():
                raise _client_gone() from exc
            raise
        if sent_bytes != records.length:
            raise _shrunk(records, sent_bytes)

    async def _send_chunks(self, frame: FetchResponseFrame) -> None:
        pending: list[bytes] = []
        for chunk in frame.chunks:
            if isinstance(chunk, bytes):
                pending.append(chunk)
            elif (
                isinstance(chunk, FileRecordsSlice)
                and chunk.length >= SENDFILE_MIN_BYTES
                and self._sendfile_ok
            ):
                if pending:
                    self._writer.write(b"".join(pending))
                    pending.clear()
                await self._sendfile(chunk)
            elif isinstance(chunk, FileRecordsSlice):
                pending.append(_slice_bytes(chunk))
            else:
                raise TypeError(f"cannot send a {type(chunk).__name__} chunk")
        if pending:
            self._writer.write(b"".join(pending))
