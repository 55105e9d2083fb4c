"""Watch keys: value semantics and Kafka's labels."""

from __future__ import annotations

import dataclasses

import pytest

from tickwheel.purgatory import GroupJoinKey, MemberKey, TopicPartitionOperationKey


def test_keys_are_equal_and_hash_alike_by_value() -> None:
    assert TopicPartitionOperationKey("t", 0) == TopicPartitionOperationKey("t", 0)
    assert hash(TopicPartitionOperationKey("t", 0)) == hash(TopicPartitionOperationKey("t", 0))
    assert TopicPartitionOperationKey("t", 0) != TopicPartitionOperationKey("t", 1)
    assert GroupJoinKey("g") == GroupJoinKey("g")
    assert MemberKey("g", "m") == MemberKey("g", "m")
    assert MemberKey("g", "m") != MemberKey("g", "n")
    assert len({GroupJoinKey("g"), MemberKey("g", "g"), TopicPartitionOperationKey("g", 0)}) == 3


@pytest.mark.parametrize(
    "key", [TopicPartitionOperationKey("t", 0), GroupJoinKey("g"), MemberKey("g", "m")]
)
def test_keys_are_frozen(key: object) -> None:
    field = dataclasses.fields(key)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(key, field, "x")


def test_key_labels_are_kafkas() -> None:
    assert TopicPartitionOperationKey("orders", 3).key_label == "orders-3"
    assert GroupJoinKey("billing").key_label == "join-billing"
    assert MemberKey("billing", "consumer-1").key_label == "billing-consumer-1"
