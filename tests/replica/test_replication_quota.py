"""The replication throttle: which partitions a topic's throttled-replicas configs name
for a broker, when the quota is exceeded, and what a leader sends a throttled follower."""

from __future__ import annotations

import time

import pytest

from tickwheel.log import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS, LogConfig
from tickwheel.replica import (
    CONSUMER_REPLICA_ID,
    UNBOUNDED_RATE,
    LeaderAndIsr,
    ReplicaManager,
    ReplicationQuota,
    become_leader,
    throttled_partitions,
)
from tickwheel.server.quotas import WindowedRate
from tickwheel.timer import ManualClock

from .conftest import BROKER_ID, T0, T1
from .helpers import fetch, produce
from .records import batch

FOLLOWER = 1
BOUND_BYTES_PER_S = 100
WINDOWS, WINDOW_MS = 2, 1000
PARKED_MS = 300


def test_the_lists_name_partitions_by_broker() -> None:
    assert throttled_partitions(LEADER_THROTTLED_REPLICAS, "0:1, 1:2 ,2:1,", 1) == {0, 2}
    assert throttled_partitions(LEADER_THROTTLED_REPLICAS, "0:1", 3) == frozenset()
    assert throttled_partitions(FOLLOWER_THROTTLED_REPLICAS, " * ", 3) is None
    assert throttled_partitions(FOLLOWER_THROTTLED_REPLICAS, None, 3) == frozenset()
    with pytest.raises(ValueError, match=r"follower\.replication\.throttled\.replicas must be"):
        throttled_partitions(FOLLOWER_THROTTLED_REPLICAS, "0-1", 3)


def test_a_malformed_list_is_a_topic_config_error() -> None:
    with pytest.raises(ValueError, match=r"leader\.replication\.throttled\.replicas must be"):
        LogConfig.from_properties({LEADER_THROTTLED_REPLICAS: "0:1,x"})
    LogConfig.from_properties({LEADER_THROTTLED_REPLICAS: "*", FOLLOWER_THROTTLED_REPLICAS: ""})


def _quota(clock: ManualClock) -> ReplicationQuota:
    quota = ReplicationQuota(WindowedRate(WINDOWS, WINDOW_MS), clock)
    quota.update_quota(BOUND_BYTES_PER_S)
    return quota


def test_only_a_bounded_quota_over_its_rate_is_exceeded() -> None:
    clock = ManualClock(start_ms=10_000)
    quota = _quota(clock)
    quota.mark_throttled("t", frozenset({1}))
    assert quota.is_throttled(T1)
    assert not quota.is_throttled(T0)
    # Two windows of 1 s: the rate is measured over at least one second.
    quota.record(BOUND_BYTES_PER_S)
    assert not quota.is_quota_exceeded()
    quota.record(1)
    assert quota.is_quota_exceeded()
    assert quota.should_throttle(T1, in_sync=False)
    assert not quota.should_throttle(T1, in_sync=True)
    assert not quota.should_throttle(T0, in_sync=False)
    clock.advance(WINDOWS * WINDOW_MS)
    assert not quota.is_quota_exceeded()
    quota.record(10 * BOUND_BYTES_PER_S)
    quota.update_quota(UNBOUNDED_RATE)
    assert not quota.is_quota_exceeded()


def _lead_with_follower(manager: ReplicaManager, in_sync: tuple[int, ...]) -> ReplicationQuota:
    state = LeaderAndIsr(leader=BROKER_ID, leader_epoch=1, isr=in_sync, controller_epoch=1)
    become_leader(manager, T0, state, (BROKER_ID, FOLLOWER), LogConfig())
    quota = _quota(ManualClock(start_ms=10_000))
    quota.mark_throttled("t", None)
    manager.leader_quota = quota
    return quota


@pytest.mark.asyncio
async def test_a_throttled_follower_out_of_sync_reads_nothing_while_the_quota_is_exceeded(
    manager: ReplicaManager,
) -> None:
    quota = _lead_with_follower(manager, (BROKER_ID,))
    record = batch(b"x" * 200)
    await produce(manager, {T0: record})
    first = await fetch(manager, [(T0, 0)], replica_id=FOLLOWER, max_wait_ms=0)
    assert first[T0].size_bytes == len(record), "under the quota: the leader sends it"
    assert quota.is_quota_exceeded(), "what it sent was recorded"
    throttled = await fetch(manager, [(T0, 0)], replica_id=FOLLOWER, max_wait_ms=0)
    assert throttled[T0].size_bytes == 0
    consumer = await fetch(manager, [(T0, 0)], replica_id=CONSUMER_REPLICA_ID, max_wait_ms=0)
    assert consumer[T0].size_bytes == len(record), "consumers are not throttled"


@pytest.mark.asyncio
async def test_an_in_sync_follower_is_never_throttled(manager: ReplicaManager) -> None:
    quota = _lead_with_follower(manager, (BROKER_ID, FOLLOWER))
    quota.record(10 * BOUND_BYTES_PER_S)
    record = batch(b"y" * 50)
    produced = produce(manager, {T0: record}, acks=1)
    await produced
    answer = await fetch(manager, [(T0, 0)], replica_id=FOLLOWER, max_wait_ms=0)
    assert answer[T0].size_bytes == len(record)


@pytest.mark.asyncio
async def test_a_parked_throttled_fetch_waits_out_its_max_wait(manager: ReplicaManager) -> None:
    quota = _lead_with_follower(manager, (BROKER_ID,))
    quota.record(10 * BOUND_BYTES_PER_S)
    started = time.monotonic()
    parked = fetch(manager, [(T0, 0)], replica_id=FOLLOWER, max_wait_ms=PARKED_MS)
    await produce(manager, {T0: batch(b"z")})
    answer = await parked
    assert answer[T0].size_bytes == 0
    # Had the throttled bytes counted, the produce would have completed it at once.
    assert time.monotonic() - started >= PARKED_MS / 1000 * 0.9
