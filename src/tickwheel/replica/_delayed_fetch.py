"""``DelayedFetch``: a fetch waiting for ``min_bytes`` to arrive, or ``max_wait_ms``.

Created when the first read of a fetch found fewer than ``min_bytes``; watched under
every partition of the request. It keeps the *fetch info* (the position each partition
was read from, as ``LogOffsetMetadata``), never the first read's data: when it
completes, by an event or by the timeout, it reads the log again and answers with what
is there then (seed 003).

``try_complete`` compares each partition's fetch position with the end it may read to
(log end for followers, high watermark for consumers, last stable offset for
read_committed) and completes at once in Kafka's cases (seed 000):

- Case A: this broker is no longer the leader for some partition.
- Case B: this broker does not know some partition (deleted).
- Case C: the fetch position is not on the last segment: the end is on an *older*
  segment than the position (the log was truncated), or the position is on an older
  segment than the end (a new segment rolled).
- Case D: the bytes available across partitions, each capped at its max bytes, reach
  ``min_bytes``.
- Case E: the partition's log directory is offline.
- Case F: this broker leads, but the fetch's leader epoch is fenced.

A follower's bytes of a partition the leader throttles now (``ReplicationQuota``) do
not count towards ``min_bytes``: its read would return nothing, so the fetch waits.

If the end offset equals the position, nothing is counted: a log that just rolled
leaves the HW on the old segment at the same offset, which must not look like Case C.
A position or end known only as an offset (no segment information) cannot be measured
in bytes; if data lies between them the fetch completes, as a read will tell.

Concurrency: runs on the ReplicaManager's event-loop thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tickwheel.log import LogOffsetMetadata
from tickwheel.purgatory import DelayedOperation
from tickwheel.replica._partition import Partition, PartitionError
from tickwheel.replica._types import (
    FetchParams,
    FetchPartitionResult,
    PartitionFetchInfo,
    TopicPartition,
)


@dataclass(frozen=True, slots=True)
class FetchPartitionStatus:
    """Where a partition of a delayed fetch was read from, and its request info."""

    start_offset_metadata: LogOffsetMetadata
    fetch_info: PartitionFetchInfo


FetchCallback = Callable[[dict[TopicPartition, FetchPartitionResult]], None]
ReadLog = Callable[[], dict[TopicPartition, FetchPartitionResult]]


class DelayedFetch(DelayedOperation):
    """Completes when enough bytes are readable, on an error case, or at the timeout."""

    def __init__(
        self,
        params: FetchParams,
        statuses: Mapping[TopicPartition, FetchPartitionStatus],
        get_partition: Callable[[TopicPartition], Partition | None],
        read_log: ReadLog,
        callback: FetchCallback,
        throttled: Callable[[TopicPartition], bool] | None = None,
    ) -> None:
        super().__init__(params.max_wait_ms)
        self.params = params
        self.statuses = dict(statuses)
        self._get_partition = get_partition
        self._read_log = read_log
        self._callback = callback
        self._throttled = throttled

    def try_complete(self) -> bool:
        """Complete if any case A-F holds; see the module docstring."""
        accumulated_bytes = 0
        for tp, status in self.statuses.items():
            end_offset = self._end_offset(tp, status)
            if end_offset is None:
                return self.force_complete()
            available = _bytes_between(
                status.start_offset_metadata, end_offset, status.fetch_info.max_bytes
            )
            if available is None:
                return self.force_complete()
            if self._throttled is None or not self._throttled(tp):
                accumulated_bytes += available
        if accumulated_bytes >= self.params.min_bytes:
            # Case D: enough bytes across the partitions.
            return self.force_complete()
        return False

    def _end_offset(
        self, tp: TopicPartition, status: FetchPartitionStatus
    ) -> LogOffsetMetadata | None:
        """How far the fetch may read now; None in cases A, B, E and F."""
        partition = self._get_partition(tp)
        if partition is None:
            # Case B: this broker no longer knows the partition.
            return None
        if partition.offline:
            # Case E: the partition's log directory is offline.
            return None
        try:
            snapshot = partition.fetch_offset_snapshot(
                status.fetch_info.current_leader_epoch, fetch_only_leader=True
            )
        except PartitionError:
            # Case A (no longer the leader) or Case F (fenced leader epoch).
            return None
        return snapshot.end_for(self.params.isolation)

    def on_expiration(self) -> None:
        """Nothing more: ``on_complete`` answered, the purgatory counted the expiration."""

    def on_complete(self) -> None:
        """Read the log again and answer with what is there now."""
        self._callback(self._read_log())


def _bytes_between(
    fetch_offset: LogOffsetMetadata, end_offset: LogOffsetMetadata, max_bytes: int
) -> int | None:
    """Bytes readable from ``fetch_offset`` to ``end_offset``, at most ``max_bytes``;
    None in case C, or when data lies between two positions that cannot be measured."""
    if end_offset.message_offset == fetch_offset.message_offset:
        # Equal offsets count nothing, even if a roll left them on different segments.
        return 0
    if end_offset.message_offset_only or fetch_offset.message_offset_only:
        return None if fetch_offset.message_offset < end_offset.message_offset else 0
    if end_offset.on_older_segment(fetch_offset) or fetch_offset.on_older_segment(end_offset):
        # Case C: truncated back to an older segment, or a new segment rolled.
        return None
    if fetch_offset.message_offset < end_offset.message_offset:
        return min(end_offset.position_diff(fetch_offset), max_bytes)
    return 0
