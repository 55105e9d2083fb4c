"""Watch keys: the names of the events a delayed operation waits for.

A purgatory accepts any hashable key. These are the ones Kafka's server uses, as
frozen, slotted dataclasses (equal by value, hashable, immutable), each with Kafka's
``key_label`` for logs and metrics:

- ``TopicPartitionOperationKey(topic, partition)`` -- produce and fetch wait on
  partitions (an append, a high-watermark move, a leadership change).
- ``GroupJoinKey(group_id)`` -- a rebalance (DelayedJoin) waits on its group.
- ``MemberKey(group_id, member_id)`` -- a member's heartbeat expiry (DelayedHeartbeat).

Concurrency: immutable values; safe to share between threads.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TopicPartitionOperationKey:
    """Key of operations waiting on one partition (DelayedProduce, DelayedFetch)."""

    topic: str
    partition: int

    @property
    def key_label(self) -> str:
        """Kafka's label, ``<topic>-<partition>``."""
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class GroupJoinKey:
    """Key of the rebalance operation of one consumer group (DelayedJoin)."""

    group_id: str

    @property
    def key_label(self) -> str:
        """Kafka's label, ``join-<group_id>``."""
        return f"join-{self.group_id}"


@dataclass(frozen=True, slots=True)
class MemberKey:
    """Key of one group member's session expiry (DelayedHeartbeat)."""

    group_id: str
    member_id: str

    @property
    def key_label(self) -> str:
        """Kafka's label, ``<group_id>-<member_id>``."""
        return f"{self.group_id}-{self.member_id}"
