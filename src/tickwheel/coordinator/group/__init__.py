"""tickwheel.coordinator.group: Kafka's group coordinator -- its classic protocol and
committed offsets here, the consumer and share group protocols in subpackages.

Consumers that ``subscribe`` form a *group*; one broker, the leader of the group's
``__consumer_offsets`` partition (``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``),
coordinates it. Which partition that is (``partition_for``), the ``CoordinatorNode``
that FindCoordinator names and the record batches come from ``tickwheel.coordinator``'s
root, shared with the other coordinators. The modules here, lowest first:

- ``_records`` -- offset-commit and group-metadata records in Kafka's own key/value
  format, in v2 record batches.
- ``_offsets_log`` -- ``OffsetsLog``, the two calls the coordinator needs from the
  topic (append a batch, read a partition back), and ``LocalOffsetsLog`` over
  ``tickwheel.log`` for a single broker.
- ``_consumer_protocol`` -- the topics a ``consumer`` member subscribes to, read from its
  protocol metadata.
- ``_group`` -- ``GroupMetadata``: states Empty, PreparingRebalance, CompletingRebalance,
  Stable, Dead; members, generations, leader, protocol vote, static members; committed
  offsets and when they expire; transactional offsets pending per producer.
- ``_delayed`` -- DelayedJoin, InitialDelayedJoin (``group.initial.rebalance.delay.ms``),
  DelayedHeartbeat.
- ``_manager`` -- ``GroupMetadataManager``: groups by id, loading a partition when this
  broker becomes its leader, storing generations and offsets, removing expired or
  deleted ones with tombstones.
- ``_coordinator`` -- ``GroupCoordinator``: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
  OffsetCommit, TxnOffsetCommit (and ``on_transaction_completed``, told of each
  transaction marker on ``__consumer_offsets``), OffsetFetch, ListGroups, DescribeGroups,
  DeleteGroups, OffsetDelete, and the periodic cleanup of expired offsets and dead groups
  (``offsets.retention.minutes``).
- ``_apis`` -- ``GroupApis``: those requests and FindCoordinator as kio entities in and out.
- ``_replica_offsets_log`` and ``_service`` -- ``ReplicaOffsetsLog`` and ``GroupService``:
  the coordinator inside a broker (offsets through its ReplicaManager, purgatories on its
  event loop).

Consumer-protocol groups (KIP-848, ``group.protocol=consumer``) are the subpackage
``consumer``: heartbeat-driven groups whose assignment the coordinator computes, with
their records in the same ``__consumer_offsets`` partitions and their offsets in this
package's manager; ``GroupService`` puts its ``ConsumerGroupApis`` in front of
``GroupApis``. Share groups' membership (KIP-932) is the subpackage ``share``
(ShareGroupHeartbeat, ShareGroupDescribe, and the administration of their offsets);
their durable state is the share coordinator's (``tickwheel.coordinator.share_state``).
Group ids are one namespace across the three protocols. The group coordinator's part in
a transaction is TxnOffsetCommit.

**The lock story.** Kafka's coordinator deadlocked twice on its locks: KAFKA-3994 (a
heartbeat expiring in one thread while another, holding the group lock, completed
delayed operations of the purgatory that wanted the same locks in the other order) and
KAFKA-8334 (an offset commit's append, made while holding a group lock, completed
delayed produces whose callbacks took *other* groups' locks). The rules here, each
closing one of those doors:

1. One lock per group (``GroupMetadata.lock``, re-entrant). It is the shared lock of
   that group's DelayedJoin and DelayedHeartbeat operations, and the watch keys of those
   operations (``GroupJoinKey(group)``, ``MemberKey(group, member)``) name only that
   group, so completing them while holding the lock takes no other lock. No code ever
   holds two groups' locks.
2. The purgatory holds none of its own locks while it calls operation code (its
   contract), so ``check_and_complete``/``try_complete_else_watch`` called under a group
   lock cannot invert an order with a purgatory lock.
3. Nothing leaves the coordinator under a group lock. Response callbacks, and appends
   to ``__consumer_offsets`` (whose completion, in a cluster, completes DelayedProduces
   and their callbacks take group locks: KAFKA-8334), are *deferred*: queued on the
   group's ``GroupLock`` and run by the thread that releases it last, after releasing.
   An append's completion callback then takes the group lock afresh, holding nothing.
4. The timer expires an operation without its lock; the coordinator's expiry code takes
   the group lock itself, as the outermost holder.
5. A transaction marker's completion reaches ``on_transaction_completed`` from the
   ReplicaManager after the marker's append (acks=all), outside any replica lock and
   with no group lock held (the group's own appends are deferred past their lock, rule
   3, so no DelayedProduce completes under one); it takes each group's lock in turn.
   Kafka hops to a scheduler thread for the same reason.

In the broker everything runs on the event loop thread (the purgatories' timers are
driven by ``AsyncioTimerDriver`` with an ``InlineExecutor``), so the locks are never
contended there; the rules make the library safe with threads as well.
"""

