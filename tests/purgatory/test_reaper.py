"""The ExpirationReaper thread: its name, its step, its purge, and shutdown."""

from __future__ import annotations

import threading
import time

from tickwheel.purgatory import REAPER_POLL_MS, DelayedOperationPurgatory
from tickwheel.timer import ManualClock

from .helpers import CountingTimer, FlagOperation


class _Expiring(FlagOperation):
    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.done = threading.Event()

    def on_expiration(self) -> None:
        super().on_expiration()
        self.done.set()


def _thread_names() -> set[str]:
    return {thread.name for thread in threading.enumerate()}


def test_the_reaper_is_named_after_the_broker_and_purgatory_and_stops_on_shutdown() -> None:
    purgatory: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory(
        "Produce", broker_id=7
    )
    assert purgatory.reaper_name == "ExpirationReaper-7-Produce"
    assert "ExpirationReaper-7-Produce" in _thread_names()
    purgatory.shutdown()
    assert "ExpirationReaper-7-Produce" not in _thread_names()
    assert purgatory.timer.closed
    purgatory.shutdown()  # idempotent


def test_the_reaper_advances_the_timer_every_poll_interval() -> None:
    assert REAPER_POLL_MS == 200
    timer = CountingTimer("poll")
    with DelayedOperationPurgatory[FlagOperation]("poll", timer):
        assert timer.wait_for_advances(2)
    assert set(timer.timeouts_ms) == {REAPER_POLL_MS}


def test_the_reaper_rests_instead_of_spinning_when_the_clock_cannot_wait() -> None:
    # A ManualClock cannot wait: advance_clock(REAPER_POLL_MS) returns at once, with
    # nothing expired and the clock where it was.
    timer = CountingTimer("manual", clock=ManualClock())
    poll_s = REAPER_POLL_MS / 1000
    started_s = time.monotonic()
    purgatory: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory("manual", timer)
    try:
        # The reaper keeps stepping: three steps, two rests between them.
        assert timer.wait_for_advances(3)
    finally:
        purgatory.shutdown()
    elapsed_s = time.monotonic() - started_s
    # Each step after the first followed a rest of a whole poll interval, so there were
    # at most elapsed / poll + 1 of them (spinning, it made hundreds of thousands a
    # second).
    assert 3 <= timer.advances <= int(elapsed_s / poll_s) + 1
    assert not any(t.name == "ExpirationReaper-0-manual" for t in threading.enumerate())


def test_operations_expire_on_the_timers_executor_thread() -> None:
    with DelayedOperationPurgatory[_Expiring]("Fetch", broker_id=1) as purgatory:
        op = _Expiring(20)
        purgatory.try_complete_else_watch(op, ["k"])
        assert op.done.wait(10)
        assert op.events == ["complete", "expire"]
        assert purgatory.expired == 1
        assert purgatory.num_delayed == 0
        executor_threads = {t.ident: t.name for t in threading.enumerate()}
        assert executor_threads.get(op.completed_on) == "executor-Fetch"


def test_the_reaper_purges_completed_operations() -> None:
    interval = 10
    timer = CountingTimer("purge")
    with DelayedOperationPurgatory[FlagOperation](
        "purge", timer, purge_interval=interval
    ) as purgatory:
        for i in range(5 * interval):
            op = FlagOperation(60_000)
            purgatory.try_complete_else_watch(op, [f"own-{i}", "shared"])
            op.ready = True
            assert purgatory.check_and_complete(f"own-{i}") == 1
        assert purgatory.num_delayed == 0
        # The reaper's step after the next return of advance_clock ran after the
        # completions above; once it is done, "shared" holds nothing.
        assert timer.wait_for_advances(2)
        assert purgatory.watched == 0


def test_shutdown_from_a_context_manager_closes_a_given_timer() -> None:
    timer = CountingTimer("given")
    with DelayedOperationPurgatory[FlagOperation]("given", timer, reaper_enabled=False):
        pass
    assert timer.closed
