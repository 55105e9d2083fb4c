"""TimingWheel: bucket and level arithmetic at its boundaries, lazy overflow, cascading."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.timer import (
    COMPILED,
    BucketQueue,
    TaskCounter,
    TimerTask,
    TimerTaskEntry,
    TimingWheel,
)


def _wheel(tick_ms: int = 1, wheel_size: int = 20, start_ms: int = 0) -> TimingWheel:
    return TimingWheel(tick_ms, wheel_size, start_ms, TaskCounter(), BucketQueue())


def _entry(expiration_ms: int) -> TimerTaskEntry:
    return TimerTaskEntry(TimerTask(expiration_ms), expiration_ms)


def test_current_time_is_truncated_to_the_tick() -> None:
    wheel = _wheel(tick_ms=20, start_ms=123)
    assert wheel.current_time_ms == 120
    assert wheel.interval_ms == 400


@pytest.mark.parametrize(("expiration_ms", "accepted"), [(-5, False), (0, False), (1, True)])
def test_an_entry_within_the_current_tick_is_expired(expiration_ms: int, accepted: bool) -> None:
    assert _wheel().add(_entry(expiration_ms)) is accepted


def test_coarse_tick_expired_boundary() -> None:
    wheel = _wheel(tick_ms=10, start_ms=100)
    assert not wheel.add(_entry(109))
    assert wheel.add(_entry(110))


def test_a_cancelled_entry_is_refused() -> None:
    entry = _entry(5)
    entry.task.cancel()
    assert not _wheel().add(entry)


class _CancelledWhilePlaced(TimerTaskEntry):
    """An entry whose task is cancelled once the wheel has read where it goes.

    What a ``cancel()`` in another thread does when it lands between the wheel's look at
    the entry and its linking: it finds the entry in no bucket yet, so it only unbinds.
    """

    @property
    def expiration_ms(self) -> int:
        self.task.cancel()
        return self._expiration_ms

    @expiration_ms.setter
    def expiration_ms(self, expiration_ms: int) -> None:
        self._expiration_ms = expiration_ms


@pytest.mark.skipif(
    COMPILED, reason="the compiled TimerTaskEntry cannot be subclassed by interpreted code"
)
@pytest.mark.parametrize("expiration_ms", [5, 500, 50_000])
def test_an_entry_cancelled_while_being_placed_is_not_left_counted(expiration_ms: int) -> None:
    counter = TaskCounter()
    wheel = TimingWheel(1, 20, 0, counter, BucketQueue())
    entry = _CancelledWhilePlaced(TimerTask(expiration_ms), expiration_ms)
    assert not wheel.add(entry)
    assert entry.cancelled
    assert entry.list is None
    assert counter.value == 0


@pytest.mark.parametrize(
    ("expiration_ms", "slot", "bucket_expiration_ms"),
    [(1, 1, 1), (19, 19, 19), (5, 5, 5)],
)
def test_level_zero_bucket_index_and_expiration(
    expiration_ms: int, slot: int, bucket_expiration_ms: int
) -> None:
    wheel = _wheel()
    entry = _entry(expiration_ms)
    assert wheel.add(entry)
    assert entry.list is wheel.bucket(slot)
    assert wheel.bucket(slot).expiration_ms == bucket_expiration_ms
    assert wheel.overflow_wheel is None


def test_interval_boundary_goes_to_the_overflow_wheel() -> None:
    wheel = _wheel()
    inside, outside = _entry(19), _entry(20)
    assert wheel.add(inside)
    assert wheel.overflow_wheel is None
    assert wheel.add(outside)
    overflow = wheel.overflow_wheel
    assert overflow is not None
    assert (overflow.tick_ms, overflow.wheel_size, overflow.interval_ms) == (20, 20, 400)
    assert outside.list is overflow.bucket(1)
    assert overflow.bucket(1).expiration_ms == 20


@pytest.mark.parametrize(
    ("expiration_ms", "level", "slot", "bucket_expiration_ms"),
    [
        (399, 1, 19, 380),
        (400, 2, 1, 400),
        (7999, 2, 19, 7600),
        (8000, 3, 1, 8000),
        (8_000 * 20 - 1, 3, 19, 152_000),
        (8_000 * 20, 4, 1, 160_000),
    ],
)
def test_level_boundaries_for_kafka_defaults(
    expiration_ms: int, level: int, slot: int, bucket_expiration_ms: int
) -> None:
    wheel = _wheel()
    entry = _entry(expiration_ms)
    assert wheel.add(entry)
    target = wheel
    for _ in range(level):
        upper = target.overflow_wheel
        assert upper is not None
        target = upper
    assert target.tick_ms == 20**level
    assert target.overflow_wheel is None
    assert entry.list is target.bucket(slot)
    assert target.bucket(slot).expiration_ms == bucket_expiration_ms


def test_slot_wraps_with_the_current_time() -> None:
    wheel = _wheel(start_ms=35)  # current 35: holds [36, 55)
    entry = _entry(54)
    assert wheel.add(entry)
    assert entry.list is wheel.bucket(54 % 20)
    assert wheel.overflow_wheel is None
    assert wheel.add(_entry(55))
    assert wheel.overflow_wheel is not None


def test_overflow_wheels_are_created_lazily_once_and_reused() -> None:
    wheel = _wheel()
    wheel.add(_entry(100))
    first = wheel.overflow_wheel
    wheel.add(_entry(300))
    wheel.add(_entry(5000))
    assert wheel.overflow_wheel is first
    assert first is not None
    second = first.overflow_wheel
    assert second is not None
    assert second.tick_ms == 400
    assert second.current_time_ms == 0


def test_overflow_starts_at_the_lower_wheels_current_time() -> None:
    wheel = _wheel(start_ms=57)
    wheel.add(_entry(57 + 100))
    overflow = wheel.overflow_wheel
    assert overflow is not None
    assert overflow.current_time_ms == 40  # 57 truncated to the 20 ms tick


def test_advance_clock_moves_only_past_a_whole_tick_and_cascades_up() -> None:
    wheel = _wheel()
    wheel.add(_entry(1000))  # creates levels 1 and 2
    level1 = wheel.overflow_wheel
    assert level1 is not None
    level2 = level1.overflow_wheel
    assert level2 is not None
    wheel.advance_clock(0)
    assert wheel.current_time_ms == 0
    wheel.advance_clock(419)
    assert (wheel.current_time_ms, level1.current_time_ms, level2.current_time_ms) == (
        419,
        400,
        400,
    )
    wheel.advance_clock(419)
    assert wheel.current_time_ms == 419
    wheel.advance_clock(10)  # never backwards
    assert wheel.current_time_ms == 419


@given(
    tick_ms=st.integers(1, 7),
    wheel_size=st.integers(2, 5),
    times_ms=st.lists(st.integers(0, 5_000), max_size=6),
    expiration_ms=st.integers(0, 20_000),
)
def test_only_level_zero_refuses_an_entry_as_expired(
    tick_ms: int, wheel_size: int, times_ms: list[int], expiration_ms: int
) -> None:
    # add() checks "expired" at level 0 only; this pins the invariant that makes the
    # check redundant above it, whatever the clock did: every upper wheel's first
    # unexpired instant is at or below the end of the range of the wheel beneath it.
    wheel = _wheel(tick_ms=tick_ms, wheel_size=wheel_size)
    wheel.add(_entry(tick_ms * wheel_size**4))  # build four upper levels
    for time_ms in sorted(times_ms):
        wheel.advance_clock(time_ms)
    lower = wheel
    while (upper := lower.overflow_wheel) is not None:
        assert upper.current_time_ms + upper.tick_ms <= lower.current_time_ms + lower.interval_ms
        lower = upper
    accepted = wheel.add(_entry(expiration_ms))
    assert accepted is (expiration_ms >= wheel.current_time_ms + tick_ms)


def test_a_bucket_is_queued_once_per_rotation() -> None:
    queue = BucketQueue()
    wheel = TimingWheel(1, 20, 0, TaskCounter(), queue)
    for _ in range(5):
        wheel.add(_entry(7))
    assert len(queue) == 1
    assert queue.poll(7) is wheel.bucket(7)
    flushed: list[TimerTaskEntry] = []
    wheel.bucket(7).flush(flushed.append)
    assert len(flushed) == 5
    wheel.advance_clock(10)
    wheel.add(_entry(27))  # same slot, next rotation
    assert wheel.bucket(7).expiration_ms == 27
    assert len(queue) == 1
    assert queue.peek_expiration_ms() == 27


def test_three_slot_wheel_cascades_down_through_every_level() -> None:
    """A 3-slot wheel with a 1 ms tick: levels of 1, 3, 9, 27 ms ticks."""
    counter = TaskCounter()
    queue = BucketQueue()
    wheel = TimingWheel(1, 3, 0, counter, queue)
    entry = _entry(50)
    assert wheel.add(entry)
    levels = []
    w: TimingWheel | None = wheel
    while w is not None:
        levels.append(w.tick_ms)
        w = w.overflow_wheel
    assert levels == [1, 3, 9, 27]
    hops: list[int] = []  # tick of the wheel holding the entry after each re-insertion
    ran_at: list[int] = []
    while (head := queue.peek_expiration_ms()) is not None:
        bucket = queue.poll(head)
        assert bucket is not None
        wheel.advance_clock(head)

        def reinsert(e: TimerTaskEntry, now_ms: int = head) -> None:
            if wheel.add(e):
                lst = e.list
                assert lst is not None
                hops.append(now_ms)
            else:
                ran_at.append(now_ms)

        bucket.flush(reinsert)
    assert ran_at == [50]
    assert hops == [27, 45, 48]  # level 3 -> 2 -> 1 -> 0
    assert counter.value == 0


def test_constructor_validates() -> None:
    with pytest.raises(ValueError, match="tick_ms"):
        _wheel(tick_ms=0)
    with pytest.raises(ValueError, match="wheel_size"):
        _wheel(wheel_size=1)
