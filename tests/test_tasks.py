"""``cancel_and_wait``: tasks stopped, failures raised, the caller's cancellation kept."""

from __future__ import annotations

import asyncio

import pytest

from tickwheel._tasks import cancel_and_wait


async def _forever() -> None:
    await asyncio.Event().wait()


async def _stubborn(release: asyncio.Event) -> None:
    """A task that finishes its cleanup only once ``release`` is set."""
    try:
        await asyncio.Event().wait()
    finally:
        await release.wait()


def test_every_task_is_cancelled_and_ended() -> None:
    async def main() -> list[asyncio.Task[None]]:
        tasks = [asyncio.create_task(_forever()) for _ in range(3)]
        await asyncio.sleep(0)
        await cancel_and_wait(*tasks)
        return tasks

    assert all(task.cancelled() for task in asyncio.run(main()))


def test_a_task_that_failed_has_its_exception_raised() -> None:
    async def fail() -> None:
        raise ValueError("broken")

    async def main() -> None:
        task = asyncio.create_task(fail())
        await asyncio.sleep(0)
        await cancel_and_wait(task)

    with pytest.raises(ValueError, match="broken"):
        asyncio.run(main())


def test_the_callers_own_cancellation_is_not_swallowed() -> None:
    async def main() -> str:
        release = asyncio.Event()
        owned = asyncio.create_task(_stubborn(release))
        await asyncio.sleep(0)
        after_stop: list[str] = []

        async def stopper() -> None:
            await cancel_and_wait(owned)
            after_stop.append("went on")  # what the suppress idiom let happen

        caller = asyncio.create_task(stopper())
        await asyncio.sleep(0)
        caller.cancel()
        await asyncio.wait([caller])
        release.set()
        await asyncio.wait([owned])
        return "cancelled" if caller.cancelled() and not after_stop else "swallowed"

    assert asyncio.run(main()) == "cancelled"
