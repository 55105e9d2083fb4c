"""A Produce handler the reader started by hand and a task took over when it waited
(``_connection._resume``): the task gets its result, and a cancellation reaches the
handler, whose cleanup runs, as it would have in a task of its own; a connection that
fails while Produces wait gives their bytes back to the broker's memory pool."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from tickwheel.server.apis import Response
from tickwheel.server.net._connection import Connection, _resume
from tickwheel.server.net._memory_pool import MemoryPool


async def _handler(waited: asyncio.Future[bytes], cleaned: list[str]) -> Response:
    try:
        return b"answer:" + await waited
    except asyncio.CancelledError:
        cleaned.append("cancelled")
        raise
    finally:
        cleaned.append("finally")


def test_the_task_that_takes_a_started_handler_over_gets_its_result() -> None:
    async def scenario() -> None:
        waited: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        cleaned: list[str] = []
        handling = _handler(waited, cleaned)
        first = handling.send(None)
        assert first is waited
        task = asyncio.get_running_loop().create_task(_resume(handling, first))
        await asyncio.sleep(0)
        assert not task.done()
        waited.set_result(b"ok")
        assert await task == b"answer:ok"
        assert cleaned == ["finally"]

    asyncio.run(scenario())


def test_cancelling_the_task_cancels_the_handler_and_runs_its_cleanup() -> None:
    async def scenario() -> None:
        waited: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        cleaned: list[str] = []
        handling = _handler(waited, cleaned)
        task = asyncio.get_running_loop().create_task(_resume(handling, handling.send(None)))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cleaned == ["cancelled", "finally"]
        assert waited.cancelled()

    asyncio.run(scenario())


def test_a_handler_that_raises_after_its_wait_fails_the_task() -> None:
    async def failing(waited: asyncio.Future[bytes]) -> Response:
        await waited
        raise ConnectionAbortedError("after the wait")

    async def scenario() -> None:
        waited: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        handling = failing(waited)
        task = asyncio.get_running_loop().create_task(_resume(handling, handling.send(None)))
        waited.set_result(b"")
        with pytest.raises(ConnectionAbortedError, match="after the wait"):
            await task

    asyncio.run(scenario())


class _WaitingProduces:
    """A dispatcher whose every request waits on a future that never resolves, as an
    acks=all Produce waits in the purgatory; records each handler's cleanup."""

    def __init__(self) -> None:
        self.cleaned = 0

    async def dispatch(self, frame: bytes) -> Response:
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            self.cleaned += 1
        return None


@pytest.mark.parametrize("produces", [1, 2])
def test_produces_still_waiting_when_the_connection_fails_give_their_memory_back(
    produces: int,
) -> None:
    """Produces read and waiting (the first started by the reader itself, the second in
    a task not yet run), then a frame too large: the connection closes before their
    tasks take a step; the started handler is still cleaned up, and every request's
    bytes go back to the broker's pool."""

    async def scenario() -> None:
        produce = struct.pack(">hhih", 0, 9, 1, -1) + b"\x00" * 8
        frames = struct.pack(">i", len(produce)) + produce
        data = frames * produces + struct.pack(">i", 1 << 30)
        pool = MemoryPool(1 << 20)
        dispatcher = _WaitingProduces()
        ours, theirs = socket.socketpair()
        with ours, theirs:
            reader, writer = await asyncio.open_connection(sock=ours)
            theirs.sendall(data)
            connection = Connection(dispatcher, reader, writer, 1 << 20, pool)  # type: ignore[arg-type]
            await connection.run()
            await connection.wait_closed()
            for _ in range(3):
                await asyncio.sleep(0)
        assert dispatcher.cleaned == 1  # the second one's handler never started
        assert pool.held_bytes == 0

    asyncio.run(scenario())
