"""ConsumerGroupHeartbeat on a manual clock: epochs, reconciliation without
stop-the-world, the session and rebalance timeouts on the wheel, static members,
offset-commit checks, and the group rebuilt from its records."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tickwheel.coordinator.group._records import GroupKey, read_batches
from tickwheel.coordinator.group.consumer import (
    ConsumerGroupState,
    MemberState,
)

from .harness import (
    INTERVAL_MS,
    REBALANCE_MS,
    SESSION_MS,
    TOPIC_ID,
    Client,
    ConsumerHarness,
    consumer_config,
)


def _settle(clients: list[Client], rounds: int = 6) -> None:
    for _ in range(rounds):
        for client in clients:
            client.beat()


def test_two_members_split_the_topic_and_a_third_takes_only_from_them() -> None:
    h = ConsumerHarness()
    a, b = Client(h, "a"), Client(h, "b")
    _settle([a, b])
    assert a.partitions | b.partitions == frozenset(range(4))
    assert len(a.partitions) == len(b.partitions) == 2
    group = h.coordinator.describe("g")
    assert group.state == ConsumerGroupState.STABLE.value

    kept_a, kept_b = a.history[-1], b.history[-1]
    c = Client(h, "c")
    c.beat()
    # The newcomer gets nothing the others still hold: revocation comes first.
    assert c.partitions == frozenset()
    _settle([a, b, c])
    assert a.partitions | b.partitions | c.partitions == frozenset(range(4))
    assert not a.partitions & b.partitions
    assert not a.partitions & c.partitions
    assert len(c.partitions) == 1
    # No stop-the-world: each old member held on to a partition throughout.
    for client, kept in ((a, kept_a), (b, kept_b)):
        always = frozenset.intersection(*client.history[client.history.index(kept) :])
        assert always, f"{client.member_id} lost all its partitions at some point"
    assert h.coordinator.describe("g").state == ConsumerGroupState.STABLE.value


def test_a_partition_is_never_owned_by_two_members_during_reconciliation() -> None:
    h = ConsumerHarness()
    clients = [Client(h, name) for name in ("a", "b")]
    _settle(clients)
    clients.append(Client(h, "c"))
    clients.append(Client(h, "d"))
    for _ in range(8):
        for client in clients:
            client.beat()
            owners: dict[int, str] = {}
            for other in clients:
                for partition in other.partitions:
                    assert partition not in owners, (partition, owners[partition], other.member_id)
                    owners[partition] = other.member_id
    assert all(len(c.partitions) == 1 for c in clients)


def test_epochs_fence_a_member_that_is_ahead_or_behind() -> None:
    h = ConsumerHarness()
    a = Client(h, "a")
    a.beat()
    assert a.epoch == 1
    assert h.heartbeat("a", 5, owned=dict(a.owned)).error is ErrorCode.fenced_member_epoch
    Client(h, "b").beat()  # bumps the group epoch to 2
    a.beat()
    a.beat()
    assert a.epoch == 2
    # The previous epoch is accepted once more (the bump's answer may have been lost).
    assert h.heartbeat("a", 1, owned=dict(a.owned)).error is ErrorCode.none
    # ... but not with partitions it was never given.
    everything = {TOPIC_ID: frozenset(range(4))}
    assert h.heartbeat("a", 1, owned=everything).error is ErrorCode.fenced_member_epoch
    assert h.heartbeat("nobody", 3).error is ErrorCode.unknown_member_id
    assert h.heartbeat("x", 1, group_id="unknown").error is ErrorCode.group_id_not_found


def test_invalid_requests_get_kafka_errors() -> None:
    h = ConsumerHarness()
    assert h.heartbeat("a", 0, group_id="").error is ErrorCode.invalid_request
    assert h.heartbeat("a", 0, assignor="sticky").error is ErrorCode.unsupported_assignor
    assert h.heartbeat("a", 0, regex="(unclosed").error is ErrorCode.invalid_regular_expression
    assert h.heartbeat("a", -7).error is ErrorCode.invalid_request
    assert h.heartbeat("a", -2).error is ErrorCode.invalid_request  # static leave, no instance


def test_the_session_timeout_is_a_timer_task_that_heartbeats_reset() -> None:
    h = ConsumerHarness()
    a, b = Client(h, "a"), Client(h, "b")
    _settle([a, b])
    for _ in range(4):  # b keeps heartbeating, a goes silent
        h.advance(SESSION_MS // 2)
        b.beat()
    members = {m.member.member_id for m in h.coordinator.describe("g").members}
    assert members == {"b"}
    _settle([b])
    assert b.partitions == frozenset(range(4))
    assert h.heartbeat("a", a.epoch, owned=dict(a.owned)).error is ErrorCode.unknown_member_id
    assert h.timer.size == 1  # only b's session task is pending: a's went with it


def test_a_group_config_overrides_the_session_timeout_and_heartbeat_interval() -> None:
    h = ConsumerHarness()
    h.coordinator.group_configs = lambda group_id: (
        {
            "consumer.session.timeout.ms": str(SESSION_MS * 2),
            "consumer.heartbeat.interval.ms": "250",
        }
        if group_id == "g"
        else {}
    )
    joined = h.ok("a", 0)
    assert joined.heartbeat_interval_ms == 250
    h.advance(SESSION_MS + 1)
    assert {m.member.member_id for m in h.coordinator.describe("g").members} == {"a"}
    h.advance(SESSION_MS)
    assert not h.coordinator.describe("g").members


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    h = ConsumerHarness()
    a = Client(h, "a")
    _settle([a])
    b = Client(h, "b")
    b.beat()
    # a is asked to revoke two partitions but keeps reporting all four.
    result = h.ok("a", a.epoch, owned={TOPIC_ID: frozenset(range(4))})
    assert result.member_epoch == a.epoch
    for _ in range(REBALANCE_MS // INTERVAL_MS + 1):
        h.advance(INTERVAL_MS)
        if "a" not in {m.member.member_id for m in h.coordinator.describe("g").members}:
            break
        h.ok("a", a.epoch, owned={TOPIC_ID: frozenset(range(4))})
        b.beat()
    assert {m.member.member_id for m in h.coordinator.describe("g").members} == {"b"}
    _settle([b])
    assert b.partitions == frozenset(range(4))


def test_leaving_gives_the_partitions_to_the_others() -> None:
    h = ConsumerHarness()
    a, b = Client(h, "a"), Client(h, "b")
    _settle([a, b])
    assert h.ok("a", -1).member_epoch == -1
    _settle([b])
    assert b.partitions == frozenset(range(4))
    assert h.timer.size == 1


def test_a_static_member_that_leaves_for_now_keeps_its_partitions() -> None:
    h = ConsumerHarness()
    a = Client(h, "a")
    h.ok("a", 0, instance_id="i-a")
    a.epoch = 1
    b = Client(h, "b")
    _settle([a, b])
    held = a.partitions
    assert h.ok("a", -2, instance_id="i-a").member_epoch == -2
    _settle([b])
    assert b.partitions == frozenset(range(4)) - held  # a's partitions wait for it
    # Another process with the same instance id takes its place and its partitions.
    result = h.ok("a2", 0, instance_id="i-a")
    assert result.assignment == {TOPIC_ID: held}
    # A second one is refused while the first is active.
    assert h.heartbeat("a3", 0, instance_id="i-a").error is ErrorCode.unreleased_instance_id
    # Left again, and gone for good after the session timeout.
    h.ok("a2", -2, instance_id="i-a")
    for _ in range(4):
        h.advance(SESSION_MS // 2)
        b.beat()
    assert b.partitions == frozenset(range(4))


def test_new_partitions_bump_the_group_epoch() -> None:
    h = ConsumerHarness()
    a, b = Client(h, "a"), Client(h, "b")
    _settle([a, b])
    epoch = h.coordinator.describe("g").group_epoch
    h.topics.add("orders", 6)
    _settle([a, b])
    assert h.coordinator.describe("g").group_epoch == epoch + 1
    assert a.partitions | b.partitions == frozenset(range(6))


def test_regex_subscription_picks_up_a_new_topic() -> None:
    h = ConsumerHarness()
    h.ok("a", 0, regex="ord.*")
    later = h.topics.add("ordinals", 2)
    h.topics.add("other", 3)
    result = h.ok("a", 1, owned={})
    for _ in range(3):
        result = h.ok("a", result.member_epoch, owned=dict(result.assignment or {}))
    described = h.coordinator.describe("g").members[0].member
    assert set(described.assigned_partitions) == {TOPIC_ID, later}


def test_regexes_are_re2s() -> None:
    """RE2 has no backreferences (Python's ``re`` would accept this one), and matches a
    pattern that makes a backtracking engine take exponential time in linear time."""
    h = ConsumerHarness()
    refused = h.heartbeat("a", 0, regex=r"(ord)\1")
    assert refused.error is ErrorCode.invalid_regular_expression
    h.topics.add("a" * 40, 1)
    h.ok("b", 0, regex="(a|a)*b")
    described = h.coordinator.describe("g").members[0].member
    assert described.assigned_partitions == {}


def test_range_assignor_on_request() -> None:
    h = ConsumerHarness()
    h.ok("a", 0, assignor="range")
    h.ok("b", 0, assignor="range")
    assert h.coordinator.describe("g").assignor_name == "range"


def test_offset_commits_check_the_member_epoch() -> None:
    h = ConsumerHarness()
    a = Client(h, "a")
    _settle([a])
    check = h.coordinator.validate_offset_commit
    assert check("g", "a", a.epoch, api_version=9) is ErrorCode.none
    assert check("g", "a", a.epoch - 1, api_version=9) is ErrorCode.stale_member_epoch
    assert check("g", "a", a.epoch, api_version=8) is ErrorCode.unsupported_version
    assert check("g", "zz", a.epoch, api_version=9) is ErrorCode.unknown_member_id
    assert check("g", "", -1, api_version=9) is ErrorCode.unknown_member_id  # not empty
    assert check("classic", "m", 1, api_version=9) is None
    h.ok("a", -1)
    assert check("g", "", -1, api_version=9) is ErrorCode.none  # admin, empty group


def test_the_group_is_rebuilt_from_its_records() -> None:
    h = ConsumerHarness()
    a, b = Client(h, "a"), Client(h, "b")
    _settle([a, b])
    h.ok("s", 0, instance_id="i-s")
    a.beat()  # a is now asked to revoke something: mid-reconciliation state is kept too
    before = h.coordinator.describe("g")

    reloaded = ConsumerHarness(offsets_log=h.offsets_log, topics=h.topics)
    after = reloaded.coordinator.describe("g")
    assert (after.state, after.group_epoch, after.assignment_epoch) == (
        before.state,
        before.group_epoch,
        before.assignment_epoch,
    )
    by_id = {m.member.member_id: m for m in after.members}
    for described in before.members:
        assert by_id[described.member.member_id] == described
    assert reloaded.timer.size == len(before.members)  # sessions restart after a load
    # The members go on where they were: no epoch bump, and b keeps reconciling from
    # the partitions it had.
    b.harness = reloaded
    b.beat()
    assert reloaded.coordinator.describe("g").group_epoch == before.group_epoch
    assert b.partitions <= by_id["b"].member.assigned_partitions[TOPIC_ID]


def test_deleted_group_stays_deleted_after_a_reload() -> None:
    h = ConsumerHarness()
    h.ok("a", 0)
    assert h.coordinator.delete("g") is ErrorCode.non_empty_group
    h.ok("a", -1)
    assert h.coordinator.delete("g") is ErrorCode.none
    assert not h.coordinator.has_group("g")
    reloaded = ConsumerHarness(offsets_log=h.offsets_log, topics=h.topics)
    assert not reloaded.coordinator.has_group("g")


def test_classic_and_consumer_groups_share_one_namespace() -> None:
    h = ConsumerHarness(consumer_config(group_consumer_migration_policy="downgrade"))
    h.manager.get_or_add_group("was-classic")  # an empty classic group (offsets only)
    assert h.heartbeat("a", 0, group_id="was-classic").error is ErrorCode.group_id_not_found
    h.ok("a", 0, group_id="g")
    assert h.coordinator.downgrade("g") is ErrorCode.inconsistent_group_protocol
    h.ok("a", -1, group_id="g")
    assert h.coordinator.downgrade("g") is None
    assert not h.coordinator.has_group("g")


def test_an_empty_classic_group_is_taken_over_by_default() -> None:
    h = ConsumerHarness()
    classic = h.manager.get_or_add_group("was-classic")
    classic.generation_id, classic.protocol_type = 3, "consumer"  # once a classic group
    assert h.ok("a", 0, group_id="was-classic").member_epoch == 1
    # Its classic group record is gone: only the offsets' holder remains.
    assert (classic.generation_id, classic.protocol_type) == (0, None)
    records = [r for batch in h.offsets_log.batches[0] for r in read_batches(batch)]
    assert [(r.key, r.value) for r in records] == [(GroupKey("was-classic"), None)]
    assert h.coordinator.group_state("was-classic") is ConsumerGroupState.STABLE


def test_member_state_reaches_stable_after_reconciliation() -> None:
    h = ConsumerHarness()
    a, b = Client(h, "a"), Client(h, "b")
    _settle([a, b])
    members = h.coordinator.describe("g").members
    assert {m.member.state for m in members} == {MemberState.STABLE}


def test_empty_groups_without_offsets_are_cleaned_up() -> None:
    h = ConsumerHarness()
    h.ok("a", 0, group_id="kept")
    h.ok("a", -1, group_id="kept")
    h.ok("b", 0, group_id="gone")
    h.ok("b", -1, group_id="gone")
    h.ok("c", 0, group_id="active")
    assert h.coordinator.delete_empty_groups(lambda group_id: group_id == "kept") == 1
    assert h.coordinator.has_group("kept")
    assert not h.coordinator.has_group("gone")
    assert h.coordinator.has_group("active")
    reloaded = ConsumerHarness(offsets_log=h.offsets_log, topics=h.topics)
    assert not reloaded.coordinator.has_group("gone")
