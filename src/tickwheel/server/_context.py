"""``BrokerContext``: what every API handler may use, and the topic operations.

One object per running broker, handed to each handler: the config, the
``ReplicaManager``, the ``TopicRegistry``, the metrics, the advertised endpoint, the
advertised API versions and the broker's services (``BrokerServices``: the group,
transaction and share coordinators, share groups, share-partitions and their admin).

It is built whole: ``BrokerState`` is everything but the services, and the services
are started over it (they create internal topics through it and advertise its
endpoints), so ``BrokerContext``'s constructor hands its state to the broker's
``start_services`` and keeps what comes back. Every service is a typed, non-optional
attribute from then on, and the broker opens its listeners only after: no request
meets a missing service. What a coordinator learns later (which ``__consumer_offsets``
or ``__transaction_state`` partitions it leads) is its own state, answered as
NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS meanwhile.

Creating, growing and deleting topics happen here, since the
Metadata (auto-create), CreateTopics, CreatePartitions and DeleteTopics handlers all
need them: the registry records the change, the replica manager makes this broker the
leader of each new partition or deletes the logs of a deleted one. Creating and
growing are all-or-nothing: an ``OSError`` (a full disk, no file descriptors left)
removes the partitions that call made and leaves the registry as it was.

Live config changes (AlterConfigs, IncrementalAlterConfigs) are applied here too: a
topic's new overrides, a group's (``group_configs``, read by the coordinators at their
next use), or new dynamic broker configs (``DynamicBrokerConfig``; ``config``
is always its ``current``), reach every hosted partition's log at once; the replication
throttles take the throttled rates and each topic's throttled replicas
(``apply_replication_throttles``, called as the cluster reports topics). On a single
node the registry file records them; in a cluster ZooKeeper does, and every broker,
this one included, applies them when notified (``ClusterNode.alter_config``).

Broker-side schema id validation: ``schema_validations`` holds what each topic that
validates asks (its ``confluent.*.schema.validation`` configs, read once when the topic
is loaded, created or altered), so a produce finds a topic that does not validate with
one look-up; ``schema_validator`` is the schema registry's validator when the broker
serves one (``schema.registry.listeners``, set by the broker as the registry starts),
else None, and then no topic may turn validation on.

Concurrency: used on the broker's event-loop thread only.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from tickwheel.cluster import BROKER_ENTITY, GROUP_ENTITY, TOPIC_ENTITY, ClusterNode
from tickwheel.coordinator.group import GroupService
from tickwheel.coordinator.group.share import ShareGroupAdmin, ShareGroupCoordinator
from tickwheel.coordinator.share_state import ShareCoordinatorService
from tickwheel.coordinator.transaction import TransactionService
from tickwheel.log import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    LogConfig,
    LogStorageError,
)
from tickwheel.protocol import VersionRange
from tickwheel.replica import ReplicaManager, TopicPartition
from tickwheel.security import AclAuthorizer, current_session_or_none
from tickwheel.server._acl_store import AclStore
from tickwheel.server._features import FeatureUpdate, FinalizedFeatures, plan_update
from tickwheel.server._metrics import BrokerMetrics
from tickwheel.server._topic_metadata import TopicMetadataParts
from tickwheel.server._topics import TopicInfo, TopicRegistry
from tickwheel.server._users import UserConfigs
from tickwheel.server.config._broker import BrokerConfig, ConfigError
from tickwheel.server.config._dynamic import DynamicBrokerConfig
from tickwheel.server.config._groups import GroupConfigs
from tickwheel.server.config._schema_validation import (
    SCHEMA_VALIDATION_CONFIG_TYPES,
    TopicSchemaValidation,
    topic_schema_validation,
)
from tickwheel.server.quotas import (
    QUOTA_KEYS,
    ClientQuotas,
    QuotaEntity,
    QuotaEntityError,
    entity_path,
    parse_entity_path,
    quota_text,
)
from tickwheel.share_delivery import SharePartitionManager

if TYPE_CHECKING:
    from tickwheel.registry import SchemaValidator

_log = logging.getLogger(__name__)
_ALTER_CONFIG_TIMEOUT_MS = 30_000
"""How long an alteration waits for this broker to apply its own change (cluster)."""

_MS_PER_S = 1000.0
STORAGE_ERRORS = (OSError, LogStorageError)
"""What creating a partition's log raises when the disk or the descriptors fail."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A host and port clients connect to."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """The coordinators and share-group services of one broker, started together."""

    groups: GroupService
    transactions: TransactionService
    # The share coordinator (``__share_group_state``) the share-partitions keep their
    # state through.
    share_coordinator: ShareCoordinatorService
    share_groups: ShareGroupCoordinator
    share_partitions: SharePartitionManager
    share_admin: ShareGroupAdmin

    async def shutdown(self) -> None:
        """Share groups and share-partitions first, then the coordinators they use (the
        transactions' before the groups': their timers and marker senders stop first)."""
        self.share_groups.shutdown()
        self.share_partitions.shutdown()
        await self.share_coordinator.shutdown()
        await self.transactions.shutdown()
        self.groups.shutdown()


