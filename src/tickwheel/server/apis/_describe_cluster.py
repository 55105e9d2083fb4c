"""DescribeCluster (key 60, KIP-700): the cluster id, the controller and the brokers.

What an admin client's ``describe_cluster`` asks for without a whole Metadata request:
the cluster id (Kafka's 22-character id, ``_meta_properties``), the controller (this
broker on a single node; in a cluster the live controller ZooKeeper names, or -1) and
the live brokers. v1 asks for an endpoint type: brokers (1) are answered; controllers
(2) are KRaft's quorum, which a ZooKeeper-mode broker does not have, so Kafka's broker
answers UNSUPPORTED_ENDPOINT_TYPE and so does this one. Anyone may ask, as in Kafka:
only ``include_cluster_authorized_operations`` depends on the authorizer, answering the
cluster operations the principal may perform (all of them with no authorizer) when it
may DESCRIBE the cluster and 0 when it may not; not asked, the field keeps its "not
asked" value (Int.MinValue).

Written against v1's classes; a v0 request reads as asking for brokers.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from typing import Final

from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.describe_cluster.v1.response import DescribeClusterBroker, DescribeClusterResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import i32

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.server._authorization import cluster_authorized_operations
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply

_BROKERS_ENDPOINT: Final = 1


def _brokers(context: BrokerContext) -> tuple[DescribeClusterBroker, ...]:
    if context.cluster is not None:
        return tuple(
            DescribeClusterBroker(broker_id=BrokerId(b.broker_id), host=b.host, port=i32(b.port))
            for b in context.cluster.cache.endpoints(context.request_listener)
        )
    endpoint = context.advertised
    return (
        DescribeClusterBroker(
            broker_id=BrokerId(context.broker_id), host=endpoint.host, port=i32(endpoint.port)
        ),
    )


async def handle_describe_cluster(context: BrokerContext, request: DecodedRequest) -> Response:
    """The cluster as this broker knows it."""
    body = request.body_as(DescribeClusterRequest)
    cluster = context.cluster
    error_code, error_message, brokers = ErrorCode.none, None, _brokers(context)
    if body.endpoint_type != _BROKERS_ENDPOINT:
        error_code = ErrorCode.unsupported_endpoint_type
        error_message = "a ZooKeeper-mode broker has no controller quorum to describe"
        brokers = ()
    return reply(
        request,
        DescribeClusterResponse(
            throttle_time=NO_THROTTLE,
            error_code=error_code,
            error_message=error_message,
            endpoint_type=body.endpoint_type,
            cluster_id=context.cluster_id,
            controller_id=BrokerId(
                cluster.cache.live_controller_id() if cluster else context.broker_id
            ),
            brokers=brokers,
            cluster_authorized_operations=i32(
                cluster_authorized_operations(
                    context, request, asked=body.include_cluster_authorized_operations
                )
            ),
        ),
    )


DESCRIBE_CLUSTER = ApiSpec(
    ApiKey.DESCRIBE_CLUSTER, "DescribeCluster", VersionRange(0, 1), handle_describe_cluster
)
