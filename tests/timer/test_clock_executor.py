"""Clocks and executors."""

from __future__ import annotations

import threading
import time

import pytest

from tickwheel.timer import InlineExecutor, ManualClock, SystemClock, ThreadExecutor

_READ_GAP_MS = 50


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(5)
    assert clock.now_ms() == 5
    clock.advance(10)
    assert clock.now_ms() == 15
    with pytest.raises(ValueError, match="back"):
        clock.advance(-1)
    condition = threading.Condition()
    with condition:
        assert clock.wait_ms(condition, 1000) is False
    assert clock.now_ms() == 15


def test_system_clock_is_monotonic_milliseconds() -> None:
    clock = SystemClock()
    before = clock.now_ms()
    # Two reads of the clock, one after the other; a loaded machine may pause between.
    assert abs(before - time.monotonic_ns() // 1_000_000) <= _READ_GAP_MS
    condition = threading.Condition()
    with condition:
        assert clock.wait_ms(condition, 5) is True
    assert clock.now_ms() >= before + 4


def test_inline_executor_runs_at_once_and_logs_failures(caplog: pytest.LogCaptureFixture) -> None:
    ran: list[int] = []
    executor = InlineExecutor()
    executor.execute(lambda: ran.append(1))

    def boom() -> None:
        raise ValueError("boom")

    executor.execute(boom)
    executor.shutdown()
    assert ran == [1]
    assert "failed" in caplog.text


def test_thread_executor_runs_in_order_on_its_thread_and_drains_on_shutdown() -> None:
    executor = ThreadExecutor("executor-test")
    names: list[str] = []
    order: list[int] = []
    for i in range(50):
        executor.execute(lambda i=i: order.append(i))
    executor.execute(lambda: names.append(threading.current_thread().name))
    executor.shutdown()
    assert order == list(range(50))
    assert names == ["executor-test"]
    with pytest.raises(RuntimeError):
        executor.execute(lambda: None)
    executor.shutdown()
