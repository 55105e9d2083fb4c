"""``DelayedProduce``: an acks=all produce waiting for the ISR to reach its offsets.

One operation per request, watched under every partition of the request, all sharing
one lock (DESIGN.md §4, seed 000). Each partition's status starts with
``acks_pending`` and error REQUEST_TIMED_OUT preset, so a timeout answers exactly the
partitions still waiting with that error. ``try_complete`` re-checks every pending
partition, in Kafka's cases:

- Case A: the partition is unknown to this broker → UNKNOWN_TOPIC_OR_PARTITION.
- Case B: this broker no longer leads it → NOT_LEADER_OR_FOLLOWER.
- Case C: this broker leads it:
  C.1 a local error while checking the ISR (e.g. not enough replicas) → that error;
  C.2 the HW reached the offset after the appended records → no error.
- Case D: its log directory is offline → KAFKA_STORAGE_ERROR (checked before B and C:
  an offline partition can neither lead nor reach an offset).

When no partition is pending the operation completes and answers.

Concurrency: runs on the ReplicaManager's event-loop thread (purgatory in event-loop
mode); the shared lock is Kafka's and is never contended there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from kio.schema.errors import ErrorCode

from tickwheel.purgatory import DelayedOperation
from tickwheel.replica._partition import Partition
from tickwheel.replica._partition_status import PartitionStatus, any_pending, preset_timeouts
from tickwheel.replica._types import ProducePartitionResult, TopicPartition

ProducePartitionStatus = PartitionStatus[ProducePartitionResult]
"""A partition of a delayed produce: waits for the HW to reach ``required_offset``."""

ProduceCallback = Callable[[dict[TopicPartition, ProducePartitionResult]], None]


class DelayedProduce(DelayedOperation):
    """Waits until every partition's HW reaches its ``required_offset``, or a timeout."""

    def __init__(
        self,
        delay_ms: int,
        statuses: Mapping[TopicPartition, ProducePartitionStatus],
        get_partition: Callable[[TopicPartition], Partition | None],
        callback: ProduceCallback,
        *,
        lock: threading.RLock | None = None,
    ) -> None:
        super().__init__(delay_ms, lock=lock)
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
                has_enough, error = False, ErrorCode.unknown_topic_or_partition
            elif partition.offline:
                # Case D: the partition's log directory failed.
                has_enough, error = False, ErrorCode.kafka_storage_error
            elif not partition.is_leader:
                # Case B: leadership moved away.
                has_enough, error = False, ErrorCode.not_leader_or_follower
            else:
                # Case C: C.1 when error is set, C.2 when has_enough without error.
                has_enough, error = partition.check_enough_replicas_reach_offset(
                    status.required_offset
                )
            if error != ErrorCode.none or has_enough:
                status.acks_pending = False
                status.result = status.result.with_error_code(error)
        if any_pending(self.statuses.values()):
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        """Nothing more: pending partitions answer REQUEST_TIMED_OUT, preset above."""

    def on_complete(self) -> None:
        """Answer with every partition's result."""
        self._callback({tp: status.result for tp, status in self.statuses.items()})
