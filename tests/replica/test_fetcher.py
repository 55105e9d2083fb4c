"""The follower's fetch loop against a real leader ``ReplicaManager``, in one event loop.

The transport hands the follower's fetch straight to the leader's ``fetch_messages``
(long polls included), so the whole replication loop runs without sockets: append on
the leader, wake the follower's parked fetch, append as follower, fetch again, HW moves,
the acks=all produce completes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest
import pytest_asyncio
from kio.schema.errors import ErrorCode

from tickwheel.log import LogConfig
from tickwheel.replica import (
    ACKS_ALL,
    EpochEndOffset,
    FetcherConfig,
    FetchIsolation,
    FetchParams,
    FetchPartitionResult,
    FollowerFetchRequest,
    FollowerFetchResult,
    IsrManager,
    LeaderAndIsr,
    PartitionFetchInfo,
    ReplicaFetcherManager,
    ReplicaManager,
    TopicPartition,
    become_follower,
    become_leader,
)

from .conftest import T0
from .helpers import produce
from .records import batch

LEADER, FOLLOWER = 0, 1
STATE = LeaderAndIsr(LEADER, leader_epoch=3, isr=(LEADER, FOLLOWER), version=0)
TIMEOUT_S = 10.0


class LoopbackTransport:
    """Delivers a follower's fetch to the leader's ReplicaManager directly."""

    def __init__(self, leader: ReplicaManager) -> None:
        self.leader = leader
        self.requests: list[FollowerFetchRequest] = []

    async def fetch(
        self, leader_id: int, request: FollowerFetchRequest
    ) -> Mapping[TopicPartition, FollowerFetchResult]:
        assert leader_id == LEADER
        self.requests.append(request)
        future: asyncio.Future[dict[TopicPartition, FetchPartitionResult]] = (
            asyncio.get_running_loop().create_future()
        )
        params = FetchParams(
            request.replica_id,
            request.max_wait_ms,
            request.min_bytes,
            request.max_bytes,
            FetchIsolation.LOG_END,
        )
        infos = [
            (p.topic_partition, PartitionFetchInfo(p.fetch_offset, p.max_bytes, p.leader_epoch))
            for p in request.partitions
        ]
        self.leader.fetch_messages(params, infos, future.set_result)
        results = await future
        return {
            tp: FollowerFetchResult(
                int(r.error_code),
                r.high_watermark,
                r.log_start_offset,
                None if r.data is None else r.data.records.read_bytes(),
            )
            for tp, r in results.items()
        }

    async def end_offsets_for_epochs(
        self, leader_id: int, replica_id: int, epochs: Mapping[TopicPartition, tuple[int, int]]
    ) -> Mapping[TopicPartition, EpochEndOffset]:
        assert leader_id == LEADER
        assert replica_id == FOLLOWER
        answers = {}
        for tp, (_current, epoch) in epochs.items():
            partition = self.leader.get_partition(tp)
            assert partition is not None
            found_epoch, end_offset = partition.log.end_offset_for_epoch(epoch)
            answers[tp] = EpochEndOffset(int(ErrorCode.none), found_epoch, end_offset)
        return answers

    async def disconnect(self, leader_id: int) -> None:
        """Nothing to close."""


@pytest_asyncio.fixture
async def follower(tmp_path: Path) -> AsyncIterator[ReplicaManager]:
    replica_manager = ReplicaManager(FOLLOWER, [tmp_path / "follower"])
    replica_manager.start()
    yield replica_manager
    replica_manager.shutdown()


@pytest.mark.asyncio
async def test_acks_all_completes_once_the_follower_has_fetched(
    manager: ReplicaManager, follower: ReplicaManager
) -> None:
    replicas = (LEADER, FOLLOWER)
    leader_partition = become_leader(manager, T0, STATE, replicas, LogConfig())
    isr = IsrManager(manager, _never_written, replica_lag_time_max_ms=30_000)
    manager.follower_fetch_listener = isr.on_follower_fetch
    isr.became_leader(leader_partition, STATE)
    follower_partition = become_follower(follower, T0, STATE, replicas, LogConfig())
    fetchers = ReplicaFetcherManager(
        follower, LoopbackTransport(manager), FetcherConfig(wait_max_ms=5_000)
    )
    await fetchers.follow(T0, LEADER, STATE.leader_epoch)
    try:
        for round_number in range(3):
            values = [f"{round_number}-{i}".encode() for i in range(5)]
            async with asyncio.timeout(TIMEOUT_S):
                results = await produce(manager, {T0: batch(*values)}, acks=ACKS_ALL)
            assert results[T0].error_code == ErrorCode.none
            # The produce completed because the follower asked for what follows it.
            assert follower_partition.log.log_end_offset == leader_partition.log.log_end_offset
            assert leader_partition.log.high_watermark == leader_partition.log.log_end_offset
    finally:
        await fetchers.shutdown()
    leader_bytes = leader_partition.log.read(0, 1 << 20).records.read_bytes()
    follower_bytes = follower_partition.log.read(0, 1 << 20).records.read_bytes()
    assert follower_bytes == leader_bytes


@pytest.mark.asyncio
async def test_a_partition_the_leader_refuses_is_backed_off_alone(
    manager: ReplicaManager, follower: ReplicaManager
) -> None:
    # The follower believes in an epoch the leader has not reached: UNKNOWN_LEADER_EPOCH.
    replicas = (LEADER, FOLLOWER)
    become_leader(manager, T0, STATE, replicas, LogConfig())
    ahead = LeaderAndIsr(LEADER, STATE.leader_epoch + 1, STATE.isr, version=1)
    become_follower(follower, T0, ahead, replicas, LogConfig())
    transport = LoopbackTransport(manager)
    backoff_ms = 60_000
    fetchers = ReplicaFetcherManager(
        follower, transport, FetcherConfig(wait_max_ms=0, backoff_ms=backoff_ms)
    )
    await fetchers.follow(T0, LEADER, ahead.leader_epoch)
    try:
        async with asyncio.timeout(TIMEOUT_S):
            while not transport.requests:
                await asyncio.sleep(0)
        # Within the backoff, the refused partition is not asked for again.
        await asyncio.sleep(0.05)
        assert len(transport.requests) == 1
    finally:
        await fetchers.shutdown()


async def _never_written(_tp: TopicPartition, _state: LeaderAndIsr) -> LeaderAndIsr | None:
    raise AssertionError("no ISR change expected")


@pytest.mark.asyncio
async def test_a_diverged_follower_truncates_to_where_the_logs_part(
    manager: ReplicaManager, follower: ReplicaManager
) -> None:
    replicas = (LEADER, FOLLOWER)
    # Both logs agree on two records of epoch 3; then the follower (a leader once, at
    # epoch 3) took two more that nobody replicated, while the leader went on at epoch 4.
    old = LeaderAndIsr(FOLLOWER, leader_epoch=3, isr=replicas, version=0)
    diverged = become_leader(follower, T0, old, replicas, LogConfig())
    diverged.log.append_as_leader(batch(b"a", b"b"), 3)
    diverged.log.append_as_leader(batch(b"lost-1", b"lost-2"), 3)
    leader_partition = become_leader(manager, T0, STATE, replicas, LogConfig())
    leader_partition.log.append_as_leader(batch(b"a", b"b"), 3)
    newer = LeaderAndIsr(LEADER, leader_epoch=4, isr=replicas, version=1)
    leader_partition = become_leader(manager, T0, newer, replicas, LogConfig())
    leader_partition.log.append_as_leader(batch(b"c", b"d", b"e"), 4)

    become_follower(follower, T0, newer, replicas, LogConfig())
    # Caught up, the follower's fetches park in the leader's purgatory (a fetch
    # answered at once would never let this loop run: the transport does no I/O).
    fetchers = ReplicaFetcherManager(
        follower, LoopbackTransport(manager), FetcherConfig(wait_max_ms=1_000)
    )
    await fetchers.follow(T0, LEADER, newer.leader_epoch)
    try:
        async with asyncio.timeout(TIMEOUT_S):
            while diverged.log.log_end_offset != leader_partition.log.log_end_offset:
                await asyncio.sleep(0.01)
    finally:
        await fetchers.shutdown()
    leader_bytes = leader_partition.log.read(0, 1 << 20).records.read_bytes()
    follower_bytes = diverged.log.read(0, 1 << 20).records.read_bytes()
    assert follower_bytes == leader_bytes
    assert [entry.epoch for entry in diverged.log.leader_epoch_entries] == [3, 4]
