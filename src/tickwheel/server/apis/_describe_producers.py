"""DescribeProducers (key 61): the active producers of partitions (KIP-664).

Any replica holding the partition's log answers (Kafka's ``activeProducerState``),
leader or follower; a partition not hosted here gets NOT_LEADER_OR_FOLLOWER or
UNKNOWN_TOPIC_OR_PARTITION. Each producer: id, epoch (int32 on the wire), last
sequence, last timestamp, coordinator epoch and the first offset of its open
transaction (-1 if none).

Authorization (Kafka's ``handleDescribeProducersRequest``): READ on each topic, else
its partitions are answered TOPIC_AUTHORIZATION_FAILED.

Written against v0's classes, the only version served.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from kio.schema.describe_producers.v0.request import DescribeProducersRequest
from kio.schema.describe_producers.v0.response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName
from kio.static.primitive import i32, i64

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import TopicPartition
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorized_names
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply


def _partition(
    context: BrokerContext, topic: TopicName, index: i32, allowed: set[str]
) -> PartitionResponse:
    if topic not in allowed:
        return PartitionResponse(
            partition_index=index,
            error_code=ErrorCode.topic_authorization_failed,
            active_producers=(),
        )
    error, producers = context.replica_manager.active_producer_state(TopicPartition(topic, index))
    return PartitionResponse(
        partition_index=index,
        error_code=error,
        active_producers=tuple(
            ProducerState(
                producer_id=ProducerId(p.producer_id),
                producer_epoch=i32(p.producer_epoch),
                last_sequence=i32(p.last_sequence),
                last_timestamp=i64(p.last_timestamp),
                coordinator_epoch=i32(p.coordinator_epoch),
                current_txn_start_offset=i64(p.current_txn_start_offset),
            )
            for p in producers
        ),
    )


async def handle_describe_producers(context: BrokerContext, request: DecodedRequest) -> Response:
    """Describe each requested partition's producers."""
    body = request.body_as(DescribeProducersRequest)
    allowed = authorized_names(
        context, request, AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics)
    )
    topics = tuple(
        TopicResponse(
            name=topic.name,
            partitions=tuple(
                _partition(context, topic.name, index, allowed) for index in topic.partition_indexes
            ),
        )
        for topic in body.topics
    )
    return reply(request, DescribeProducersResponse(throttle_time=NO_THROTTLE, topics=topics))


DESCRIBE_PRODUCERS = ApiSpec(
    ApiKey.DESCRIBE_PRODUCERS, "DescribeProducers", VersionRange(0, 0), handle_describe_producers
)
