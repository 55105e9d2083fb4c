"""DeleteRecords (key 21): move partitions' log start offsets forward.

Offset -1 means the high watermark. The log start moves at once; the answer waits in
the DeleteRecords purgatory until the low watermark (the smallest log start over the
replicas) has reached the offset, which on one broker is immediately. A request that
names no partition is answered at once.

Authorization (Kafka's ``handleDeleteRecordsRequest``): DELETE on each topic, else its
partitions are answered TOPIC_AUTHORIZATION_FAILED and keep their records.

Written against v2's classes; ``body_as`` and ``reply`` carry v0 and v1.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.delete_records.v2.request import DeleteRecordsRequest, DeleteRecordsTopic
from kio.schema.delete_records.v2.response import (
    DeleteRecordsPartitionResult as PartitionAnswer,
)
from kio.schema.delete_records.v2.response import (
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i64

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import DeleteRecordsPartitionResult, TopicPartition
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorized_names
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Pending, Response, reply, to_ms


def _topic_answer(
    topic: DeleteRecordsTopic, results: Mapping[TopicPartition, DeleteRecordsPartitionResult]
) -> DeleteRecordsTopicResult:
    partitions = []
    for p in topic.partitions:
        result = results[TopicPartition(topic.name, p.partition_index)]
        partitions.append(
            PartitionAnswer(
                partition_index=p.partition_index,
                low_watermark=i64(result.low_watermark),
                error_code=ErrorCode(result.error_code),
            )
        )
    return DeleteRecordsTopicResult(name=topic.name, partitions=tuple(partitions))


async def handle_delete_records(context: BrokerContext, request: DecodedRequest) -> Response:
    """Delete records below each requested offset and report the low watermarks."""
    body = request.body_as(DeleteRecordsRequest)
    offsets = {
        TopicPartition(topic.name, p.partition_index): p.offset
        for topic in body.topics
        for p in topic.partitions
    }
    allowed = authorized_names(
        context, request, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in body.topics)
    )
    denied = DeleteRecordsPartitionResult(ErrorCode.topic_authorization_failed)
    results = {tp: denied for tp in offsets if tp.topic not in allowed}
    offsets = {tp: offset for tp, offset in offsets.items() if tp.topic in allowed}
    if offsets:  # Nothing to delete, nothing to wait for: the purgatory needs a key.
        pending: Pending[dict[TopicPartition, DeleteRecordsPartitionResult]] = Pending()
        context.replica_manager.delete_records(to_ms(body.timeout), offsets, pending.resolve)
        results.update(await pending)
    topics = tuple(_topic_answer(topic, results) for topic in body.topics)
    return reply(request, DeleteRecordsResponse(throttle_time=NO_THROTTLE, topics=topics))


DELETE_RECORDS = ApiSpec(
    ApiKey.DELETE_RECORDS, "DeleteRecords", VersionRange(0, 2), handle_delete_records
)
