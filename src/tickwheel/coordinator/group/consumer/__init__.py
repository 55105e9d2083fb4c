"""tickwheel.coordinator.group.consumer: consumer-protocol groups (KIP-848,
``group.protocol=consumer``).

In the consumer protocol the coordinator, not a group leader, assigns partitions, and
members move to their assignment one heartbeat at a time: no JoinGroup/SyncGroup
barrier, no stop-the-world. The modules, lowest first:

- ``_member`` -- ``ConsumerGroupMember``: epochs, state, assigned partitions and those
  pending revocation (Kafka's ConsumerGroupMember, MemberState).
- ``_group`` -- ``ConsumerGroup``: group epoch, target-assignment epoch, members, target
  assignment, subscribed topics' metadata; states EMPTY, ASSIGNING, RECONCILING, STABLE,
  DEAD.
- ``_assignors`` -- the server-side ``uniform`` and ``range`` assignors.
- ``_reconciliation`` -- how a member moves towards its target (CurrentAssignmentBuilder).
- ``_records`` -- the group's records in ``__consumer_offsets`` (key versions 3 to 8).
- ``_replay`` -- groups rebuilt from those records when a partition is loaded.
- ``_coordinator`` -- ``ConsumerGroupCoordinator``: ConsumerGroupHeartbeat, session and
  rebalance timeouts on the timing wheel, ConsumerGroupDescribe, offset-commit checks,
  deletion, migration to and from classic groups, loading and unloading partitions.
- ``_apis`` -- ``ConsumerGroupApis``: ConsumerGroupHeartbeat (68) and
  ConsumerGroupDescribe (69) as kio entities, and the classic group APIs for group ids
  that name a consumer-protocol group, in front of ``tickwheel.coordinator.GroupApis``.

The package sits inside ``tickwheel.coordinator.group`` and uses its offsets manager, record
batches and offsets log; it knows the broker's topics only through an injected
``TopicCatalog`` (topic ids, names and partition counts).
"""

from tickwheel.coordinator.group.consumer._apis import (
    CONSUMER_GROUP_DESCRIBE_KEY,
    CONSUMER_GROUP_HEARTBEAT_KEY,
    GROUP_API_NAMES_WITH_CONSUMER,
    GROUP_API_VERSIONS_WITH_CONSUMER,
    OFFSET_FETCH_BATCHED,
    ConsumerGroupApis,
)
from tickwheel.coordinator.group.consumer._assignors import (
    ASSIGNORS,
    RANGE_ASSIGNOR,
    UNIFORM_ASSIGNOR,
    Assignor,
    MemberSpec,
    range_assign,
    uniform_assign,
)
from tickwheel.coordinator.group.consumer._coordinator import (
    CONSUMER_GROUP_TYPE,
    ConsumerGroupCoordinator,
    DescribedGroup,
    HeartbeatRequest,
    HeartbeatResult,
    TopicCatalog,
)
from tickwheel.coordinator.group.consumer._group import (
    ConsumerGroup,
    ConsumerGroupState,
    TopicMetadata,
)
from tickwheel.coordinator.group.consumer._member import (
    JOIN_MEMBER_EPOCH,
    LEAVE_MEMBER_EPOCH,
    LEAVE_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupMember,
    MemberState,
)
from tickwheel.coordinator.group.consumer._reconciliation import reconcile

__all__ = [
    "ASSIGNORS",
    "CONSUMER_GROUP_DESCRIBE_KEY",
    "CONSUMER_GROUP_HEARTBEAT_KEY",
    "CONSUMER_GROUP_TYPE",
    "GROUP_API_NAMES_WITH_CONSUMER",
    "GROUP_API_VERSIONS_WITH_CONSUMER",
    "JOIN_MEMBER_EPOCH",
    "LEAVE_MEMBER_EPOCH",
    "LEAVE_STATIC_MEMBER_EPOCH",
    "OFFSET_FETCH_BATCHED",
    "RANGE_ASSIGNOR",
    "UNIFORM_ASSIGNOR",
    "Assignment",
    "Assignor",
    "ConsumerGroup",
    "ConsumerGroupApis",
    "ConsumerGroupCoordinator",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "DescribedGroup",
    "HeartbeatRequest",
    "HeartbeatResult",
    "MemberSpec",
    "MemberState",
    "TopicCatalog",
    "TopicMetadata",
    "range_assign",
    "reconcile",
    "uniform_assign",
]
