"""WriteTxnMarkers (key 27): the transaction coordinator's COMMIT/ABORT markers.

Sent by a transaction coordinator to each partition leader (a local coordinator calls
``ReplicaManager.append_txn_markers`` directly). Each marker is one append with
acks=all and COORDINATOR origin, with Kafka's ``request.timeout.ms`` default as its
timeout (``handleWriteTxnMarkersRequest``); the answer lists every partition's error
per producer id. Only v1 exists: kio has no v0, which Kafka 4 removed. Only brokers
may write markers: CLUSTER_ACTION on the cluster. The handler is written against v1's
classes.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v1.request import WritableTxnMarker, WriteTxnMarkersRequest
from kio.schema.write_txn_markers.v1.response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)

from tickwheel.protocol import ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import TopicPartition, TxnMarker
from tickwheel.security import AclOperation
from tickwheel.server._authorization import authorize_cluster
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Pending, Response, reply


async def handle_write_txn_markers(context: BrokerContext, request: DecodedRequest) -> Response:
    """Append every marker, then answer per producer and partition."""
    body = request.body_as(WriteTxnMarkersRequest)
    if not authorize_cluster(context, request, AclOperation.CLUSTER_ACTION):
        # Only brokers write markers (Kafka: every partition CLUSTER_AUTHORIZATION_FAILED).
        return reply(
            request, _answer(body, lambda _marker, _tp: ErrorCode.cluster_authorization_failed)
        )
    markers = [
        TxnMarker(
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            coordinator_epoch=marker.coordinator_epoch,
            commit=marker.transaction_result,
            partitions=tuple(
                TopicPartition(topic.name, index)
                for topic in marker.topics
                for index in topic.partition_indexes
            ),
        )
        for marker in body.markers
    ]
    pending: Pending[dict[int, dict[TopicPartition, int]]] = Pending()
    timeout_ms = context.transactions.config.request_timeout_ms
    context.replica_manager.append_txn_markers(markers, timeout_ms, pending.resolve)
    results = await pending
    return reply(
        request, _answer(body, lambda marker, tp: ErrorCode(results[marker.producer_id][tp]))
    )


def _answer(
    body: WriteTxnMarkersRequest,
    error_of: Callable[[WritableTxnMarker, TopicPartition], ErrorCode],
) -> WriteTxnMarkersResponse:
    """The response naming every marker's partitions in the request's order, each with
    ``error_of(marker, partition)``."""
    return WriteTxnMarkersResponse(
        markers=tuple(
            WritableTxnMarkerResult(
                producer_id=marker.producer_id,
                topics=tuple(
                    WritableTxnMarkerTopicResult(
                        name=topic.name,
                        partitions=tuple(
                            WritableTxnMarkerPartitionResult(
                                partition_index=index,
                                error_code=error_of(marker, TopicPartition(topic.name, index)),
                            )
                            for index in topic.partition_indexes
                        ),
                    )
                    for topic in marker.topics
                ),
            )
            for marker in body.markers
        )
    )


WRITE_TXN_MARKERS = ApiSpec(
    ApiKey.WRITE_TXN_MARKERS, "WriteTxnMarkers", VersionRange(1, 1), handle_write_txn_markers
)
