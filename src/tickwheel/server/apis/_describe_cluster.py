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

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey, DecodedRequest, VersionRange
from tickwheel.security import CLUSTER_NAME, AclOperation, ResourceType
from tickwheel.server._authorization import authorize_cluster, authorized_operations
from tickwheel.server._cluster import broker_entries
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply

_BROKERS_ENDPOINT: Final = 1
_NOT_ASKED: Final = -(2**31)


def _brokers(context: BrokerContext) -> list[dict[str, Any]]:
    if context.cluster is not None:
        return [
            {"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
            for b in broker_entries(context.cluster, context.request_listener)
        ]
    endpoint = context.advertised
    return [{"broker_id": context.broker_id, "host": endpoint.host, "port": endpoint.port}]


def _cluster_operations(context: BrokerContext, request: DecodedRequest, body: Any) -> int:
    if not body.include_cluster_authorized_operations:
        return _NOT_ASKED
    if not authorize_cluster(context, request, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(context, request, ResourceType.CLUSTER, CLUSTER_NAME)


async def handle_describe_cluster(context: BrokerContext, request: DecodedRequest) -> Response:
    """The cluster as this broker knows it."""
    body: Any = request.body
    cluster = context.cluster
    answer: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "cluster_id": context.cluster_id,
        "controller_id": cluster.cache.live_controller_id() if cluster else context.broker_id,
        "brokers": _brokers(context),
        "cluster_authorized_operations": _cluster_operations(context, request, body),
    }
    endpoint_type = getattr(body, "endpoint_type", _BROKERS_ENDPOINT)
    answer["endpoint_type"] = endpoint_type
    if endpoint_type != _BROKERS_ENDPOINT:
        answer.update(
            error_code=ErrorCode.unsupported_endpoint_type,
            error_message="a ZooKeeper-mode broker has no controller quorum to describe",
            brokers=[],
        )
    return reply(request, answer)


DESCRIBE_CLUSTER = ApiSpec(
    ApiKey.DESCRIBE_CLUSTER, "DescribeCluster", VersionRange(0, 1), handle_describe_cluster
)
