"""DelayedFetch: answer at once when there is enough, else wait for cases A-F or the timeout.

The purgatory runs on the test's event loop, so an event that completes a fetch has
done so by the time the call that caused it returns: the tests check the future right
after the event instead of sleeping.
"""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.replica import ReplicaManager, ReplicaState

from .conftest import T0, T1
from .helpers import fetch, produce
from .records import batch, batch_of_size

SHORT_WAIT_MS = 50


@pytest.mark.asyncio
async def test_enough_bytes_answer_at_once(manager: ReplicaManager) -> None:
    await produce(manager, {T0: batch(b"a", b"b")})
    result = fetch(manager, [(T0, 0)]).result()[T0]
    assert result.error_code == ErrorCode.none
    assert result.high_watermark == 2
    assert result.data is not None
    assert result.data.records.read_bytes()[57:61] == (2).to_bytes(4, "big")
    assert manager.fetch_purgatory.num_delayed == 0


@pytest.mark.asyncio
async def test_case_d_an_append_completes_a_waiting_fetch(manager: ReplicaManager) -> None:
    waiting = fetch(manager, [(T0, 0)])
    assert not waiting.done()
    assert manager.fetch_purgatory.num_delayed == 1
    await produce(manager, {T0: batch(b"hello")})
    assert waiting.done(), "the append itself must complete the fetch"
    result = waiting.result()[T0]
    assert result.size_bytes > 0
    assert result.high_watermark == 1
    assert manager.fetch_purgatory.num_delayed == 0


@pytest.mark.asyncio
async def test_case_d_counts_bytes_across_partitions(manager: ReplicaManager) -> None:
    waiting = fetch(manager, [(T0, 0), (T1, 0)], min_bytes=300)
    await produce(manager, {T0: batch_of_size(200)})
    assert not waiting.done()
    await produce(manager, {T1: batch_of_size(200)})
    assert waiting.done()
    assert all(r.size_bytes > 0 for r in waiting.result().values())


@pytest.mark.asyncio
async def test_case_d_caps_each_partition_at_its_max_bytes(manager: ReplicaManager) -> None:
    waiting = fetch(
        manager, [(T0, 0)], min_bytes=500, partition_max_bytes=100, max_wait_ms=SHORT_WAIT_MS
    )
    await produce(manager, {T0: batch_of_size(600)})
    # 600 bytes arrived, but only 100 count towards min_bytes for this partition.
    assert not waiting.done()
    assert (await waiting)[T0].size_bytes >= 600  # min-one-message on the re-read


@pytest.mark.asyncio
async def test_too_few_bytes_wait_the_full_time_then_return_what_is_there(
    manager: ReplicaManager,
) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    waiting = fetch(manager, [(T0, 0)], min_bytes=10_000, max_wait_ms=SHORT_WAIT_MS)
    await produce(manager, {T0: batch(b"small")})
    assert not waiting.done()
    result = (await waiting)[T0]
    assert loop.time() - started >= SHORT_WAIT_MS / 1000 * 0.9
    assert result.size_bytes > 0, "the expired fetch reads the log again"
    assert manager.fetch_purgatory.expired == 1


@pytest.mark.asyncio
async def test_no_wait_answers_empty_at_once(manager: ReplicaManager) -> None:
    result = fetch(manager, [(T0, 0)], max_wait_ms=0).result()[T0]
    assert result.error_code == ErrorCode.none
    assert result.size_bytes == 0


@pytest.mark.asyncio
async def test_case_a_leadership_moving_away_completes_it(manager: ReplicaManager) -> None:
    waiting = fetch(manager, [(T0, 0)])
    manager.make_follower(T0, leader_id=7, leader_epoch=1)
    assert waiting.result()[T0].error_code == ErrorCode.not_leader_or_follower


@pytest.mark.asyncio
async def test_case_b_a_deleted_partition_completes_it(manager: ReplicaManager) -> None:
    waiting = fetch(manager, [(T0, 0)])
    manager.delete_partitions([T0])
    assert waiting.result()[T0].error_code == ErrorCode.unknown_topic_or_partition


@pytest.mark.asyncio
async def test_case_c_a_new_segment_completes_it_whatever_min_bytes(
    manager: ReplicaManager,
) -> None:
    await produce(manager, {T0: batch(b"first")})
    waiting = fetch(manager, [(T0, 1)], min_bytes=1_000_000)
    partition = manager.get_partition(T0)
    assert partition is not None
    partition.log.roll()
    # A roll with no new data leaves the HW at the fetch offset: not case C.
    assert not waiting.done()
    await produce(manager, {T0: batch(b"on the new segment")})
    assert waiting.done(), "the fetch position is now on an older segment than the HW"
    assert waiting.result()[T0].size_bytes > 0


@pytest.mark.asyncio
async def test_case_e_an_offline_partition_completes_it(manager: ReplicaManager) -> None:
    waiting = fetch(manager, [(T0, 0)])
    manager.mark_offline(T0)
    assert waiting.done()


@pytest.mark.asyncio
async def test_case_f_a_fenced_leader_epoch_completes_it(manager: ReplicaManager) -> None:
    waiting = fetch(manager, [(T0, 0)], leader_epoch=0)
    manager.bump_leader_epoch(T0)
    assert waiting.result()[T0].error_code == ErrorCode.fenced_leader_epoch


@pytest.mark.asyncio
async def test_consumers_read_below_the_hw_followers_up_to_the_leo(
    manager: ReplicaManager,
) -> None:
    partition = manager.get_partition(T0)
    assert partition is not None
    follower = 1
    partition.remote_replicas[follower] = ReplicaState(follower, log_end_offset=0)
    partition.isr.add(follower)
    await produce(manager, {T0: batch(b"x")})
    assert partition.log.log_end_offset == 1
    assert partition.log.high_watermark == 0, "the follower has not fetched yet"
    consumer = fetch(manager, [(T0, 0)])
    assert not consumer.done()
    from_follower = fetch(manager, [(T0, 0)], replica_id=follower).result()[T0]
    assert from_follower.size_bytes > 0
    assert not consumer.done()
    # The follower's next fetch, from offset 1, tells the leader it has the record.
    fetch(manager, [(T0, 1)], replica_id=follower, max_wait_ms=0)
    assert partition.log.high_watermark == 1
    assert consumer.done(), "the HW move completes the consumer's fetch"
    assert consumer.result()[T0].size_bytes > 0


@pytest.mark.asyncio
async def test_appends_of_one_loop_turn_reach_a_waiting_follower_in_one_answer(
    manager: ReplicaManager,
) -> None:
    """Piped produces read together are appended in one turn of the loop: the parked
    follower fetch is completed after the last of them, not at the first (which would
    leave the others to the follower's next fetch, a round trip later)."""
    partition = manager.get_partition(T0)
    assert partition is not None
    follower = 1
    partition.remote_replicas[follower] = ReplicaState(follower, log_end_offset=0)
    partition.isr.add(follower)
    waiting = fetch(manager, [(T0, 0)], replica_id=follower)
    assert not waiting.done()
    first, second = batch(b"a"), batch(b"b")
    produce(manager, {T0: first})
    produce(manager, {T0: second})
    result = (await waiting)[T0]
    assert result.size_bytes == len(first) + len(second)
    assert manager.fetch_purgatory.num_delayed == 0
