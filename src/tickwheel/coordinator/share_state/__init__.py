"""tickwheel.coordinator.share_state: Kafka's share coordinator, the durable share state.

Share groups (KIP-932) deliver records under acquisition locks; where each group stands
on each partition -- its start offset, which in-flight records are acknowledged or
archived, their delivery counts -- must outlive the broker that leads the partition.
The share coordinator keeps it in the compacted internal topic ``__share_group_state``.
The modules, lowest first:

- ``_config`` -- ``ShareCoordinatorConfig`` (``share.coordinator.*``).
- ``_records`` -- the ShareSnapshot key and value, Kafka's record format.
- ``_coordinator`` -- ``ShareCoordinator``: the states of the ``__share_group_state``
  partitions led here, loaded on election, written with acks=all, fenced by leader and
  state epochs.
- ``_persister`` -- ``CoordinatorPersister``: ``tickwheel.share_delivery.Persister`` over the
  coordinators of the cluster (this broker's directly, others' through a
  ``ShareStateTransport`` of Kafka's share-state requests).
- ``_apis`` -- ``ShareStateApis``: InitializeShareGroupState, ReadShareGroupState,
  WriteShareGroupState, DeleteShareGroupState, ReadShareGroupStateSummary (keys 83-87),
  and FindCoordinator for share-partition keys.
- ``_service`` -- ``ShareCoordinatorService``: the above inside a broker.

Share-group *membership* is the group coordinator's (``tickwheel.coordinator.group.share``)
and the delivery side -- share-partitions, locks, ShareFetch -- is ``tickwheel.share_delivery``,
which reads and writes its state only through the persister.
"""

from tickwheel.coordinator.share_state._apis import (
    DELETE_SHARE_GROUP_STATE,
    INITIALIZE_SHARE_GROUP_STATE,
    READ_SHARE_GROUP_STATE,
    READ_SHARE_GROUP_STATE_SUMMARY,
    SHARE_KEY_MIN_VERSION,
    UNINITIALIZED_START_OFFSET,
    WRITE_SHARE_GROUP_STATE,
    ShareStateApi,
    ShareStateApis,
    batches_from_wire,
    batches_to_wire,
    parse_coordinator_key,
)
from tickwheel.coordinator.share_state._config import (
    CLUSTER_SHARE_STATE_MIN_ISR,
    CLUSTER_SHARE_STATE_REPLICATION_FACTOR,
    ShareCoordinatorConfig,
)
from tickwheel.coordinator.share_state._coordinator import (
    NO_LEADER_EPOCH,
    ShareCoordinator,
    coordinator_key,
    partition_for,
)
from tickwheel.coordinator.share_state._persister import (
    CoordinatorPersister,
    ShareCoordinatorLocator,
    ShareStateTransport,
)
from tickwheel.coordinator.share_state._records import (
    SHARE_GROUP_STATE_TOPIC,
    ShareSnapshot,
    ShareStateRecordError,
    build_record_batch,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from tickwheel.coordinator.share_state._service import PERSISTER_TIMEOUT_MS, ShareCoordinatorService

__all__ = [
    "CLUSTER_SHARE_STATE_MIN_ISR",
    "CLUSTER_SHARE_STATE_REPLICATION_FACTOR",
    "DELETE_SHARE_GROUP_STATE",
    "INITIALIZE_SHARE_GROUP_STATE",
    "NO_LEADER_EPOCH",
    "PERSISTER_TIMEOUT_MS",
    "READ_SHARE_GROUP_STATE",
    "READ_SHARE_GROUP_STATE_SUMMARY",
    "SHARE_GROUP_STATE_TOPIC",
    "SHARE_KEY_MIN_VERSION",
    "UNINITIALIZED_START_OFFSET",
    "WRITE_SHARE_GROUP_STATE",
    "CoordinatorPersister",
    "ShareCoordinator",
    "ShareCoordinatorConfig",
    "ShareCoordinatorLocator",
    "ShareCoordinatorService",
    "ShareSnapshot",
    "ShareStateApi",
    "ShareStateApis",
    "ShareStateRecordError",
    "ShareStateTransport",
    "batches_from_wire",
    "batches_to_wire",
    "build_record_batch",
    "coordinator_key",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "parse_coordinator_key",
    "partition_for",
]