@dataclass(frozen=True, slots=True)
class BrokerParts:
    """What a broker builds before its state: the config, the replica manager over the
    opened logs, the topic registry, the metrics, the advertised API versions, this
    broker's cluster id (meta.properties; in a cluster, until it has joined, the id it
    proposes), users' SCRAM credentials and the client quotas."""

    config: BrokerConfig
    replica_manager: ReplicaManager
    topics: TopicRegistry
    metrics: BrokerMetrics
    advertised_versions: Mapping[int, VersionRange]
    cluster_id: str
    users: UserConfigs
    quotas: ClientQuotas


class BrokerState:
    """The broker's state without its services: what the services are started over."""

    def __init__(self, parts: BrokerParts) -> None:
        config, topics = parts.config, parts.topics
        self.dynamic = DynamicBrokerConfig(config)
        for entity, configs in topics.broker_configs.items():
            try:
                self.dynamic.set(entity, configs)
            except ConfigError as exc:
                _log.error("ignoring the stored dynamic configs of %s: %s", entity, exc)
        self.config = self.dynamic.current
        # The properties of ``config`` as it is now (dynamic configs replace it).
        self.group_configs = GroupConfigs(self._broker_properties)
        for group_id, configs in topics.group_configs.items():
            self.group_configs.set(group_id, configs)
        self.replica_manager = parts.replica_manager
        self._apply_replication_rates()
        self.topics = topics
        # Each topic's encoded Metadata entry, kept until the topic changes.
        self.topic_metadata = TopicMetadataParts()
        self.metrics = parts.metrics
        self.advertised_versions = parts.advertised_versions
        # Where clients reach each listener, by listener name (set by the broker once it
        # listens), and the listener other brokers use.
        self.listener_endpoints: dict[str, Endpoint] = {}
        self.inter_broker_listener = config.inter_broker_listener().name
        # Users' SCRAM credentials (``_users``), in the first log directory.
        self.users = parts.users
        # Client quotas and their enforcement (``server.quotas``), kept in ``topics``.
        self.quotas = parts.quotas
        for path, quotas in topics.client_quotas.items():
            try:
                self.quotas.apply(parse_entity_path(path), quotas)
            except QuotaEntityError as exc:
                _log.error("ignoring the stored client quotas of %s: %s", path, exc)
        # Cluster membership when ``zookeeper.connect`` is set; None on a single node.
        # Set by ``start_services`` before any service starts, never changed after.
        self.cluster: ClusterNode | None = None
        # The authorizer (``authorizer.class.name``) and its ACLs' store (an
        # ``AclStore``), set by ``start_services`` too; None: every request is allowed.
        self.authorizer: AclAuthorizer | None = None
        self.acl_store: AclStore | None = None
        # The schema registry's validator, set by the broker when it serves the registry.
        self.schema_validator: SchemaValidator | None = None
        # What each topic that validates schema ids asks, by topic name.
        self.schema_validations: dict[str, TopicSchemaValidation] = {}
        for info in topics.topics.values():
            self._note_schema_validation(info.name, info.configs)
        self._own_cluster_id = parts.cluster_id

    @property
    def request_listener(self) -> str:
        """The listener of the request being handled; outside a request (registration,
        the broker's own calls), the inter-broker listener."""
        session = current_session_or_none()
        if session is not None and session.listener_name in self.listener_endpoints:
            return session.listener_name
        return self.inter_broker_listener

    @property
    def advertised(self) -> Endpoint:
        """This broker's endpoint on the listener of the request being handled.

        Kafka answers Metadata, FindCoordinator and DescribeCluster with the endpoints
        of the listener the request came on; outside a request (registration, the
        broker's own calls) it is the inter-broker listener's.
        """
        return self.listener_endpoints.get(self.request_listener, Endpoint("127.0.0.1", 0))

    @property
    def cluster_id(self) -> str:
        """The cluster id clients are told: ZooKeeper's once joined, else this broker's."""
        cluster = self.cluster
        if cluster is not None and cluster.cache.cluster_id:
            return cluster.cache.cluster_id
        return self._own_cluster_id

    @property
    def broker_id(self) -> int:
        """This broker's id."""
        return self.config.broker_id

    def topic_id(self, name: str) -> uuid.UUID | None:
        """The id of topic ``name``, or None if there is no such topic."""
        info = self.topics.topics.get(name)
        return info.topic_id if info is not None else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with id ``topic_id``, or None if there is none."""
        return self.topics.name_of(topic_id)

    def topic_properties(self, configs: Mapping[str, str]) -> dict[str, str]:
        """The broker's topic defaults with ``configs`` on top."""
        return {**self.config.topic_defaults(), **configs}

    def log_config(self, configs: Mapping[str, str]) -> LogConfig:
        """The ``LogConfig`` of a topic with overrides ``configs``; ValueError if invalid."""
        return LogConfig.from_properties(
            {
                name: value
                for name, value in self.topic_properties(configs).items()
                if name not in SCHEMA_VALIDATION_CONFIG_TYPES
            }
        )

    def check_schema_validation(self, configs: Mapping[str, str]) -> None:
        """ValueError naming the config unless the schema validation settings among a
        topic's overrides ``configs`` are valid and can be served by this broker."""
        validation = topic_schema_validation(configs)
        if validation is not None and self.schema_validator is None:
            raise ValueError(
                f"{validation.enabling_config}: this broker serves no schema registry to "
                "validate against (schema.registry.listeners is unset)"
            )

    def _note_schema_validation(self, name: str, configs: Mapping[str, str]) -> None:
        """Keep what topic ``name`` with overrides ``configs`` validates."""
        try:
            validation = topic_schema_validation(configs)
        except ValueError as exc:
            _log.error("topic %s: ignoring its schema validation configs: %s", name, exc)
            validation = None
        if validation is None:
            self.schema_validations.pop(name, None)
        else:
            self.schema_validations[name] = validation

    async def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the overrides of topic ``name`` (already validated) and apply them."""
        if self.cluster is not None:
            await self.cluster.alter_config(
                TOPIC_ENTITY, name, configs, timeout_ms=_ALTER_CONFIG_TIMEOUT_MS
            )
            return
        self.topics.set_configs(name, dict(configs))
        self.replica_manager.update_topic_config(name, self.log_config(configs))
        self._note_schema_validation(name, configs)
        _log.info("topic %s: config overrides now %s", name, dict(configs))

    async def alter_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of ``entity`` (``<default>`` or this broker's id,
        already validated) and apply them."""
        if self.cluster is not None:
            await self.cluster.alter_config(
                BROKER_ENTITY, entity, configs, timeout_ms=_ALTER_CONFIG_TIMEOUT_MS
            )
            return
        self.topics.set_broker_configs(entity, dict(configs))
        self.apply_broker_configs(entity, configs)

    @property
    def finalized_features(self) -> FinalizedFeatures:
        """The cluster's finalized features as this broker knows them now."""
        cluster = self.cluster
        if cluster is not None:
            return FinalizedFeatures(cluster.features_epoch, cluster.feature_levels)
        return self.topics.finalized_features

    async def update_features(
        self, updates: tuple[FeatureUpdate, ...], *, validate_only: bool, timeout_ms: int
    ) -> None:
        """Apply ``updates`` to the finalized features, all or none (``plan_update``'s
        ``FeatureUpdateError`` when one is refused; ``validate_only``: only checked).
        Levels left as they were are no change and keep the epoch, as Kafka's
        ZooKeeper-mode controller leaves ``/feature`` alone then.
        In a cluster an update that loses the race to another is planned again, until
        ``timeout_ms`` has passed (then ``TimeoutError``)."""
        deadline_s = time.monotonic() + timeout_ms / _MS_PER_S
        while True:
            current = self.finalized_features
            levels = plan_update(current, updates, self.broker_id)
            if validate_only or levels == current.levels:
                return
            if self.cluster is None:
                self.topics.set_finalized_features(FinalizedFeatures(current.epoch + 1, levels))
                _log.info("finalized features set to %s (epoch %d)", levels, current.epoch + 1)
                return
            left_ms = round((deadline_s - time.monotonic()) * _MS_PER_S)
            if left_ms <= 0:
                raise TimeoutError(f"the finalized features did not settle in {timeout_ms} ms")
            written = await self.cluster.update_features(levels, current.epoch, timeout_ms=left_ms)
            if written is not None:
                return

    def _broker_properties(self) -> dict[str, str]:
        return self.config.as_properties()

    async def alter_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Replace the config overrides of group ``group_id`` (already validated)."""
        if self.cluster is not None:
            await self.cluster.alter_config(
                GROUP_ENTITY, group_id, configs, timeout_ms=_ALTER_CONFIG_TIMEOUT_MS
            )
            return
        self.apply_group_configs(group_id, configs)

    def apply_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Take ``group_id``'s overrides: the coordinators read them at their next use."""
        self.topics.set_group_configs(group_id, dict(configs))
        self.group_configs.set(group_id, configs)
        _log.info("group %s: config overrides now %s", group_id, dict(configs))

    async def alter_client_quotas(self, entity: QuotaEntity, quotas: Mapping[str, float]) -> None:
        """Replace ``entity``'s client quotas (already validated) and apply them: on a
        single node kept in the topics registry, in a cluster in ZooKeeper beside the
        entity's other configs (a user's SCRAM credentials), where every broker hears
        of them."""
        path = entity_path(entity)
        if self.cluster is not None:

            def update(stored: dict[str, str]) -> dict[str, str]:
                kept = {k: v for k, v in stored.items() if k not in QUOTA_KEYS}
                return {**kept, **{k: quota_text(k, v) for k, v in quotas.items()}}

            entity_type, _, name = path.partition("/")
            await self.cluster.update_entity_config(
                entity_type, name, update, timeout_ms=_ALTER_CONFIG_TIMEOUT_MS
            )
            return
        self.topics.set_client_quotas(path, dict(quotas))
        self.quotas.apply(entity, quotas)
        _log.info("client quotas of %s now %s", path, dict(quotas))

    def apply_quota_configs(self, path: str, configs: Mapping[str, str]) -> None:
        """Take the client quotas among the configs ZooKeeper holds for entity ``path``."""
        try:
            entity = parse_entity_path(path)
            quotas = {k: float(v) for k, v in configs.items() if k in QUOTA_KEYS}
        except (QuotaEntityError, ValueError) as exc:
            _log.error("ignoring the client quotas of %s: %s", path, exc)
            return
        self.quotas.apply(entity, quotas)
        if quotas or entity in self.quotas.configs:
            _log.info("client quotas of %s now %s", path, quotas)

    def apply_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        """Take ``entity``'s dynamic configs: new topic defaults reach every live log
        whose topic does not override them."""
        self.dynamic.set(entity, configs)
        self.config = self.dynamic.current
        self._apply_replication_rates()
        for info in self.topics.topics.values():
            try:
                log_config = self.log_config(info.configs)
            except ValueError as exc:
                _log.error("not applying new broker defaults to topic %s: %s", info.name, exc)
                continue
            self.replica_manager.update_topic_config(info.name, log_config)
        _log.info("dynamic broker configs of %s now %s", entity, dict(configs))

    def _apply_replication_rates(self) -> None:
        """Bound the replication throttles at the configured rates."""
        manager = self.replica_manager
        for quota, rate in (
            (manager.leader_quota, self.config.leader_replication_throttled_rate),
            (manager.follower_quota, self.config.follower_replication_throttled_rate),
        ):
            if quota is not None:
                quota.update_quota(rate)

    def apply_replication_throttles(self, topic: str, configs: Mapping[str, str] | None) -> None:
        """Throttle the replication of ``topic``'s partitions its throttled-replicas
        configs list for this broker (``configs`` None: the topic is gone)."""
        manager = self.replica_manager
        for quota, name in (
            (manager.leader_quota, LEADER_THROTTLED_REPLICAS),
            (manager.follower_quota, FOLLOWER_THROTTLED_REPLICAS),
        ):
            if quota is None:
                continue
            try:
                quota.apply_topic_config(topic, name, configs, self.broker_id)
            except ValueError as exc:
                _log.error("not throttling the replication of topic %s: %s", topic, exc)

    def open_partitions(self, info: TopicInfo, first_partition: int = 0) -> None:
        """Lead partitions ``first_partition``.. of ``info``, opening or creating logs."""
        if self.cluster is not None:
            return  # In a cluster, the partition states in ZooKeeper decide leadership.
        log_config = self.log_config(info.configs)
        for index in range(first_partition, info.num_partitions):
            self.replica_manager.make_leader(
                TopicPartition(info.name, index),
                log_config,
                min_insync_replicas=log_config.min_insync_replicas,
            )

    def create_topic(self, name: str, num_partitions: int, configs: Mapping[str, str]) -> None:
        """Create a topic whose name and configs are already validated."""
        if self.cluster is not None:
            # Synchronous callers cannot wait for ZooKeeper: it appears once written.
            replication = min(
                self.config.default_replication_factor, len(self.cluster.cache.brokers)
            )
            self.cluster.create_topic_later(name, num_partitions, replication, configs)
            return
        # Logs first, the registry last: a failure (say, out of file descriptors)
        # rolls back every partition this call made, so no half topic is left.
        try:
            self.open_partitions(TopicInfo(name, num_partitions, dict(configs)))
            self.topics.create(name, num_partitions, dict(configs))
        except STORAGE_ERRORS:
            self._discard_partitions(name, 0, num_partitions)
            self.topics.topics.pop(name, None)
            raise
        self._note_schema_validation(name, configs)
        _log.info("created topic %s with %d partitions", name, num_partitions)

    def auto_create_topic(self, name: str) -> bool:
        """Create ``name`` with the defaults if ``auto.create.topics.enable``; True if created."""
        if not self.config.auto_create_topics_enable or name in self.topics.topics:
            return False
        self.create_topic(name, self.config.num_partitions, {})
        return True

    def add_partitions(self, name: str, num_partitions: int) -> None:
        """Grow ``name`` to ``num_partitions`` partitions."""
        info = self.topics.topics[name]
        first_new = info.num_partitions
        try:
            self.open_partitions(TopicInfo(name, num_partitions, info.configs), first_new)
            self.topics.set_partitions(name, num_partitions)
        except STORAGE_ERRORS:
            self._discard_partitions(name, first_new, num_partitions)
            info.num_partitions = first_new
            raise
        _log.info("grew topic %s to %d partitions", name, num_partitions)

    def _discard_partitions(self, name: str, first: int, end: int) -> None:
        """Undo a failed create or grow: remove partitions ``first``..``end`` of ``name``."""
        tps = [TopicPartition(name, index) for index in reversed(range(first, end))]
        # Newest first, each on its own: closing a log flushes it, which needs a free
        # descriptor, and a close that fails still frees the log's own for the next.
        for tp in tps:
            with contextlib.suppress(*STORAGE_ERRORS):
                self.replica_manager.delete_partitions([tp])
        # Now that descriptors are free, remove what a failed open, close or removal
        # left behind.
        for tp in tps:
            self.replica_manager.log_manager.delete_log(tp)
        _log.warning("rolled back partitions %d..%d of topic %s", first, end - 1, name)

    def delete_topic(self, name: str) -> None:
        """Delete ``name`` and its logs."""
        info = self.topics.delete(name)
        self.schema_validations.pop(name, None)
        self.replica_manager.delete_partitions(
            TopicPartition(name, index) for index in range(info.num_partitions)
        )
        _log.info("deleted topic %s", name)


class BrokerContext(BrokerState):
    """The broker's state and its services, as handlers see them.

    ``start_services`` readies the state (cluster membership, authorizer, hosted
    partitions) and starts the services over it; the services become the attributes
    below, fixed for the broker's life.

    ``cluster`` and ``authorizer`` (with ``acl_store``) stay optional: None is a mode,
    not a missing part (a single node; no ``authorizer.class.name``, every request
    allowed). A null object would not be cleaner: handlers branch on the mode anyway
    (a cluster decides leadership and creates topics through ZooKeeper), and without an
    authorizer each check stays one attribute test instead of a call.
    """

    def __init__(
        self, parts: BrokerParts, start_services: Callable[[BrokerState], BrokerServices]
    ) -> None:
        super().__init__(parts)
        self.services: Final = start_services(self)
        self.groups: Final = self.services.groups
        self.transactions: Final = self.services.transactions
        self.share_coordinator: Final = self.services.share_coordinator
        self.share_groups: Final = self.services.share_groups
        self.share_partitions: Final = self.services.share_partitions
        self.share_admin: Final = self.services.share_admin
