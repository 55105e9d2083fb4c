"""Operations and timers shared by the purgatory tests."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory
from tickwheel.timer import InlineExecutor, ManualClock, SystemTimer


class FlagOperation(DelayedOperation):
    """Completes when ``ready`` is set; records every call it gets."""

    def __init__(
        self,
        delay_ms: int,
        *,
        ready: bool = False,
        lock: threading.RLock | None = None,
    ) -> None:
        super().__init__(delay_ms, lock=lock)
        self.ready = ready
        self.tries = 0
        self.completions = 0
        self.expirations = 0
        self.events: list[str] = []
        self.completed_on: int | None = None

    def try_complete(self) -> bool:
        self.tries += 1
        return self.ready and self.force_complete()

    def on_complete(self) -> None:
        self.completions += 1
        self.completed_on = threading.get_ident()
        self.events.append("complete")

    def on_expiration(self) -> None:
        self.expirations += 1
        self.events.append("expire")


class ManualPurgatory:
    """A purgatory on a manual clock with no thread at all, and ways to move time."""

    def __init__(self, *, purge_interval: int = 1000, timer_enabled: bool = True) -> None:
        self.clock = ManualClock()
        self.timer = SystemTimer("test", clock=self.clock, executor=InlineExecutor())
        self.purgatory: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory(
            "test",
            self.timer,
            purge_interval=purge_interval,
            reaper_enabled=False,
            timer_enabled=timer_enabled,
        )

    def advance(self, ms: int) -> None:
        """Move the clock by ``ms`` and do one reaper step (expire, purge if due)."""
        self.clock.advance(ms)
        self.purgatory.advance_clock(0)


class CountingTimer(SystemTimer):
    """A SystemTimer that reports every ``advance_clock`` call and its timeout."""

    def __init__(self, name: str, *, clock: ManualClock | None = None) -> None:
        super().__init__(name, clock=clock)
        self.timeouts_ms: list[int] = []
        self.advances = 0
        self.advanced = threading.Condition()

    def advance_clock(self, timeout_ms: int) -> bool:
        expired = super().advance_clock(timeout_ms)
        with self.advanced:
            self.timeouts_ms.append(timeout_ms)
            self.advances += 1
            self.advanced.notify_all()
        return expired

    def wait_for_advances(self, count: int, timeout_s: float = 10.0) -> bool:
        """Wait until ``count`` more advance_clock calls have returned."""
        with self.advanced:
            target = self.advances + count
            return self.advanced.wait_for(lambda: self.advances >= target, timeout_s)


def run_in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Start ``fn`` on a thread; the list receives its result."""
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()
    return thread, result
