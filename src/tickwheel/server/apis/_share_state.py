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

Each share-state API (``ShareStateApi``) is served by one handler: the request read as
the newest version's kio class, answered by ``ShareStateApis`` (or refused) in that
version's response, which ``reply`` converts to the version sent.

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

import functools
from typing import TypeVar

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload, ResponsePayload

from tickwheel.cluster import SHARE_STATE, ClusterNode
from tickwheel.coordinator import CoordinatorNode
from tickwheel.coordinator.share_state import (
    DELETE_SHARE_GROUP_STATE,
    INITIALIZE_SHARE_GROUP_STATE,
    PERSISTER_TIMEOUT_MS,
    READ_SHARE_GROUP_STATE,
    READ_SHARE_GROUP_STATE_SUMMARY,
    SHARE_GROUP_STATE_TOPIC,
    WRITE_SHARE_GROUP_STATE,
    ShareCoordinatorConfig,
    ShareCoordinatorLocator,
    ShareCoordinatorService,
    ShareStateApi,
)
from tickwheel.protocol import DecodedRequest
from tickwheel.replica import TopicPartition
from tickwheel.security import AclOperation
from tickwheel.server._authorization import authorize_cluster
from tickwheel.server._context import BrokerContext, BrokerState
from tickwheel.server._share_transport import KafkaShareStateTransport
from tickwheel.server._time import BrokerTime
from tickwheel.server.apis._common import ApiSpec, Response, reply
from tickwheel.server.apis._internal_topics import chain_leadership, internal_topic_leader


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
                    SHARE_STATE.client_id(context.broker_id), PERSISTER_TIMEOUT_MS
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


_REFUSAL_MESSAGE = "Authorization failed."
Request = TypeVar("Request", bound=RequestPayload)
Answer = TypeVar("Answer", bound=ResponsePayload)


def _share_state_spec(api: ShareStateApi[Request, Answer]) -> ApiSpec:
    """``api`` answered by the share coordinator; brokers only (CLUSTER_ACTION on the
    cluster, else every partition CLUSTER_AUTHORIZATION_FAILED, as Kafka's)."""

    async def handle(context: BrokerContext, request: DecodedRequest) -> Response:
        body = request.body_as(api.request)
        if not authorize_cluster(context, request, AclOperation.CLUSTER_ACTION):
            refused = api.refuse(body, ErrorCode.cluster_authorization_failed, _REFUSAL_MESSAGE)
            return reply(request, refused)
        return reply(request, await api.answer(context.share_coordinator.apis, body))

    return ApiSpec(api.api_key, api.name, api.versions, handle)


SHARE_STATE_SPECS: tuple[ApiSpec, ...] = (
    _share_state_spec(INITIALIZE_SHARE_GROUP_STATE),
    _share_state_spec(READ_SHARE_GROUP_STATE),
    _share_state_spec(WRITE_SHARE_GROUP_STATE),
    _share_state_spec(DELETE_SHARE_GROUP_STATE),
    _share_state_spec(READ_SHARE_GROUP_STATE_SUMMARY),
)
