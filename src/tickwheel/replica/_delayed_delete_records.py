"""``DelayedDeleteRecords``: a DeleteRecords waiting for every replica to drop the records.

The leader moves its log start offset at once; the request is done when the *low
watermark* (the smallest log start offset over the replicas) reaches the requested
offset. One operation per request, watched under each partition, in Kafka's cases:

- Case A: the partition is unknown to this broker → UNKNOWN_TOPIC_OR_PARTITION.
- Case B: this broker no longer leads it → NOT_LEADER_OR_FOLLOWER.
- Case C: this broker leads it and the low watermark reached the requested offset.

Each pending partition has REQUEST_TIMED_OUT preset, answered if the timeout comes
first. With one replica the low watermark is the leader's log start offset, so the
first check completes it; the purgatory is kept for the followers replication adds.

Concurrency: runs on the ReplicaManager's event-loop thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kio.schema.errors import ErrorCode

from tickwheel.purgatory import DelayedOperation
from tickwheel.replica._partition import Partition
from tickwheel.replica._partition_status import PartitionStatus, any_pending, preset_timeouts
from tickwheel.replica._types import DeleteRecordsPartitionResult, TopicPartition

DeleteRecordsPartitionStatus = PartitionStatus[DeleteRecordsPartitionResult]
"""A partition of a delayed DeleteRecords: waits for the low watermark to reach its offset."""

DeleteRecordsCallback = Callable[[dict[TopicPartition, DeleteRecordsPartitionResult]], None]


class DelayedDeleteRecords(DelayedOperation):
    """Waits until every partition's low watermark reaches its requested offset."""

    def __init__(
        self,
        delay_ms: int,
        statuses: Mapping[TopicPartition, DeleteRecordsPartitionStatus],
        get_partition: Callable[[TopicPartition], Partition | None],
        callback: DeleteRecordsCallback,
    ) -> None:
        super().__init__(delay_ms)
        self.statuses = dict(statuses)
        self._get_partition = get_partition
        self._callback = callback
        preset_timeouts(self.statuses.values())

    def try_complete(self) -> bool:
        """Settle every partition that can be settled; complete when none is pending."""
        for tp, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = self._get_partition(tp)
            if partition is None:
                # Case A: the partition is gone from this broker.
                low_watermark, error = -1, ErrorCode.unknown_topic_or_partition
            elif not partition.is_leader:
                # Case B: leadership moved away.
                low_watermark, error = -1, ErrorCode.not_leader_or_follower
            else:
                # Case C: the low watermark is the smallest log start over the replicas.
                low_watermark, error = partition.low_watermark(), ErrorCode.none
                if low_watermark < status.required_offset:
                    continue
            status.acks_pending = False
            status.result = DeleteRecordsPartitionResult(error, low_watermark)
        if any_pending(self.statuses.values()):
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        """Nothing beyond the preset timeouts: the purgatory counts the expiration."""

    def on_complete(self) -> None:
        """Answer with every partition's result."""
        self._callback({tp: status.result for tp, status in self.statuses.items()})
