"""Calls into the ReplicaManager that hand back a future for the callback's value."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from tickwheel.replica import (
    CONSUMER_REPLICA_ID,
    FetchIsolation,
    FetchParams,
    FetchPartitionResult,
    PartitionFetchInfo,
    ProducePartitionResult,
    ReplicaManager,
    TopicPartition,
)

MAX_BYTES = 1 << 20


def produce(
    manager: ReplicaManager,
    entries: Mapping[TopicPartition, bytes],
    *,
    acks: int = 1,
    timeout_ms: int = 30_000,
) -> asyncio.Future[dict[TopicPartition, ProducePartitionResult]]:
    future: asyncio.Future[dict[TopicPartition, ProducePartitionResult]] = (
        asyncio.get_running_loop().create_future()
    )
    manager.append_records(timeout_ms, acks, entries, future.set_result)
    return future


def fetch(
    manager: ReplicaManager,
    offsets: Sequence[tuple[TopicPartition, int]],
    *,
    min_bytes: int = 1,
    max_wait_ms: int = 30_000,
    replica_id: int = CONSUMER_REPLICA_ID,
    max_bytes: int = MAX_BYTES,
    partition_max_bytes: int = MAX_BYTES,
    leader_epoch: int = -1,
) -> asyncio.Future[dict[TopicPartition, FetchPartitionResult]]:
    future: asyncio.Future[dict[TopicPartition, FetchPartitionResult]] = (
        asyncio.get_running_loop().create_future()
    )
    params = FetchParams(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation=FetchIsolation.of(replica_id, 0),
    )
    infos = [
        (tp, PartitionFetchInfo(offset, partition_max_bytes, leader_epoch))
        for tp, offset in offsets
    ]
    manager.fetch_messages(params, infos, future.set_result)
    return future
