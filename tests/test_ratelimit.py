"""``RateLimitedLog``: a repeating condition logged with backoff and a count, on a manual clock."""

from __future__ import annotations

import logging

import pytest

from tickwheel._ratelimit import RateLimitedLog

LOGGER = "tickwheel.test.ratelimit"


class ManualClock:
    """Seconds that move only when told."""

    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def limited(clock: ManualClock) -> RateLimitedLog:
    return RateLimitedLog(
        logging.getLogger(LOGGER), initial_interval_s=1.0, max_interval_s=8.0, clock=clock
    )


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_the_first_event_is_logged_and_repeats_within_the_interval_are_held_back(
    limited: RateLimitedLog, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    assert limited.log(logging.WARNING, "10.0.0.7", "garbage from %s", "10.0.0.7")
    for _ in range(36):
        clock.now_s += 0.01
        assert not limited.log(logging.WARNING, "10.0.0.7", "garbage from %s", "10.0.0.7")
    clock.now_s += 1.0
    assert limited.log(logging.WARNING, "10.0.0.7", "garbage from %s", "10.0.0.7")
    assert messages(caplog) == [
        "garbage from 10.0.0.7",
        "garbage from 10.0.0.7 (repeated 36 times in the last 1 s)",
    ]


def test_the_interval_doubles_while_the_condition_repeats_up_to_the_maximum(
    limited: RateLimitedLog, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    logged_at = []
    for _ in range(400):  # an event every 0.1 s for 40 s
        if limited.log(logging.WARNING, "leader 2", "leader 2 is unreachable"):
            logged_at.append(round(clock.now_s - 1000.0, 1))
        clock.now_s += 0.1
    # Gaps of 1, 2, 4, then 8 s (the maximum), each after a line that had repeats.
    assert logged_at[:6] == [0.0, 1.0, 3.0, 7.0, 15.0, 23.0]
    assert messages(caplog)[3] == "leader 2 is unreachable (repeated 39 times in the last 4 s)"


def test_keys_are_limited_separately(
    limited: RateLimitedLog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    assert limited.log(logging.WARNING, "a", "from a")
    assert limited.log(logging.WARNING, "b", "from b")
    assert not limited.log(logging.WARNING, "a", "from a")
    assert messages(caplog) == ["from a", "from b"]


def test_a_key_quiet_for_the_maximum_interval_starts_over(
    limited: RateLimitedLog, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    limited.log(logging.WARNING, "a", "event")
    limited.log(logging.WARNING, "a", "event")
    clock.now_s += 8.0
    assert limited.log(logging.WARNING, "a", "event")
    assert messages(caplog) == ["event", "event"], "a fresh start: no count"


def test_an_event_after_a_quiet_interval_resets_the_backoff(
    limited: RateLimitedLog, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    limited.log(logging.WARNING, "a", "event")
    clock.now_s += 0.5
    limited.log(logging.WARNING, "a", "event")  # held back
    clock.now_s += 0.5
    limited.log(logging.WARNING, "a", "event")  # logged with its count; next gap 2 s
    clock.now_s += 2.0
    limited.log(logging.WARNING, "a", "event")  # nothing held back since: gap back to 1 s
    clock.now_s += 1.0
    assert limited.log(logging.WARNING, "a", "event")


def test_the_least_recently_seen_key_is_dropped_beyond_max_keys(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    limited = RateLimitedLog(logging.getLogger(LOGGER), max_keys=2, clock=clock)
    for key in ("a", "b", "c"):
        limited.log(logging.WARNING, key, key)
    assert limited.log(logging.WARNING, "a", "a again"), "a was dropped, so logged as new"
    assert not limited.log(logging.WARNING, "c", "c again")


def test_a_disabled_level_costs_no_interval(
    limited: RateLimitedLog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    assert not limited.log(logging.INFO, "a", "info")
    assert limited.log(logging.WARNING, "a", "warning")


def test_the_line_names_the_caller_not_the_limiter(
    limited: RateLimitedLog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    limited.log(logging.WARNING, "a", "event")
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert record.funcName == "test_the_line_names_the_caller_not_the_limiter"


def test_intervals_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="initial_interval_s"):
        RateLimitedLog(logging.getLogger(LOGGER), initial_interval_s=2.0, max_interval_s=1.0)
