"""Reconciliation: how a member moves from its current assignment to its target.

Kafka's CurrentAssignmentBuilder, as one function. Given a member, the group's target
epoch and the member's target, what it reported owning in this heartbeat (None when
the heartbeat did not say), and who holds each partition now:

1. A member STABLE at the target epoch has nothing to do.
2. A member in UNREVOKED_PARTITIONS waits until its heartbeat no longer reports any of
   its ``partitions_pending_revocation``; then it moves on at epoch + 1 (from 3).
3. Otherwise (STABLE behind the target, UNRELEASED_PARTITIONS, or just acknowledged a
   revocation) the next step is computed per topic:
   kept = current ∩ target; to revoke = current - kept; to assign = target - kept,
   less the partitions another member still holds (*unreleased*).

   a. Something to revoke that the member still owns: it stays at its epoch in
      UNREVOKED_PARTITIONS, keeps ``kept`` and is asked to give up the rest. It does
      not get anything new yet: a partition is revoked, and the revocation
      acknowledged, before it is assigned elsewhere.
   b. Otherwise it reaches the target epoch with ``kept`` plus what it may take now,
      UNRELEASED_PARTITIONS if part of its target is still held by someone else
      (it gets it on a later heartbeat, once released), else STABLE.

Members never lose a partition they keep, so no member stops consuming while another
one's partitions move: there is no stop-the-world.

An UNKNOWN member (a state this coordinator does not know) that reports owned
partitions is fenced (``UnknownMemberStateError``) so that it rejoins from scratch.

Pure function; safe from any thread.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping

from tickwheel.coordinator.group.consumer._member import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
    normalized,
)


class UnknownMemberStateError(Exception):
    """The member is in a state this coordinator does not know: it must rejoin."""


def _still_owns(owned: Assignment | None, revoking: Assignment) -> bool:
    """True if the member may still own a partition of ``revoking`` (None: it did not say)."""
    if owned is None:
        return True
    return any(
        partitions & revoking.get(topic_id, frozenset()) for topic_id, partitions in owned.items()
    )


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    owners: Mapping[tuple[uuid.UUID, int], str],
) -> ConsumerGroupMember:
    """The member after this heartbeat (see the module docstring)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(member, member.member_epoch, target_epoch, target, owned, owners)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, member.partitions_pending_revocation):
            return member
        return _next_assignment(
            member, member.member_epoch + 1, target_epoch, target, owned, owners
        )
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target, owned, owners)
    if owned is None or owned:
        raise UnknownMemberStateError(member.member_id)
    return _next_assignment(member, target_epoch, target_epoch, target, owned, owners)


def _next_assignment(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    owners: Mapping[tuple[uuid.UUID, int], str],
) -> ConsumerGroupMember:
    kept: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    assigning: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    current = member.assigned_partitions
    for topic_id in {*target, *current}:
        wanted = target.get(topic_id, frozenset())
        have = current.get(topic_id, frozenset())
        kept[topic_id] = have & wanted
        revoking[topic_id] = have - wanted
        free = set()
        for partition in wanted - have:
            holder = owners.get((topic_id, partition))
            if holder is None or holder == member.member_id:
                free.add(partition)
            else:
                unreleased = True
        assigning[topic_id] = frozenset(free)
    kept_now = normalized(kept)
    revoking_now = normalized(revoking)
    if revoking_now and _still_owns(owned, revoking_now):
        return _moved(
            member, member_epoch, MemberState.UNREVOKED_PARTITIONS, kept_now, revoking_now
        )
    assigned = normalized(
        {
            topic_id: kept_now.get(topic_id, frozenset()) | assigning.get(topic_id, frozenset())
            for topic_id in {*kept_now, *assigning}
        }
    )
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _moved(member, target_epoch, state, assigned, {})


def _moved(
    member: ConsumerGroupMember,
    member_epoch: int,
    state: MemberState,
    assigned: Assignment,
    revoking: Assignment,
) -> ConsumerGroupMember:
    previous = member.previous_member_epoch
    if member_epoch != member.member_epoch:
        previous = member.member_epoch
    return dataclasses.replace(
        member,
        member_epoch=member_epoch,
        previous_member_epoch=previous,
        state=state,
        assigned_partitions=assigned,
        partitions_pending_revocation=revoking,
    )
