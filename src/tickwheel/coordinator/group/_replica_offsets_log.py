"""``ReplicaOffsetsLog``: ``__consumer_offsets`` through the broker's ReplicaManager.

Appends go through ``ReplicaManager.append_records`` with acks=all, as Kafka's
GroupMetadataManager does (``_append_as_coordinator``, the coordinator's own batches:
Kafka's origin COORDINATOR, under which TxnOffsetCommit batches, all at sequence 0, are
not sequence-checked): in a cluster an offset commit is answered only once every
in-sync replica has it (a DelayedProduce waits for the high watermark), and on one node
the DelayedProduce completes on its first check. Reads, when this broker becomes a
partition's leader, come straight from the partition's log up to its high watermark.

Concurrency contract: like the ReplicaManager, event-loop thread only. ``append`` is
called with no group lock held (the coordinator defers it), so the DelayedProduce's
completion, which takes the group lock in ``on_appended``, holds only its own lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from kio.schema.errors import ErrorCode

from tickwheel.coordinator.group._offsets_log import (
    OFFSETS_TOPIC,
    UNKNOWN_OFFSET,
    AppendCallback,
    read_log_batches,
)
from tickwheel.log import AppendOrigin
from tickwheel.replica import ACKS_ALL, ProducePartitionResult, ReplicaManager, TopicPartition


class ReplicaOffsetsLog:
    """``OffsetsLog`` over the partitions of ``__consumer_offsets`` that a broker hosts."""

    def __init__(self, replica_manager: ReplicaManager, *, commit_timeout_ms: int) -> None:
        self._replica_manager = replica_manager
        self._commit_timeout_ms = commit_timeout_ms

    def append(self, partition: int, records: bytes, on_appended: AppendCallback) -> None:
        """Append with acks=all; ``on_appended`` gets the partition's error code and offset."""
        tp = TopicPartition(OFFSETS_TOPIC, partition)

        def appended(results: Mapping[TopicPartition, ProducePartitionResult]) -> None:
            result = results[tp]
            error = ErrorCode(result.error_code)
            on_appended(error, result.base_offset if error is ErrorCode.none else UNKNOWN_OFFSET)

        self._append_as_coordinator(tp, records, appended)

    def _append_as_coordinator(
        self,
        tp: TopicPartition,
        records: bytes,
        appended: Callable[[Mapping[TopicPartition, ProducePartitionResult]], None],
    ) -> None:
        self._replica_manager.append_records(
            self._commit_timeout_ms,
            ACKS_ALL,
            {tp: records},
            appended,
            internal_topics_allowed=True,
            origin=AppendOrigin.COORDINATOR,
        )

    def read(self, partition: int) -> Iterator[bytes]:
        """The partition's batches up to its high watermark (nothing if not hosted)."""
        hosted = self._replica_manager.get_partition(TopicPartition(OFFSETS_TOPIC, partition))
        if hosted is None:
            return iter(())
        return read_log_batches(hosted.log)
