"""A member of a consumer-protocol group (KIP-848), as Kafka's ConsumerGroupMember.

A member is an immutable value: every heartbeat that changes it builds a new one with
``dataclasses.replace``, so the coordinator can compare the old and the new member to
know what to write to ``__consumer_offsets`` (member metadata when the subscription
changed, the current assignment when the epochs, state or partitions changed).

Epochs: ``member_epoch`` is the epoch the member must send in its next heartbeat; it
moves up to the group's target-assignment epoch once the member owns nothing it must
give up. ``previous_member_epoch`` is the epoch before the last bump, accepted once more
in case the response carrying the bump was lost. ``state`` is Kafka's MemberState
(its byte values are written in the current-assignment record):

- STABLE: the member owns its whole share of the target assignment at its epoch;
- UNREVOKED_PARTITIONS: it must first give up ``partitions_pending_revocation`` (it
  keeps the rest, ``assigned_partitions``) and acknowledge that in a heartbeat;
- UNRELEASED_PARTITIONS: its epoch is the target's, but some partitions of its target
  still belong to another member that has not yet revoked them.

Assignments are maps topic id -> frozen set of partitions, never holding an empty set.

Immutable values; share them freely between threads.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Assignment = Mapping[uuid.UUID, frozenset[int]]
"""Partitions by topic id; a topic with no partition is left out."""

EMPTY_ASSIGNMENT: Assignment = {}

JOIN_MEMBER_EPOCH = 0
"""The epoch a member sends to join (ConsumerGroupHeartbeat)."""
LEAVE_MEMBER_EPOCH = -1
"""The epoch a member sends to leave; also "no member" in an admin's OffsetCommit."""
LEAVE_STATIC_MEMBER_EPOCH = -2
"""The epoch a static member sends to leave for now, keeping its assignment."""


class MemberState(enum.IntEnum):
    """Kafka's MemberState, with the byte it is written as."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


def normalized(assignment: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
    """``assignment`` with frozen sets and without empty topics."""
    frozen = {topic_id: frozenset(partitions) for topic_id, partitions in assignment.items()}
    return {topic_id: partitions for topic_id, partitions in frozen.items() if partitions}


def is_subset(owned: Assignment, of: Assignment) -> bool:
    """True if every partition of ``owned`` is in ``of``."""
    return all(
        partitions <= of.get(topic_id, frozenset()) for topic_id, partitions in owned.items()
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMember:
    """One member: who it is, what it subscribes to, its epochs and its partitions."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = JOIN_MEMBER_EPOCH
    previous_member_epoch: int = JOIN_MEMBER_EPOCH
    state: MemberState = MemberState.STABLE
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)

    @property
    def has_left_temporarily(self) -> bool:
        """True for a static member that left with epoch -2 and keeps its assignment."""
        return self.member_epoch == LEAVE_STATIC_MEMBER_EPOCH

    def same_metadata(self, other: ConsumerGroupMember) -> bool:
        """True if the member-metadata record of ``other`` would be the same as this one's."""
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
        ) == (
            other.instance_id,
            other.rack_id,
            other.client_id,
            other.client_host,
            other.subscribed_topic_names,
            other.subscribed_topic_regex,
            other.rebalance_timeout_ms,
            other.server_assignor,
        )

    def same_assignment(self, other: ConsumerGroupMember) -> bool:
        """True if the current-assignment record of ``other`` would be the same."""
        return (
            self.member_epoch,
            self.previous_member_epoch,
            self.state,
            normalized(self.assigned_partitions),
            normalized(self.partitions_pending_revocation),
        ) == (
            other.member_epoch,
            other.previous_member_epoch,
            other.state,
            normalized(other.assigned_partitions),
            normalized(other.partitions_pending_revocation),
        )
