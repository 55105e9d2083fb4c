"""ReplicaManager: reads within byte limits, DeleteRecords, and logs that survive a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.log import LogConfig
from tickwheel.replica import (
    DeleteRecordsPartitionResult,
    ProducePartitionResult,
    ReplicaManager,
    TopicPartition,
)

from .conftest import BROKER_ID, T0, T1
from .helpers import fetch, produce
from .records import batch, batch_of_size


def delete_records(
    manager: ReplicaManager, offsets: dict[TopicPartition, int]
) -> dict[TopicPartition, DeleteRecordsPartitionResult]:
    answers: list[dict[TopicPartition, DeleteRecordsPartitionResult]] = []
    manager.delete_records(1000, offsets, answers.append)
    (answer,) = answers
    return answer


@pytest.mark.asyncio
async def test_the_first_partition_returns_a_batch_larger_than_max_bytes(
    manager: ReplicaManager,
) -> None:
    await produce(manager, {T0: batch_of_size(500), T1: batch_of_size(500)})
    results = fetch(manager, [(T0, 0), (T1, 0)], max_bytes=100, max_wait_ms=0).result()
    assert results[T0].size_bytes >= 500, "min-one-message: the consumer must not stall"
    assert results[T1].size_bytes == 0, "the request's max bytes are used up"


@pytest.mark.asyncio
async def test_fetching_past_the_log_end_is_offset_out_of_range(manager: ReplicaManager) -> None:
    result = fetch(manager, [(T0, 5)]).result()[T0]
    assert result.error_code == ErrorCode.offset_out_of_range


@pytest.mark.asyncio
async def test_delete_records_moves_the_log_start(manager: ReplicaManager) -> None:
    await produce(manager, {T0: batch(b"a", b"b", b"c")})
    answer = delete_records(manager, {T0: 2})
    assert answer[T0] == DeleteRecordsPartitionResult(ErrorCode.none, 2)
    assert fetch(manager, [(T0, 0)]).result()[T0].error_code == ErrorCode.offset_out_of_range
    assert fetch(manager, [(T0, 2)]).result()[T0].log_start_offset == 2


@pytest.mark.asyncio
async def test_delete_records_minus_one_means_the_high_watermark(
    manager: ReplicaManager,
) -> None:
    await produce(manager, {T0: batch(b"a", b"b")})
    assert delete_records(manager, {T0: -1})[T0].low_watermark == 2


@pytest.mark.asyncio
async def test_delete_records_errors(manager: ReplicaManager) -> None:
    answer = delete_records(manager, {T0: 10, TopicPartition("x", 0): 0})
    assert answer[T0].error_code == ErrorCode.offset_out_of_range
    assert answer[TopicPartition("x", 0)].error_code == ErrorCode.unknown_topic_or_partition


@pytest.mark.asyncio
async def test_logs_are_recovered_by_a_new_manager(tmp_path: Path) -> None:
    first = ReplicaManager(BROKER_ID, [tmp_path])
    first.start()
    first.make_leader(T0, LogConfig())
    await produce(first, {T0: batch(b"a", b"b")})
    first.shutdown()
    second = ReplicaManager(BROKER_ID, [tmp_path])
    second.start()
    try:
        assert second.log_manager.existing_partitions() == [T0]
        partition = second.make_leader(T0, LogConfig())
        assert partition.log.log_end_offset == 2
        assert partition.log.high_watermark == 2
    finally:
        second.shutdown()


@pytest.mark.asyncio
async def test_deleted_partitions_lose_their_directory(
    manager: ReplicaManager, tmp_path: Path
) -> None:
    assert (tmp_path / "t-0").is_dir()
    manager.delete_partitions([T0])
    assert not (tmp_path / "t-0").exists()
    assert manager.get_partition(T0) is None


@pytest.mark.asyncio
async def test_only_the_broker_itself_writes_or_trims_internal_topics(
    manager: ReplicaManager,
) -> None:
    offsets = TopicPartition("__consumer_offsets", 0)
    manager.make_leader(offsets, LogConfig())
    refused = await produce(manager, {offsets: batch(b"garbage"), T0: batch(b"a")}, acks=-1)
    assert refused[offsets].error_code == ErrorCode.invalid_topic_exception
    assert refused[T0].error_code == ErrorCode.none
    hosted = manager.get_partition(offsets)
    assert hosted is not None
    assert hosted.log.log_end_offset == 0
    allowed: asyncio.Future[dict[TopicPartition, ProducePartitionResult]] = (
        asyncio.get_running_loop().create_future()
    )
    manager.append_records(
        1000, -1, {offsets: batch(b"commit")}, allowed.set_result, internal_topics_allowed=True
    )
    assert (await allowed)[offsets].error_code == ErrorCode.none
    assert delete_records(manager, {offsets: 1})[offsets].error_code == (
        ErrorCode.invalid_topic_exception
    )
