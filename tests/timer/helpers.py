"""Helpers shared by the timer tests."""

from __future__ import annotations

from tickwheel.timer import ManualClock, RoundWheelTimer, SystemTimer


class Recorder:
    """Collects (clock time, label) for every call."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.fired: list[tuple[int, object]] = []

    def __call__(self, label: object) -> None:
        self.fired.append((self.clock.now_ms(), label))


def step(timer: SystemTimer | RoundWheelTimer, clock: ManualClock, ms: int) -> None:
    """Advance the manual clock ``ms`` times by 1 ms, expiring after each step."""
    for _ in range(ms):
        clock.advance(1)
        timer.advance_clock(0)
