"""Offset expiry, dead-group removal and OffsetDelete on a manual clock (Kafka 2.1+ rules).

Each test drives ``GroupCoordinator.cleanup_group_metadata`` by hand, as Kafka's own
GroupMetadataManagerTest drives cleanupGroupMetadata, and reloads the partitions from
the in-memory log to prove the tombstones keep what was removed from coming back.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.coordinator.group import GroupState, OffsetValue
from tickwheel.coordinator.group._records import GroupKey, OffsetKey, read_batches

from .harness import INITIAL_DELAY_MS, SESSION_MS, Harness, make_config

RETENTION_MS = 60_000
GROUP = "g"
TOPIC = "subscribed"
OTHER = "other"


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v1: topics, no user data, no owned partitions."""
    body = struct.pack(">hi", 1, len(topics))
    for topic in topics:
        body += struct.pack(">h", len(topic)) + topic.encode()
    return body + struct.pack(">ii", -1, 0)


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness(make_config(offsets_retention_ms=RETENTION_MS))
    yield h
    h.close()


def reload(harness: Harness) -> Harness:
    """A new coordinator over the same log (nothing cleaned up on the way)."""
    return Harness(harness.config, harness.offsets_log)


def form_group(
    harness: Harness, protocols: tuple[tuple[str, bytes], ...], group_id: str = GROUP
) -> str:
    """A one-member Stable group; returns the member id."""
    replies = harness.join(group_id, protocols=protocols)
    harness.advance(INITIAL_DELAY_MS)
    member = replies.join.member_id
    assert harness.sync(group_id, member, 1, {member: b"assigned"}).sync.error is ErrorCode.none
    assert harness.group(group_id).is_in(GroupState.STABLE)
    return member


