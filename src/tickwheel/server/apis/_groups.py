"""The consumer-group APIs, answered by the broker's group coordinator.

OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup, Heartbeat, LeaveGroup, SyncGroup,
DescribeGroups, ListGroups and DeleteGroups: their versions and handlers live in
``tickwheel.coordinator`` (``GROUP_API_VERSIONS``, ``GroupApis``); each spec here hands
its request to the broker's ``GroupService`` (``context.groups``).

``start_groups`` runs at broker start-up, once the hosted partitions are open: the
service loads the groups of every ``__consumer_offsets`` partition. The topic itself is
created, as in Kafka, when the first FindCoordinator needs it, so a broker that never
sees a consumer group never opens its partitions.

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

import dataclasses

from tickwheel.coordinator import (
    GROUP_API_NAMES,
    GROUP_API_VERSIONS,
    OFFSETS_TOPIC,
    CoordinatorNode,
    GroupConfig,
    GroupService,
)
from tickwheel.protocol import DecodedRequest
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response


def start_groups(context: BrokerContext) -> GroupService:
    """Start this broker's group coordinator over its ``__consumer_offsets`` partitions."""
    config = GroupConfig.from_properties(context.config.as_properties())
    existing = context.topics.topics.get(OFFSETS_TOPIC)
    if existing is not None:
        # The topic's real partition count decides where groups live, whatever the
        # configuration says now (Kafka's rule too).
        config = dataclasses.replace(config, offsets_topic_num_partitions=existing.num_partitions)

    def create_offsets_topic() -> None:
        if OFFSETS_TOPIC in context.topics.topics:
            return
        topic_configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(config.offsets_topic_segment_bytes),
            # Kafka compacts this topic and never deletes it by age; the log does not
            # compact, so at least nothing may expire: a quiet group keeps its offsets.
            "retention.ms": "-1",
            "retention.bytes": "-1",
        }
        context.create_topic(OFFSETS_TOPIC, config.offsets_topic_num_partitions, topic_configs)

    def advertised() -> CoordinatorNode:
        endpoint = context.advertised
        return CoordinatorNode(context.broker_id, endpoint.host, endpoint.port)

    service = GroupService(
        config,
        context.replica_manager,
        broker_id=context.broker_id,
        advertised=advertised,
        create_offsets_topic=create_offsets_topic,
    )
    service.start()
    return service


async def handle_group_request(context: BrokerContext, request: DecodedRequest) -> Response:
    """Answer a group API request through the broker's group coordinator."""
    if context.groups is None:
        raise RuntimeError("the group coordinator is not started")
    return await context.groups.handle(request)


GROUP_SPECS: tuple[ApiSpec, ...] = tuple(
    ApiSpec(api_key, GROUP_API_NAMES[api_key], versions, handle_group_request)
    for api_key, versions in GROUP_API_VERSIONS.items()
)
