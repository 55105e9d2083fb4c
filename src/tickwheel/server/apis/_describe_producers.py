"""DescribeProducers (key 61): the active producers of partitions (KIP-664).

Any replica holding the partition's log answers (Kafka's ``activeProducerState``),
leader or follower; a partition not hosted here gets NOT_LEADER_OR_FOLLOWER or
UNKNOWN_TOPIC_OR_PARTITION. Each producer: id, epoch (int32 on the wire), last
sequence, last timestamp, coordinator epoch and the first offset of its open
transaction (-1 if none).

Authorization (Kafka's ``handleDescribeProducersRequest``): READ on each topic, else
its partitions are answered TOPIC_AUTHORIZATION_FAILED.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import TopicPartition
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorized_names
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply


def _partition(context: BrokerContext, tp: TopicPartition, allowed: set[str]) -> dict[str, Any]:
    if tp.topic not in allowed:
        return {
            "partition_index": tp.partition,
            "error_code": ErrorCode.topic_authorization_failed,
            "error_message": None,
            "active_producers": [],
        }
    error, producers = context.replica_manager.active_producer_state(tp)
    return {
        "partition_index": tp.partition,
        "error_code": error,
        "error_message": None,
        "active_producers": [
            {
                "producer_id": p.producer_id,
                "producer_epoch": p.producer_epoch,
                "last_sequence": p.last_sequence,
                "last_timestamp": p.last_timestamp,
                "coordinator_epoch": p.coordinator_epoch,
                "current_txn_start_offset": p.current_txn_start_offset,
            }
            for p in producers
        ],
    }


async def handle_describe_producers(context: BrokerContext, request: DecodedRequest) -> Response:
    """Describe each requested partition's producers."""
    body: Any = request.body
    allowed = authorized_names(
        context, request, AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics)
    )
    return reply(
        request,
        {
            "throttle_time": 0,
            "topics": [
                {
                    "name": topic.name,
                    "partitions": [
                        _partition(context, TopicPartition(topic.name, index), allowed)
                        for index in topic.partition_indexes
                    ],
                }
                for topic in body.topics
            ],
        },
    )


DESCRIBE_PRODUCERS = ApiSpec(
    ApiKey.DESCRIBE_PRODUCERS, "DescribeProducers", VersionRange(0, 0), handle_describe_producers
)
