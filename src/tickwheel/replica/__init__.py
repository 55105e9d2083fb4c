"""The replica layer: partitions, their logs, and the delayed produce/fetch/delete-records.

``ReplicaManager`` hosts the partitions (``Partition``: leader/follower shape, ISR, HW,
LEO over a ``tickwheel.log.Log``) and three purgatories — Produce, Fetch and
DeleteRecords — driven by the asyncio event loop. ``DelayedProduce``,
``DelayedFetch`` and ``DelayedDeleteRecords`` carry Kafka's completion cases in their
docstrings and code. ``LogManager`` keeps the logs under ``log.dirs`` and moves one
between them (``LogDirMove``, AlterReplicaLogDirs). ``ReplicationQuota`` throttles the
replication of listed partitions (Kafka's ``ReplicationQuotaManager``). Built on
``tickwheel.log``, ``tickwheel.purgatory`` and ``tickwheel.timer``; knows nothing of
sockets or the wire format.

Concurrency: everything runs on one event-loop thread (see ``_manager``).
"""

from tickwheel.replica._delayed_delete_records import DelayedDeleteRecords
from tickwheel.replica._delayed_fetch import DelayedFetch
from tickwheel.replica._delayed_produce import DelayedProduce
from tickwheel.replica._fetcher import (
    EpochEndOffset,
    FetcherConfig,
    FetchTransport,
    FollowerFetchPartition,
    FollowerFetchRequest,
    FollowerFetchResult,
    ReplicaFetcher,
    ReplicaFetcherManager,
)
from tickwheel.replica._isr import IsrManager, IsrWriter
from tickwheel.replica._leader_and_isr import NO_LEADER, LeaderAndIsr
from tickwheel.replica._leadership import become_follower, become_leader
from tickwheel.replica._log_manager import LogDirError, LogDirInfo, LogManager, check_log_dir
from tickwheel.replica._manager import PurgatoryConfig, ReplicaManager, refused_records
from tickwheel.replica._partition import OffsetSnapshot, Partition, PartitionError, ReplicaState
from tickwheel.replica._replication_quota import (
    UNBOUNDED_RATE,
    RateMeter,
    ReplicationQuota,
    throttled_partitions,
)
from tickwheel.replica._types import (
    ACKS_ALL,
    ACKS_LEADER,
    ACKS_NONE,
    CONSUMER_REPLICA_ID,
    INTERNAL_TOPICS,
    DeleteRecordsPartitionResult,
    FetchIsolation,
    FetchParams,
    FetchPartitionResult,
    PartitionFetchInfo,
    ProducePartitionResult,
    TopicPartition,
    TxnMarker,
    TxnMarkerCallback,
    is_internal_topic,
)

__all__ = [
    "ACKS_ALL",
    "ACKS_LEADER",
    "ACKS_NONE",
    "CONSUMER_REPLICA_ID",
    "INTERNAL_TOPICS",
    "NO_LEADER",
    "UNBOUNDED_RATE",
    "DelayedDeleteRecords",
    "DelayedFetch",
    "DelayedProduce",
    "DeleteRecordsPartitionResult",
    "EpochEndOffset",
    "FetchIsolation",
    "FetchParams",
    "FetchPartitionResult",
    "FetchTransport",
    "FetcherConfig",
    "FollowerFetchPartition",
    "FollowerFetchRequest",
    "FollowerFetchResult",
    "IsrManager",
    "IsrWriter",
    "LeaderAndIsr",
    "LogDirError",
    "LogDirInfo",
    "LogManager",
    "OffsetSnapshot",
    "Partition",
    "PartitionError",
    "PartitionFetchInfo",
    "ProducePartitionResult",
    "PurgatoryConfig",
    "RateMeter",
    "ReplicaFetcher",
    "ReplicaFetcherManager",
    "ReplicaManager",
    "ReplicaState",
    "ReplicationQuota",
    "TopicPartition",
    "TxnMarker",
    "TxnMarkerCallback",
    "become_follower",
    "become_leader",
    "check_log_dir",
    "is_internal_topic",
    "refused_records",
    "throttled_partitions",
]
