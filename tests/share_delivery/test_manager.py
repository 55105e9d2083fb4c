"""SharePartitionManager and DelayedShareFetch on a real log and a manual clock.

The completion cases of a waiting ShareFetch (an append moving the high watermark, a
release, a lock expiry, the timeout, a partition gone), and the state written through
the persister before an acknowledgement returns.
"""

from __future__ import annotations

import asyncio
import struct

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.record import SimpleRecord, build_batch, build_end_txn_marker
from tickwheel.share_delivery import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    PersisterError,
    RecordState,
    ShareFetchPartitionResult,
    ShareGroupState,
    SharePartitionKey,
    aborted_batches,
    record_batches,
)

from .conftest import KEY, LOCK_MS, TP, Shares
from .persister import InMemoryPersister

WAIT_MS = 5_000


def fetch(
    shares: Shares,
    member: str,
    *,
    max_wait_ms: int = WAIT_MS,
    max_records: int = 100,
    max_bytes: int = 1 << 20,
) -> asyncio.Task[dict[SharePartitionKey, ShareFetchPartitionResult]]:
    return asyncio.create_task(
        shares.manager.fetch(
            "g",
            member,
            [KEY],
            max_wait_ms=max_wait_ms,
            max_records=max_records,
            max_bytes=max_bytes,
        )
    )


async def settle(task: asyncio.Task[object]) -> None:
    """Let ``task`` run until it waits on something outside the loop's ready queue."""
    for _ in range(5):
        await asyncio.sleep(0)


async def ack(shares: Shares, member: str, first: int, last: int, kind: AcknowledgeType) -> None:
    errors = await shares.manager.acknowledge(
        "g", member, {KEY: [AcknowledgementBatch(first, last, (int(kind),))]}
    )
    assert errors == {KEY: ErrorCode.none}


@pytest.mark.asyncio
async def test_a_new_group_starts_at_the_high_watermark_and_an_append_wakes_it(
    shares: Shares,
) -> None:
    await shares.produce(b"old")
    waiting = fetch(shares, "a")
    await settle(waiting)
    assert not waiting.done()
    assert shares.manager.purgatory.watched == 1
    await shares.produce(b"x", b"y")
    result = (await waiting)[KEY]
    assert result.acquired == [AcquiredRecords(1, 2, 1)]
    assert result.records is not None
    assert [(first, last) for first, last, _, _ in record_batches(result.records)] == [(1, 2)]


@pytest.mark.asyncio
async def test_earliest_starts_at_the_log_start(shares: Shares) -> None:
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    await shares.produce(b"old")
    result = (await fetch(shares, "a"))[KEY]
    assert result.acquired == [AcquiredRecords(0, 0, 1)]


@pytest.mark.asyncio
async def test_by_duration_starts_at_the_first_record_that_recent(shares: Shares) -> None:
    await shares.produce(b"old")
    log = shares.replica_manager.get_partition(TP).log  # type: ignore[union-attr]
    newest = log.offset_for_timestamp(-3)
    assert newest is not None
    shares.manager.shutdown()
    shares.manager = shares.new_manager(clock_ms=lambda: newest.timestamp + 60_000)
    shares.group_configs["share.auto.offset.reset"] = "by_duration:PT2M"
    assert (await shares.manager.share_partition(KEY)).start_offset == 0  # type: ignore[union-attr]
    # Another group, for which the record is too old: it starts at the end.
    shares.group_configs["share.auto.offset.reset"] = "by_duration:PT30S"
    other = SharePartitionKey("other", KEY.topic_id, KEY.partition)
    assert (await shares.manager.share_partition(other)).start_offset == 1  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_a_release_wakes_a_waiting_fetch_with_delivery_count_two(shares: Shares) -> None:
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    await shares.produce(b"m")
    first = (await fetch(shares, "a"))[KEY]
    assert first.acquired == [AcquiredRecords(0, 0, 1)]
    waiting = fetch(shares, "b")
    await settle(waiting)
    assert not waiting.done()
    await ack(shares, "a", 0, 0, AcknowledgeType.RELEASE)
    assert (await waiting)[KEY].acquired == [AcquiredRecords(0, 0, 2)]


