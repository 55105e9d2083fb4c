"""The consumer-group APIs, answered by the broker's group coordinator.

OffsetCommit, OffsetFetch, FindCoordinator (key_type 0, routed by
``_find_coordinator``), JoinGroup, Heartbeat, LeaveGroup, SyncGroup, DescribeGroups,
ListGroups, DeleteGroups and OffsetDelete: their versions and answers live in
``tickwheel.coordinator.group``, over the ``apis`` of the broker's ``GroupService``
(``context.groups``), which also knows from here which topic partitions exist
(OffsetDelete answers UNKNOWN_TOPIC_OR_PARTITION for the others). Each API's handler
here (``_APIS``) reads the request as the newest version the coordinator knows
(``DecodedRequest.body_as``; LeaveGroup before v3 through ``one_member_leaving``;
OffsetFetch as v7 before v8, as v9 from there), asks the coordinator, and replies with
its typed answer carried down to the version asked (``reply``).

``start_groups`` runs at broker start-up, once the hosted partitions are open: the
service loads the groups of every ``__consumer_offsets`` partition and starts expiring
offsets and dead groups every ``offsets.retention.check.interval.ms``. The topic itself
is created, as in Kafka, when the first FindCoordinator needs it, so a broker that never
sees a consumer group never opens its partitions.

In a cluster the coordinator of a group is the leader of its ``__consumer_offsets``
partition as this broker's metadata cache knows it: FindCoordinator answers that
broker, or COORDINATOR_NOT_AVAILABLE while the topic or its leader is unknown. The
topic is created in ZooKeeper on first need with ``offsets.topic.replication.factor``
replicas; as in Kafka, never with fewer: while fewer brokers are alive, it is not
created and FindCoordinator keeps answering COORDINATOR_NOT_AVAILABLE (a cluster that
is still starting gets there; an offsets topic with fewer replicas than asked for would
stay under-replicated for good). The node's leadership listener loads an offsets
partition's groups when this broker starts leading it and unloads them (their requests
then answer NOT_COORDINATOR) when it stops.

Consumer-protocol groups (KIP-848): ConsumerGroupHeartbeat and ConsumerGroupDescribe go
to the same service, whose versions table (``GROUP_API_VERSIONS_WITH_CONSUMER``) also
widens OffsetFetch to v9; its coordinator sees the
broker's topics through ``_BrokerTopics`` (the context's topic ids, and partition counts
from the registry on one node or the metadata cache in a cluster).

With an authorizer, each request is checked first (``_group_authorization``).

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TypeVar

from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v7.request import JoinGroupRequest
from kio.schema.leave_group.v2.request import LeaveGroupRequest as LeaveGroupRequestV2
from kio.schema.leave_group.v5.request import LeaveGroupRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.offset_commit.v9.request import OffsetCommitRequest
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as OffsetFetchRequestV7
from kio.schema.offset_fetch.v9.request import OffsetFetchRequest
from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequest
from kio.static.protocol import RequestPayload, ResponsePayload

from tickwheel.cluster import ClusterNode
from tickwheel.coordinator import FIND_COORDINATOR_KEY, CoordinatorLocator, CoordinatorNode
from tickwheel.coordinator.group import (
    LEAVE_GROUP_BATCHED,
    OFFSETS_TOPIC,
    GroupConfig,
    GroupService,
    one_member_leaving,
)
from tickwheel.coordinator.group.consumer import (
    GROUP_API_NAMES_WITH_CONSUMER,
    GROUP_API_VERSIONS_WITH_CONSUMER,
    OFFSET_FETCH_BATCHED,
    ConsumerGroupApis,
)
from tickwheel.protocol import ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import TopicPartition
from tickwheel.server._context import BrokerContext, BrokerState
from tickwheel.server._time import BrokerTime
from tickwheel.server.apis._common import ApiSpec, Response, reply
from tickwheel.server.apis._group_authorization import (
    Rule,
    authorize_consumer_group_describe,
    authorize_consumer_group_heartbeat,
    authorize_delete_groups,
    authorize_describe_groups,
    authorize_list_groups,
    authorize_member,
    authorize_offset_commit,
    authorize_offset_delete,
    authorize_offset_fetch,
    authorize_offset_fetch_groups,
    authorize_txn_offset_commit,
)
from tickwheel.server.apis._internal_topics import chain_leadership, internal_topic_leader
from tickwheel.server.apis._txn_offset_verification import refused_txn_offset_commit

T = TypeVar("T")
Req = TypeVar("Req")
Resp = TypeVar("Resp", bound=ResponsePayload)
Body = TypeVar("Body", bound=RequestPayload)


class _BrokerTopics:
    """The broker's topics as the consumer-group coordinator sees them (a TopicCatalog)."""

    def __init__(self, context: BrokerState) -> None:
        self._context = context

    def topic_id(self, name: str) -> uuid.UUID | None:
        return self._context.topic_id(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._context.topic_name(topic_id)

    def partition_count(self, name: str) -> int | None:
        cluster = self._context.cluster
        if cluster is None:
            info = self._context.topics.topics.get(name)
            return None if info is None else info.num_partitions
        cached = cluster.cache.topics.get(name)
        return None if cached is None else len(cached.assignment)

    def topic_names(self) -> Iterable[str]:
        cluster = self._context.cluster
        if cluster is None:
            return list(self._context.topics.topics)
        return list(cluster.cache.topics)


def start_groups(context: BrokerState, broker_time: BrokerTime) -> GroupService:
    """Start this broker's group coordinator over its ``__consumer_offsets`` partitions,
    on the broker's timers, scheduler and clock."""
    config = GroupConfig.from_properties(context.config.as_properties())
    existing = context.topics.topics.get(OFFSETS_TOPIC)
    if existing is not None:
        # The topic's real partition count decides where groups live, whatever the
        # configuration says now (Kafka's rule too).
        config = dataclasses.replace(config, offsets_topic_num_partitions=existing.num_partitions)

    topic_configs = {
        "cleanup.policy": "compact",
        "segment.bytes": str(config.offsets_topic_segment_bytes),
    }

    def create_offsets_topic() -> None:
        if OFFSETS_TOPIC in context.topics.topics:
            return
        context.create_topic(OFFSETS_TOPIC, config.offsets_topic_num_partitions, topic_configs)

    def advertised() -> CoordinatorNode:
        endpoint = context.advertised
        return CoordinatorNode(context.broker_id, endpoint.host, endpoint.port)

    cluster = context.cluster
    if cluster is None:

        def partition_exists(topic: str, partition: int) -> bool:
            info = context.topics.topics.get(topic)
            return info is not None and 0 <= partition < info.num_partitions

        service = GroupService(
            config,
            context.replica_manager,
            broker_id=context.broker_id,
            advertised=advertised,
            create_offsets_topic=create_offsets_topic,
            partition_exists=partition_exists,
            topics=_BrokerTopics(context),
            timers=broker_time.timers,
            scheduler=broker_time.scheduler,
            clock_ms=broker_time.wall_clock_ms,
        )
    else:
        service = GroupService(
            config,
            context.replica_manager,
            broker_id=context.broker_id,
            advertised=advertised,
            locate=_cluster_locator(context, cluster, config, topic_configs),
            partition_exists=lambda topic, partition: cluster.cache.contains_partition(
                TopicPartition(topic, partition)
            ),
            topics=_BrokerTopics(context),
            timers=broker_time.timers,
            scheduler=broker_time.scheduler,
            clock_ms=broker_time.wall_clock_ms,
        )
        chain_leadership(cluster, OFFSETS_TOPIC, service.on_elected, service.on_resigned)
    service.consumer_groups.group_configs = context.group_configs.overrides_of
    service.start()
    return service


def _cluster_locator(
    context: BrokerState,
    cluster: ClusterNode,
    config: GroupConfig,
    topic_configs: Mapping[str, str],
) -> CoordinatorLocator:
    """The leader of an offsets partition per ``cluster``'s metadata cache, if it is live,
    on the listener of the request being handled."""

    def locate(partition: int) -> CoordinatorNode | None:
        leader = internal_topic_leader(
            cluster,
            TopicPartition(OFFSETS_TOPIC, partition),
            num_partitions=config.offsets_topic_num_partitions,
            replication_factor=config.offsets_topic_replication_factor,
            configs=topic_configs,
            replication_setting="offsets.topic.replication.factor",
            listener_name=context.request_listener,
        )
        return (
            None if leader is None else CoordinatorNode(leader.broker_id, leader.host, leader.port)
        )

    return locate


@dataclasses.dataclass(frozen=True, slots=True)
class _GroupApi:
    """One group API's handler over the broker's ``ConsumerGroupApis``: the coordinator's
    answer, and the same behind the API's authorization rule."""

    answer: Callable[[ConsumerGroupApis, DecodedRequest], Awaitable[Response]]
    authorized: Callable[[BrokerContext, ConsumerGroupApis, DecodedRequest], Awaitable[Response]]


def _served(
    read: Callable[[DecodedRequest], Req],
    answer: Callable[[ConsumerGroupApis, Req, DecodedRequest], Awaitable[Resp]],
    rule: Rule[Req, Resp],
) -> _GroupApi:
    """The API whose body is ``read`` from the request and ``answer``ed by the
    coordinator; with an authorizer, behind ``rule``."""

    async def answered(apis: ConsumerGroupApis, request: DecodedRequest) -> Response:
        return reply(request, await answer(apis, read(request), request))

    async def authorized(
        context: BrokerContext, apis: ConsumerGroupApis, request: DecodedRequest
    ) -> Response:
        def ask(narrowed: Req) -> Awaitable[Resp]:
            return answer(apis, narrowed, request)

        return await rule(context, request, read(request), ask)

    return _GroupApi(answered, authorized)


def _as(cls: type[Body]) -> Callable[[DecodedRequest], Body]:
    """Read the body as ``cls``, the newest version the coordinator knows."""

    def read(request: DecodedRequest) -> Body:
        return request.body_as(cls)

    return read


def _read_leave_group(request: DecodedRequest) -> LeaveGroupRequest:
    """LeaveGroup as v5: before v3 it names one member."""
    if request.api_version < LEAVE_GROUP_BATCHED:
        return one_member_leaving(request.body_as(LeaveGroupRequestV2))
    return request.body_as(LeaveGroupRequest)


async def _now(response: T) -> T:
    return response


def _client_id(request: DecodedRequest) -> str:
    return request.header.client_id or ""


def _offset_fetch(one_group: _GroupApi, groups: _GroupApi) -> _GroupApi:
    """OffsetFetch: one group before v8 (the classic handler), several from v8."""

    def by_version(request: DecodedRequest) -> _GroupApi:
        return one_group if request.api_version < OFFSET_FETCH_BATCHED else groups

    async def answered(apis: ConsumerGroupApis, request: DecodedRequest) -> Response:
        return await by_version(request).answer(apis, request)

    async def authorized(
        context: BrokerContext, apis: ConsumerGroupApis, request: DecodedRequest
    ) -> Response:
        return await by_version(request).authorized(context, apis, request)

    return _GroupApi(answered, authorized)


_APIS: Mapping[int, _GroupApi] = {
    ApiKey.OFFSET_COMMIT: _served(
        _as(OffsetCommitRequest),
        lambda apis, body, request: apis.offset_commit(body, api_version=request.api_version),
        authorize_offset_commit,
    ),
    ApiKey.OFFSET_FETCH: _offset_fetch(
        _served(
            _as(OffsetFetchRequestV7),
            lambda apis, body, request: _now(
                apis.classic.offset_fetch(body, api_version=request.api_version)
            ),
            authorize_offset_fetch,
        ),
        _served(
            _as(OffsetFetchRequest),
            lambda apis, body, _request: _now(apis.offset_fetch(body)),
            authorize_offset_fetch_groups,
        ),
    ),
    ApiKey.JOIN_GROUP: _served(
        _as(JoinGroupRequest),
        lambda apis, body, request: apis.join_group(
            body, api_version=request.api_version, client_id=_client_id(request)
        ),
        authorize_member,
    ),
    ApiKey.HEARTBEAT: _served(
        _as(HeartbeatRequest),
        lambda apis, body, _request: apis.classic.heartbeat(body),
        authorize_member,
    ),
    ApiKey.LEAVE_GROUP: _served(
        _read_leave_group,
        lambda apis, body, request: apis.classic.leave_group(body, api_version=request.api_version),
        authorize_member,
    ),
    ApiKey.SYNC_GROUP: _served(
        _as(SyncGroupRequest),
        lambda apis, body, _request: apis.classic.sync_group(body),
        authorize_member,
    ),
    ApiKey.DESCRIBE_GROUPS: _served(
        _as(DescribeGroupsRequest),
        lambda apis, body, _request: _now(apis.describe_groups(body)),
        authorize_describe_groups,
    ),
    ApiKey.LIST_GROUPS: _served(
        _as(ListGroupsRequest),
        lambda apis, body, _request: _now(apis.list_groups(body)),
        authorize_list_groups,
    ),
    ApiKey.TXN_OFFSET_COMMIT: _served(
        _as(TxnOffsetCommitRequest),
        lambda apis, body, request: apis.txn_offset_commit(body, api_version=request.api_version),
        authorize_txn_offset_commit,
    ),
    ApiKey.DELETE_GROUPS: _served(
        _as(DeleteGroupsRequest),
        lambda apis, body, _request: apis.delete_groups(body),
        authorize_delete_groups,
    ),
    ApiKey.OFFSET_DELETE: _served(
        _as(OffsetDeleteRequest),
        lambda apis, body, _request: _now(apis.offset_delete(body)),
        authorize_offset_delete,
    ),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _served(
        _as(ConsumerGroupHeartbeatRequest),
        lambda apis, body, request: apis.heartbeat(
            body, api_version=request.api_version, client_id=_client_id(request)
        ),
        authorize_consumer_group_heartbeat,
    ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: _served(
        _as(ConsumerGroupDescribeRequest),
        lambda apis, body, _request: _now(apis.describe(body)),
        authorize_consumer_group_describe,
    ),
}


def _group_spec(api_key: int, versions: VersionRange) -> ApiSpec:
    """API ``api_key`` answered by the group coordinator."""
    api = _APIS[api_key]

    async def handle(context: BrokerContext, request: DecodedRequest) -> Response:
        groups = context.groups
        if api_key == ApiKey.TXN_OFFSET_COMMIT:
            refused = await refused_txn_offset_commit(context, request)
            if refused is not None:
                return refused
        if context.authorizer is not None:
            return await api.authorized(context, groups.apis, request)
        return await api.answer(groups.apis, request)

    return ApiSpec(api_key, GROUP_API_NAMES_WITH_CONSUMER[api_key], versions, handle)


GROUP_SPECS: tuple[ApiSpec, ...] = tuple(
    _group_spec(api_key, versions)
    for api_key, versions in GROUP_API_VERSIONS_WITH_CONSUMER.items()
    if api_key != FIND_COORDINATOR_KEY  # _find_coordinator routes it by key type
)
