"""Event-loop mode: no threads; the asyncio driver moves the timer; completions on the loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tickwheel.purgatory import (
    PURGE_SHARDS_PER_STEP,
    SHARD_COUNT,
    DelayedOperation,
    DelayedOperationPurgatory,
)
from tickwheel.timer import AsyncioTimerDriver, InlineExecutor, SystemClock, SystemTimer

PURGE_INTERVAL = 100
STEPS_PER_PASS = SHARD_COUNT // PURGE_SHARDS_PER_STEP


class LongPoll(DelayedOperation):
    """Answers a future with the value once it is there, or None after the delay."""

    def __init__(self, delay_ms: int, box: dict[str, int]) -> None:
        super().__init__(delay_ms)
        self.box = box
        self.answer: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self.completed_on: int | None = None
        self.completed_at_ms: int | None = None
        self.expired_on: int | None = None

    def try_complete(self) -> bool:
        return "value" in self.box and self.force_complete()

    def on_complete(self) -> None:
        self.completed_on = threading.get_ident()
        self.completed_at_ms = SystemClock().now_ms()
        self.answer.set_result(self.box.get("value"))

    def on_expiration(self) -> None:
        self.expired_on = threading.get_ident()


@pytest_asyncio.fixture
async def loop_purgatory() -> AsyncIterator[DelayedOperationPurgatory[LongPoll]]:
    timer = SystemTimer("loop", executor=InlineExecutor())
    driver = AsyncioTimerDriver(timer)
    driver.start()
    purgatory: DelayedOperationPurgatory[LongPoll] = DelayedOperationPurgatory(
        "loop", timer, reaper_enabled=False, purge_interval=PURGE_INTERVAL
    )
    yield purgatory
    purgatory.shutdown()
    assert not driver.running


@pytest.mark.asyncio
async def test_no_thread_is_started() -> None:
    before = threading.active_count()
    timer = SystemTimer("loop", executor=InlineExecutor())
    driver = AsyncioTimerDriver(timer)
    driver.start()
    with DelayedOperationPurgatory[LongPoll]("loop", timer, reaper_enabled=False) as purgatory:
        assert purgatory.reaper_name is None
        op = LongPoll(5, {})
        purgatory.try_complete_else_watch(op, ["box"])
        assert await asyncio.wait_for(op.answer, 5) is None
        assert threading.active_count() == before


@pytest.mark.asyncio
async def test_expiry_runs_on_the_loop_thread_no_earlier_than_the_delay(
    loop_purgatory: DelayedOperationPurgatory[LongPoll],
) -> None:
    started_ms = loop_purgatory.timer.clock.now_ms()
    op = LongPoll(30, {})
    assert loop_purgatory.try_complete_else_watch(op, ["box"]) is False
    assert await asyncio.wait_for(op.answer, 5) is None
    assert op.completed_at_ms is not None
    assert op.completed_at_ms - started_ms >= 30
    assert op.completed_on == op.expired_on == threading.get_ident()
    assert loop_purgatory.expired == 1
    assert loop_purgatory.num_delayed == 0


@pytest.mark.asyncio
async def test_a_value_arriving_completes_the_long_poll_on_the_loop_thread(
    loop_purgatory: DelayedOperationPurgatory[LongPoll],
) -> None:
    box: dict[str, int] = {}
    op = LongPoll(60_000, box)
    loop_purgatory.try_complete_else_watch(op, ["box"])

    def arrive() -> None:
        box["value"] = 42
        loop_purgatory.check_and_complete("box")

    asyncio.get_running_loop().call_soon(arrive)
    assert await asyncio.wait_for(op.answer, 5) == 42
    assert op.completed_on == threading.get_ident()
    assert op.expired_on is None
    assert loop_purgatory.num_delayed == 0
    assert loop_purgatory.watched == 0


@pytest.mark.asyncio
async def test_the_purge_still_runs_with_no_reaper(
    loop_purgatory: DelayedOperationPurgatory[LongPoll],
) -> None:
    count = 3_000
    for i in range(count):
        box = {"value": i}
        op = LongPoll(60_000, {})
        loop_purgatory.try_complete_else_watch(op, [f"own-{i}", "shared", f"group-{i % 10}"])
        op.box = box
        assert loop_purgatory.check_and_complete(f"own-{i}") == 1
        if i % 100 == 0:
            await asyncio.sleep(0)
    # Without a purge, "shared" and the groups would hold 2 * 3000 stale entries; with
    # it, at most the interval plus one pass of steps, under two keys each.
    assert loop_purgatory.watched <= 2 * (PURGE_INTERVAL + STEPS_PER_PASS)
    assert loop_purgatory.num_delayed == 0


@pytest.mark.asyncio
async def test_expired_operations_leave_with_the_next_calls(
    loop_purgatory: DelayedOperationPurgatory[LongPoll],
) -> None:
    ops = [LongPoll(1, {}) for _ in range(3 * PURGE_INTERVAL)]
    for i, op in enumerate(ops):
        loop_purgatory.try_complete_else_watch(op, [f"own-{i}"])
    await asyncio.gather(*(op.answer for op in ops))
    assert loop_purgatory.expired == len(ops)
    assert loop_purgatory.watched == len(ops)
    for _ in range(STEPS_PER_PASS):
        loop_purgatory.check_and_complete("unrelated")
    assert loop_purgatory.watched == 0