@pytest.mark.asyncio
async def test_a_lock_expiry_wakes_a_waiting_fetch(shares: Shares) -> None:
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    await shares.produce(b"m", b"n")
    await fetch(shares, "a")
    waiting = fetch(shares, "b")
    await settle(waiting)
    await shares.advance(LOCK_MS - 1)
    assert not waiting.done()
    await shares.advance(1)
    assert (await waiting)[KEY].acquired == [AcquiredRecords(0, 1, 2)]


@pytest.mark.asyncio
async def test_the_timeout_answers_with_nothing(shares: Shares) -> None:
    waiting = fetch(shares, "a")
    await settle(waiting)
    await shares.advance(WAIT_MS)
    assert (await waiting)[KEY] == ShareFetchPartitionResult()
    assert shares.manager.purgatory.expired == 1


@pytest.mark.asyncio
async def test_a_deleted_partition_completes_the_wait_with_its_error(shares: Shares) -> None:
    waiting = fetch(shares, "a")
    await settle(waiting)
    shares.replica_manager.delete_partitions([TP])
    shares.manager.on_high_watermark(TP)
    assert (await waiting)[KEY].error_code == ErrorCode.unknown_topic_or_partition


@pytest.mark.asyncio
async def test_max_records_takes_whole_batches(shares: Shares) -> None:
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    await shares.produce(b"1", b"2", b"3")
    await shares.produce(b"4", b"5")
    result = (await fetch(shares, "a", max_records=2))[KEY]
    assert result.acquired == [AcquiredRecords(0, 2, 1)]
    rest = (await fetch(shares, "b", max_records=2))[KEY]
    assert rest.acquired == [AcquiredRecords(3, 4, 1)]


@pytest.mark.asyncio
async def test_acknowledged_state_is_written_before_the_answer_and_survives_a_reload(
    shares: Shares,
) -> None:
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    await shares.produce(b"a", b"b", b"c", b"d")
    await fetch(shares, "m")
    await ack(shares, "m", 0, 1, AcknowledgeType.ACCEPT)
    await ack(shares, "m", 2, 2, AcknowledgeType.REJECT)
    stored = shares.persister.states[KEY]
    assert stored.start_offset == 3
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in stored.state_batches] == [
        (3, 3, RecordState.AVAILABLE)
    ]
    # A restart: a new manager reads the state; only the unacknowledged record returns.
    shares.manager.shutdown()
    shares.manager = shares.new_manager()
    again = (await fetch(shares, "m2"))[KEY]
    assert again.acquired == [AcquiredRecords(3, 3, 2)]


@pytest.mark.asyncio
async def test_acknowledging_records_not_held_is_invalid_record_state(shares: Shares) -> None:
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    await shares.produce(b"a")
    await fetch(shares, "m")
    errors = await shares.manager.acknowledge(
        "g", "other", {KEY: [AcknowledgementBatch(0, 0, (1,))]}
    )
    assert errors == {KEY: ErrorCode.invalid_record_state}


@pytest.mark.asyncio
async def test_releasing_a_member_gives_its_records_to_a_waiting_fetch(shares: Shares) -> None:
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    await shares.produce(b"a")
    await fetch(shares, "m")
    waiting = fetch(shares, "n")
    await settle(waiting)
    shares.manager.member_left("g", "m", expired=True)
    assert (await waiting)[KEY].acquired == [AcquiredRecords(0, 0, 2)]


@pytest.mark.asyncio
async def test_a_member_that_leaves_gets_its_waiting_fetch_answered_empty(
    shares: Shares,
) -> None:
    waiting = fetch(shares, "a")
    await settle(waiting)
    shares.manager.member_left("g", "a", expired=False)
    assert (await waiting)[KEY] == ShareFetchPartitionResult()
    await shares.produce(b"later")
    assert shares.manager.get(KEY) is not None
    assert shares.manager.get(KEY).in_flight == 0  # type: ignore[union-attr]


