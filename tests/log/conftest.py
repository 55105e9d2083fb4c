"""Fixtures for the log's tests: a partition directory and a controllable clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tickwheel.log import Log, LogConfig

from .helpers import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


@pytest.fixture
def open_log(log_dir: Path, clock: FakeClock) -> Iterator[Callable[..., Log]]:
    """Opens logs on ``log_dir`` with the fake clock; closes whatever is left open."""
    opened: list[Log] = []

    def opener(config: LogConfig | None = None) -> Log:
        log = Log.open(log_dir, config or LogConfig(), clock_ms=clock)
        opened.append(log)
        return log

    yield opener
    for log in opened:
        log.close()
