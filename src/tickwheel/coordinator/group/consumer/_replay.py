"""Rebuilding consumer-protocol groups from their records, as Kafka's
GroupMetadataManager.replay does when a coordinator loads a ``__consumer_offsets``
partition.

The records come in log order (the offsets loader collects them, key version 3 and up);
each one sets one piece of state, and a tombstone removes it:

- group epoch (key 3): creates the group; its tombstone, written last when a group is
  deleted, forgets it;
- subscription metadata (4) and target-assignment epoch (6): the group's;
- member metadata (5): creates or updates a member (its tombstone removes it), target
  assignment member (7) its target, current member assignment (8) its epochs, state and
  partitions (a tombstone resets them, should the member still be there).

A record that does not decode is logged and skipped: it costs what it held, never the
partition's load. Pure function of its input; safe from any thread.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence

from tickwheel.coordinator._errors import CorruptOffsetsRecordError
from tickwheel.coordinator.group._records import OtherRecord
from tickwheel.coordinator.group.consumer._group import ConsumerGroup
from tickwheel.coordinator.group.consumer._member import (
    JOIN_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from tickwheel.coordinator.group.consumer._records import (
    CONSUMER_GROUP_KEY_VERSIONS,
    CURRENT_MEMBER_ASSIGNMENT_KEY,
    GROUP_METADATA_KEY,
    MEMBER_METADATA_KEY,
    PARTITION_METADATA_KEY,
    TARGET_ASSIGNMENT_MEMBER_KEY,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    SubscriptionMetadataValue,
    TargetEpochValue,
    TargetMemberValue,
    decode,
)

_log = logging.getLogger(__name__)


def rebuild_groups(others: Sequence[OtherRecord]) -> dict[str, ConsumerGroup]:
    """The consumer groups that the records ``others`` (in log order) describe."""
    groups: dict[str, ConsumerGroup] = {}
    for other in others:
        if other.key_version not in CONSUMER_GROUP_KEY_VERSIONS:
            continue
        try:
            record = decode(other.key, other.value)
        except CorruptOffsetsRecordError as exc:
            _log.error(
                "skipping undecodable consumer group record at offset %d: %s",
                other.log_offset,
                exc,
            )
            continue
        _apply(groups, record.key_version, record.group_id, record.member_id, record.value)
    return groups


def _apply(
    groups: dict[str, ConsumerGroup],
    key_version: int,
    group_id: str,
    member_id: str | None,
    value: object,
) -> None:
    """Replay one record onto ``groups`` (Kafka's GroupMetadataManager.replay)."""
    if key_version == GROUP_METADATA_KEY:
        if isinstance(value, GroupEpochValue):
            groups.setdefault(group_id, ConsumerGroup(group_id)).group_epoch = value.epoch
        else:
            groups.pop(group_id, None)
        return
    group = groups.setdefault(group_id, ConsumerGroup(group_id))
    if key_version == PARTITION_METADATA_KEY:
        group.subscription_metadata = (
            {t.name: t for t in value.topics}
            if isinstance(value, SubscriptionMetadataValue)
            else {}
        )
    elif isinstance(value, TargetEpochValue):
        group.target_assignment_epoch = value.assignment_epoch
    elif member_id is not None:  # else a target-epoch tombstone: the group's follows
        _MEMBER_REPLAYS[key_version](group, member_id, value)


def _replay_member_metadata(group: ConsumerGroup, member_id: str, value: object) -> None:
    if not isinstance(value, MemberMetadataValue):
        group.remove_member(member_id)
        return
    member = group.members.get(member_id, ConsumerGroupMember(member_id=member_id))
    group.put_member(
        dataclasses.replace(
            member,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=value.subscribed_topic_names,
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
        )
    )


def _replay_target_member(group: ConsumerGroup, member_id: str, value: object) -> None:
    if isinstance(value, TargetMemberValue):
        group.target_assignment[member_id] = value.assignment
    else:
        group.target_assignment.pop(member_id, None)


def _replay_current_assignment(group: ConsumerGroup, member_id: str, value: object) -> None:
    member = group.members.get(member_id, ConsumerGroupMember(member_id=member_id))
    if isinstance(value, CurrentAssignmentValue):
        group.put_member(
            dataclasses.replace(
                member,
                member_epoch=value.member_epoch,
                previous_member_epoch=value.previous_member_epoch,
                state=value.state,
                assigned_partitions=value.assigned_partitions,
                partitions_pending_revocation=value.partitions_pending_revocation,
            )
        )
    elif member_id in group.members:
        group.put_member(
            dataclasses.replace(
                member,
                member_epoch=JOIN_MEMBER_EPOCH,
                previous_member_epoch=JOIN_MEMBER_EPOCH,
                state=MemberState.STABLE,
                assigned_partitions={},
                partitions_pending_revocation={},
            )
        )


_MEMBER_REPLAYS: Mapping[int, Callable[[ConsumerGroup, str, object], None]] = {
    MEMBER_METADATA_KEY: _replay_member_metadata,
    TARGET_ASSIGNMENT_MEMBER_KEY: _replay_target_member,
    CURRENT_MEMBER_ASSIGNMENT_KEY: _replay_current_assignment,
}
