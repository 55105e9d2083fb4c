"""``Partition``: one partition's replica on this broker, leader or follower.

Kafka's ``Partition`` holds the local ``Log`` and, when this broker leads, the state
of every remote replica (its LEO, learnt from its fetches, and when it last caught
up), the ISR, and the high watermark rule: HW = the minimum LEO over the ISR. On one
node the ISR is this broker alone, so every append moves the HW to the new LEO at
once; the shape is kept so that replication adds followers, not a redesign.

Concurrency: a partition belongs to the ``ReplicaManager``'s event loop; every method
is called on that thread, so no lock guards its fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from tickwheel.log import AppendOrigin, LogAppendInfo, LogOffsetMetadata, VerificationGuard
from tickwheel.log import Log as _Log
from tickwheel.replica._types import ACKS_ALL, FetchIsolation, TopicPartition


class PartitionError(Exception):
    """A request on this partition that gets ``error_code`` instead of an answer."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of a remote replica: Kafka's ``Replica`` state."""

    broker_id: int
    log_end_offset: int = -1
    # Kafka's caught-up bookkeeping, from the follower's fetches (see ``_isr``).
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class OffsetSnapshot:
    """The offsets a DelayedFetch compares against the fetch position."""

    log_start_offset: int
    log_end_offset: LogOffsetMetadata
    high_watermark: LogOffsetMetadata
    last_stable_offset: LogOffsetMetadata

    def end_for(self, isolation: FetchIsolation) -> LogOffsetMetadata:
        """The offset a fetch with ``isolation`` may read up to."""
        if isolation is FetchIsolation.LOG_END:
            return self.log_end_offset
        if isolation is FetchIsolation.TXN_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark


@dataclass(slots=True)
class Partition:
    """A partition replica: its log, leadership, ISR and the remote replicas' state."""

    topic_partition: TopicPartition
    log: _Log
    local_broker_id: int
    leader_id: int = -1
    leader_epoch: int = 0
    assigned_replicas: tuple[int, ...] = ()
    # The replicas a reassignment adds and removes (among ``assigned_replicas``).
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    isr: set[int] = field(default_factory=set)
    remote_replicas: dict[int, ReplicaState] = field(default_factory=dict)
    min_insync_replicas: int = 1
    offline: bool = False
    # The log end when this broker last became leader (Kafka's leaderEpochStartOffset):
    # until the HW reaches it, offsets by time are not known yet.
    leader_epoch_start_offset: int = -1

    @property
    def replication_factor(self) -> int:
        """The replicas it should have: while reassigned, the original ones (Kafka's)."""
        return len([r for r in self.assigned_replicas if r not in self.adding_replicas])

    @property
    def is_reassigning(self) -> bool:
        """Whether a reassignment is moving its replicas."""
        return bool(self.adding_replicas or self.removing_replicas)

    @classmethod
    def leader(
        cls,
        topic_partition: TopicPartition,
        log: _Log,
        broker_id: int,
        *,
        min_insync_replicas: int = 1,
    ) -> Partition:
        """A partition that this broker leads, with itself as the only replica."""
        return cls(
            topic_partition=topic_partition,
            log=log,
            local_broker_id=broker_id,
            leader_id=broker_id,
            assigned_replicas=(broker_id,),
            isr={broker_id},
            min_insync_replicas=min_insync_replicas,
        )

    @property
    def is_leader(self) -> bool:
        """Whether this broker leads the partition."""
        return self.leader_id == self.local_broker_id

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Raise unless this broker leads at ``current_leader_epoch`` (-1: any epoch).

        The epoch is checked first, as Kafka's ``localLogWithEpochOrThrow`` does: a
        client with a stale epoch learns it is fenced (and refreshes its metadata)
        whether or not this broker still leads.
        """
        if self.offline:
            raise PartitionError(ErrorCode.kafka_storage_error)
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise PartitionError(ErrorCode.fenced_leader_epoch)
            if current_leader_epoch > self.leader_epoch:
                raise PartitionError(ErrorCode.unknown_leader_epoch)
        if not self.is_leader:
            raise PartitionError(ErrorCode.not_leader_or_follower)

    def append_records_to_leader(
        self,
        records: bytes,
        required_acks: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> tuple[LogAppendInfo, bool]:
        """Append as leader; returns the append info and whether the HW moved."""
        self.check_leader()
        if required_acks == ACKS_ALL and len(self.isr) < self.min_insync_replicas:
            raise PartitionError(
                ErrorCode.not_enough_replicas,
                f"ISR {sorted(self.isr)} is smaller than min.insync.replicas",
            )
        info = self.log.append_as_leader(records, self.leader_epoch, origin, verification_guard)
        return info, self.maybe_increment_leader_hw()

    def start_leader_epoch(self) -> None:
        """Record that this broker's leader epoch starts at its log end (Kafka's
        ``makeLeader``), so OffsetsForLeaderEpoch answers it before anything is written."""
        self.leader_epoch_start_offset = self.log.log_end_offset
        self.log.maybe_assign_epoch_start_offset(self.leader_epoch, self.leader_epoch_start_offset)

    def high_watermark_lags_epoch_start(self) -> bool:
        """Whether this leader's HW is still below where its leader epoch started: just
        after an election, until the followers have fetched up to there."""
        return self.leader_epoch_start_offset > self.log.high_watermark

    def maybe_increment_leader_hw(self) -> bool:
        """Move the HW to the minimum LEO over the ISR if that is higher; True if moved.
        An ISR below ``min.insync.replicas`` (at most the replica count) holds the HW
        where it is: Kafka's strict min ISR, which makes the replicas that leave such
        an ISR eligible leaders."""
        if len(self.isr) < min(self.min_insync_replicas, len(self.assigned_replicas)):
            return False
        end = self.log.log_end_offset
        for broker_id in self.isr:
            replica = self.remote_replicas.get(broker_id)
            if replica is not None:
                end = min(end, replica.log_end_offset)
        if end > self.log.high_watermark:
            self.log.update_high_watermark(end)
            return True
        return False

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """Whether every ISR member has ``required_offset``, and the error if any."""
        if not self.is_leader:
            return False, ErrorCode.not_leader_or_follower
        if self.log.high_watermark >= required_offset:
            if len(self.isr) < self.min_insync_replicas:
                return True, ErrorCode.not_enough_replicas_after_append
            return True, ErrorCode.none
        return False, ErrorCode.none

    def fetch_offset_snapshot(
        self, current_leader_epoch: int, fetch_only_leader: bool
    ) -> OffsetSnapshot:
        """The log's bounds now, after checking leadership when required."""
        if fetch_only_leader:
            self.check_leader(current_leader_epoch)
        log = self.log
        return OffsetSnapshot(
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset_metadata,
            high_watermark=log.high_watermark_metadata,
            last_stable_offset=log.last_stable_offset_metadata,
        )

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int) -> bool:
        """Record a follower's LEO from its fetch; True if that moved the HW."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None or not self.is_leader or self.offline:
            return False
        replica.log_end_offset = fetch_offset
        return self.maybe_increment_leader_hw()

    def low_watermark(self) -> int:
        """The smallest log start offset over the replicas (only the leader's, on one node)."""
        return self.log.log_start_offset

    def last_stable_offset(self) -> int:
        """The last stable offset: read_committed fetches stop here."""
        return self.log.last_stable_offset
