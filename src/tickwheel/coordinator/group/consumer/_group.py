"""A consumer-protocol group (KIP-848), as Kafka's ConsumerGroup: epochs, members, target.

Three epochs order everything. The *group epoch* goes up whenever the inputs of the
assignment change: a member joins, leaves or is fenced, a subscription changes, or a
subscribed topic appears, disappears or grows. The *target-assignment epoch* is the
group epoch the last computed target assignment (one ``Assignment`` per member) was
computed for; while it is behind, the group is ASSIGNING. Each member then moves to the
target at its own pace (its *member epoch*, see ``_member``): while some member is not
STABLE at the target epoch the group is RECONCILING, and once all are it is STABLE. A
group without members is EMPTY; DEAD is a deleted (or unloaded) group.

``subscription_metadata`` is what the last assignment was computed from: each subscribed
topic's name, id and partition count (``subscribed_names``: the names the members'
subscriptions resolved to, existing or not). The coordinator compares it with the
broker's topics on every heartbeat, looking up only the subscribed names unless a member
subscribes by regex; a difference bumps the group epoch (Kafka refreshes it on a
deadline instead).

``partition_owners`` answers Kafka's ``currentPartitionEpoch``: which member still holds a
partition (assigned or pending revocation). A partition is given to its new owner only
once nobody holds it, which is what lets members keep all their other partitions while
one moves (no stop-the-world).

Concurrency contract: not thread-safe; the coordinator guards every group with its lock.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from tickwheel.coordinator.group.consumer._member import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
)


class ConsumerGroupState(enum.Enum):
    """The group's state, with the names ListGroups and DescribeGroups show."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A subscribed topic as the last assignment saw it."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(slots=True)
class ConsumerGroup:
    """One group's state (see the module docstring)."""

    group_id: str
    group_epoch: int = 0
    target_assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    # The topic names the members subscribe to, by name or regex, when last resolved.
    subscribed_names: frozenset[str] = frozenset()
    dead: bool = False

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's ConsumerGroup state, derived from the epochs and members."""
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.target_assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if (
                member.member_epoch != self.target_assignment_epoch
                or member.state is not MemberState.STABLE
            ):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def put_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace ``member`` (and its static instance id)."""
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        """Forget a member, its target assignment and its instance id."""
        member = self.members.pop(member_id, None)
        self.target_assignment.pop(member_id, None)
        if (
            member is not None
            and member.instance_id is not None
            and self.static_members.get(member.instance_id) == member_id
        ):
            del self.static_members[member.instance_id]
        return member

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        """The member that holds ``instance_id``, if any."""
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def partition_owners(self) -> dict[tuple[uuid.UUID, int], str]:
        """Which member holds each owned partition (assigned or pending revocation)."""
        owners: dict[tuple[uuid.UUID, int], str] = {}
        for member in self.members.values():
            for owned in (member.assigned_partitions, member.partitions_pending_revocation):
                for topic_id, partitions in owned.items():
                    for partition in partitions:
                        owners[(topic_id, partition)] = member.member_id
        return owners

    def subscribed_topic_names(self) -> frozenset[str]:
        """Every topic name some member subscribes to by name."""
        return frozenset(
            name for member in self.members.values() for name in member.subscribed_topic_names
        )
