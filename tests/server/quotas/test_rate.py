"""Kafka's sampled rate and the throttle time it implies, on explicit times."""

from __future__ import annotations

import pytest

from tickwheel.server.quotas import QUOTA_WINDOW_NUM, QUOTA_WINDOW_SIZE_MS, WindowedRate

WINDOW_MS = QUOTA_WINDOW_SIZE_MS
MIN_SPAN_MS = (QUOTA_WINDOW_NUM - 1) * WINDOW_MS


def test_a_burst_is_measured_over_at_least_ten_windows() -> None:
    rate = WindowedRate()
    rate.record(11_000, now_ms=0)
    assert rate.span_ms(0) == MIN_SPAN_MS
    assert rate.rate_per_s(0) == pytest.approx(1100.0)


def test_throttle_time_brings_the_rate_back_to_the_quota() -> None:
    rate = WindowedRate()
    rate.record(11_000, now_ms=0)
    # (1100 - 1000) / 1000 * 10 s: one second of silence brings it to 1000/s.
    assert rate.throttle_ms(1000.0, 0) == 1000
    assert rate.throttle_ms(1100.0, 0) == 0


def test_once_the_windows_are_full_the_span_is_the_time_since_the_oldest() -> None:
    rate = WindowedRate()
    for second in range(12):
        rate.record(500, now_ms=second * WINDOW_MS)
    now_ms = 11 * WINDOW_MS + 500
    # The sample of second 0 is reused for second 11: the oldest began at second 1.
    assert rate.span_ms(now_ms) == now_ms - WINDOW_MS
    assert rate.rate_per_s(now_ms) == pytest.approx(11 * 500 / (now_ms - WINDOW_MS) * 1000)


def test_samples_older_than_every_window_are_forgotten() -> None:
    rate = WindowedRate()
    rate.record(50_000, now_ms=0)
    later_ms = QUOTA_WINDOW_NUM * WINDOW_MS
    assert rate.rate_per_s(later_ms) == 0.0
    assert rate.throttle_ms(1.0, later_ms) == 0


def test_a_value_taken_back_is_not_counted() -> None:
    rate = WindowedRate()
    rate.record(20_000, now_ms=0)
    rate.record(-20_000, now_ms=10)
    assert rate.throttle_ms(1.0, 10) == 0
