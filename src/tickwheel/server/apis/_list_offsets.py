"""ListOffsets (key 2): an offset by time — earliest, latest, max timestamp, or ≥ t.

Timestamps -2 (earliest: the log start offset), -1 (latest: the high watermark for a
consumer, the last stable offset for read_committed, the log end for a follower),
-3 (v7+: the first record holding the largest timestamp, KIP-734) or a time in ms: the
first record whose timestamp is at least that and below the latest offset (records,
not batches: a batch's records are decoded, as Kafka does), or offset -1 and timestamp
-1 when none is.

Just after this broker became leader its high watermark may lag where its leader epoch
started (the followers have not fetched yet): a client asking for latest, or for a time
not found below the high watermark, is answered OFFSET_NOT_AVAILABLE and retries.

The leader epoch answered (v4+) is Kafka's: for latest, the partition's current leader
epoch; for earliest, the epoch of the log's first epoch entry if it covers the log
start; for a record found by timestamp, the epoch its batch was written in; -1 when
unknown. A consumer keeps it with its position, and checks it with
OffsetsForLeaderEpoch after a leader change (KIP-320).

Authorization (Kafka's ``handleListOffsetRequest``): DESCRIBE on each topic, else its
partitions are answered TOPIC_AUTHORIZATION_FAILED.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from tickwheel.protocol import ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import FetchIsolation, Partition, PartitionError, TopicPartition
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorized_names
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, answer_as_leader, reply

_NOT_FOUND = -1


def _lookup(
    context: BrokerContext,
    tp: TopicPartition,
    timestamp: int,
    isolation: FetchIsolation,
    current_leader_epoch: int,
) -> dict[str, Any]:
    """One partition's ListOffsets fields, or its error code."""

    def found(partition: Partition) -> dict[str, Any]:
        found_timestamp, offset, leader_epoch = _find(partition, timestamp, isolation)
        return {"timestamp": found_timestamp, "offset": offset, "leader_epoch": leader_epoch}

    return answer_as_leader(context, tp, current_leader_epoch, found)


def _find(partition: Partition, timestamp: int, isolation: FetchIsolation) -> tuple[int, int, int]:
    """(timestamp, offset, leader epoch) for a ListOffsets ``timestamp``.

    A client's lookup of the latest offset, or of a time not found below what it may
    read, while the HW still lags the leader epoch's start raises OFFSET_NOT_AVAILABLE
    (the client retries), as Kafka's ``fetchOffsetForTimestamp`` and ``fetchOffset`` do.
    """
    log = partition.log
    client = isolation is not FetchIsolation.LOG_END
    if isolation is FetchIsolation.TXN_COMMITTED:
        latest = log.last_stable_offset
    else:
        latest = log.high_watermark if client else log.log_end_offset
    not_yet = client and partition.high_watermark_lags_epoch_start()
    if timestamp == LATEST_TIMESTAMP:
        if not_yet:
            raise PartitionError(ErrorCode.offset_not_available)
        return _NOT_FOUND, latest, partition.leader_epoch
    found = log.offset_for_timestamp(timestamp)
    if found is None or (timestamp != EARLIEST_TIMESTAMP and found.offset >= latest):
        if not_yet:
            raise PartitionError(ErrorCode.offset_not_available)
        return _NOT_FOUND, _NOT_FOUND, _NOT_FOUND
    return found.timestamp, found.offset, found.leader_epoch


async def handle_list_offsets(context: BrokerContext, request: DecodedRequest) -> Response:
    """Answer each partition's offset lookup."""
    body: Any = request.body
    isolation = FetchIsolation.of(body.replica_id, getattr(body, "isolation_level", 0))
    denied_topics: set[str] = set()
    if context.authorizer is not None:
        names = {t.name for t in body.topics}
        denied_topics = names - authorized_names(
            context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, names
        )
    denied = {"error_code": ErrorCode.topic_authorization_failed}
    return reply(
        request,
        {
            "throttle_time": 0,
            "topics": [
                {
                    "name": topic.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            **(
                                _lookup(
                                    context,
                                    TopicPartition(topic.name, p.partition_index),
                                    p.timestamp,
                                    isolation,
                                    getattr(p, "current_leader_epoch", -1),
                                )
                                if topic.name not in denied_topics
                                else denied
                            ),
                        }
                        for p in topic.partitions
                    ],
                }
                for topic in body.topics
            ],
        },
    )


LIST_OFFSETS = ApiSpec(ApiKey.LIST_OFFSETS, "ListOffsets", VersionRange(1, 7), handle_list_offsets)