from tickwheel.coordinator.group._apis import (
    DEFAULT_CLIENT_HOST,
    GROUP_API_NAMES,
    GROUP_API_VERSIONS,
    LEAVE_GROUP_BATCHED,
    AskedPartitions,
    CommitTopic,
    GroupApis,
    PartitionChecker,
    PartitionError,
    asked_partitions,
    offset_commit_response,
    one_member_leaving,
    txn_offset_commit_response,
)
from tickwheel.coordinator.group._config import (
    CLUSTER_OFFSETS_TOPIC_REPLICATION_FACTOR,
    GroupConfig,
)
from tickwheel.coordinator.group._coordinator import (
    HEARTBEAT_PURGATORY,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    REBALANCE_PURGATORY,
    GroupCoordinator,
    GroupOverview,
    GroupSummary,
    JoinRequest,
    LeavingMember,
    MemberSummary,
)
from tickwheel.coordinator.group._delayed import DelayedHeartbeat, DelayedJoin, InitialDelayedJoin
from tickwheel.coordinator.group._group import (
    CommitRecordMetadataAndOffset,
    GroupLock,
    GroupMetadata,
    GroupState,
    JoinedMember,
    JoinGroupResult,
    MemberMetadata,
    SyncGroupResult,
)
from tickwheel.coordinator.group._manager import FetchedOffset, GroupMetadataManager
from tickwheel.coordinator.group._offsets_log import OFFSETS_TOPIC, LocalOffsetsLog, OffsetsLog
from tickwheel.coordinator.group._records import OffsetValue
from tickwheel.coordinator.group._replica_offsets_log import ReplicaOffsetsLog
from tickwheel.coordinator.group._service import GroupService

__all__ = [
    "CLUSTER_OFFSETS_TOPIC_REPLICATION_FACTOR",
    "DEFAULT_CLIENT_HOST",
    "GROUP_API_NAMES",
    "GROUP_API_VERSIONS",
    "HEARTBEAT_PURGATORY",
    "LEAVE_GROUP_BATCHED",
    "NEW_MEMBER_JOIN_TIMEOUT_MS",
    "OFFSETS_TOPIC",
    "REBALANCE_PURGATORY",
    "AskedPartitions",
    "CommitRecordMetadataAndOffset",
    "CommitTopic",
    "DelayedHeartbeat",
    "DelayedJoin",
    "FetchedOffset",
    "GroupApis",
    "GroupConfig",
    "GroupCoordinator",
    "GroupLock",
    "GroupMetadata",
    "GroupMetadataManager",
    "GroupOverview",
    "GroupService",
    "GroupState",
    "GroupSummary",
    "InitialDelayedJoin",
    "JoinGroupResult",
    "JoinRequest",
    "JoinedMember",
    "LeavingMember",
    "LocalOffsetsLog",
    "MemberMetadata",
    "MemberSummary",
    "OffsetValue",
    "OffsetsLog",
    "PartitionChecker",
    "PartitionError",
    "ReplicaOffsetsLog",
    "SyncGroupResult",
    "asked_partitions",
    "offset_commit_response",
    "one_member_leaving",
    "txn_offset_commit_response",
]
