"""DelayedProduce: acks=all waits in the Produce purgatory until the ISR has the records."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.replica import Partition, ReplicaManager, ReplicaState, TopicPartition

from .conftest import T0, T1
from .helpers import fetch, produce
from .records import batch

FOLLOWER = 1
SHORT_TIMEOUT_MS = 50


def add_follower(manager: ReplicaManager) -> Partition:
    """Put a follower, at offset 0, into T0's ISR: the HW now waits for it."""
    partition = manager.get_partition(T0)
    assert partition is not None
    partition.remote_replicas[FOLLOWER] = ReplicaState(FOLLOWER, log_end_offset=0)
    partition.isr.add(FOLLOWER)
    return partition


@pytest.mark.asyncio
async def test_acks_all_on_one_replica_completes_on_its_first_check(
    manager: ReplicaManager,
) -> None:
    result = (await produce(manager, {T0: batch(b"a")}, acks=-1))[T0]
    assert (result.error_code, result.base_offset) == (ErrorCode.none, 0)


@pytest.mark.asyncio
async def test_case_c2_acks_all_waits_for_the_follower_then_answers(
    manager: ReplicaManager,
) -> None:
    add_follower(manager)
    waiting = produce(manager, {T0: batch(b"a", b"b")}, acks=-1)
    assert not waiting.done()
    assert manager.produce_purgatory.num_delayed == 1
    fetch(manager, [(T0, 1)], replica_id=FOLLOWER, max_wait_ms=0)
    assert not waiting.done(), "the follower has offset 0 only; 2 is required"
    fetch(manager, [(T0, 2)], replica_id=FOLLOWER, max_wait_ms=0)
    assert waiting.done()
    result = waiting.result()[T0]
    assert (result.error_code, result.base_offset) == (ErrorCode.none, 0)


@pytest.mark.asyncio
async def test_one_operation_answers_all_partitions_of_the_request(
    manager: ReplicaManager,
) -> None:
    add_follower(manager)
    waiting = produce(manager, {T0: batch(b"a"), T1: batch(b"b")}, acks=-1)
    assert not waiting.done(), "T0 waits for the follower even though T1 is done"
    fetch(manager, [(T0, 1)], replica_id=FOLLOWER, max_wait_ms=0)
    results = waiting.result()
    assert {tp: r.error_code for tp, r in results.items()} == {
        T0: ErrorCode.none,
        T1: ErrorCode.none,
    }


@pytest.mark.asyncio
async def test_a_timeout_answers_request_timed_out_for_pending_partitions(
    manager: ReplicaManager,
) -> None:
    add_follower(manager)
    results = await produce(
        manager, {T0: batch(b"a"), T1: batch(b"b")}, acks=-1, timeout_ms=SHORT_TIMEOUT_MS
    )
    assert results[T0].error_code == ErrorCode.request_timed_out
    assert results[T1].error_code == ErrorCode.none
    assert manager.produce_purgatory.expired == 1


@pytest.mark.asyncio
async def test_case_a_a_deleted_partition_answers_unknown(manager: ReplicaManager) -> None:
    add_follower(manager)
    waiting = produce(manager, {T0: batch(b"a")}, acks=-1)
    manager.delete_partitions([T0])
    assert waiting.result()[T0].error_code == ErrorCode.unknown_topic_or_partition


@pytest.mark.asyncio
async def test_case_b_losing_leadership_answers_not_leader(manager: ReplicaManager) -> None:
    add_follower(manager)
    waiting = produce(manager, {T0: batch(b"a")}, acks=-1)
    manager.make_follower(T0, leader_id=FOLLOWER, leader_epoch=1)
    assert waiting.result()[T0].error_code == ErrorCode.not_leader_or_follower


@pytest.mark.asyncio
async def test_case_c1_too_small_an_isr_is_an_error(manager: ReplicaManager) -> None:
    partition = manager.get_partition(T0)
    assert partition is not None
    partition.min_insync_replicas = 2
    result = (await produce(manager, {T0: batch(b"a")}, acks=-1))[T0]
    assert result.error_code == ErrorCode.not_enough_replicas
    result = (await produce(manager, {T0: batch(b"a")}, acks=1))[T0]
    assert result.error_code == ErrorCode.none, "acks=1 ignores min.insync.replicas"


@pytest.mark.asyncio
async def test_acks_1_never_enters_the_purgatory(manager: ReplicaManager) -> None:
    add_follower(manager)
    result = produce(manager, {T0: batch(b"a")}, acks=1).result()[T0]
    assert result.error_code == ErrorCode.none
    assert manager.produce_purgatory.watched == 0


@pytest.mark.asyncio
async def test_invalid_acks_are_refused(manager: ReplicaManager) -> None:
    result = produce(manager, {T0: batch(b"a")}, acks=2).result()[T0]
    assert result.error_code == ErrorCode.invalid_required_acks


@pytest.mark.asyncio
async def test_unknown_partitions_and_bad_batches_answer_errors(
    manager: ReplicaManager,
) -> None:
    unknown = TopicPartition("nope", 0)
    results = produce(manager, {unknown: batch(b"a"), T0: b"garbage"}).result()
    assert results[unknown].error_code == ErrorCode.unknown_topic_or_partition
    assert results[T0].error_code in {ErrorCode.corrupt_message, ErrorCode.invalid_record}


@pytest.mark.asyncio
async def test_an_isr_below_min_isr_holds_the_high_watermark(manager: ReplicaManager) -> None:
    partition = add_follower(manager)
    partition.assigned_replicas = (partition.local_broker_id, FOLLOWER)
    partition.isr.discard(FOLLOWER)
    partition.min_insync_replicas = 2
    assert (await produce(manager, {T0: batch(b"a")}, acks=1))[T0].error_code == ErrorCode.none
    assert partition.log.high_watermark == 0, "strict min ISR: nothing is committed alone"
    partition.isr.add(FOLLOWER)
    fetch(manager, [(T0, 1)], replica_id=FOLLOWER, max_wait_ms=0)
    assert partition.log.high_watermark == 1
    # min.insync.replicas above the replica count is capped at it.
    partition.assigned_replicas = (partition.local_broker_id,)
    partition.isr.discard(FOLLOWER)
    partition.min_insync_replicas = 3
    await produce(manager, {T0: batch(b"b")}, acks=1)
    assert partition.log.high_watermark == 2
