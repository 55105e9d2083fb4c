"""The classic group protocol on a manual clock: joins, syncs, heartbeats, leaves, offsets."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.coordinator._batches import build_batch
from tickwheel.coordinator.group import GroupState, LeavingMember, OffsetValue

from .harness import INITIAL_DELAY_MS, REBALANCE_MS, SESSION_MS, Harness, make_config

GROUP = "g"
# A second member arriving during the initial delay extends it once.
SETTLE_MS = 2 * INITIAL_DELAY_MS


def form_group(harness: Harness, *member_ids: str) -> tuple[str, ...]:
    """Start a group of len(member_ids) fresh members and take it to Stable; return their ids."""
    replies = [harness.join(GROUP, client_id=name) for name in member_ids]
    harness.advance(SETTLE_MS)
    ids = tuple(r.join.member_id for r in replies)
    generation = replies[0].join.generation_id
    leader = replies[0].join.leader_id
    syncs = [
        harness.sync(GROUP, mid, generation, {m: m.encode() for m in ids} if mid == leader else {})
        for mid in ids
    ]
    assert all(s.sync.error is ErrorCode.none for s in syncs)
    assert harness.group(GROUP).is_in(GroupState.STABLE)
    return ids


def test_first_join_waits_for_the_initial_rebalance_delay(harness: Harness) -> None:
    replies = harness.join(GROUP)
    assert harness.group(GROUP).is_in(GroupState.PREPARING_REBALANCE)
    harness.advance(INITIAL_DELAY_MS - 1)
    assert replies.joins == []
    harness.advance(1)
    result = replies.join
    assert result.error is ErrorCode.none
    assert result.generation_id == 1
    assert result.leader_id == result.member_id
    assert result.protocol_name == "range"
    assert [m.member_id for m in result.members] == [result.member_id]
    assert harness.group(GROUP).is_in(GroupState.COMPLETING_REBALANCE)


def test_initial_delay_extends_while_members_keep_arriving(harness: Harness) -> None:
    first = harness.join(GROUP, client_id="a")
    harness.advance(INITIAL_DELAY_MS // 2)
    second = harness.join(GROUP, client_id="b")
    harness.advance(INITIAL_DELAY_MS // 2)
    assert first.joins == []  # a member arrived during the delay: wait once more
    harness.advance(INITIAL_DELAY_MS)
    assert first.join.generation_id == second.join.generation_id == 1
    assert len(first.join.members) == 2
    assert second.join.members == ()  # only the leader sees the members


def test_initial_delay_is_bounded_by_the_rebalance_timeout() -> None:
    harness = Harness(make_config(group_initial_rebalance_delay_ms=100))
    try:
        first = harness.join(GROUP, rebalance_ms=250)
        for _ in range(10):  # a new member every 50 ms, for longer than the timeout
            harness.advance(50)
            harness.join(GROUP, rebalance_ms=250)
        assert first.join.error is ErrorCode.none
    finally:
        harness.close()


def test_sync_hands_out_the_leaders_assignment(harness: Harness) -> None:
    first = harness.join(GROUP, client_id="a")
    second = harness.join(GROUP, client_id="b")
    harness.advance(SETTLE_MS)
    leader, follower = first.join.member_id, second.join.member_id
    follower_sync = harness.sync(GROUP, follower, 1)
    assert follower_sync.syncs == []  # waits for the leader
    leader_sync = harness.sync(GROUP, leader, 1, {leader: b"A", follower: b"B"})
    assert leader_sync.sync.assignment == b"A"
    assert follower_sync.sync.assignment == b"B"
    assert follower_sync.sync.protocol_name == "range"
    assert harness.group(GROUP).is_in(GroupState.STABLE)
    assert harness.heartbeat(GROUP, follower, 1) is ErrorCode.none


def test_second_member_triggers_a_rebalance_that_completes_when_all_rejoin(
    harness: Harness,
) -> None:
    (first,) = form_group(harness, "a")
    newcomer = harness.join(GROUP, client_id="b")
    group = harness.group(GROUP)
    assert group.is_in(GroupState.PREPARING_REBALANCE)
    assert harness.heartbeat(GROUP, first, 1) is ErrorCode.rebalance_in_progress
    rejoin = harness.join(GROUP, first)
    # Everyone has rejoined: no waiting for a timeout.
    assert rejoin.join.generation_id == newcomer.join.generation_id == 2
    assert rejoin.join.leader_id == first
    assert {m.member_id for m in rejoin.join.members} == {first, newcomer.join.member_id}


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout(
    harness: Harness,
) -> None:
    first, second = form_group(harness, "a", "b")
    rejoin = harness.join(GROUP, first)
    step_ms = SESSION_MS // 2
    for _ in range(REBALANCE_MS // step_ms - 1):
        harness.advance(step_ms)
        # The second member keeps heartbeating but never rejoins.
        assert harness.heartbeat(GROUP, second, 1) is ErrorCode.rebalance_in_progress
    assert rejoin.joins == []
    harness.advance(step_ms)
    assert rejoin.join.generation_id == 2
    assert [m.member_id for m in rejoin.join.members] == [first]
    assert harness.heartbeat(GROUP, second, 2) is ErrorCode.unknown_member_id


def test_heartbeats_keep_a_member_alive(harness: Harness) -> None:
    (member,) = form_group(harness, "a")
    for _ in range(5):
        harness.advance(SESSION_MS - 1)
        assert harness.heartbeat(GROUP, member, 1) is ErrorCode.none
    assert harness.group(GROUP).is_in(GroupState.STABLE)


def test_session_timeout_evicts_a_silent_member_and_rebalances(harness: Harness) -> None:
    alive, silent = form_group(harness, "a", "b")
    harness.advance(SESSION_MS // 2)
    assert harness.heartbeat(GROUP, alive, 1) is ErrorCode.none
    harness.advance(SESSION_MS // 2)
    group = harness.group(GROUP)
    assert not group.has(silent)
    assert group.is_in(GroupState.PREPARING_REBALANCE)
    assert harness.heartbeat(GROUP, alive, 1) is ErrorCode.rebalance_in_progress
    rejoin = harness.join(GROUP, alive)
    assert rejoin.join.generation_id == 2
    assert [m.member_id for m in rejoin.join.members] == [alive]


def test_member_id_required_then_pending_id_expires(harness: Harness) -> None:
    first = harness.join(GROUP, require_known_member_id=True)
    assert first.join.error is ErrorCode.member_id_required
    assigned = first.join.member_id
    assert assigned.startswith("client-")
    group = harness.group(GROUP)
    assert group.is_pending(assigned)
    harness.advance(SESSION_MS)
    assert not group.is_pending(assigned)


def test_member_id_required_then_join_with_it(harness: Harness) -> None:
    first = harness.join(GROUP, require_known_member_id=True)
    second = harness.join(GROUP, first.join.member_id, require_known_member_id=True)
    harness.advance(SETTLE_MS)
    assert second.join.error is ErrorCode.none
    assert second.join.member_id == first.join.member_id


def test_protocol_vote_and_inconsistent_protocols(harness: Harness) -> None:
    a = harness.join(GROUP, protocols=(("range", b""), ("roundrobin", b"")))
    b = harness.join(GROUP, protocols=(("roundrobin", b""), ("range", b"")))
    c = harness.join(GROUP, protocols=(("roundrobin", b""), ("sticky", b"")))
    bad = harness.join(GROUP, protocols=(("sticky", b""),))
    other_type = harness.join(GROUP, protocol_type="connect")
    assert bad.join.error is ErrorCode.inconsistent_group_protocol
    assert other_type.join.error is ErrorCode.inconsistent_group_protocol
    harness.advance(SETTLE_MS)
    assert {r.join.protocol_name for r in (a, b, c)} == {"roundrobin"}


def test_leave_group_rebalances_and_last_leave_empties_the_group(harness: Harness) -> None:
    first, second = form_group(harness, "a", "b")
    answers: list[tuple[ErrorCode, list[LeavingMember]]] = []
    harness.coordinator.handle_leave_group(
        GROUP, [LeavingMember(second, None)], lambda e, m: answers.append((e, m))
    )
    assert answers == [(ErrorCode.none, [LeavingMember(second, None, ErrorCode.none)])]
    rejoin = harness.join(GROUP, first)
    assert [m.member_id for m in rejoin.join.members] == [first]
    harness.sync(GROUP, first, 2, {first: b"all"})
    harness.coordinator.handle_leave_group(
        GROUP, [LeavingMember(first, None)], lambda e, m: answers.append((e, m))
    )
    assert harness.group(GROUP).is_in(GroupState.EMPTY)
    harness.coordinator.handle_leave_group(
        GROUP, [LeavingMember("nobody", None)], lambda e, m: answers.append((e, m))
    )
    assert answers[-1][1][0].error is ErrorCode.unknown_member_id


def test_static_member_rejoin_keeps_the_generation_and_fences_the_old_id(
    harness: Harness,
) -> None:
    first = harness.join(GROUP, instance_id="instance-1", client_id="a")
    other = harness.join(GROUP, client_id="b")
    harness.advance(SETTLE_MS)
    old_id = first.join.member_id
    assert old_id.startswith("instance-1-")
    harness.sync(GROUP, old_id, 1, {old_id: b"A", other.join.member_id: b"B"})
    # The instance restarts: it joins without a member id.
    restarted = harness.join(GROUP, instance_id="instance-1", client_id="a")
    new_id = restarted.join.member_id
    assert new_id != old_id
    assert restarted.join.generation_id == 1
    group = harness.group(GROUP)
    assert group.is_in(GroupState.STABLE)
    assert harness.heartbeat(GROUP, old_id, 1, "instance-1") is ErrorCode.fenced_instance_id
    assert harness.sync(GROUP, new_id, 1, instance_id="instance-1").sync.assignment == b"A"


def test_invalid_session_timeout_and_group_id(harness: Harness) -> None:
    assert harness.join(GROUP, session_ms=10).join.error is ErrorCode.invalid_session_timeout
    assert harness.join("").join.error is ErrorCode.invalid_group_id


def test_not_coordinator_for_a_partition_it_does_not_lead(harness: Harness) -> None:
    harness.coordinator.on_resigned(harness.coordinator.partition_for(GROUP))
    assert harness.join(GROUP).join.error is ErrorCode.not_coordinator


def test_resigning_answers_waiting_joins_with_not_coordinator(harness: Harness) -> None:
    waiting = harness.join(GROUP)
    harness.coordinator.on_resigned(harness.coordinator.partition_for(GROUP))
    assert waiting.join.error is ErrorCode.not_coordinator


def commit(
    harness: Harness,
    offsets: dict[tuple[str, int], int],
    *,
    member_id: str = "",
    generation_id: int = -1,
    metadata: str = "",
    group_id: str = GROUP,
) -> dict[tuple[str, int], ErrorCode]:
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    values = {tp: OffsetValue(offset, -1, metadata, 0) for tp, offset in offsets.items()}
    harness.coordinator.handle_commit_offsets(
        group_id, member_id, None, generation_id, values, answers.append
    )
    assert len(answers) == 1
    return answers[0]


def test_offsets_commit_and_fetch_without_group_management(harness: Harness) -> None:
    assert commit(harness, {("t", 0): 5, ("t", 1): 7}) == {
        ("t", 0): ErrorCode.none,
        ("t", 1): ErrorCode.none,
    }
    error, fetched = harness.coordinator.handle_fetch_offsets(GROUP, [("t", 0), ("t", 2)])
    assert error is ErrorCode.none
    assert fetched[("t", 0)].offset == 5
    assert fetched[("t", 2)].offset == -1
    _, everything = harness.coordinator.handle_fetch_offsets(GROUP, None)
    assert {tp: f.offset for tp, f in everything.items()} == {("t", 0): 5, ("t", 1): 7}


def test_offset_commit_checks_member_and_generation(harness: Harness) -> None:
    (member,) = form_group(harness, "a")
    assert commit(harness, {("t", 0): 1}, member_id=member, generation_id=1) == {
        ("t", 0): ErrorCode.none
    }
    assert commit(harness, {("t", 0): 2}, member_id=member, generation_id=0) == {
        ("t", 0): ErrorCode.illegal_generation
    }
    assert commit(harness, {("t", 0): 2}, member_id="stranger", generation_id=1) == {
        ("t", 0): ErrorCode.unknown_member_id
    }
    assert commit(harness, {("t", 0): 3}, group_id="unknown", generation_id=4) == {
        ("t", 0): ErrorCode.illegal_generation
    }
    too_long = "x" * (harness.config.offset_metadata_max_bytes + 1)
    assert commit(harness, {("t", 0): 4}, member_id=member, generation_id=1, metadata=too_long) == {
        ("t", 0): ErrorCode.offset_metadata_too_large
    }
    _, fetched = harness.coordinator.handle_fetch_offsets(GROUP, [("t", 0)])
    assert fetched[("t", 0)].offset == 1


@pytest.mark.parametrize(
    ("append_error", "client_error"),
    [
        (ErrorCode.not_leader_or_follower, ErrorCode.not_coordinator),
        (ErrorCode.request_timed_out, ErrorCode.coordinator_not_available),
        (ErrorCode.message_too_large, ErrorCode.invalid_commit_offset_size),
    ],
)
def test_failed_append_is_reported_and_not_cached(
    harness: Harness, append_error: ErrorCode, client_error: ErrorCode
) -> None:
    harness.offsets_log.fail_with = append_error
    assert commit(harness, {("t", 0): 9}) == {("t", 0): client_error}
    _, fetched = harness.coordinator.handle_fetch_offsets(GROUP, [("t", 0)])
    assert fetched[("t", 0)].offset == -1


def test_offsets_are_cached_only_once_the_append_completes(harness: Harness) -> None:
    harness.offsets_log.hold = True
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    harness.coordinator.handle_commit_offsets(
        GROUP, "", None, -1, {("t", 0): OffsetValue(3, -1, "", 0)}, answers.append
    )
    assert answers == []
    assert harness.coordinator.handle_fetch_offsets(GROUP, [("t", 0)])[1][("t", 0)].offset == -1
    harness.offsets_log.release_held()
    assert answers == [{("t", 0): ErrorCode.none}]
    assert harness.coordinator.handle_fetch_offsets(GROUP, [("t", 0)])[1][("t", 0)].offset == 3


def test_offsets_and_groups_survive_a_new_coordinator(harness: Harness) -> None:
    member, other = form_group(harness, "a", "b")
    commit(harness, {("t", 0): 11}, member_id=member, generation_id=1)
    commit(harness, {("solo", 0): 4}, group_id="solo")
    reloaded = Harness(harness.config, harness.offsets_log)
    try:
        _, fetched = reloaded.coordinator.handle_fetch_offsets(GROUP, [("t", 0)])
        assert fetched[("t", 0)].offset == 11
        assert reloaded.coordinator.handle_fetch_offsets("solo", None)[1][("solo", 0)].offset == 4
        group = reloaded.group(GROUP)
        assert group.is_in(GroupState.STABLE)
        assert group.generation_id == 1
        assert reloaded.heartbeat(GROUP, member, 1) is ErrorCode.none
        assert reloaded.sync(GROUP, member, 1).sync.assignment == member.encode()
        # The other member never comes back: its session runs out.
        reloaded.advance(SESSION_MS // 2)
        assert reloaded.heartbeat(GROUP, member, 1) is ErrorCode.none
        reloaded.advance(SESSION_MS // 2)
        assert not reloaded.group(GROUP).has(other)
        assert reloaded.group(GROUP).is_in(GroupState.PREPARING_REBALANCE)
    finally:
        reloaded.close()


def test_list_describe_and_delete_groups(harness: Harness) -> None:
    (member,) = form_group(harness, "a")
    commit(harness, {("t", 0): 1}, group_id="offsets-only")
    error, overviews = harness.coordinator.handle_list_groups()
    assert error is ErrorCode.none
    assert {(o.group_id, o.state) for o in overviews} == {
        (GROUP, GroupState.STABLE),
        ("offsets-only", GroupState.EMPTY),
    }
    _, stable_only = harness.coordinator.handle_list_groups(frozenset({"Stable"}))
    assert [o.group_id for o in stable_only] == [GROUP]
    error, summary = harness.coordinator.handle_describe_group(GROUP)
    assert (summary.state, summary.protocol_type, summary.protocol_name) == (
        "Stable",
        "consumer",
        "range",
    )
    assert [(m.member_id, m.assignment) for m in summary.members] == [(member, member.encode())]
    assert harness.coordinator.handle_describe_group("nope")[1].state == "Dead"
    results = harness.coordinator.handle_delete_groups([GROUP, "offsets-only", "nope"])
    assert results == {
        GROUP: ErrorCode.non_empty_group,
        "offsets-only": ErrorCode.none,
        "nope": ErrorCode.group_id_not_found,
    }
    reloaded = Harness(harness.config, harness.offsets_log)
    try:
        assert reloaded.coordinator.handle_fetch_offsets("offsets-only", None)[1] == {}
    finally:
        reloaded.close()


def test_purgatories_hold_one_heartbeat_per_member(harness: Harness) -> None:
    members = form_group(harness, "a", "b", "c")
    for _ in range(20):
        for member in members:
            assert harness.heartbeat(GROUP, member, 1) is ErrorCode.none
    assert harness.coordinator.heartbeat_purgatory.num_delayed == len(members)


def test_group_max_size_turns_away_extra_members() -> None:
    harness = Harness(make_config(group_max_size=2))
    try:
        first, second = (harness.join(GROUP, client_id=name) for name in ("a", "b"))
        third = harness.join(GROUP, client_id="c")
        assert third.join.error is ErrorCode.group_max_size_reached
        harness.advance(SETTLE_MS)
        assert first.join.error is second.join.error is ErrorCode.none
        assert len(first.join.members) == 2
    finally:
        harness.close()


def test_a_lowered_group_max_size_keeps_the_first_members_to_rejoin(harness: Harness) -> None:
    members = form_group(harness, "a", "b", "c")
    smaller = Harness(make_config(group_max_size=2), harness.offsets_log)
    try:
        # Loaded over capacity: a rebalance starts at once, and the first two to rejoin stay.
        assert smaller.group(GROUP).is_in(GroupState.PREPARING_REBALANCE)
        rejoins = [smaller.join(GROUP, member) for member in members]
        assert rejoins[2].join.error is ErrorCode.group_max_size_reached
        # With the third gone, everyone left has rejoined: the rebalance completes.
        assert [r.join.error for r in rejoins[:2]] == [ErrorCode.none, ErrorCode.none]
        assert set(smaller.group(GROUP).members) == set(members[:2])
        # Full and settled: a newcomer is turned away, a member's rejoin is not.
        assert smaller.join(GROUP).join.error is ErrorCode.group_max_size_reached
    finally:
        smaller.close()


def test_pending_members_cannot_overfill_a_group() -> None:
    harness = Harness(make_config(group_max_size=1))
    try:
        first, second = (
            harness.join(GROUP, client_id=name, require_known_member_id=True).join.member_id
            for name in ("a", "b")
        )
        joined = harness.join(GROUP, first)
        refused = harness.join(GROUP, second)
        assert refused.join.error is ErrorCode.group_max_size_reached
        harness.advance(SETTLE_MS)
        assert joined.join.error is ErrorCode.none
        assert list(harness.group(GROUP).members) == [first]
    finally:
        harness.close()


def test_heartbeat_while_completing_rebalance_keeps_the_session(harness: Harness) -> None:
    replies = harness.join(GROUP)
    harness.advance(INITIAL_DELAY_MS)
    member = replies.join.member_id
    group = harness.group(GROUP)
    assert group.is_in(GroupState.COMPLETING_REBALANCE)
    # The leader is slow to sync; its heartbeats meanwhile must keep it in the group.
    harness.advance(SESSION_MS - 1)
    assert harness.heartbeat(GROUP, member, 1) is ErrorCode.none
    harness.advance(SESSION_MS - 1)
    assert group.has(member)
    assert group.is_in(GroupState.COMPLETING_REBALANCE)
    harness.advance(1)
    assert not group.has(member)


def test_an_undecodable_record_is_skipped_when_loading() -> None:
    config = make_config()
    harness = Harness(config)
    try:
        commit(harness, {("t", 0): 8})
        partition = harness.coordinator.partition_for(GROUP)
        # What a client's produce could once write there: a key of no known layout.
        harness.offsets_log.batches[partition].insert(
            0, build_batch([(b"\x00\x01garbage", b"value")], timestamp_ms=0)
        )
        reloaded = Harness(config, harness.offsets_log)
        try:
            _, fetched = reloaded.coordinator.handle_fetch_offsets(GROUP, [("t", 0)])
            assert fetched[("t", 0)].offset == 8
        finally:
            reloaded.close()
    finally:
        harness.close()
