"""OffsetsForLeaderEpoch (key 23): where a leader epoch ends in the leader's log (KIP-101).

A follower asks a new leader after a leader change, naming the latest epoch in its own
log, and truncates its log to the end offset answered; the answer's epoch is the newest
the leader holds at or below the one asked (KIP-279), so when the two differ the
follower looks that epoch up in its own log and truncates to the smaller end. A
consumer asks after a leader change, naming the epoch of its position, to detect that
the log was truncated under it (KIP-320).

Per partition, as Kafka's ``ReplicaManager.lastOffsetForLeaderEpoch``:

- not hosted: KAFKA_STORAGE_ERROR (its log directory failed), NOT_LEADER_OR_FOLLOWER
  (the topic exists, this broker holds no replica), or UNKNOWN_TOPIC_OR_PARTITION;
- only the leader answers, followers and consumers alike (Kafka's
  ``fetchOnlyFromLeader = true``): NOT_LEADER_OR_FOLLOWER on a follower;
- ``current_leader_epoch`` (-1: not checked) fences the asker: FENCED_LEADER_EPOCH
  when it is older than the leader's epoch, UNKNOWN_LEADER_EPOCH when newer;
- the answer is ``Log.end_offset_for_epoch``: (epoch, end offset), (-1, -1) when the
  log knows no epoch that answers.

Authorization (Kafka's ``handleOffsetForLeaderEpochRequest``): CLUSTER_ACTION on the
cluster (a follower) allows every topic; otherwise DESCRIBE on each topic (a consumer
checking for truncation), else its partitions are answered TOPIC_AUTHORIZATION_FAILED.
Versions 2-4: librdkafka sends v2 and kafka-python v2-v4; v0-v1 are deprecated and
gone from Kafka 4 (and from kio).

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
)
from kio.schema.offset_for_leader_epoch.v4.response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from kio.static.primitive import i32, i64

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import Partition, TopicPartition
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorize_cluster, authorized_names
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, answer_as_leader, reply


def _last_offset_for_leader_epoch(
    context: BrokerContext, topic: str, request: OffsetForLeaderPartition
) -> EpochEndOffset:
    """Where one partition's requested epoch ends, or its error code."""
    index = request.partition

    def end_offset(partition: Partition) -> EpochEndOffset:
        epoch, offset = partition.log.end_offset_for_epoch(request.leader_epoch)
        return EpochEndOffset(
            error_code=ErrorCode.none,
            partition=index,
            leader_epoch=i32(epoch),
            end_offset=i64(offset),
        )

    def refused(error_code: ErrorCode) -> EpochEndOffset:
        return EpochEndOffset(error_code=error_code, partition=index)

    return answer_as_leader(
        context, TopicPartition(topic, index), request.current_leader_epoch, end_offset, refused
    )


async def handle_offsets_for_leader_epoch(
    context: BrokerContext, request: DecodedRequest
) -> Response:
    """Answer where each requested leader epoch ends in this leader's log."""
    body = request.body_as(OffsetForLeaderEpochRequest)
    names: set[str] = {topic.topic for topic in body.topics}
    if context.authorizer is not None and not authorize_cluster(
        context, request, AclOperation.CLUSTER_ACTION, log_if_denied=False
    ):
        names = authorized_names(context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    topics = tuple(
        OffsetForLeaderTopicResult(
            topic=topic.topic,
            partitions=tuple(
                _last_offset_for_leader_epoch(context, topic.topic, p)
                if topic.topic in names
                else EpochEndOffset(
                    error_code=ErrorCode.topic_authorization_failed, partition=p.partition
                )
                for p in topic.partitions
            ),
        )
        for topic in body.topics
    )
    return reply(request, OffsetForLeaderEpochResponse(throttle_time=NO_THROTTLE, topics=topics))


OFFSETS_FOR_LEADER_EPOCH = ApiSpec(
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    "OffsetForLeaderEpoch",
    VersionRange(2, 4),
    handle_offsets_for_leader_epoch,
)
