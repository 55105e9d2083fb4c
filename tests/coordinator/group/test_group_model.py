"""Random member behaviour on a manual clock never breaks the group's invariants.

A hypothesis state machine drives one group with joins (new and rejoining members),
syncs, heartbeats, leaves and the passing of time, and checks after every step what
Kafka's GroupMetadata promises: the waiting-join count matches the members, the leader
is a member, an Empty group has no members, the protocol counts match the members'
protocols, no request is answered twice, every callback runs outside the group lock,
and a member has at most one pending DelayedHeartbeat.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tickwheel.coordinator.group import GroupMetadata, GroupState

from .harness import Harness, Replies, make_config

GROUP = "model"
SESSION_MS = 300
REBALANCE_MS = 500
PROTOCOL_CHOICES = ((("range", b"r"),), (("range", b"r"), ("roundrobin", b"rr")))


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.harness = Harness(make_config(group_initial_rebalance_delay_ms=50))
        self.known: list[str] = []  # member ids the "clients" have learnt
        self.replies: list[Replies] = []

    def teardown(self) -> None:
        self.harness.close()

    def _group(self) -> GroupMetadata | None:
        return self.harness.manager.get_group(GROUP)

    def _learn(self, replies: Replies) -> None:
        self.replies.append(replies)
        for result in replies.joins:
            if result.member_id and result.member_id not in self.known:
                self.known.append(result.member_id)

    @rule(protocols=st.sampled_from(PROTOCOL_CHOICES), require_id=st.booleans())
    def new_member_joins(self, protocols: tuple[tuple[str, bytes], ...], require_id: bool) -> None:
        replies = self.harness.join(
            GROUP,
            protocols=protocols,
            require_known_member_id=require_id,
            session_ms=SESSION_MS,
            rebalance_ms=REBALANCE_MS,
        )
        self._learn(replies)

    @rule(data=st.data(), protocols=st.sampled_from(PROTOCOL_CHOICES))
    def known_member_rejoins(
        self, data: st.DataObject, protocols: tuple[tuple[str, bytes], ...]
    ) -> None:
        if not self.known:
            return
        member_id = data.draw(st.sampled_from(self.known))
        replies = self.harness.join(
            GROUP,
            member_id,
            protocols=protocols,
            require_known_member_id=True,
            session_ms=SESSION_MS,
            rebalance_ms=REBALANCE_MS,
        )
        self._learn(replies)

    @rule(data=st.data())
    def member_syncs(self, data: st.DataObject) -> None:
        group = self._group()
        if group is None or not self.known:
            return
        member_id = data.draw(st.sampled_from(self.known))
        assignments = {m: m.encode() for m in group.members}
        self.replies.append(self.harness.sync(GROUP, member_id, group.generation_id, assignments))

    @rule(data=st.data())
    def member_heartbeats(self, data: st.DataObject) -> None:
        group = self._group()
        if group is None or not self.known:
            return
        member_id = data.draw(st.sampled_from(self.known))
        self.harness.heartbeat(GROUP, member_id, group.generation_id)

    @rule(data=st.data())
    def member_leaves(self, data: st.DataObject) -> None:
        from tickwheel.coordinator.group import LeavingMember  # noqa: PLC0415

        if not self.known:
            return
        member_id = data.draw(st.sampled_from(self.known))
        self.harness.coordinator.handle_leave_group(
            GROUP, [LeavingMember(member_id, None)], lambda _error, _members: None
        )

    @rule(ms=st.integers(min_value=1, max_value=2 * REBALANCE_MS))
    def time_passes(self, ms: int) -> None:
        self.harness.advance(ms)

    @invariant()
    def group_is_consistent(self) -> None:
        group = self._group()
        if group is None:
            return
        members = group.members.values()
        assert group.num_members_awaiting_join == sum(m.is_awaiting_join for m in members)
        if group.members:
            assert group.leader_id in group.members
        if group.is_in(GroupState.EMPTY):
            assert not group.members
        expected = Counter(name for m in members for name in m.protocol_names)
        assert +group.supported_protocols == expected
        for instance_id, member_id in group.static_members.items():
            assert group.members[member_id].group_instance_id == instance_id
        assert not group.lock.held

    @invariant()
    def answers_come_once(self) -> None:
        for replies in self.replies:
            assert len(replies.joins) <= 1
            assert len(replies.syncs) <= 1

    @invariant()
    def heartbeats_stay_bounded(self) -> None:
        group = self._group()
        if group is None:
            return
        live = len(group.members) + len(group.pending_members)
        assert self.harness.coordinator.heartbeat_purgatory.num_delayed <= live


GroupMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestGroupMachine = GroupMachine.TestCase
