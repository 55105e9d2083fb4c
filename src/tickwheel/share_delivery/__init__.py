"""Share groups' delivery side (KIP-932): share-partitions, acquisition locks, ShareFetch.

Kafka's ``kafka.server.share``, beside ``replica/`` whose logs it reads. The modules,
lowest first:

- ``_persister`` -- the ``Persister`` interface for share state (start offset, record
  states, delivery counts), kept durable by the share coordinator;
- ``_config`` -- ``ShareConfig``: ``group.share.*`` lock, delivery and session settings;
- ``_lock`` -- ``AcquisitionLock``, one timer task per acquired batch;
- ``_partition`` -- ``SharePartition``: in-flight records and their states;
- ``_session`` -- ``ShareSessionCache``: share sessions and their epochs;
- ``_delayed_share_fetch`` -- ``DelayedShareFetch`` in the ``ShareFetch`` purgatory;
- ``_manager`` -- ``SharePartitionManager``: loads share-partitions through the
  persister, acquires from the logs, applies acknowledgements, wakes waiting fetches.

Share-group *membership* (heartbeats, assignment) is the group coordinator's:
``tickwheel.coordinator.group.share``.

Concurrency: everything runs on the broker's event loop.
"""

from tickwheel.share_delivery._config import (
    BY_DURATION,
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    SHARE_AUTO_OFFSET_RESET,
    SHARE_ISOLATION_LEVEL,
    SHARE_RECORD_LOCK_DURATION_MS,
    ShareConfig,
    by_duration_ms,
)
from tickwheel.share_delivery._delayed_share_fetch import DelayedShareFetch
from tickwheel.share_delivery._lock import AcquisitionLock
from tickwheel.share_delivery._manager import (
    ShareFetchPartitionResult,
    SharePartitionManager,
    aborted_batches,
    record_batches,
)
from tickwheel.share_delivery._partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    ShareAcknowledgeError,
    SharePartition,
)
from tickwheel.share_delivery._persister import (
    Persister,
    PersisterError,
    PersisterStateBatch,
    RecordState,
    ShareGroupState,
    SharePartitionKey,
)
from tickwheel.share_delivery._session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    ShareSession,
    ShareSessionCache,
    ShareSessionError,
    next_epoch,
)

__all__ = [
    "BY_DURATION",
    "EARLIEST",
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "LATEST",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "SHARE_AUTO_OFFSET_RESET",
    "SHARE_ISOLATION_LEVEL",
    "SHARE_RECORD_LOCK_DURATION_MS",
    "AcknowledgeType",
    "AcknowledgementBatch",
    "AcquiredRecords",
    "AcquisitionLock",
    "DelayedShareFetch",
    "Persister",
    "PersisterError",
    "PersisterStateBatch",
    "RecordState",
    "ShareAcknowledgeError",
    "ShareConfig",
    "ShareFetchPartitionResult",
    "ShareGroupState",
    "SharePartition",
    "SharePartitionKey",
    "SharePartitionManager",
    "ShareSession",
    "ShareSessionCache",
    "ShareSessionError",
    "aborted_batches",
    "by_duration_ms",
    "next_epoch",
    "record_batches",
]
