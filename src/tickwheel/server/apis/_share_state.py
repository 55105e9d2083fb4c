"""The share coordinator's APIs (keys 83-87) and its start-up in the broker.

``start_share_coordinator`` runs at broker start-up after the other coordinators: the
service loads every ``__share_group_state`` partition this broker leads, and its
``persister`` is what this broker's share-partitions keep their state through. As for
the other internal topics, the topic is created on first need with
``share.coordinator.state.topic.*`` (in a cluster with
``share.coordinator.state.topic.replication.factor`` replicas and never fewer: while
fewer brokers are alive a state cannot be located, and the persister keeps retrying).
In a cluster the coordinator of a share-partition is the leader of its state partition
as this broker's metadata cache knows it; requests to another broker go as
ReadShareGroupState/WriteShareGroupState/... through
``tickwheel.server._share_transport``; the node's leadership listener loads a
state partition when this broker starts leading it and unloads it when it stops.

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

import functools
from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel.cluster import ClusterNode
from tickwheel.coordinator import CoordinatorNode
from tickwheel.coordinator.share_state import (
    PERSISTER_TIMEOUT_MS,
    SHARE_GROUP_STATE_TOPIC,
    SHARE_STATE_API_HANDLERS,
    SHARE_STATE_API_NAMES,
    SHARE_STATE_API_VERSIONS,
    ShareCoordinatorConfig,
    ShareCoordinatorLocator,
    ShareCoordinatorService,
)
from tickwheel.protocol import DecodedRequest, VersionRange, encode_response
from tickwheel.replica import TopicPartition
from tickwheel.security import AclOperation
from tickwheel.server._authorization import authorize_cluster
from tickwheel.server._context import BrokerContext, BrokerState
from tickwheel.server._share_transport import KafkaShareStateTransport
from tickwheel.server._time import BrokerTime
from tickwheel.server.apis._common import ApiSpec, Response, reply
from tickwheel.server.apis._internal_topics import chain_leadership, internal_topic_leader

_CLIENT_ID = "tickwheel-share-state-{}"


def start_share_coordinator(
    context: BrokerState, broker_time: BrokerTime
) -> ShareCoordinatorService:
    """Start this broker's share coordinator over its ``__share_group_state`` partitions."""
    config = ShareCoordinatorConfig.from_properties(context.config.as_properties())
    cluster = context.cluster
    if cluster is None:

        def create_topic() -> None:
            if SHARE_GROUP_STATE_TOPIC in context.topics.topics:
                return
            context.create_topic(
                SHARE_GROUP_STATE_TOPIC,
                config.share_coordinator_state_topic_num_partitions,
                config.topic_configs(),
            )

        service = ShareCoordinatorService(
            config,
            context.replica_manager,
            broker_id=context.broker_id,
            clock_ms=broker_time.wall_clock_ms,
            create_topic=create_topic,
            endpoint_of=lambda broker_id: CoordinatorNode(
                broker_id, context.advertised.host, context.advertised.port
            ),
        )
    else:
        service = ShareCoordinatorService(
            config,
            context.replica_manager,
            broker_id=context.broker_id,
            clock_ms=broker_time.wall_clock_ms,
            locate=_cluster_locator(cluster, config),
            endpoint_of=functools.partial(_endpoint_of, context, cluster),
            transport=KafkaShareStateTransport(
                cluster.inter_broker_channels(
                    _CLIENT_ID.format(context.broker_id), PERSISTER_TIMEOUT_MS
                )
            ),
        )
        chain_leadership(cluster, SHARE_GROUP_STATE_TOPIC, service.on_elected, service.on_resigned)
    existing = context.topics.topics.get(SHARE_GROUP_STATE_TOPIC)
    if existing is not None:
        # The topic's real partition count decides where states live (Kafka's rule too).
        service.coordinator.partition_count = existing.num_partitions
    service.elect_hosted()
    return service


def _endpoint_of(
    context: BrokerState, cluster: ClusterNode, broker_id: int
) -> CoordinatorNode | None:
    """Broker ``broker_id`` on the listener of the request being handled."""
    broker = cluster.cache.broker(broker_id, context.request_listener)
    return None if broker is None else CoordinatorNode(broker.broker_id, broker.host, broker.port)


def _cluster_locator(
    cluster: ClusterNode, config: ShareCoordinatorConfig
) -> ShareCoordinatorLocator:
    """The leader of a ``__share_group_state`` partition per the metadata cache."""

    def locate(partition: int) -> int | None:
        leader = internal_topic_leader(
            cluster,
            TopicPartition(SHARE_GROUP_STATE_TOPIC, partition),
            num_partitions=config.share_coordinator_state_topic_num_partitions,
            replication_factor=config.share_coordinator_state_topic_replication_factor,
            configs=config.topic_configs(),
            replication_setting="share.coordinator.state.topic.replication.factor",
            listener_name=cluster.settings.inter_broker_listener,
        )
        return None if leader is None else leader.broker_id

    return locate


_REFUSED_PARTITION: dict[str, Any] = {
    "error_code": ErrorCode.cluster_authorization_failed,
    "error_message": "Authorization failed.",
    "state_epoch": 0,
    "leader_epoch": -1,
    "start_offset": -1,
    "state_batches": [],
}
"""A share-partition's answer when the principal lacks CLUSTER_ACTION (every field any
of the five responses has; each takes its own)."""


def _refused(request: DecodedRequest) -> bytes:
    """Every partition of a share-state request CLUSTER_AUTHORIZATION_FAILED."""
    body: Any = request.body
    results = [
        {
            "topic_id": topic.topic_id,
            "partitions": [
                {"partition": p.partition, **_REFUSED_PARTITION} for p in topic.partitions
            ],
        }
        for topic in body.topics
    ]
    return reply(request, {"results": results})


def _share_state_spec(api_key: int, versions: VersionRange) -> ApiSpec:
    """API ``api_key`` answered by the share coordinator's handler for it; brokers only
    (CLUSTER_ACTION on the cluster, else every partition CLUSTER_AUTHORIZATION_FAILED,
    as Kafka's)."""
    handler = SHARE_STATE_API_HANDLERS[api_key]

    async def handle(context: BrokerContext, request: DecodedRequest) -> Response:
        coordinator = context.share_coordinator
        if not authorize_cluster(context, request, AclOperation.CLUSTER_ACTION):
            return _refused(request)
        response = await handler(coordinator.apis, request.body)
        return encode_response(request.correlation_id, response)

    return ApiSpec(api_key, SHARE_STATE_API_NAMES[api_key], versions, handle)


SHARE_STATE_SPECS: tuple[ApiSpec, ...] = tuple(
    _share_state_spec(api_key, versions) for api_key, versions in SHARE_STATE_API_VERSIONS.items()
)
