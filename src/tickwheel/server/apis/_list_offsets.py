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

from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest
from kio.schema.list_offsets.v7.response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kio.static.primitive import i32, i64

from tickwheel.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import FetchIsolation, Partition, PartitionError, TopicPartition
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorized_names
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, answer_as_leader, reply

_NOT_FOUND = -1


def _lookup(
    context: BrokerContext, topic: str, request: ListOffsetsPartition, isolation: FetchIsolation
) -> ListOffsetsPartitionResponse:
    """One partition's answer: the offset found, or its error code."""
    index = request.partition_index

    def found(partition: Partition) -> ListOffsetsPartitionResponse:
        timestamp, offset, leader_epoch = _find(partition, request.timestamp, isolation)
        return ListOffsetsPartitionResponse(
            partition_index=index,
            error_code=ErrorCode.none,
            timestamp=i64(timestamp),
            offset=i64(offset),
            leader_epoch=i32(leader_epoch),
        )

    def refused(error_code: ErrorCode) -> ListOffsetsPartitionResponse:
        return ListOffsetsPartitionResponse(partition_index=index, error_code=error_code)

    return answer_as_leader(
        context, TopicPartition(topic, index), request.current_leader_epoch, found, refused
    )


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
    body = request.body_as(ListOffsetsRequest)
    isolation = FetchIsolation.of(body.replica_id, body.isolation_level)
    denied_topics: set[str] = set()
    if context.authorizer is not None:
        names: set[str] = {t.name for t in body.topics}
        denied_topics = names - authorized_names(
            context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, names
        )
    topics = tuple(
        ListOffsetsTopicResponse(
            name=topic.name,
            partitions=tuple(
                ListOffsetsPartitionResponse(
                    partition_index=p.partition_index,
                    error_code=ErrorCode.topic_authorization_failed,
                )
                if topic.name in denied_topics
                else _lookup(context, topic.name, p, isolation)
                for p in topic.partitions
            ),
        )
        for topic in body.topics
    )
    return reply(request, ListOffsetsResponse(throttle_time=NO_THROTTLE, topics=topics))


LIST_OFFSETS = ApiSpec(ApiKey.LIST_OFFSETS, "ListOffsets", VersionRange(1, 7), handle_list_offsets)
