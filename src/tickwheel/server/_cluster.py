"""Cluster mode of the broker: the ``ClusterNode`` built from ``BrokerConfig``.

With ``zookeeper.connect`` set, the broker joins a ZooKeeper-coordinated cluster
(``tickwheel.cluster``): the node's watches decide which partitions this broker
hosts and whether it leads or follows each. The ``TopicRegistry`` then mirrors the
topics in ZooKeeper (so every handler that looks a topic up sees the cluster's
topics); ZooKeeper, not the registry file, is the record.

The handlers' cluster-mode parts live here too, so each handler keeps one branch:
the brokers and partitions of a Metadata answer (other brokers named by their endpoint
on the listener the request came on, as Kafka does), auto-creation, and the creation of
topics and partitions (replicas assigned over the live brokers, Kafka's errors).
Users' SCRAM credentials (``UserConfigs``) and client quotas are kept under
``/config/users`` and ``/config/clients`` and applied on every broker when notified.

Concurrency: event-loop thread only, like the ``BrokerContext``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from kio.schema.create_partitions.v3.request import CreatePartitionsTopic
from kio.schema.create_topics.v7.request import CreatableTopic
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.response import MetadataResponsePartition
from kio.schema.types import BrokerId
from kio.static.primitive import i32

from tickwheel.cluster import (
    AssignmentError,
    BrokerEndpoint,
    BrokerRegistration,
    ChannelSasl,
    ClusterNode,
    ClusterSettings,
    ControllerSettings,
    TopicExistsError,
    TopicMetadata,
    ZkSettings,
)
from tickwheel.protocol import decode_topic_id
from tickwheel.replica import NO_LEADER, FetcherConfig
from tickwheel.security import (
    SASL_PLAINTEXT,
    SASL_SSL,
    SUPPORTED_MECHANISMS,
    SaslConfigError,
    client_credentials,
)
from tickwheel.server._context import BrokerContext, BrokerState
from tickwheel.server._features import default_levels
from tickwheel.server._topics import legacy_topic_id
from tickwheel.server.config._broker import BrokerConfig, ConfigError
from tickwheel.server.net._tls import inter_broker_ssl_context

_log = logging.getLogger(__name__)
_AUTO_CREATE_TIMEOUT_MS = 5000
"""How long auto-creation waits for the new partitions' leaders (as Kafka's request)."""
_ALTER_USER_TIMEOUT_MS = 30_000
"""How long a SCRAM credential change waits for this broker to apply it."""


def cluster_settings(
    config: BrokerConfig, cluster_id: str, stored_cluster_id: str | None
) -> ClusterSettings:
    """The cluster settings in ``config`` (Kafka's ``zookeeper.*``/``replica.*`` names),
    proposing ``cluster_id`` and requiring ``stored_cluster_id`` (meta.properties)."""
    return ClusterSettings(
        broker_id=config.broker_id,
        zookeeper=ZkSettings(
            connect=config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.zookeeper_connection_timeout_ms,
        ),
        cluster_id=cluster_id,
        stored_cluster_id=stored_cluster_id,
        replica_lag_time_max_ms=config.replica_lag_time_max_ms,
        replica_socket_timeout_ms=config.replica_socket_timeout_ms,
        fetcher=FetcherConfig(
            wait_max_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_max_bytes,
            response_max_bytes=config.replica_fetch_response_max_bytes,
            backoff_ms=config.replica_fetch_backoff_ms,
        ),
        controller=ControllerSettings(
            unclean_leader_election_enable=config.unclean_leader_election_enable,
            auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
            leader_imbalance_check_interval_seconds=config.leader_imbalance_check_interval_seconds,
            leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
            min_insync_replicas=config.min_insync_replicas,
        ),
        controlled_shutdown_enable=config.controlled_shutdown_enable,
        controlled_shutdown_max_retries=config.controlled_shutdown_max_retries,
        controlled_shutdown_retry_backoff_ms=config.controlled_shutdown_retry_backoff_ms,
        request_timeout_ms=config.request_timeout_ms,
        inter_broker_listener=config.inter_broker_listener().name,
        inter_broker_ssl_context=inter_broker_ssl_context(config),
        inter_broker_sasl=inter_broker_sasl(config),
        default_features=default_levels(),
    )


def inter_broker_sasl(config: BrokerConfig) -> ChannelSasl | None:
    """How this broker logs in to the others: on a SASL inter-broker listener, the
    mechanism ``sasl.mechanism.inter.broker.protocol`` with the ``username`` and
    ``password`` of that mechanism's JAAS line on the listener (Kafka's way)."""
    listener = config.inter_broker_listener()
    if listener.security_protocol not in (SASL_PLAINTEXT, SASL_SSL):
        return None
    mechanism = config.sasl_mechanism_inter_broker_protocol.strip().upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(
            f"sasl.mechanism.inter.broker.protocol {mechanism} is not one tickwheel serves "
            f"({', '.join(SUPPORTED_MECHANISMS)})"
        )
    view = config.listener_view(listener.name)
    try:
        username, password = client_credentials(view.get, listener.name, mechanism)
    except SaslConfigError as exc:
        raise ConfigError(str(exc)) from exc
    return ChannelSasl(mechanism, username, password)


def join_cluster(context: BrokerState, stored_cluster_id: str | None) -> ClusterNode:
    """A node for ``context``'s broker, set as ``context.cluster`` (not started yet).

    It proposes ``context.cluster_id`` to ZooKeeper and refuses to join a cluster of
    another id than ``stored_cluster_id``, the one in this broker's meta.properties.
    """
    settings = cluster_settings(context.config, context.cluster_id, stored_cluster_id)
    node = ClusterNode(settings, context.replica_manager, context.log_config)

    def mirror(name: str, metadata: TopicMetadata | None) -> None:
        registry = context.topics
        context.apply_replication_throttles(name, None if metadata is None else metadata.configs)
        if metadata is None:
            if name in registry.topics:
                registry.delete(name)
            return
        count = len(metadata.assignment)
        topic_id = decode_topic_id(metadata.topic_id) or legacy_topic_id(name)
        info = registry.topics.get(name)
        if info is None or info.configs != metadata.configs or info.topic_id != topic_id:
            registry.create(name, count, metadata.configs, topic_id)
        elif info.num_partitions != count:
            registry.set_partitions(name, count)

    node.topic_listener = mirror
    node.broker_config_listener = context.apply_broker_configs
    node.group_config_listener = context.apply_group_configs
    node.user_config_listener = context.users.apply
    node.quota_config_listener = context.apply_quota_configs

    async def write_user(user: str, configs: Mapping[str, str]) -> None:
        await node.alter_user_config(user, configs, timeout_ms=_ALTER_USER_TIMEOUT_MS)

    context.users.use_cluster(write_user)
    context.cluster = node
    return node


def partition_entries(
    node: ClusterNode, topic: str, listener_name: str
) -> tuple[MetadataResponsePartition, ...]:
    """A topic's partitions as a Metadata response through ``listener_name`` describes them.

    A partition without a live leader, or whose leader has no such listener, is answered
    LEADER_NOT_AVAILABLE with leader -1: clients must never see a leader that is missing
    from the broker list.
    """
    # Replica sets repeat across a topic's partitions: each is made a typed tuple once.
    typed: dict[tuple[int, ...], tuple[BrokerId, ...]] = {}

    def broker_ids(ids: tuple[int, ...]) -> tuple[BrokerId, ...]:
        found = typed.get(ids)
        if found is None:
            found = typed[ids] = tuple(map(BrokerId, ids))
        return found

    entries = []
    for p in node.cache.partition_metadata(topic):
        reachable = p.has_leader and node.cache.broker(p.leader, listener_name) is not None
        entries.append(
            MetadataResponsePartition(
                error_code=ErrorCode.none if reachable else ErrorCode.leader_not_available,
                partition_index=i32(p.partition),
                leader_id=BrokerId(p.leader if reachable else NO_LEADER),
                leader_epoch=i32(p.leader_epoch),
                replica_nodes=broker_ids(p.replicas),
                isr_nodes=broker_ids(p.isr),
                offline_replicas=broker_ids(p.offline_replicas),
            )
        )
    return tuple(entries)


async def auto_create_topic(context: BrokerContext, name: str) -> None:
    """Create ``name`` in the cluster with the broker defaults, if allowed and missing.

    A topic created meanwhile by another broker is left as it is; one that cannot be
    created (``default.replication.factor`` above the live brokers) is logged, and
    the topic stays unknown.
    """
    node = context.cluster
    config = context.config
    if node is None or not config.auto_create_topics_enable or name in node.cache.topics:
        return
    try:
        assignment = await node.plan_assignment(
            config.num_partitions, config.default_replication_factor
        )
        await node.create_topic(name, assignment, {}, timeout_ms=_AUTO_CREATE_TIMEOUT_MS)
    except (AssignmentError, TopicExistsError) as exc:
        _log.info("auto-creating topic %s: %s", name, exc)


@dataclass(frozen=True, slots=True)
class ClusterRefusal:
    """Why the cluster refused a topic's creation or growth: Kafka's code and message."""

    error_code: ErrorCode
    message: str


async def create_cluster_topic(
    context: BrokerContext,
    topic: CreatableTopic,
    num_partitions: int,
    replication_factor: int,
    configs: dict[str, str],
    *,
    validate_only: bool,
    timeout_ms: int,
) -> ClusterRefusal | None:
    """Create one CreateTopics ``topic`` in the cluster; why it was refused, or None.

    Replicas come from the request's manual assignment, checked against the live
    brokers, or from Kafka's assignment over them; ``validate_only`` stops there.
    """
    node = context.cluster
    assert node is not None
    manual = {int(a.partition_index): tuple(a.broker_ids) for a in topic.assignments or ()}
    try:
        assignment = await node.plan_assignment(num_partitions, replication_factor, manual or None)
        if not validate_only:
            await node.create_topic(topic.name, assignment, configs, timeout_ms=timeout_ms)
    except AssignmentError as exc:
        return ClusterRefusal(exc.error_code, str(exc))
    except TopicExistsError:
        return ClusterRefusal(
            ErrorCode.topic_already_exists, f"topic {topic.name!r} already exists"
        )
    return None


async def add_cluster_partitions(
    context: BrokerContext, topic: CreatePartitionsTopic, *, validate_only: bool, timeout_ms: int
) -> ClusterRefusal | None:
    """Grow one CreatePartitions ``topic`` in the cluster; why it was refused, or None.

    New partitions get as many replicas as partition 0 has, from the request's
    assignment (checked against the live brokers) or from Kafka's assignment.
    """
    node = context.cluster
    assert node is not None
    current = node.cache.topics[topic.name].assignment
    first_new = len(current)
    manual = {
        first_new + index: tuple(a.broker_ids) for index, a in enumerate(topic.assignments or ())
    }
    try:
        assignment = await node.plan_assignment(
            topic.count - first_new,
            len(current[0]),
            manual or None,
            start_partition=first_new,
        )
        if not validate_only:
            await node.add_partitions(topic.name, assignment, timeout_ms=timeout_ms)
    except AssignmentError as exc:
        return ClusterRefusal(exc.error_code, str(exc))
    return None


async def start_cluster(
    context: BrokerContext, node: ClusterNode, previous_broker_epoch: int
) -> None:
    """Start ``node`` advertising this broker's endpoint on every listener and the
    epoch of its clean last shutdown (-1: unclean); then drop from the registry the
    topics that were deleted from the cluster while this broker was down."""
    broker_id = context.broker_id
    endpoints = tuple(
        BrokerEndpoint(broker_id, endpoint.host, endpoint.port, spec.name, spec.security_protocol)
        for spec in context.config.listener_specs()
        if (endpoint := context.listener_endpoints.get(spec.name)) is not None
    )
    await node.start(BrokerRegistration(broker_id, endpoints, previous_broker_epoch))
    for name in [name for name in context.topics.topics if name not in node.cache.topics]:
        context.topics.delete(name)
