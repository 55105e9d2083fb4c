"""A Produce handler the reader started by hand and a task took over when it waited
(``_connection._resume``): the task gets its result, and a cancellation reaches the
handler, whose cleanup runs, as it would have in a task of its own."""

from __future__ import annotations

import asyncio

import pytest

from tickwheel.server._connection import _resume
from tickwheel.server.apis import Response


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
