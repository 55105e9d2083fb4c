"""DelayedOperationPurgatory: watch, check, expire, cancel, purge -- on a manual clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tickwheel.purgatory import (
    PURGE_SHARDS_PER_STEP,
    SHARD_COUNT,
    DelayedOperation,
    DelayedOperationPurgatory,
    TopicPartitionOperationKey,
)
from tickwheel.timer import InlineExecutor, ManualClock, SystemTimer, TimerTask

from .helpers import FlagOperation, ManualPurgatory

KEYS = ("a", "b", "c")


@pytest.fixture
def env() -> Iterator[ManualPurgatory]:
    env = ManualPurgatory()
    yield env
    env.purgatory.shutdown()


def test_a_completable_operation_is_neither_watched_nor_timed(env: ManualPurgatory) -> None:
    op = FlagOperation(100, ready=True)
    assert env.purgatory.try_complete_else_watch(op, KEYS) is True
    assert op.completions == 1
    assert op.tries == 1
    assert env.purgatory.watched == 0
    assert env.purgatory.num_delayed == 0


def test_otherwise_it_is_watched_under_every_key_tried_again_then_timed(
    env: ManualPurgatory,
) -> None:
    op = FlagOperation(100)
    assert env.purgatory.try_complete_else_watch(op, KEYS) is False
    assert op.tries == 2  # once before watching, once after
    assert env.purgatory.watched == len(KEYS)
    assert env.purgatory.num_delayed == 1
    assert op.timer_task_entry is not None


def test_empty_keys_are_refused_and_nothing_is_kept(env: ManualPurgatory) -> None:
    op = FlagOperation(100)
    with pytest.raises(ValueError, match="at least one watch key"):
        env.purgatory.try_complete_else_watch(op, [])
    assert env.purgatory.watched == 0
    assert env.purgatory.num_delayed == 0
    assert not op.is_completed


def test_a_shut_down_purgatory_takes_nothing() -> None:
    env = ManualPurgatory()
    env.purgatory.shutdown()
    op = FlagOperation(100)
    with pytest.raises(RuntimeError, match="shut down"):
        env.purgatory.try_complete_else_watch(op, KEYS)
    assert env.purgatory.watched == 0
    assert op.tries == 0


class _CompletesWhenHashed:
    """A key that completes ``op`` as the purgatory files the operation under it.

    Stands for another thread completing the operation while it is being watched.
    """

    def __init__(self, op: DelayedOperation) -> None:
        self.op = op

    def __hash__(self) -> int:
        self.op.force_complete()
        return 7


def test_an_operation_completed_while_being_watched_is_not_watched_further(
    env: ManualPurgatory,
) -> None:
    op = FlagOperation(100)
    keys = ["a", _CompletesWhenHashed(op), "c"]
    assert env.purgatory.try_complete_else_watch(op, keys) is False
    assert op.completions == 1
    assert env.purgatory.watched == 2  # "a" and the completing key; never "c"
    assert env.purgatory.num_delayed == 0
    assert env.purgatory.check_and_complete("c") == 0


class _CompletesDuringAdd(SystemTimer):
    """Completes each task just before adding it, as a racing thread could."""

    def add(self, task: TimerTask) -> None:
        assert isinstance(task, DelayedOperation)
        task.force_complete()  # its cancel() finds nothing to unlink yet
        super().add(task)


def test_an_operation_completed_while_being_timed_is_untimed_at_once() -> None:
    timer = _CompletesDuringAdd("race", clock=ManualClock(), executor=InlineExecutor())
    with DelayedOperationPurgatory[FlagOperation]("race", timer, reaper_enabled=False) as p:
        op = FlagOperation(100)
        assert p.try_complete_else_watch(op, KEYS) is False
        assert op.completions == 1
        assert p.num_delayed == 0
        assert op.timer_task_entry is None


def test_check_of_an_unknown_key_completes_nothing(env: ManualPurgatory) -> None:
    assert env.purgatory.check_and_complete("nobody") == 0
    env.purgatory.try_complete_else_watch(FlagOperation(100, ready=False), ["a"])
    assert env.purgatory.check_and_complete("b") == 0


@pytest.mark.parametrize("completing_key", KEYS)
def test_a_watched_operation_completes_once_on_the_next_check_of_any_key(
    env: ManualPurgatory, completing_key: str
) -> None:
    p = env.purgatory
    op = FlagOperation(100)
    p.try_complete_else_watch(op, KEYS)
    assert p.check_and_complete(completing_key) == 0
    op.ready = True
    assert p.check_and_complete(completing_key) == 1
    assert op.completions == 1
    # Un-timed at once; stale under the other keys until their next check.
    assert p.num_delayed == 0
    assert p.watched == len(KEYS) - 1
    for key in KEYS:
        assert p.check_and_complete(key) == 0
    assert p.watched == 0
    env.advance(1000)
    assert op.expirations == 0
    assert op.completions == 1
    assert p.expired == 0


def test_check_completes_every_ready_operation_and_leaves_the_rest(
    env: ManualPurgatory,
) -> None:
    p = env.purgatory
    ops = [FlagOperation(100) for _ in range(10)]
    for op in ops:
        p.try_complete_else_watch(op, ["k"])
    for op in ops[::2]:
        op.ready = True
    assert p.check_and_complete("k") == 5
    assert p.watched == 5
    assert p.num_delayed == 5
    assert [op.completions for op in ops] == [1, 0] * 5


@pytest.mark.parametrize("delay_ms", [1, 2, 19, 20, 21, 399, 400, 7_999, 8_001, 200_000])
def test_an_operation_never_completed_expires_at_its_delay_not_before(
    env: ManualPurgatory, delay_ms: int
) -> None:
    p = env.purgatory
    op = FlagOperation(delay_ms)
    p.try_complete_else_watch(op, KEYS)
    env.advance(delay_ms - 1)
    assert op.events == []
    assert p.num_delayed == 1
    env.advance(1)
    assert op.events == ["complete", "expire"]
    assert p.expired == 1
    assert p.num_delayed == 0
    env.advance(delay_ms)
    assert op.events == ["complete", "expire"]
    # An expired operation is stale in its lists and leaves on the next check.
    assert p.watched == len(KEYS)
    op.ready = True
    assert p.check_and_complete("b") == 0
    assert p.watched == len(KEYS) - 1


def test_an_operation_with_no_delay_expires_at_once(env: ManualPurgatory) -> None:
    op = FlagOperation(0)
    assert env.purgatory.try_complete_else_watch(op, ["a"]) is False
    assert op.events == ["complete", "expire"]
    assert env.purgatory.expired == 1


def test_cancel_for_key_untimes_that_keys_operations_and_leaves_other_keys_alone(
    env: ManualPurgatory,
) -> None:
    p = env.purgatory
    both, only_a, only_b = FlagOperation(100), FlagOperation(100), FlagOperation(100)
    p.try_complete_else_watch(both, ["a", "b"])
    p.try_complete_else_watch(only_a, ["a"])
    p.try_complete_else_watch(only_b, ["b"])
    assert p.num_delayed == 3

    assert p.cancel_for_key("a") == [both, only_a]
    assert p.num_delayed == 1
    assert p.watched == 2  # "b" still holds both and only_b
    assert p.cancel_for_key("a") == []
    env.advance(100)
    assert only_b.events == ["complete", "expire"]
    assert both.events == []
    assert only_a.events == []
    # Still watched under "b": an event there completes it.
    both.ready = True
    assert p.check_and_complete("b") == 1
    assert both.events == ["complete"]


def test_cancel_for_key_returns_only_operations_not_completed(env: ManualPurgatory) -> None:
    p = env.purgatory
    done, waiting = FlagOperation(100), FlagOperation(100)
    p.try_complete_else_watch(done, ["a", "b"])
    p.try_complete_else_watch(waiting, ["b"])
    done.ready = True
    assert p.check_and_complete("a") == 1
    assert p.cancel_for_key("b") == [waiting]
    assert p.watched == 0


def test_timer_disabled_operations_are_watched_but_never_expire() -> None:
    env = ManualPurgatory(timer_enabled=False)
    op = FlagOperation(10)
    env.purgatory.try_complete_else_watch(op, ["a"])
    assert env.purgatory.num_delayed == 0
    env.advance(1000)
    assert op.events == []
    op.ready = True
    assert env.purgatory.check_and_complete("a") == 1


def test_typed_keys_work_as_watch_keys(env: ManualPurgatory) -> None:
    p = env.purgatory
    op = FlagOperation(100)
    p.try_complete_else_watch(op, [TopicPartitionOperationKey("t", 0)])
    op.ready = True
    assert p.check_and_complete(TopicPartitionOperationKey("t", 1)) == 0
    assert p.check_and_complete(TopicPartitionOperationKey("t", 0)) == 1


# -- purge -------------------------------------------------------------------------------


def _complete_through_own_key(p: DelayedOperationPurgatory[FlagOperation], count: int) -> None:
    """``count`` operations watched under their own key and "shared"; completed via own."""
    for i in range(count):
        op = FlagOperation(10_000)
        p.try_complete_else_watch(op, [f"own-{i}", "shared"])
        op.ready = True
        assert p.check_and_complete(f"own-{i}") == 1


def test_the_reaper_step_purges_completed_operations_once_past_the_interval() -> None:
    interval = 10
    env = ManualPurgatory(purge_interval=interval)
    p = env.purgatory
    live = FlagOperation(10_000)
    p.try_complete_else_watch(live, ["shared"])
    _complete_through_own_key(p, interval)
    env.advance(0)
    # Not more than purge_interval completed yet: the stale entries stay.
    assert p.watched == interval + 1
    _complete_through_own_key(p, 1)
    env.advance(0)
    assert p.watched == 1  # only the live operation is left
    assert p.num_delayed == 1
    live.ready = True
    assert p.check_and_complete("shared") == 1
    assert p.watched == 0


def test_the_purge_rides_on_calls_when_there_is_no_reaper() -> None:
    interval = 50
    env = ManualPurgatory(purge_interval=interval)
    p = env.purgatory
    count = 5_000
    _complete_through_own_key(p, count)
    # Never advanced by hand: the purge steps came with the calls. What is left is at
    # most one purge interval plus what completed during one pass of steps.
    steps_per_pass = SHARD_COUNT // PURGE_SHARDS_PER_STEP
    assert p.watched <= interval + steps_per_pass
    assert p.num_delayed == 0


def test_purge_drops_empty_watchers_and_keeps_live_operations() -> None:
    env = ManualPurgatory(purge_interval=0)
    p = env.purgatory
    live = [FlagOperation(10_000) for _ in range(100)]
    for i, op in enumerate(live):
        p.try_complete_else_watch(op, [f"k{i % 7}", f"j{i % 5}"])
    dead = [FlagOperation(10_000) for _ in range(1000)]
    for i, op in enumerate(dead):
        p.try_complete_else_watch(op, [f"k{i % 7}", f"dead-{i}"])
        op.force_complete()
    env.advance(0)
    assert p.watched == 2 * len(live)
    assert p.num_delayed == len(live)
    for i in range(7):
        assert p.check_and_complete(f"k{i}") == 0
    assert all(op.completions == 0 for op in live)


class _CompletesOnSecondTry(FlagOperation):
    """Not completable when first offered; completable by the time it is watched."""

    def try_complete(self) -> bool:
        self.tries += 1
        return self.tries > 1 and self.force_complete()


def test_operations_completed_while_being_watched_are_purged_without_any_check() -> None:
    interval = 50
    keys_per_operation = 3
    env = ManualPurgatory(purge_interval=interval)
    p = env.purgatory
    steps_per_pass = SHARD_COUNT // PURGE_SHARDS_PER_STEP
    # Stale operations: up to the interval, plus one, plus those added while a pass of
    # steps is sweeping (one per call); each is listed under every key.
    bound = (interval + 1 + steps_per_pass) * keys_per_operation
    most_watched = 0
    for i in range(3_000):
        op = _CompletesOnSecondTry(10_000)
        # Completed by the try after watching (the call's early return): it stays listed
        # under every key, and no check_and_complete ever runs to take it off.
        assert p.try_complete_else_watch(op, [f"a{i % 7}", f"b{i % 11}", f"own-{i}"])
        assert op.completions == 1
        if i % 10 == 0:
            most_watched = max(most_watched, p.watched)
    # The purge steps came with these calls alone and kept the lists bounded.
    assert most_watched <= bound
    assert p.watched <= bound
    assert p.num_delayed == 0
    env.purgatory.shutdown()