def keep_alive(harness: Harness, member: str, ms: int, group_id: str = GROUP) -> None:
    """Advance ``ms`` with the member heartbeating twice per session timeout."""
    step_ms = SESSION_MS // 2
    for _ in range(ms // step_ms):
        harness.advance(step_ms)
        assert harness.heartbeat(group_id, member, 1) is ErrorCode.none
    harness.advance(ms % step_ms)


def commit(
    harness: Harness,
    partitions: list[tuple[str, int]],
    *,
    group_id: str = GROUP,
    member_id: str = "",
    generation_id: int = -1,
) -> None:
    now_ms = harness.clock.now_ms()
    values = {tp: OffsetValue(7, -1, "", now_ms) for tp in partitions}
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    harness.coordinator.handle_commit_offsets(
        group_id, member_id, None, generation_id, values, answers.append
    )
    assert answers == [dict.fromkeys(partitions, ErrorCode.none)]


def committed(harness: Harness, group_id: str = GROUP) -> set[tuple[str, int]]:
    error, fetched = harness.coordinator.handle_fetch_offsets(group_id, None)
    assert error is ErrorCode.none
    return set(fetched)


def listed(harness: Harness) -> set[str]:
    return {o.group_id for o in harness.coordinator.handle_list_groups()[1]}


def last_values(harness: Harness) -> dict[OffsetKey | GroupKey, bool]:
    """Each key's last record in the log: True for a value, False for a tombstone."""
    latest: dict[OffsetKey | GroupKey, bool] = {}
    for batches in harness.offsets_log.batches.values():
        for batch in batches:
            for record in read_batches(batch):
                latest[record.key] = record.value is not None
    return latest


def test_a_group_whose_members_are_gone_is_removed_at_the_next_cleanup(harness: Harness) -> None:
    form_group(harness, (("range", subscription(TOPIC)),))
    harness.advance(SESSION_MS)  # the member never heartbeats
    group = harness.group(GROUP)
    assert group.is_in(GroupState.EMPTY)
    assert GROUP in listed(harness)

    assert harness.coordinator.cleanup_group_metadata() == 0
    assert group.is_in(GroupState.DEAD)
    assert GROUP not in listed(harness)
    assert harness.coordinator.handle_describe_group(GROUP)[1].state == "Dead"
    # It reached generation 2 (its member left): its record is deleted for good.
    assert last_values(harness)[GroupKey(GROUP)] is False
    reloaded = reload(harness)
    try:
        assert GROUP not in listed(reloaded)
    finally:
        reloaded.close()


def test_a_group_that_never_formed_leaves_no_record(harness: Harness) -> None:
    handed_out = harness.join(GROUP, require_known_member_id=True)
    assert handed_out.join.error is ErrorCode.member_id_required
    harness.advance(SESSION_MS)  # the client never came back with its id
    harness.coordinator.cleanup_group_metadata()
    assert GROUP not in listed(harness)
    assert harness.offsets_log.batches == {}


def test_offsets_live_with_members_and_expire_a_retention_after_the_group_empties(
    harness: Harness,
) -> None:
    member = form_group(harness, (("range", subscription(TOPIC)),))
    commit(harness, [(TOPIC, 0), (TOPIC, 1)], member_id=member, generation_id=1)
    keep_alive(harness, member, 2 * RETENTION_MS)
    harness.coordinator.cleanup_group_metadata()
    assert committed(harness) == {(TOPIC, 0), (TOPIC, 1)}

    harness.advance(SESSION_MS)
    assert harness.group(GROUP).is_in(GroupState.EMPTY)
    harness.advance(RETENTION_MS - SESSION_MS - 1)
    assert harness.coordinator.cleanup_group_metadata() == 0
    # Retention counts from when the group emptied, not from the old commits.
    assert committed(harness) == {(TOPIC, 0), (TOPIC, 1)}
    assert GROUP in listed(harness)

    harness.advance(SESSION_MS + 1)
    assert harness.coordinator.cleanup_group_metadata() == 2
    assert committed(harness) == set()
    assert GROUP not in listed(harness)
    latest = last_values(harness)
    assert latest[OffsetKey(GROUP, TOPIC, 0)] is latest[OffsetKey(GROUP, TOPIC, 1)] is False
    assert latest[GroupKey(GROUP)] is False
    reloaded = reload(harness)
    try:
        assert GROUP not in listed(reloaded)
        assert committed(reloaded) == set()
    finally:
        reloaded.close()


def test_a_reloaded_empty_group_counts_its_retention_from_when_it_emptied(
    harness: Harness,
) -> None:
    member = form_group(harness, (("range", subscription(TOPIC)),))
    commit(harness, [(TOPIC, 0)], member_id=member, generation_id=1)
    harness.advance(SESSION_MS)
    assert harness.group(GROUP).is_in(GroupState.EMPTY)
    harness.advance(RETENTION_MS - 1)
    reloaded = reload(harness)
    try:
        reloaded.clock.advance(harness.clock.now_ms() - reloaded.clock.now_ms())
        assert reloaded.coordinator.cleanup_group_metadata() == 0
        reloaded.advance(1)
        assert reloaded.coordinator.cleanup_group_metadata() == 1
        assert GROUP not in listed(reloaded)
    finally:
        reloaded.close()


def test_offsets_of_a_group_without_members_expire_one_by_one(harness: Harness) -> None:
    commit(harness, [("t", 0)])
    harness.advance(RETENTION_MS // 2)
    commit(harness, [("t", 1)])
    harness.advance(RETENTION_MS // 2)
    assert harness.coordinator.cleanup_group_metadata() == 1
    assert committed(harness) == {("t", 1)}
    harness.advance(RETENTION_MS // 2)
    assert harness.coordinator.cleanup_group_metadata() == 1
    assert GROUP not in listed(harness)
    # It never had a generation, so it never had a group record to delete.
    assert GroupKey(GROUP) not in last_values(harness)


def test_a_stable_consumer_group_loses_only_offsets_of_topics_it_stopped_consuming(
    harness: Harness,
) -> None:
    member = form_group(harness, (("range", subscription(TOPIC)),))
    commit(harness, [(TOPIC, 0), (OTHER, 0)], member_id=member, generation_id=1)
    keep_alive(harness, member, RETENTION_MS)
    assert harness.coordinator.cleanup_group_metadata() == 1
    assert committed(harness) == {(TOPIC, 0)}
    assert harness.group(GROUP).is_in(GroupState.STABLE)


def test_an_offset_being_committed_never_expires_and_keeps_its_group(harness: Harness) -> None:
    commit(harness, [("t", 0)])
    harness.advance(RETENTION_MS)
    harness.offsets_log.hold = True
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    value = OffsetValue(9, -1, "", harness.clock.now_ms())
    harness.coordinator.handle_commit_offsets(
        GROUP, "", None, -1, {("t", 0): value}, answers.append
    )
    harness.offsets_log.hold = False
    assert harness.coordinator.cleanup_group_metadata() == 0
    assert GROUP in listed(harness)
    harness.offsets_log.release_held()
    assert answers == [{("t", 0): ErrorCode.none}]
    assert harness.coordinator.handle_fetch_offsets(GROUP, None)[1][("t", 0)].offset == 9


def test_many_removed_groups_are_deleted_in_batches_that_fit_a_message() -> None:
    harness = Harness(
        make_config(offsets_retention_ms=RETENTION_MS, offsets_topic_num_partitions=1)
    )
    try:
        ids = [f"one-shot-{index:05d}-{'x' * 300}" for index in range(3000)]
        for group_id in ids:
            commit(harness, [("t", 0)], group_id=group_id)
        commits = len(harness.offsets_log.batches[0])
        harness.advance(RETENTION_MS)
        assert harness.coordinator.cleanup_group_metadata() == len(ids)
        assert listed(harness) == set()
        tombstone_batches = harness.offsets_log.batches[0][commits:]
        assert len(tombstone_batches) > 1
        assert all(len(batch) < 1024 * 1024 for batch in tombstone_batches)
        reloaded = reload(harness)
        try:
            assert listed(reloaded) == set()
        finally:
            reloaded.close()
    finally:
        harness.close()


# --- OffsetDelete ------------------------------------------------------------------------


def test_offset_delete_refuses_topics_a_live_consumer_group_subscribes_to(
    harness: Harness,
) -> None:
    member = form_group(harness, (("range", subscription(TOPIC)),))
    commit(harness, [(TOPIC, 0), (OTHER, 0)], member_id=member, generation_id=1)
    error, results = harness.coordinator.handle_delete_offsets(GROUP, [(TOPIC, 0), (OTHER, 0)])
    assert error is ErrorCode.none
    assert results == {
        (TOPIC, 0): ErrorCode.group_subscribed_to_topic,
        (OTHER, 0): ErrorCode.none,
    }
    assert committed(harness) == {(TOPIC, 0)}
    reloaded = reload(harness)
    try:
        assert committed(reloaded) == {(TOPIC, 0)}
    finally:
        reloaded.close()


def test_offset_delete_treats_an_unreadable_subscription_as_subscribed(harness: Harness) -> None:
    member = form_group(harness, (("range", b"not a subscription"),))
    commit(harness, [(OTHER, 0)], member_id=member, generation_id=1)
    _, results = harness.coordinator.handle_delete_offsets(GROUP, [(OTHER, 0)])
    assert results == {(OTHER, 0): ErrorCode.group_subscribed_to_topic}


def test_offset_delete_of_an_empty_groups_last_offsets_deletes_the_group(
    harness: Harness,
) -> None:
    commit(harness, [("t", 0), ("t", 1)])
    _, results = harness.coordinator.handle_delete_offsets(GROUP, [("t", 0)])
    assert results == {("t", 0): ErrorCode.none}
    assert committed(harness) == {("t", 1)}
    _, results = harness.coordinator.handle_delete_offsets(GROUP, [("t", 1), ("t", 2)])
    assert results == {("t", 1): ErrorCode.none, ("t", 2): ErrorCode.none}
    assert GROUP not in listed(harness)
    assert harness.coordinator.handle_delete_offsets(GROUP, [("t", 0)]) == (
        ErrorCode.group_id_not_found,
        {},
    )


def test_offset_delete_of_a_non_consumer_group_with_members_is_refused(
    harness: Harness,
) -> None:
    replies = harness.join(GROUP, protocol_type="connect", protocols=(("default", b""),))
    harness.advance(INITIAL_DELAY_MS)
    assert replies.join.error is ErrorCode.none
    assert harness.coordinator.handle_delete_offsets(GROUP, [("t", 0)]) == (
        ErrorCode.non_empty_group,
        {},
    )


def test_offset_delete_validates_the_group_like_every_group_api(harness: Harness) -> None:
    assert harness.coordinator.handle_delete_offsets("", [("t", 0)]) == (
        ErrorCode.invalid_group_id,
        {},
    )
    assert harness.coordinator.handle_delete_offsets("unknown", [("t", 0)]) == (
        ErrorCode.group_id_not_found,
        {},
    )
    harness.coordinator.on_resigned(harness.coordinator.partition_for(GROUP))
    assert harness.coordinator.handle_delete_offsets(GROUP, [("t", 0)]) == (
        ErrorCode.not_coordinator,
        {},
    )


def test_an_offset_deleted_while_its_commit_is_in_flight_stays_deleted(
    harness: Harness,
) -> None:
    commit(harness, [("t", 0), ("t", 1)])
    harness.offsets_log.hold = True
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    value = OffsetValue(9, -1, "", harness.clock.now_ms())
    harness.coordinator.handle_commit_offsets(
        GROUP, "", None, -1, {("t", 0): value}, answers.append
    )
    _, results = harness.coordinator.handle_delete_offsets(GROUP, [("t", 0)])
    assert results == {("t", 0): ErrorCode.none}
    harness.offsets_log.release_held()
    assert answers == [{("t", 0): ErrorCode.none}]
    assert committed(harness) == {("t", 1)}
