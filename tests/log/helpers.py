"""Helpers shared by the log's tests."""

from __future__ import annotations

from tickwheel.log import Log

START_MS = 1_700_000_000_000


class FakeClock:
    """Wall-clock milliseconds that move only when told."""

    def __init__(self, now_ms: int = START_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, delta_ms: int) -> None:
        self.now_ms += delta_ms


def crash(log: Log) -> None:
    """Drop a log as a crash would: no flush, no checkpoint; its bytes stay in the page cache."""
    for segment in log._segments:
        segment.close()
    log._closed = True
