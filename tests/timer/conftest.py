"""Fixtures for the timer tests: a manual clock, an inline timer on it, a recorder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tickwheel.timer import InlineExecutor, ManualClock, SystemTimer

from .helpers import Recorder


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(0)


@pytest.fixture
def timer(clock: ManualClock) -> Iterator[SystemTimer]:
    with SystemTimer("test", clock=clock, executor=InlineExecutor()) as t:
        yield t


@pytest.fixture
def recorder(clock: ManualClock) -> Recorder:
    return Recorder(clock)
