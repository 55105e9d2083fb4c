"""Share groups' membership (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe.

- ``_config`` -- ``ShareGroupConfig``: ``group.share.*`` session, heartbeat, size;
- ``_assignor`` -- Kafka's ``simple`` share assignor;
- ``_coordinator`` -- ``ShareGroupCoordinator``: members, epochs, sessions on the
  timing wheel, assignment, describe and list;
- ``_admin`` -- ``ShareGroupAdmin``: Describe/Alter/DeleteShareGroupOffsets and
  DeleteGroups of share groups, over the share state's persister.

Their durable state is the share coordinator's (``tickwheel.coordinator.share_state``);
the records' side (share-partitions, locks, ShareFetch) is ``tickwheel.share_delivery``.

Concurrency: the broker's event loop only.
"""

from tickwheel.coordinator.group.share._admin import (
    PartitionOffset,
    ShareGroupAdmin,
    ShareGroupTopology,
    ShareStateAdmin,
    TopicOffsets,
)
from tickwheel.coordinator.group.share._assignor import assign
from tickwheel.coordinator.group.share._config import ShareGroupConfig
from tickwheel.coordinator.group.share._coordinator import (
    SHARE_GROUP_TYPE,
    ShareGroup,
    ShareGroupCoordinator,
    ShareGroupState,
    ShareMember,
)

__all__ = [
    "SHARE_GROUP_TYPE",
    "PartitionOffset",
    "ShareGroup",
    "ShareGroupAdmin",
    "ShareGroupConfig",
    "ShareGroupCoordinator",
    "ShareGroupState",
    "ShareGroupTopology",
    "ShareMember",
    "ShareStateAdmin",
    "TopicOffsets",
    "assign",
]
