"""``TimedHandler`` counts the time a handler ran, not the time it waited."""

from __future__ import annotations

import asyncio
import time

import pytest

from tickwheel.server.quotas import TimedHandler

BUSY_S = 0.02


async def _handler(wait: asyncio.Future[None]) -> str:
    started = time.perf_counter()
    while time.perf_counter() - started < BUSY_S:
        pass
    await wait
    return "answered"


def test_only_the_handler_s_own_steps_are_counted() -> None:
    async def main() -> tuple[str, float, float]:
        wait: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.3, wait.set_result, None)
        timed = TimedHandler(_handler(wait))
        started = time.perf_counter()
        result = await timed
        return result, timed.busy_s, time.perf_counter() - started

    result, busy_s, elapsed_s = asyncio.run(main())
    assert result == "answered"
    assert BUSY_S <= busy_s < 0.15
    assert elapsed_s >= 0.3


def test_a_cancellation_reaches_the_handler() -> None:
    async def main() -> None:
        wait: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(TimedHandler(_handler(wait)))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert wait.cancelled()

    asyncio.run(main())