class FailingPersister(InMemoryPersister):
    async def write_state(self, key: SharePartitionKey, state: ShareGroupState) -> None:
        if state.start_offset > 0:
            raise PersisterError(ErrorCode.coordinator_not_available)
        await super().write_state(key, state)


@pytest.mark.asyncio
async def test_a_failed_write_is_the_acknowledgement_s_error(shares: Shares) -> None:
    shares.persister = FailingPersister()
    shares.manager = shares.new_manager()
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    await shares.produce(b"a")
    await fetch(shares, "m")
    errors = await shares.manager.acknowledge(
        "g", "m", {KEY: [AcknowledgementBatch(0, 0, (int(AcknowledgeType.ACCEPT),))]}
    )
    assert errors == {KEY: ErrorCode.coordinator_not_available}


class FencingPersister(InMemoryPersister):
    """A share coordinator whose state was reset by an administrator: every write of
    the old state epoch is fenced, and a read gives the new state."""

    def __init__(self) -> None:
        super().__init__()
        self.fence = False

    async def write_state(self, key: SharePartitionKey, state: ShareGroupState) -> None:
        if self.fence and state.state_epoch < self.states[key].state_epoch:
            raise PersisterError(ErrorCode.fenced_state_epoch)
        await super().write_state(key, state)


@pytest.mark.asyncio
async def test_a_fenced_write_drops_the_share_partition_and_the_next_use_reloads_it(
    shares: Shares,
) -> None:
    persister = FencingPersister()
    shares.persister = persister
    shares.manager = shares.new_manager()
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    await shares.produce(b"a", b"b", b"c")
    await fetch(shares, "m")
    persister.fence = True
    persister.states[KEY] = ShareGroupState(
        state_epoch=1, leader_epoch=0, start_offset=2, state_batches=()
    )
    errors = await shares.manager.acknowledge(
        "g", "m", {KEY: [AcknowledgementBatch(0, 0, (int(AcknowledgeType.ACCEPT),))]}
    )
    assert errors == {KEY: ErrorCode.fenced_state_epoch}
    assert shares.manager.get(KEY) is None
    reloaded = (await fetch(shares, "m"))[KEY]
    assert reloaded.acquired == [AcquiredRecords(2, 2, 1)]


@pytest.mark.asyncio
async def test_a_new_leader_epoch_reloads_the_share_partition(shares: Shares) -> None:
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    await shares.produce(b"a", b"b")
    await fetch(shares, "m")
    await ack(shares, "m", 0, 0, AcknowledgeType.ACCEPT)
    before = shares.manager.get(KEY)
    assert before is not None
    # Another broker led the partition meanwhile and settled record 1 there.
    shares.persister.states[KEY] = ShareGroupState(0, before.leader_epoch + 1, 2, ())
    shares.replica_manager.bump_leader_epoch(TP)
    await shares.produce(b"c")
    after = (await fetch(shares, "m"))[KEY]
    assert after.acquired == [AcquiredRecords(2, 2, 1)]
    reloaded = shares.manager.get(KEY)
    assert reloaded is not before
    assert reloaded is not None
    assert reloaded.leader_epoch == before.leader_epoch + 1


