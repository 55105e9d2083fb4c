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
``tickwheel.cluster.KafkaShareStateTransport``; the node's leadership listener loads a
state partition when this broker starts leading it and unloads it when it stops.

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from tickwheel.cluster import ClusterNode, KafkaShareStateTransport
from tickwheel.coordinator import CoordinatorNode
from tickwheel.coordinator.share import (
    PERSISTER_TIMEOUT_MS,
    SHARE_GROUP_STATE_TOPIC,
    SHARE_STATE_API_NAMES,
    SHARE_STATE_API_VERSIONS,
    ShareCoordinatorConfig,
    ShareCoordinatorLocator,
    ShareCoordinatorService,
)
from tickwheel.protocol import DecodedRequest
from tickwheel.replica import TopicPartition
from tickwheel.server._context import BrokerContext
from tickwheel.server._time import BrokerTime
from tickwheel.server.apis._common import ApiSpec, Response

_log = logging.getLogger(__name__)

_CLIENT_ID = "tickwheel-share-state-{}"


def start_share_coordinator(
    context: BrokerContext, broker_time: BrokerTime
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
            endpoint_of=functools.partial(_endpoint_of, cluster),
            transport=KafkaShareStateTransport(
                cluster.cache.broker,
                client_id=_CLIENT_ID.format(context.broker_id),
                timeout_ms=PERSISTER_TIMEOUT_MS,
            ),
        )
        cluster.leadership_listener = _fan_out(cluster.leadership_listener, service)
    existing = context.topics.topics.get(SHARE_GROUP_STATE_TOPIC)
    if existing is not None:
        # The topic's real partition count decides where states live (Kafka's rule too).
        service.coordinator.partition_count = existing.num_partitions
    service.elect_hosted()
    return service


def _endpoint_of(cluster: ClusterNode, broker_id: int) -> CoordinatorNode | None:
    broker = cluster.cache.broker(broker_id)
    return None if broker is None else CoordinatorNode(broker.broker_id, broker.host, broker.port)


def _fan_out(
    previous: Callable[[TopicPartition, bool], None] | None, service: ShareCoordinatorService
) -> Callable[[TopicPartition, bool], None]:
    """A leadership listener telling ``previous`` (the other coordinators') and then
    ``service`` of every change."""

    def changed(tp: TopicPartition, leading: bool) -> None:
        if previous is not None:
            previous(tp, leading)
        if tp.topic != SHARE_GROUP_STATE_TOPIC:
            return
        if leading:
            service.on_elected(tp.partition)
        else:
            service.on_resigned(tp.partition)

    return changed


def _cluster_locator(
    cluster: ClusterNode, config: ShareCoordinatorConfig
) -> ShareCoordinatorLocator:
    """The leader of a ``__share_group_state`` partition per the metadata cache."""

    def locate(partition: int) -> int | None:
        cache = cluster.cache
        if SHARE_GROUP_STATE_TOPIC not in cache.topics:
            replication = config.share_coordinator_state_topic_replication_factor
            if len(cache.brokers) < replication:
                _log.warning(
                    "Number of alive brokers %d does not meet the required replication "
                    "factor %d for the share state topic "
                    "(share.coordinator.state.topic.replication.factor); this can be "
                    "ignored while the cluster is starting up",
                    len(cache.brokers),
                    replication,
                )
                return None
            cluster.create_topic_later(
                SHARE_GROUP_STATE_TOPIC,
                config.share_coordinator_state_topic_num_partitions,
                replication,
                config.topic_configs(),
            )
            return None
        leader = cache.broker(cache.leader(TopicPartition(SHARE_GROUP_STATE_TOPIC, partition)))
        return None if leader is None else leader.broker_id

    return locate


async def handle_share_state_request(context: BrokerContext, request: DecodedRequest) -> Response:
    """Answer a share-state request through the broker's share coordinator."""
    if context.share_coordinator is None:
        raise RuntimeError("the share coordinator is not started")
    return await context.share_coordinator.handle(request)


SHARE_STATE_SPECS: tuple[ApiSpec, ...] = tuple(
    ApiSpec(api_key, SHARE_STATE_API_NAMES[api_key], versions, handle_share_state_request)
    for api_key, versions in SHARE_STATE_API_VERSIONS.items()
)
