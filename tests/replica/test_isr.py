"""The leader's ISR bookkeeping: caught-up times, shrink, expansion, conditional writes."""

from __future__ import annotations

import dataclasses

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.log import LogConfig
from tickwheel.replica import (
    ACKS_ALL,
    IsrManager,
    LeaderAndIsr,
    ReplicaManager,
    ReplicaState,
    TopicPartition,
    become_leader,
)
from tickwheel.replica._isr import record_follower_fetch
from tickwheel.timer import ManualClock

from .conftest import T0
from .helpers import fetch, produce
from .records import batch

LAG_MS = 1000
FOLLOWER, SILENT = 1, 2


def test_a_fetch_at_the_log_end_is_caught_up_now() -> None:
    replica = ReplicaState(FOLLOWER)
    record_follower_fetch(replica, fetch_offset=10, leader_end_offset=10, now_ms=500)
    assert replica.last_caught_up_time_ms == 500


def test_a_fetch_reaching_the_previous_log_end_was_caught_up_at_the_previous_fetch() -> None:
    replica = ReplicaState(FOLLOWER)
    record_follower_fetch(replica, fetch_offset=5, leader_end_offset=10, now_ms=100)
    assert replica.last_caught_up_time_ms == 0
    # It has now read everything it was shown at t=100, while the leader moved on.
    record_follower_fetch(replica, fetch_offset=10, leader_end_offset=20, now_ms=300)
    assert replica.last_caught_up_time_ms == 100
    # Falling behind what it was shown does not count.
    record_follower_fetch(replica, fetch_offset=15, leader_end_offset=30, now_ms=600)
    assert replica.last_caught_up_time_ms == 100


class FakeZooKeeper:
    """Conditional writes of one partition state, in memory."""

    def __init__(self, state: LeaderAndIsr) -> None:
        self.state = state
        self.writes: list[LeaderAndIsr] = []

    async def write(self, _tp: TopicPartition, proposed: LeaderAndIsr) -> LeaderAndIsr | None:
        self.writes.append(proposed)
        if proposed.version != self.state.version:
            return None
        self.state = dataclasses.replace(proposed, version=proposed.version + 1)
        return self.state


def _lead(manager: ReplicaManager, clock: ManualClock, zk: FakeZooKeeper) -> IsrManager:
    isr = IsrManager(manager, zk.write, replica_lag_time_max_ms=LAG_MS, clock=clock)
    manager.follower_fetch_listener = isr.on_follower_fetch
    partition = become_leader(manager, T0, zk.state, (0, FOLLOWER, SILENT), LogConfig())
    isr.became_leader(partition, zk.state)
    return isr


@pytest.mark.asyncio
async def test_silent_follower_is_dropped_and_the_waiting_produce_completes(
    manager: ReplicaManager,
) -> None:
    clock = ManualClock(start_ms=10_000)
    zk = FakeZooKeeper(LeaderAndIsr(0, 0, (0, FOLLOWER, SILENT), version=0))
    isr = _lead(manager, clock, zk)
    waiting = produce(manager, {T0: batch(b"a")}, acks=ACKS_ALL)
    # The live follower fetches the record and comes back from the log end.
    await fetch(manager, [(T0, 0)], replica_id=FOLLOWER)
    await fetch(manager, [(T0, 1)], replica_id=FOLLOWER, max_wait_ms=0)
    assert not waiting.done()  # the silent follower is still in the ISR

    clock.advance(LAG_MS)
    isr.maybe_shrink_isr()
    await isr.wait_for_writes()
    assert zk.writes == []  # not lagging for *more* than the lag time yet
    await fetch(manager, [(T0, 1)], replica_id=FOLLOWER, max_wait_ms=0)
    clock.advance(1)
    isr.maybe_shrink_isr()
    await isr.wait_for_writes()

    assert zk.state.isr == (0, FOLLOWER)
    assert manager.get_partition(T0).isr == {0, FOLLOWER}  # type: ignore[union-attr]
    result = (await waiting)[T0]
    assert result.error_code == ErrorCode.none


@pytest.mark.asyncio
async def test_follower_rejoins_once_it_reaches_the_high_watermark(
    manager: ReplicaManager,
) -> None:
    clock = ManualClock(start_ms=10_000)
    zk = FakeZooKeeper(LeaderAndIsr(0, 0, (0, FOLLOWER), version=3))
    isr = _lead(manager, clock, zk)
    await produce(manager, {T0: batch(b"a", b"b")}, acks=1)
    await fetch(manager, [(T0, 2)], replica_id=FOLLOWER, max_wait_ms=0)
    assert manager.get_partition(T0).log.high_watermark == 2  # type: ignore[union-attr]

    await fetch(manager, [(T0, 0)], replica_id=SILENT, max_wait_ms=0)
    await isr.wait_for_writes()
    assert zk.writes == []  # behind the high watermark: not in sync yet
    await fetch(manager, [(T0, 2)], replica_id=SILENT, max_wait_ms=0)
    await isr.wait_for_writes()
    assert zk.state.isr == (0, FOLLOWER, SILENT)
    assert zk.state.version == 4
    assert manager.get_partition(T0).isr == {0, FOLLOWER, SILENT}  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_a_write_that_loses_changes_nothing(manager: ReplicaManager) -> None:
    clock = ManualClock(start_ms=10_000)
    zk = FakeZooKeeper(LeaderAndIsr(0, 0, (0, FOLLOWER, SILENT), version=0))
    isr = _lead(manager, clock, zk)
    zk.state = dataclasses.replace(zk.state, version=7)  # someone else wrote meanwhile
    clock.advance(LAG_MS + 1)
    isr.maybe_shrink_isr()
    await isr.wait_for_writes()
    assert len(zk.writes) == 1
    assert manager.get_partition(T0).isr == {0, FOLLOWER, SILENT}  # type: ignore[union-attr]
    # The newer state arrives (through the watch); the next check proposes on it.
    isr.state_changed(T0, zk.state)
    isr.maybe_shrink_isr()
    await isr.wait_for_writes()
    assert zk.state.isr == (0,)
