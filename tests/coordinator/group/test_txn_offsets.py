"""Transactional offset commits in the group coordinator (TxnOffsetCommit, KIP-98/447).

A transactional producer's offsets wait in their group per producer id until the
transaction's marker is appended to the group's ``__consumer_offsets`` partition; the
marker reaches ``on_transaction_completed`` (here called by hand where a broker's marker
append would). A commit materialises them only over offsets appended before them, an
abort drops them; the loader replays the same rules from hand-built transactional
batches and control batches.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from tickwheel.coordinator import partition_for
from tickwheel.coordinator._batches import build_batch
from tickwheel.coordinator.group import OFFSETS_TOPIC, FetchedOffset, GroupState, OffsetValue
from tickwheel.coordinator.group._records import (
    OffsetKey,
    encode_offset_key,
    encode_offset_value,
    read_record_batches,
)
from tickwheel.log import ControlType, EndTxnMarker, parse_end_txn_marker, write_varint
from tickwheel.replica import TopicPartition

from .harness import INITIAL_DELAY_MS, Harness, MemoryOffsetsLog, make_config

GROUP = "txn-group"
TOPIC = "input"
TP = (TOPIC, 0)
PRODUCER = 4000
EPOCH = 3
RETENTION_MS = 60_000
UNSTABLE = FetchedOffset(-1, -1, "", ErrorCode.unstable_offset_commit)
NOTHING = FetchedOffset(-1, -1, "")


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness(make_config(offsets_retention_ms=RETENTION_MS))
    yield h
    h.close()


def value(offset: int, timestamp_ms: int = 1_000) -> OffsetValue:
    return OffsetValue(offset, -1, "", timestamp_ms)


def txn_commit(
    harness: Harness,
    offsets: dict[tuple[str, int], OffsetValue],
    *,
    producer_id: int = PRODUCER,
    member_id: str = "",
    instance_id: str | None = None,
    generation_id: int = -1,
    group_id: str = GROUP,
) -> dict[tuple[str, int], ErrorCode]:
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    harness.coordinator.handle_txn_commit_offsets(
        group_id,
        producer_id,
        EPOCH,
        member_id,
        instance_id,
        generation_id,
        offsets,
        answers.append,
    )
    assert len(answers) == 1
    return answers[0]


def commit(harness: Harness, offsets: dict[tuple[str, int], OffsetValue]) -> None:
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    harness.coordinator.handle_commit_offsets(GROUP, "", None, -1, offsets, answers.append)
    assert answers == [dict.fromkeys(offsets, ErrorCode.none)]


def fetch(harness: Harness, *, stable: bool = False, group_id: str = GROUP) -> FetchedOffset:
    error, fetched = harness.coordinator.handle_fetch_offsets(group_id, [TP], require_stable=stable)
    assert error is ErrorCode.none
    return fetched[TP]


def complete(
    harness: Harness, committed: bool, producer_id: int = PRODUCER, group_id: str = GROUP
) -> None:
    partition = harness.coordinator.partition_for(group_id)
    harness.coordinator.on_transaction_completed(
        producer_id, [TopicPartition(OFFSETS_TOPIC, partition)], committed
    )


def reload(harness: Harness) -> Harness:
    return Harness(harness.config, harness.offsets_log)


# --- pending, commit, abort --------------------------------------------------------------


def test_txn_offsets_wait_for_the_commit_marker(harness: Harness) -> None:
    assert txn_commit(harness, {TP: value(42)}) == {TP: ErrorCode.none}
    assert fetch(harness) == NOTHING
    assert fetch(harness, stable=True) == UNSTABLE
    complete(harness, committed=True)
    assert fetch(harness) == FetchedOffset(42, -1, "")
    assert fetch(harness, stable=True) == FetchedOffset(42, -1, "")
    assert harness.manager.open_groups_for_producer(PRODUCER) == frozenset()


def test_abort_marker_drops_them_and_keeps_the_committed_offset(harness: Harness) -> None:
    commit(harness, {TP: value(10)})
    txn_commit(harness, {TP: value(42)})
    assert fetch(harness) == FetchedOffset(10, -1, "")
    complete(harness, committed=False)
    assert fetch(harness, stable=True) == FetchedOffset(10, -1, "")
    assert harness.group(GROUP).pending_txn_offsets == {}


def test_a_plain_commit_appended_later_wins_over_the_transaction(harness: Harness) -> None:
    txn_commit(harness, {TP: value(42)})
    commit(harness, {TP: value(7)})  # appended after the transactional batch
    complete(harness, committed=True)
    assert fetch(harness) == FetchedOffset(7, -1, "")


def test_the_transaction_wins_over_a_plain_commit_appended_before(harness: Harness) -> None:
    commit(harness, {TP: value(7)})
    txn_commit(harness, {TP: value(42)})
    complete(harness, committed=True)
    assert fetch(harness) == FetchedOffset(42, -1, "")


def test_only_the_markers_partitions_and_producer_complete(harness: Harness) -> None:
    txn_commit(harness, {TP: value(42)})
    other = (harness.coordinator.partition_for(GROUP) + 1) % 4
    harness.coordinator.on_transaction_completed(
        PRODUCER, [TopicPartition(OFFSETS_TOPIC, other), TopicPartition("data", 0)], True
    )
    complete(harness, committed=True, producer_id=PRODUCER + 1)
    assert fetch(harness, stable=True) == UNSTABLE
    complete(harness, committed=True)
    assert fetch(harness) == FetchedOffset(42, -1, "")


def test_producers_are_kept_apart(harness: Harness) -> None:
    second = (TOPIC, 1)
    txn_commit(harness, {TP: value(1)})
    txn_commit(harness, {second: value(2)}, producer_id=PRODUCER + 1)
    complete(harness, committed=False)
    _, fetched = harness.coordinator.handle_fetch_offsets(GROUP, [TP, second], require_stable=True)
    assert fetched == {TP: NOTHING, second: UNSTABLE}
    complete(harness, committed=True, producer_id=PRODUCER + 1)
    _, fetched = harness.coordinator.handle_fetch_offsets(GROUP, [TP, second])
    assert fetched == {TP: NOTHING, second: FetchedOffset(2, -1, "")}


def test_the_batch_is_transactional_with_the_producer_and_sequence_0(harness: Harness) -> None:
    txn_commit(harness, {TP: value(42)})
    partition = harness.coordinator.partition_for(GROUP)
    (raw,) = harness.offsets_log.batches[partition]
    attributes, _, _, _, producer_id, producer_epoch, base_sequence = struct.unpack_from(
        ">hiqqqhi", raw, 21
    )
    assert attributes == 0x10  # transactional, not control, no compression
    assert (producer_id, producer_epoch, base_sequence) == (PRODUCER, EPOCH, 0)
    (batch,) = read_record_batches(raw)
    assert batch.is_transactional
    assert batch.producer_id == PRODUCER
    assert batch.records[0].key == OffsetKey(GROUP, TOPIC, 0)


def test_a_pending_plain_commit_is_unstable_too(harness: Harness) -> None:
    harness.offsets_log.hold = True
    harness.coordinator.handle_commit_offsets(GROUP, "", None, -1, {TP: value(5)}, [].append)
    assert fetch(harness, stable=True) == UNSTABLE
    harness.offsets_log.release_held()
    assert fetch(harness, stable=True) == FetchedOffset(5, -1, "")


# --- validation and append failures ---------------------------------------------------


def test_validation_follows_kafkas_order(harness: Harness) -> None:
    assert txn_commit(harness, {TP: value(1)}, group_id="") == {TP: ErrorCode.invalid_group_id}
    replies = harness.join(GROUP)
    harness.advance(INITIAL_DELAY_MS)
    member = replies.join.member_id
    assert harness.sync(GROUP, member, 1, {member: b""}).sync.error is ErrorCode.none
    assert txn_commit(harness, {TP: value(1)}, member_id="stranger", generation_id=1) == {
        TP: ErrorCode.unknown_member_id
    }
    assert txn_commit(harness, {TP: value(1)}, member_id=member, generation_id=7) == {
        TP: ErrorCode.illegal_generation
    }
    assert txn_commit(harness, {TP: value(1)}, member_id=member, generation_id=1) == {
        TP: ErrorCode.none
    }
    # No member and no generation (TxnOffsetCommit before v3): accepted, group or not.
    assert txn_commit(harness, {TP: value(2)}, producer_id=PRODUCER + 1) == {TP: ErrorCode.none}


def test_a_fenced_static_member_is_refused(harness: Harness) -> None:
    replies = harness.join(GROUP, instance_id="static-1")
    harness.advance(INITIAL_DELAY_MS)
    member = replies.join.member_id
    harness.sync(GROUP, member, 1, {member: b""}, instance_id="static-1")
    assert txn_commit(
        harness, {TP: value(1)}, member_id="old-id", instance_id="static-1", generation_id=1
    ) == {TP: ErrorCode.fenced_instance_id}


def test_a_failed_append_forgets_the_pending_offsets(harness: Harness) -> None:
    harness.offsets_log.fail_with = ErrorCode.not_leader_or_follower
    assert txn_commit(harness, {TP: value(1)}) == {TP: ErrorCode.not_coordinator}
    assert fetch(harness, stable=True) == NOTHING
    assert harness.manager.open_groups_for_producer(PRODUCER) == frozenset()


def test_metadata_too_large_is_refused_per_partition() -> None:
    h = Harness(make_config(offset_metadata_max_bytes=4))
    big = OffsetValue(1, -1, "too long", 0)
    assert txn_commit(h, {TP: big, (TOPIC, 1): value(2)}) == {
        TP: ErrorCode.offset_metadata_too_large,
        (TOPIC, 1): ErrorCode.none,
    }
    h.close()


def test_the_marker_before_the_append_completes_changes_nothing(harness: Harness) -> None:
    harness.offsets_log.hold = True
    harness.coordinator.handle_txn_commit_offsets(
        GROUP, PRODUCER, EPOCH, "", None, -1, {TP: value(1)}, [].append
    )
    complete(harness, committed=True)  # cannot happen with a real client: logged, skipped
    harness.offsets_log.release_held()
    assert fetch(harness, stable=True) == NOTHING


# --- expiry and dead groups -------------------------------------------------------------


def test_expiry_never_touches_pending_txn_offsets(harness: Harness) -> None:
    commit(harness, {TP: value(3)})
    txn_commit(harness, {TP: value(4)})
    harness.clock.advance(RETENTION_MS + 1)
    assert harness.coordinator.cleanup_group_metadata() == 1  # the committed offset expired
    group = harness.group(GROUP)
    assert not group.is_in(GroupState.DEAD)  # its pending offsets keep it
    assert TP in group.pending_txn_offsets[PRODUCER]
    complete(harness, committed=True)
    assert fetch(harness) == FetchedOffset(4, -1, "")


def test_a_group_with_only_pending_offsets_is_not_removed(harness: Harness) -> None:
    txn_commit(harness, {TP: value(4)})
    harness.clock.advance(RETENTION_MS + 1)
    harness.coordinator.cleanup_group_metadata()
    assert harness.manager.get_group(GROUP) is not None
    complete(harness, committed=False)
    harness.coordinator.cleanup_group_metadata()
    assert harness.manager.get_group(GROUP) is None


def test_unloading_forgets_the_groups_producers(harness: Harness) -> None:
    txn_commit(harness, {TP: value(4)})
    harness.coordinator.on_resigned(harness.coordinator.partition_for(GROUP))
    assert harness.manager.open_groups_for_producer(PRODUCER) == frozenset()


# --- loading -------------------------------------------------------------------------------


def control_batch(producer_id: int, control_type: ControlType, coordinator_epoch: int) -> bytes:
    """One v2 control batch (transactional|control) holding an end-transaction marker."""
    key = struct.pack(">hh", 0, control_type)
    marker = struct.pack(">hi", 0, coordinator_epoch)
    body = (
        b"\x00"
        + write_varint(0)
        + write_varint(0)
        + write_varint(len(key))
        + key
        + write_varint(len(marker))
        + marker
        + write_varint(0)
    )
    record = write_varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0x30, 0, 5_000, 5_000, producer_id, EPOCH, -1, 1) + record
    header = struct.pack(">qiib", 0, 4 + 1 + 4 + len(after_crc), 0, 2)
    return header + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc


def offsets_batch(
    entries: dict[tuple[str, int], OffsetValue], producer_id: int | None = None
) -> bytes:
    records = [
        (encode_offset_key(OffsetKey(GROUP, t, p)), encode_offset_value(v))
        for (t, p), v in entries.items()
    ]
    if producer_id is None:
        return build_batch(records, 1_000)
    return build_batch(
        records,
        1_000,
        producer_id=producer_id,
        producer_epoch=EPOCH,
        base_sequence=0,
        transactional=True,
    )


def log_with(*batches: bytes) -> MemoryOffsetsLog:
    offsets_log = MemoryOffsetsLog()
    target = partition_for(GROUP, make_config().offsets_topic_num_partitions)
    for batch in batches:
        offsets_log.append(target, batch, lambda error, _offset: None)
    return offsets_log


def test_control_batch_helper_parses_as_a_marker() -> None:
    (batch,) = read_record_batches(control_batch(9, ControlType.ABORT, 17))
    assert batch.is_control
    assert batch.producer_id == 9
    assert batch.marker == EndTxnMarker(ControlType.ABORT, 17)
    assert parse_end_txn_marker(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 3)) == EndTxnMarker(
        ControlType.COMMIT, 3
    )
    with pytest.raises(ValueError, match="type 4"):
        parse_end_txn_marker(struct.pack(">hh", 0, 4), struct.pack(">hi", 0, 3))
    with pytest.raises(ValueError, match="missing or too short"):
        parse_end_txn_marker(struct.pack(">hh", 0, 0), None)


def test_load_commits_aborts_and_keeps_what_is_still_open() -> None:
    committed, aborted, still_open = (TOPIC, 1), (TOPIC, 2), (TOPIC, 3)
    offsets_log = log_with(
        offsets_batch({committed: value(1), aborted: value(2), still_open: value(3)}),
        offsets_batch({committed: value(11)}, producer_id=1),
        offsets_batch({aborted: value(12)}, producer_id=2),
        offsets_batch({still_open: value(13)}, producer_id=3),
        control_batch(2, ControlType.ABORT, 0),
        control_batch(1, ControlType.COMMIT, 0),
    )
    h = Harness(make_config(), offsets_log)
    _, fetched = h.coordinator.handle_fetch_offsets(
        GROUP, [committed, aborted, still_open], require_stable=True
    )
    assert fetched == {
        committed: FetchedOffset(11, -1, ""),
        aborted: FetchedOffset(2, -1, ""),
        still_open: UNSTABLE,
    }
    assert h.manager.open_groups_for_producer(3) == frozenset({GROUP})
    complete(h, committed=True, producer_id=3)
    assert h.coordinator.handle_fetch_offsets(GROUP, [still_open])[1] == {
        still_open: FetchedOffset(13, -1, "")
    }
    h.close()


def test_load_keeps_a_plain_commit_written_after_the_transactional_one() -> None:
    offsets_log = log_with(
        offsets_batch({TP: value(42)}, producer_id=1),
        offsets_batch({TP: value(7)}),
        control_batch(1, ControlType.COMMIT, 0),
    )
    h = Harness(make_config(), offsets_log)
    assert fetch(h, stable=True) == FetchedOffset(7, -1, "")
    h.close()


def test_load_brings_back_a_group_that_only_has_pending_offsets() -> None:
    h = Harness(make_config(), log_with(offsets_batch({TP: value(5)}, producer_id=8)))
    group = h.group(GROUP)
    assert group.is_in(GroupState.EMPTY)
    assert group.offsets == {}
    assert fetch(h, stable=True) == UNSTABLE
    h.close()


def test_a_reload_sees_what_the_live_coordinator_saw(harness: Harness) -> None:
    commit(harness, {TP: value(1)})
    txn_commit(harness, {TP: value(2)})
    assert fetch(reload(harness), stable=True) == UNSTABLE
    partition = harness.coordinator.partition_for(GROUP)
    harness.offsets_log.append(
        partition, control_batch(PRODUCER, ControlType.COMMIT, 0), lambda error, _offset: None
    )
    assert fetch(reload(harness), stable=True) == FetchedOffset(2, -1, "")


def test_a_deleted_group_leaves_no_producer_behind(harness: Harness) -> None:
    txn_commit(harness, {TP: value(4)})
    assert harness.coordinator.handle_delete_groups([GROUP]) == {GROUP: ErrorCode.none}
    complete(harness, committed=True)
    assert harness.manager.open_groups_for_producer(PRODUCER) == frozenset()


# --- the live cache and a reload agree -------------------------------------------------

PARTITIONS = [(TOPIC, 0), (TOPIC, 1)]
PRODUCERS = [1, 2]

_operation = st.one_of(
    st.tuples(st.just("commit"), st.sampled_from(PARTITIONS), st.integers(0, 99)),
    st.tuples(
        st.just("txn"), st.sampled_from(PARTITIONS), st.integers(0, 99), st.sampled_from(PRODUCERS)
    ),
    st.tuples(st.just("end"), st.sampled_from(PRODUCERS), st.booleans()),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_operation, max_size=12))
def test_live_offsets_equal_what_a_reload_reads(operations: list[tuple[Any, ...]]) -> None:
    """Whatever mix of plain commits, transactional commits and markers, the offsets the
    coordinator serves equal those a coordinator loading the same log serves."""
    h = Harness(make_config())
    partition = h.coordinator.partition_for(GROUP)
    for operation in operations:
        if operation[0] == "commit":
            commit(h, {operation[1]: value(operation[2])})
        elif operation[0] == "txn":
            txn_commit(h, {operation[1]: value(operation[2])}, producer_id=operation[3])
        else:
            _, producer_id, committed = operation
            control_type = ControlType.COMMIT if committed else ControlType.ABORT
            h.offsets_log.append(
                partition, control_batch(producer_id, control_type, 0), lambda _e, _o: None
            )
            complete(h, committed, producer_id=producer_id)

    def served(harness: Harness) -> dict[tuple[str, int], FetchedOffset]:
        return harness.coordinator.handle_fetch_offsets(GROUP, PARTITIONS, require_stable=True)[1]

    reloaded = reload(h)
    assert served(reloaded) == served(h)
    h.close()
    reloaded.close()