@pytest.mark.asyncio
async def test_a_backlog_is_read_a_chunk_at_a_time(
    shares: Shares, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tickwheel.share_delivery._manager.READ_CHUNK_BYTES", 200)
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    for n in range(10):
        await shares.produce(str(n).encode() * 100)  # one batch of about 170 bytes each
    result = (await fetch(shares, "a", max_records=4))[KEY]
    assert result.acquired == [AcquiredRecords(n, n, 1) for n in range(4)]
    assert result.records is not None
    assert [first for first, _, _, _ in record_batches(result.records)] == [0, 1, 2, 3]


@pytest.mark.asyncio
async def test_only_the_first_batch_may_pass_max_bytes(
    shares: Shares, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tickwheel.share_delivery._manager.FIRST_READ_BYTES", 200)
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    for n in range(6):
        await shares.produce(str(n).encode() * 100)  # one batch of about 170 bytes each
    sizes = [end - start for _, _, start, end in record_batches(await read_log(shares))]
    # The first read (one chunk) holds one batch, the second read two more of the three
    # that remain below max bytes; the fourth batch would pass it.
    max_bytes = sum(sizes[:3]) + sizes[3] // 2
    result = (await fetch(shares, "a", max_bytes=max_bytes))[KEY]
    assert result.records is not None
    assert len(result.records) == sum(sizes[:3])
    assert result.acquired == [AcquiredRecords(0, 0, 1), AcquiredRecords(1, 2, 1)]
    larger = (await fetch(shares, "b", max_bytes=sizes[3] // 2))[KEY]
    assert larger.records is not None
    assert len(larger.records) == sizes[3]
    assert larger.acquired == [AcquiredRecords(3, 3, 1)]


@pytest.mark.asyncio
async def test_a_batch_larger_than_a_read_chunk_still_joins_the_answer(
    shares: Shares, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tickwheel.share_delivery._manager.FIRST_READ_BYTES", 200)
    monkeypatch.setattr("tickwheel.share_delivery._manager.READ_CHUNK_BYTES", 200)
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    await shares.produce(b"small")
    await shares.produce(b"x" * 600)
    result = (await fetch(shares, "a", max_bytes=2_000))[KEY]
    assert result.acquired == [AcquiredRecords(0, 0, 1), AcquiredRecords(1, 1, 1)]


async def read_log(shares: Shares) -> bytes:
    replica = shares.replica_manager.get_partition(TP)
    assert replica is not None
    return replica.log.read(0, 1 << 20).records.read_bytes()


@pytest.mark.asyncio
async def test_records_deleted_from_the_log_are_skipped(shares: Shares) -> None:
    shares.group_configs["share.auto.offset.reset"] = "earliest"
    await shares.produce(b"a", b"b")
    await fetch(shares, "m")
    await ack(shares, "m", 0, 1, AcknowledgeType.RELEASE)
    await shares.produce(b"c")
    replica = shares.replica_manager.get_partition(TP)
    assert replica is not None
    replica.log.delete_records_before(2)
    result = (await fetch(shares, "n"))[KEY]
    assert result.acquired == [AcquiredRecords(2, 2, 1)]


def stored_batch(base_offset: int, count: int, producer_id: int = -1, **kind: bool) -> bytes:
    """A batch of ``count`` records as the log stores it at ``base_offset``."""
    records = [SimpleRecord(None, b"v", 0) for _ in range(count)]
    built = build_batch(records, producer_id=producer_id, producer_epoch=0, **kind)
    return at_offset(base_offset, built)


def at_offset(base_offset: int, batch: bytes) -> bytes:
    return struct.pack(">q", base_offset) + batch[8:]


def test_aborted_batches_are_the_data_batches_of_an_aborted_transaction() -> None:
    log = b"".join(
        (
            stored_batch(0, 2, producer_id=1, transactional=True),  # aborted below
            stored_batch(2, 1, producer_id=2, transactional=True),  # committed
            at_offset(3, build_end_txn_marker(2, 0, 0, commit=True, timestamp_ms=0)),
            at_offset(4, build_end_txn_marker(1, 0, 0, commit=False, timestamp_ms=0)),
            stored_batch(5, 1, producer_id=1, transactional=True),  # a later transaction
            stored_batch(6, 1),  # not transactional
        )
    )
    assert aborted_batches(log, [(1, 0)]) == {0}
    assert aborted_batches(log, [(1, 5), (1, 0)]) == {0, 5}
    assert aborted_batches(log, [(2, 2)]) == {2}  # a COMMIT marker does not end it
    assert aborted_batches(log, []) == set()
