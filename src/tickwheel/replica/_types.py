"""Values that travel between the API handlers and the ``ReplicaManager``.

Plain frozen records (Kafka's ``FetchParams``, ``FetchPartitionData``,
``PartitionResponse``) with Kafka's numeric error codes; no behaviour.

Immutable; safe from any thread.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from tickwheel.log import FetchDataInfo

ACKS_NONE = 0
"""Produce ``acks=0``: no response at all."""
ACKS_LEADER = 1
"""Produce ``acks=1``: answered once the leader has appended."""
ACKS_ALL = -1
"""Produce ``acks=all``: answered once every in-sync replica has the records."""
NO_TIMESTAMP = -1
UNKNOWN_OFFSET = -1
CONSUMER_REPLICA_ID = -1
"""``replica_id`` of a fetch from a consumer (a follower sends its broker id)."""
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
"""Kafka's ``Topic.isInternal`` set: topics only the broker's own coordinators write."""


def is_internal_topic(topic: str) -> bool:
    """Whether ``topic`` is internal: clients may not produce to it or delete its records."""
    return topic in INTERNAL_TOPICS


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A partition of a topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class FetchIsolation(enum.Enum):
    """How far a fetch may read: Kafka's FetchLogEnd / FetchHighWatermark / FetchTxnCommitted."""

    LOG_END = "log_end"
    """Followers read up to the log end offset."""
    HIGH_WATERMARK = "high_watermark"
    """Consumers (read_uncommitted) read below the high watermark."""
    TXN_COMMITTED = "txn_committed"
    """read_committed consumers read below the last stable offset."""

    @classmethod
    def of(cls, replica_id: int, isolation_level: int) -> FetchIsolation:
        """The isolation of a fetch from ``replica_id`` at Kafka's ``isolation_level``."""
        if replica_id >= 0:
            return cls.LOG_END
        return cls.TXN_COMMITTED if isolation_level == 1 else cls.HIGH_WATERMARK


@dataclass(frozen=True, slots=True)
class FetchParams:
    """The request-wide part of a fetch."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: FetchIsolation
    hard_max_bytes_limit: bool = False
    """Kafka's ``hardMaxBytesLimit``: no batch past ``max_bytes``, not even the first."""

    @property
    def is_from_follower(self) -> bool:
        """Whether a follower replica (not a consumer) sent the fetch."""
        return self.replica_id >= 0


@dataclass(frozen=True, slots=True)
class PartitionFetchInfo:
    """One partition of a fetch request."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchPartitionResult:
    """What a fetch returns for one partition (Kafka's ``FetchPartitionData``)."""

    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    data: FetchDataInfo | None = None

    @property
    def size_bytes(self) -> int:
        """Bytes of records returned."""
        return 0 if self.data is None else self.data.records.length


@dataclass(frozen=True, slots=True)
class ProducePartitionResult:
    """What a produce returns for one partition (Kafka's ``PartitionResponse``)."""

    error_code: int
    base_offset: int = UNKNOWN_OFFSET
    log_append_time_ms: int = NO_TIMESTAMP
    log_start_offset: int = UNKNOWN_OFFSET
    error_message: str | None = None
    # Each record refused by a per-record rule: its position in its batch and why.
    record_errors: tuple[tuple[int, str], ...] = ()
    # Not on the wire: records this append added (0 for a duplicate), for the
    # broker's MessagesInPerSec.
    appended_messages: int = 0

    def with_error_code(self, error_code: int) -> ProducePartitionResult:
        """This result answering ``error_code`` (``dataclasses.replace`` costs a few µs
        more, on every acks=all produce)."""
        return ProducePartitionResult(
            error_code,
            self.base_offset,
            self.log_append_time_ms,
            self.log_start_offset,
            self.error_message,
            self.record_errors,
            self.appended_messages,
        )


@dataclass(frozen=True, slots=True)
class DeleteRecordsPartitionResult:
    """What DeleteRecords returns for one partition."""

    error_code: int
    low_watermark: int = UNKNOWN_OFFSET

    def with_error_code(self, error_code: int) -> DeleteRecordsPartitionResult:
        """This result answering ``error_code``."""
        return DeleteRecordsPartitionResult(error_code, self.low_watermark)


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One WriteTxnMarkers entry: end ``producer_id``'s transaction on ``partitions``."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


TxnMarkerCallback = Callable[[dict[int, dict[TopicPartition, int]]], None]
"""Gets ``{producer id: {partition: error code}}`` once every marker's append finished."""
