"""Consumer-group records: Kafka's bytes, and a round trip through ``decode``."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from tickwheel.coordinator.group.consumer import ConsumerGroupMember, MemberState, TopicMetadata
from tickwheel.coordinator.group.consumer._records import (
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    SubscriptionMetadataValue,
    TargetMemberValue,
    current_assignment_record,
    decode,
    group_epoch_record,
    member_metadata_record,
    member_tombstones,
    subscription_metadata_record,
    target_member_record,
)

names = st.text(min_size=1, max_size=20)
assignments = st.dictionaries(
    st.uuids(), st.frozensets(st.integers(0, 2**31 - 1), min_size=1, max_size=5), max_size=4
)


def test_group_epoch_record_is_kafkas_bytes() -> None:
    key, value = group_epoch_record("g", 7)
    assert key == b"\x00\x03\x00\x01g"
    # version 0, epoch 7, no tagged fields
    assert value == b"\x00\x00\x00\x00\x00\x07\x00"
    assert decode(key, value).value == GroupEpochValue(7)


@given(
    names,
    names,
    st.none() | names,
    st.lists(names, max_size=4),
    st.none() | names,
    st.integers(-1, 2**31 - 1),
)
def test_member_metadata_round_trip(
    group_id: str,
    member_id: str,
    instance_id: str | None,
    topics: list[str],
    regex: str | None,
    rebalance_timeout_ms: int,
) -> None:
    member = ConsumerGroupMember(
        member_id=member_id,
        instance_id=instance_id,
        client_id="c",
        client_host="/h",
        subscribed_topic_names=tuple(topics),
        subscribed_topic_regex=regex,
        rebalance_timeout_ms=rebalance_timeout_ms,
        server_assignor="uniform",
    )
    record = decode(*member_metadata_record(group_id, member))
    assert (record.group_id, record.member_id) == (group_id, member_id)
    assert record.value == MemberMetadataValue(
        instance_id, None, "c", "/h", tuple(topics), regex, rebalance_timeout_ms, "uniform"
    )


@given(names, assignments, assignments, st.sampled_from(list(MemberState)))
def test_assignment_records_round_trip(
    member_id: str,
    assigned: dict[uuid.UUID, frozenset[int]],
    revoking: dict[uuid.UUID, frozenset[int]],
    state: MemberState,
) -> None:
    member = ConsumerGroupMember(
        member_id=member_id,
        member_epoch=5,
        previous_member_epoch=4,
        state=state,
        assigned_partitions=assigned,
        partitions_pending_revocation=revoking,
    )
    current = decode(*current_assignment_record("g", member)).value
    assert current == CurrentAssignmentValue(5, 4, state, assigned, revoking)
    target = decode(*target_member_record("g", member_id, assigned)).value
    assert target == TargetMemberValue(assigned)


def test_subscription_metadata_and_tombstones() -> None:
    topic = TopicMetadata(uuid.UUID(int=9), "orders", 4)
    record = decode(*subscription_metadata_record("g", [topic]))
    assert record.value == SubscriptionMetadataValue((topic,))
    versions = [decode(key, value).key_version for key, value in member_tombstones("g", "m")]
    assert versions == [8, 7, 5]
    assert all(value is None for _key, value in member_tombstones("g", "m"))
