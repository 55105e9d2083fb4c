"""DescribeProducers (key 61): the active producers of partitions (KIP-664).

Any replica holding the partition's log answers (Kafka's ``activeProducerState``),
leader or follower; a partition not hosted here gets NOT_LEADER_OR_FOLLOWER or
UNKNOWN_TOPIC_OR_PARTITION. Each producer: id, epoch (int32 on the wire), last
sequence, last timestamp, coordinator epoch and the first offset of its open
transaction (-1 if none).

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from typing import Any

from tickwheel.protocol import DecodedRequest, VersionRange
from tickwheel.replica import TopicPartition
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply


def _partition(context: BrokerContext, tp: TopicPartition) -> dict[str, Any]:
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
    return reply(
        request,
        {
            "throttle_time": 0,
            "topics": [
                {
                    "name": topic.name,
                    "partitions": [
                        _partition(context, TopicPartition(topic.name, index))
                        for index in topic.partition_indexes
                    ],
                }
                for topic in body.topics
            ],
        },
    )


DESCRIBE_PRODUCERS = ApiSpec(61, "DescribeProducers", VersionRange(0, 0), handle_describe_producers)
