"""``ClusterNode``: a broker's membership in a ZooKeeper-coordinated cluster.

What Kafka's ``KafkaZkClient`` watches, ``MetadataCache`` and the LeaderAndIsr path of
``ReplicaManager`` do together, for one broker:

1. ``start`` opens the ZooKeeper session, reads (or sets) the cluster id, registers
   this broker's endpoint on every listener, runs for controller, and watches the live brokers, the
   topics, each topic's assignment and each partition's state.
2. Every watch event goes to the event loop through one queue and is applied in
   order (so is every leadership this broker writes itself, without waiting for its
   watch, which then brings a copy that is ignored): the ``MetadataCache`` is
   updated, then each affected partition assigned to this broker is reconciled with
   its ``LeaderAndIsr``:

   - the state names this broker as leader at an epoch it does not lead yet →
     stop fetching it, ``become_leader``, and let the ``IsrManager`` track followers;
   - it names another broker → ``become_follower`` and fetch it from that leader
     (``ReplicaFetcherManager``, over ``KafkaFetchTransport``, on the leader's
     ``inter.broker.listener.name`` endpoint, over TLS when that listener is SSL);
   - the same leader and epoch with a newer version → only the ISR changed;
   - the assignment no longer names this broker (a reassignment moved the replica
     away) → stop fetching or leading it and delete it (Kafka's StopReplica with
     delete); an assignment with other replicas at the same epoch → the leader
     tracks the replicas added and forgets those removed.

   ``topic_listener`` hears of every topic change and ``leadership_listener`` of every
   hosted partition this broker starts or stops leading (the group coordinator loads
   and unloads its ``__consumer_offsets`` partitions on it); both run on the loop,
   in event order.

3. ``create_topic`` (CreateTopics, auto-creation) assigns replicas like Kafka's
   ``AdminUtils`` and writes the topic with each partition's first state (leader: the
   first live replica; ISR: the live replicas) in one transaction, then waits until
   this broker's cache knows every partition's leader, as Kafka's
   ``DelayedCreatePartitions`` does. ``delete_topic`` and ``add_partitions`` too.
4. ISR changes that the leader decides are written by ``_write_state``: conditional
   on the znode version, and reflected in the cache once they win.
5. ``allocate_producer_id`` hands out producer ids from blocks claimed in ZooKeeper,
   so idempotent producers get ids unique in the cluster, as Kafka's do.

6. Config changes (Kafka's ``ZkConfigManager``): ``alter_config`` writes a topic's or
   broker entity's configs with a change notification (``/config/changes``); every
   broker watches the notifications and, for each one newer than the last it saw,
   reads the entity it names again, then deletes notifications older than 15 minutes
   (as Kafka does; a broker down longer reads every config afresh when it starts).
   A topic's new overrides go to the cache, to ``topic_listener`` and to every hosted
   replica's log; a broker entity's (``<default>`` or this broker's id) to
   ``broker_config_listener``, which also hears of both at start-up; a group's
   (``groups``/``<group>``, KIP-848/KIP-932 group configs) to ``group_config_listener``,
   which hears of every group at start-up; a user's (``users``/``<user>``, where Kafka
   keeps SCRAM credentials, the name sanitized as Kafka does) to
   ``user_config_listener``, which hears of every user at start-up too
   (``alter_user_config`` writes one). Client quotas live where Kafka keeps them: a
   user's beside its credentials, a user's client id's at
   ``users``/``<user>/clients/<client>``, a client id's at ``clients``/``<client>``;
   ``quota_config_listener`` hears each such entity by its path (``users/<user>``,
   ``users/<user>/clients/<client>``, ``clients/<client>``), every one at start-up too
   (``update_entity_config`` rewrites part of one). ``alter_config`` returns once this
   broker has applied its own change.

7. Leader failover: the broker that wins ``/controller`` runs the ``Controller``,
   which re-elects leaders when brokers die or return (``_controller``); its
   decisions reach every other broker through the same state watches, and this one
   through the queue. It also moves replicas (AlterPartitionReassignments), hearing of
   every applied state change, and of this broker's own ISR writes, to complete a move
   once its target replicas are in sync. ElectLeaders answers from a
   ``DelayedElectLeader`` once this broker has applied the new leaders.
   ``controlled_shutdown`` moves this broker's leaderships to other in-sync replicas
   before it stops: through the controller when
   this broker is the controller, else as the leader's own conditional writes (Kafka
   sends a ControlledShutdown request to the controller; here leadership travels
   through the state znodes whoever writes them, so the broker writes its own
   hand-over, as it writes its ISR). The same hand-over moves the leaderships of a log
   directory that fails. Unlike a controller's decision, such a write is fenced by the
   state's version only. It is bounded as Kafka's is (attempts, each at most
   ``request.timeout.ms``, a backoff apart), then gives up with one WARNING, and is
   skipped when ZooKeeper is not connected: a broker always stops. ``stop`` closes the
   ZooKeeper session within ``ZK_CLOSE_TIMEOUT_MS``.

8. ACLs (``_acls``, Kafka's ``/kafka-acl`` layout): with an ``acl_listener`` set, the
   node hands it every ACL at start-up and each pattern a change notification names,
   in event order; ``update_acls`` writes a change and returns once this broker has
   applied its own notification, so the writer's next request already sees it.

9. Finalized features (Kafka's ``/feature`` znode, KIP-584): the controller creates the
   znode at ``default_features`` when it takes office and finds none (a new cluster);
   every broker watches it and keeps ``feature_levels`` at ``features_epoch`` (the
   znode's version; -1 until read), which its ApiVersions answers advertise.
   ``update_features`` replaces the levels conditionally on the epoch they were
   planned from, so of two concurrent updates one wins and the other is told to plan
   again, the serialisation Kafka's controller gives; it returns once this broker has
   applied its own write. ``start`` waits (at most the ZooKeeper connection timeout)
   until the levels are known. The features are watched before the controller, so a
   controller elected at start decides with them. ``eligible.leader.replicas.version``
   (``elr_enabled``) turns the controller's KIP-966 rules on; its turning off, a
   change of a topic's ``min.insync.replicas`` and one of the cluster default (the
   ``<default>`` broker entity's) make the controller clear the ELRs.

10. Clean shutdown (KIP-966): the registration carries ``previous_broker_epoch``, the
   epoch the broker's clean shutdown marker held (-1: unclean), for the controller;
   ``broker_epoch`` is this registration's czxid, which the broker writes into the
   marker when it stops cleanly. The ISR changes a leader writes, and its hand-over,
   keep the ELRs through ``Controller.with_elr``.

Concurrency: the node lives on the broker's event loop; ZooKeeper calls run in worker
threads (``asyncio.to_thread``); watch callbacks run on kazoo's thread and only post
events to the loop (``call_soon_threadsafe``). The watched-path sets they share are
guarded by ``_watch_lock``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel._tasks import cancel_and_wait
from tickwheel.cluster._acls import ZkAclStore
from tickwheel.cluster._assignment import AssignmentError, assign_replicas
from tickwheel.cluster._channels import REPLICA_FETCHER
from tickwheel.cluster._controller import Controller, ControllerSettings
from tickwheel.cluster._delayed_elect_leader import DelayedElectLeader
from tickwheel.cluster._election import elect_offline
from tickwheel.cluster._elr import ELR_FEATURE
from tickwheel.cluster._metadata import NO_CONTROLLER, MetadataCache, TopicMetadata
from tickwheel.cluster._wire import (
    BrokerChannels,
    ChannelSasl,
    ChannelSettings,
    KafkaFetchTransport,
)
from tickwheel.cluster._zk import ControllerEpoch, TopicExistsError, ZkClient, ZkSettings
from tickwheel.cluster._znodes import (
    BROKER_ENTITY,
    BROKER_IDS_PATH,
    CLIENT_ENTITY,
    CONFIG_CHANGES_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DEFAULT_BROKER_ENTITY,
    FEATURE_PATH,
    GROUP_ENTITY,
    TOPIC_ENTITY,
    TOPICS_PATH,
    USER_CLIENTS,
    USER_ENTITY,
    BrokerEndpoint,
    BrokerRegistration,
    TopicAssignment,
    ZnodeError,
    broker_path,
    config_change_sequence,
    decode_broker,
    decode_config_change,
    decode_controller,
    decode_features,
    decode_partition_state,
    decode_topic,
    decode_topic_config,
    desanitize_user,
    entity_type_path,
    new_topic_id,
    parse_int_children,
    partition_state_path,
    sanitize_user,
    topic_config_path,
    topic_path,
)
from tickwheel.log import NO_BROKER_EPOCH, LogConfig
from tickwheel.purgatory import DelayedOperationPurgatory, TopicPartitionOperationKey
from tickwheel.replica import (
    NO_LEADER,
    FetcherConfig,
    IsrManager,
    LeaderAndIsr,
    ReplicaFetcherManager,
    ReplicaManager,
    TopicPartition,
    become_follower,
    become_leader,
)
from tickwheel.security import AccessControlEntry, ResourcePattern
from tickwheel.timer import AsyncioTimerDriver, InlineExecutor, SystemTimer

_log = logging.getLogger(__name__)
_MS_PER_S = 1000.0
_INITIAL_LEADER_EPOCH = 0
_MIN_ISR = "min.insync.replicas"
_BACKGROUND_CREATE_TIMEOUT_MS = 30_000
ZK_CLOSE_TIMEOUT_MS = 2000
"""How long ``stop`` waits for the ZooKeeper session to close: a healthy close takes
milliseconds; one that waits for a server gone or unreachable is abandoned (its thread
ends on its own) so that the stop stays within the few seconds past the controlled
shutdown that operators are told to expect."""
PRODUCER_ID_BLOCK_SIZE = 1000
"""Producer ids claimed per write to ZooKeeper (Kafka's block size)."""

LogConfigFor = Callable[[Mapping[str, str]], LogConfig]
"""A topic's ``LogConfig`` from its config overrides (the broker's defaults below)."""
TopicListener = Callable[[str, TopicMetadata | None], None]
"""Told of every topic created or changed (its metadata) or deleted (None)."""
LeadershipListener = Callable[[TopicPartition, bool], None]
"""Told when this broker starts (True) or stops (False) leading a hosted partition."""
BrokerConfigListener = Callable[[str, dict[str, str]], None]
"""Told of the dynamic configs of ``<default>`` or this broker's id, when they change."""
_INITIAL_CONFIGS = -1
"""The notification sequence of the broker configs read at start-up."""
CONFIG_CHANGE_EXPIRATION_MS = 15 * 60 * 1000
"""How long a change notification is kept (Kafka's ``changeExpirationMs``)."""


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class InconsistentClusterIdError(Exception):
    """ZooKeeper holds another cluster id than this broker's log directories (Kafka's
    ``InconsistentClusterIdException``): the broker does not join."""


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """What a broker needs to join a cluster (Kafka's names in ``BrokerConfig``)."""

    broker_id: int
    zookeeper: ZkSettings
    cluster_id: str
    """The id this broker proposes if ZooKeeper holds none yet (``/cluster/id``)."""
    stored_cluster_id: str | None = None
    """The id its ``meta.properties`` hold, which ZooKeeper's must equal."""
    replica_lag_time_max_ms: int = 30_000
    replica_socket_timeout_ms: int = 30_000
    fetcher: FetcherConfig = field(default_factory=FetcherConfig)
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5000
    request_timeout_ms: int = 30_000
    """What bounds each controlled shutdown attempt (Kafka's ``request.timeout.ms``)."""
    inter_broker_listener: str = "PLAINTEXT"
    """The listener other brokers are reached on (``inter.broker.listener.name``)."""
    inter_broker_ssl_context: ssl.SSLContext | None = None
    """The TLS this broker connects to that listener with; None for a plain one."""
    inter_broker_sasl: ChannelSasl | None = None
    """How this broker logs in to the others (a SASL inter-broker listener), or None."""
    default_features: Mapping[str, int] = field(default_factory=dict)
    """The finalized feature levels the controller writes to a new cluster's ``/feature``."""


# -- events from the watches -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _BrokersChanged:
    brokers: tuple[BrokerRegistration, ...]


@dataclass(frozen=True, slots=True)
class _TopicChanged:
    name: str
    assignment: TopicAssignment
    configs: dict[str, str]


@dataclass(frozen=True, slots=True)
class _TopicDeleted:
    name: str


@dataclass(frozen=True, slots=True)
class _StateChanged:
    tp: TopicPartition
    state: LeaderAndIsr


@dataclass(frozen=True, slots=True)
class _ControllerChanged:
    controller_id: int


@dataclass(frozen=True, slots=True)
class _ControllerElected:
    epoch: ControllerEpoch


@dataclass(frozen=True, slots=True)
class _ConfigChanged:
    entity_type: str
    name: str
    configs: dict[str, str] | None
    """None: the notification or its entity could not be read; only counted as seen."""
    sequence: int


@dataclass(frozen=True, slots=True)
class _AclsChanged:
    pattern: ResourcePattern
    entries: frozenset[AccessControlEntry]
    changes_path: str
    sequence: int


@dataclass(frozen=True, slots=True)
class _FeaturesChanged:
    levels: dict[str, int]
    epoch: int
    """The znode's version; -1: the znode is gone."""


@dataclass(frozen=True, slots=True)
class _Barrier:
    """Set once every event queued before it has been applied."""

    applied: asyncio.Event


_Event = (
    _BrokersChanged
    | _TopicChanged
    | _TopicDeleted
    | _StateChanged
    | _ControllerChanged
    | _ControllerElected
    | _ConfigChanged
    | _AclsChanged
    | _FeaturesChanged
    | _Barrier
)


class ClusterNode:
    """This broker in the cluster: ZooKeeper session, metadata cache, replication."""

    def __init__(
        self,
        settings: ClusterSettings,
        replica_manager: ReplicaManager,
        log_config_for: LogConfigFor,
    ) -> None:
        self.settings = settings
        self.broker_id = settings.broker_id
        self.cache = MetadataCache()
        self.topic_listener: TopicListener | None = None
        self.leadership_listener: LeadershipListener | None = None
        self.broker_config_listener: BrokerConfigListener | None = None
        # Told each group's config overrides: at start-up, then on every change.
        self.group_config_listener: BrokerConfigListener | None = None
        # Told each user's config (SCRAM credentials), by user name: at start-up, then on
        # every change.
        self.user_config_listener: BrokerConfigListener | None = None
        # Told (entity path, configs) of every client-quota entity (users' and client
        # ids'), at start-up and on each change.
        self.quota_config_listener: BrokerConfigListener | None = None
        # Told the cluster id once it is known and checked, before this broker
        # registers (the broker keeps it in meta.properties, as Kafka does then).
        self.cluster_id_listener: Callable[[str], None] | None = None
        # Told every ACL at start-up, then each pattern whose ACLs change (set before
        # ``start`` to watch the ACLs at all: a broker without an authorizer does not).
        self.acl_listener: (
            Callable[[ResourcePattern, frozenset[AccessControlEntry]], None] | None
        ) = None
        self._replica_manager = replica_manager
        self._log_config_for = log_config_for
        self._zk = ZkClient(settings.zookeeper)
        self._acls = ZkAclStore(self._zk)
        # The newest ACL change notification applied, by notification path.
        self._applied_acl_changes: dict[str, int] = {}
        # The finalized feature levels in ``/feature`` and their epoch (-1: not read yet).
        self.feature_levels: dict[str, int] = {}
        self.features_epoch = -1
        self.controller = Controller(
            self._zk, self.cache, settings.controller, self._post_state, self.elr_enabled
        )
        # The czxid of this broker's registration: its broker epoch, as in Kafka's
        # ZooKeeper mode (-1 until registered).
        self.broker_epoch = NO_BROKER_EPOCH
        elect_timer = SystemTimer("ElectLeader", executor=InlineExecutor())
        self._elect_timer_driver = AsyncioTimerDriver(elect_timer)
        self.elect_leader_purgatory: DelayedOperationPurgatory[DelayedElectLeader] = (
            DelayedOperationPurgatory(
                "ElectLeader", elect_timer, broker_id=self.broker_id, reaper_enabled=False
            )
        )
        self._transport = KafkaFetchTransport(
            self.inter_broker_channels(
                REPLICA_FETCHER.client_id(settings.broker_id), settings.replica_socket_timeout_ms
            )
        )
        self._fetchers = ReplicaFetcherManager(replica_manager, self._transport, settings.fetcher)
        self.isr_manager = IsrManager(
            replica_manager,
            self._write_state,
            replica_lag_time_max_ms=settings.replica_lag_time_max_ms,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._events: asyncio.Queue[_Event] = asyncio.Queue()
        self._changed = asyncio.Condition()
        self._apply_task: asyncio.Task[None] | None = None
        self._watch_lock = threading.Lock()
        self._watched_topics: set[str] = set()
        self._watched_states: set[TopicPartition] = set()
        # The newest change notification read (kazoo's thread) and applied (the loop).
        self._seen_config_change: int | None = None
        self._applied_config_change = _INITIAL_CONFIGS
        self._stopping = False
        self._background: set[asyncio.Task[None]] = set()
        self._next_producer_id = 0
        self._producer_id_block_end = 0
        self._producer_id_lock = asyncio.Lock()

    # -- lifecycle -------------------------------------------------------------------

    def inter_broker_endpoint(self, broker_id: int) -> BrokerEndpoint | None:
        """Where this broker reaches live broker ``broker_id``: its endpoint on the
        inter-broker listener."""
        return self.cache.broker(broker_id, self.settings.inter_broker_listener)

    def inter_broker_channels(self, client_id: str, timeout_ms: int) -> BrokerChannels:
        """Channels to the other brokers on the inter-broker listener, with its TLS and
        SASL login (followers, transaction markers and share-state requests each own
        a set)."""
        settings = self.settings
        return BrokerChannels(
            self.inter_broker_endpoint,
            ChannelSettings(
                client_id,
                timeout_ms,
                ssl_context=settings.inter_broker_ssl_context,
                sasl=settings.inter_broker_sasl,
            ),
        )

    async def start(self, advertised: BrokerRegistration) -> None:
        """Join the cluster advertising ``advertised``, this broker's every listener.

        The broker registers last, once its cache holds what ZooKeeper held and a
        controller is known, and returns once it sees itself and the controller among
        the live brokers:
        from then on its Metadata answers describe the whole cluster (a client that
        finds the registration must not get an empty or controller-less answer).
        """
        self._loop = asyncio.get_running_loop()
        zk = self._zk
        await asyncio.to_thread(zk.start)
        cluster_id = await asyncio.to_thread(zk.cluster_id, self.settings.cluster_id)
        stored = self.settings.stored_cluster_id
        if stored is not None and stored != cluster_id:
            await asyncio.to_thread(zk.stop)
            raise InconsistentClusterIdError(
                f"the cluster id {cluster_id} in ZooKeeper {self.settings.zookeeper.connect} "
                f"does not match the cluster id {stored} in meta.properties: this broker's "
                f"log.dirs belong to another cluster (is zookeeper.connect right?)"
            )
        self.cache.cluster_id = cluster_id
        if self.cluster_id_listener is not None:
            try:
                self.cluster_id_listener(cluster_id)
            except BaseException:
                await asyncio.to_thread(zk.stop)
                raise
        self._apply_task = self._loop.create_task(self._apply_events(), name="cluster-metadata")
        self._elect_timer_driver.start()
        self._replica_manager.follower_fetch_listener = self.isr_manager.on_follower_fetch
        self._replica_manager.partition_exists = self.partition_known
        self._replica_manager.log_dir_failure_listener = self._on_log_dir_failure
        await asyncio.to_thread(self._install_watches)
        # The watches delivered their first data before the thread returned, so those
        # events are queued ahead of this barrier.
        synced = _Barrier(asyncio.Event())
        self._events.put_nowait(synced)
        await synced.applied.wait()
        timeout_ms = self.settings.zookeeper.connection_timeout_ms
        await self.wait_until(lambda: self.cache.controller_id != NO_CONTROLLER, timeout_ms)
        await self.wait_until(lambda: self.features_epoch >= 0, timeout_ms)
        self.broker_epoch = await asyncio.to_thread(zk.register_broker, advertised)
        await self.wait_until(lambda: self.broker_id in self.cache.brokers, timeout_ms)
        # Only now can followers fetch from the leaderships taken above.
        self.isr_manager.start()
        # The controller may register after this broker: its Metadata answers must not
        # name no controller (an AdminClient told so may not ask again).
        await self.wait_until(lambda: self.cache.live_controller_id() != NO_CONTROLLER, timeout_ms)
        _log.info(
            "broker %d joined cluster %s through ZooKeeper %s (controller: broker %d)",
            self.broker_id,
            self.cache.cluster_id,
            self.settings.zookeeper.connect,
            self.cache.controller_id,
        )

    def _install_watches(self) -> None:
        zk = self._zk
        # Notifications first: a change made after a topic's config is read below is
        # then seen as a notification.
        zk.watch_children(CONFIG_CHANGES_PATH, self._on_config_changes)
        zk.watch_children(BROKER_IDS_PATH, self._on_broker_ids)
        zk.watch_children(TOPICS_PATH, self._on_topics)
        # The finalized features before the controller: a broker that wins the election
        # at once decides with the levels (eligible leader replicas) already applied.
        zk.watch_data(FEATURE_PATH, self._on_features)
        zk.watch_data(CONTROLLER_PATH, self._on_controller)
        if self.acl_listener is not None:
            self._acls.watch(self._on_acls)

    async def stop(self) -> None:
        """Leave the cluster: stop fetching and tracking, close the ZooKeeper session."""
        self._stopping = True
        self.controller.deactivate()
        self._elect_timer_driver.stop()
        self.elect_leader_purgatory.shutdown()
        for task in self._background:
            task.cancel()
        if self._apply_task is not None:
            await cancel_and_wait(self._apply_task)
        self._replica_manager.follower_fetch_listener = None
        self._replica_manager.partition_exists = None
        self._replica_manager.log_dir_failure_listener = None
        await self.isr_manager.stop()
        await self._fetchers.shutdown()
        await self._transport.close()
        await self._close_zookeeper()

    async def _close_zookeeper(self) -> None:
        """Close the session, waiting at most ``ZK_CLOSE_TIMEOUT_MS``.

        On a daemon thread of its own, not the loop's executor: the executor's workers
        may all be waiting in calls that only the close ends, and a close that outlives
        the wait must not keep the process from exiting.
        """
        loop = asyncio.get_running_loop()
        closed = loop.create_future()

        def close() -> None:
            try:
                self._zk.stop()
            except Exception as exc:  # kazoo's writer did not stop: nothing left to do
                _log.warning("closing the ZooKeeper client failed: %r", exc)
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(_resolve, closed)

        threading.Thread(target=close, name="zookeeper-close", daemon=True).start()
        try:
            async with asyncio.timeout(ZK_CLOSE_TIMEOUT_MS / _MS_PER_S):
                await closed
        except TimeoutError:
            _log.warning(
                "the ZooKeeper client did not close within %d ms; going on without it",
                ZK_CLOSE_TIMEOUT_MS,
            )

    # -- watch callbacks (kazoo's thread) ------------------------------------------------

    def _post(self, event: _Event) -> None:
        loop = self._loop
        if loop is None or self._stopping:
            return
        # The loop may already be closed while kazoo delivers a last event.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._events.put_nowait, event)

    def _on_broker_ids(self, children: list[str]) -> bool | None:
        if self._stopping:
            return False
        brokers = []
        for broker_id in parse_int_children(children):
            found = self._zk.get(broker_path(broker_id))
            if found is None:
                continue
            try:
                brokers.append(decode_broker(broker_id, found[0]))
            except ZnodeError as exc:
                _log.warning("ignoring broker %d: %s", broker_id, exc)
        self._post(_BrokersChanged(tuple(brokers)))
        return None

    def _on_topics(self, children: list[str]) -> bool | None:
        if self._stopping:
            return False
        with self._watch_lock:
            new = [name for name in children if name not in self._watched_topics]
            gone = [name for name in self._watched_topics if name not in children]
            self._watched_topics.update(new)
            self._watched_topics.difference_update(gone)
        for name in gone:
            self._post(_TopicDeleted(name))
        for name in new:
            self._zk.watch_data(topic_path(name), self._topic_watcher(name))
        return None

    def _on_config_changes(self, children: list[str]) -> bool | None:
        if self._stopping:
            return False
        sequences = sorted(
            (seq, child) for child in children if (seq := config_change_sequence(child)) is not None
        )
        if self._seen_config_change is None:
            # Start-up: the topics' configs are read with the topics; the broker
            # entities' now.
            self._seen_config_change = max((seq for seq, _ in sequences), default=-1)
            for entity in (DEFAULT_BROKER_ENTITY, str(self.broker_id)):
                configs = self._read_entity_config(BROKER_ENTITY, entity)
                if configs is not None:
                    self._post(_ConfigChanged(BROKER_ENTITY, entity, configs, _INITIAL_CONFIGS))
            for entity_type in (GROUP_ENTITY, USER_ENTITY, CLIENT_ENTITY):
                self._post_every_config(entity_type)
            return None
        for seq, child in sequences:
            if seq <= self._seen_config_change:
                continue
            self._seen_config_change = seq
            found = self._zk.get(f"{CONFIG_CHANGES_PATH}/{child}")
            entity_type, name, configs = "", "", None
            if found is not None:
                try:
                    entity_type, name = decode_config_change(found[0])
                except ZnodeError as exc:
                    _log.warning("ignoring config change %s: %s", child, exc)
                else:
                    configs = self._read_entity_config(entity_type, name)
            # Posted even when unreadable, so that an alter_config waiting for this
            # sequence is answered at once rather than at its timeout.
            self._post(_ConfigChanged(entity_type, name, configs, seq))
        self._zk.purge_config_changes(CONFIG_CHANGE_EXPIRATION_MS, int(time.time() * 1000))
        return None

    def _on_acls(
        self,
        pattern: ResourcePattern,
        entries: frozenset[AccessControlEntry],
        changes_path: str,
        sequence: int,
    ) -> None:
        self._post(_AclsChanged(pattern, entries, changes_path, sequence))

    def _post_every_config(self, entity_type: str) -> None:
        """Start-up: hand every entity of ``entity_type`` (groups, users and their client
        ids, client ids) to its listener."""
        for name in self._zk.children(entity_type_path(entity_type)):
            names = [name]
            if entity_type == USER_ENTITY:
                clients_path = f"{entity_type_path(entity_type)}/{name}/{USER_CLIENTS}"
                names += [f"{name}/{USER_CLIENTS}/{c}" for c in self._zk.children(clients_path)]
            for entity in names:
                configs = self._read_entity_config(entity_type, entity)
                if configs is not None:
                    self._post(_ConfigChanged(entity_type, entity, configs, _INITIAL_CONFIGS))

    def _read_entity_config(self, entity_type: str, name: str) -> dict[str, str] | None:
        try:
            return self._zk.entity_config(entity_type, name)
        except ZnodeError as exc:
            _log.warning("ignoring the config of %s/%s: %s", entity_type, name, exc)
            return None

    def _topic_watcher(self, name: str) -> Callable[[bytes | None, Any], bool | None]:
        def on_assignment(data: bytes | None, _stat: Any) -> bool | None:
            if self._stopping:
                return False
            if data is None:
                return False
            try:
                assignment = decode_topic(name, data)
                config = self._zk.get(topic_config_path(name))
                configs = decode_topic_config(name, config[0]) if config else {}
            except ZnodeError as exc:
                _log.warning("ignoring topic %s: %s", name, exc)
                return None
            self._post(_TopicChanged(name, assignment, configs))
            for partition in assignment.partitions:
                tp = TopicPartition(name, partition)
                with self._watch_lock:
                    if tp in self._watched_states:
                        continue
                    self._watched_states.add(tp)
                self._zk.watch_data(partition_state_path(name, partition), self._state_watcher(tp))
            return None

        return on_assignment

    def _state_watcher(self, tp: TopicPartition) -> Callable[[bytes | None, Any], bool | None]:
        path = partition_state_path(tp.topic, tp.partition)

        def on_state(data: bytes | None, stat: Any) -> bool | None:
            if self._stopping:
                return False
            if data is None or stat is None:
                with self._watch_lock:
                    self._watched_states.discard(tp)
                return False
            try:
                state = decode_partition_state(path, data, int(stat.version))
            except ZnodeError as exc:
                _log.warning("ignoring the state of %s: %s", tp, exc)
                return None
            self._post(_StateChanged(tp, state))
            return None

        return on_state

    def _on_controller(self, data: bytes | None, _stat: Any) -> bool | None:
        if self._stopping:
            return False
        if data is None:
            self._post(_ControllerChanged(NO_CONTROLLER))
            won = self._zk.elect_controller(self.broker_id)
            if won is not None:
                _log.info("broker %d is the controller (epoch %d)", self.broker_id, won.epoch)
                self._post(_ControllerElected(won))
            return None
        try:
            self._post(_ControllerChanged(decode_controller(data)))
        except ZnodeError as exc:
            _log.warning("ignoring the controller znode: %s", exc)
        return None

    def _on_features(self, data: bytes | None, stat: Any) -> bool | None:
        if self._stopping:
            return False
        if data is None or stat is None:
            self._post(_FeaturesChanged({}, -1))
            return None
        try:
            self._post(_FeaturesChanged(decode_features(data), int(stat.version)))
        except ZnodeError as exc:
            _log.warning("ignoring the finalized features: %s", exc)
        return None

    # -- applying events (the loop) ------------------------------------------------------

    async def _apply_events(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await self._apply(event)
            except Exception:
                _log.exception("applying %s failed", event)
            async with self._changed:
                self._changed.notify_all()

    async def _apply(self, event: _Event) -> None:
        if self._apply_now(event):
            return
        cache = self.cache
        if isinstance(event, _BrokersChanged):
            cache.set_brokers(event.brokers)
            await self.controller.on_brokers_changed()
        elif isinstance(event, _ControllerElected):
            await self.controller.activate(event.epoch)
            await asyncio.to_thread(self._zk.create_features, self.settings.default_features)
        elif isinstance(event, _TopicChanged):
            cache.set_topic(
                event.name,
                event.assignment.partitions,
                event.configs,
                event.assignment.topic_id,
                adding=event.assignment.adding,
                removing=event.assignment.removing,
            )
            if self.topic_listener is not None:
                self.topic_listener(event.name, cache.topics[event.name])
            for partition in event.assignment.partitions:
                await self._reconcile(TopicPartition(event.name, partition))
        elif isinstance(event, _TopicDeleted):
            await self._delete_local(event.name)
        elif isinstance(event, _StateChanged):
            await self._record_state(event.tp, event.state)

    def _apply_now(self, event: _Event) -> bool:
        """Apply ``event`` if it needs no waiting; False if it does (not applied)."""
        if isinstance(event, _Barrier):
            event.applied.set()
        elif isinstance(event, _ControllerChanged):
            self.cache.controller_id = event.controller_id
            if event.controller_id != self.broker_id:
                self.controller.deactivate()
        elif isinstance(event, _ConfigChanged):
            self._apply_config(event)
        elif isinstance(event, _AclsChanged):
            self._apply_acls(event)
        elif isinstance(event, _FeaturesChanged):
            had_elr = self.elr_enabled()
            self.feature_levels, self.features_epoch = event.levels, event.epoch
            _log.info("finalized features at epoch %d: %s", event.epoch, event.levels)
            if had_elr and not self.elr_enabled():
                self._clear_elr(None)
        else:
            return False
        return True

    def _apply_acls(self, event: _AclsChanged) -> None:
        if self.acl_listener is not None:
            self.acl_listener(event.pattern, event.entries)
        applied = self._applied_acl_changes.get(event.changes_path, -1)
        self._applied_acl_changes[event.changes_path] = max(applied, event.sequence)

    def _apply_config(self, event: _ConfigChanged) -> None:
        self._applied_config_change = max(self._applied_config_change, event.sequence)
        if event.configs is None:
            return
        if event.entity_type == BROKER_ENTITY:
            self._apply_broker_config(event.name, event.configs, event.sequence)
            return
        if event.entity_type == GROUP_ENTITY:
            if self.group_config_listener is not None:
                self.group_config_listener(event.name, event.configs)
            return
        if event.entity_type in (USER_ENTITY, CLIENT_ENTITY):
            a_user = event.entity_type == USER_ENTITY and "/" not in event.name
            if a_user and self.user_config_listener is not None:
                self.user_config_listener(desanitize_user(event.name), event.configs)
            if self.quota_config_listener is not None:
                self.quota_config_listener(f"{event.entity_type}/{event.name}", event.configs)
            return
        topic = self.cache.topics.get(event.name)
        if event.entity_type != TOPIC_ENTITY or topic is None:
            return
        if topic.configs.get(_MIN_ISR) != event.configs.get(_MIN_ISR):
            self._clear_elr(event.name)
        topic.configs = dict(event.configs)
        if self.topic_listener is not None:
            self.topic_listener(event.name, topic)
        try:
            log_config = self._log_config_for(topic.configs)
        except ValueError as exc:
            _log.error("not applying the config of topic %s: %s", event.name, exc)
            return
        self._replica_manager.update_topic_config(event.name, log_config)
        _log.info("topic %s: config overrides now %s", event.name, topic.configs)

    def _apply_broker_config(self, name: str, configs: dict[str, str], sequence: int) -> None:
        if name == DEFAULT_BROKER_ENTITY:
            changed = self.controller.set_default_min_isr(configs.get(_MIN_ISR))
            if changed and sequence != _INITIAL_CONFIGS:
                self._clear_elr(None)
        listener = self.broker_config_listener
        if listener is not None and name in {DEFAULT_BROKER_ENTITY, str(self.broker_id)}:
            listener(name, configs)

    def elr_enabled(self) -> bool:
        """Whether the cluster keeps eligible leader replicas (the finalized
        ``eligible.leader.replicas.version`` is 1)."""
        return self.feature_levels.get(ELR_FEATURE, 0) >= 1

    def _clear_elr(self, topic: str | None) -> None:
        """Have the controller, if it is this broker, clear ``topic``'s ELRs (None: all)."""
        if not self.controller.active:
            return
        task = asyncio.get_running_loop().create_task(
            self.controller.clear_elr(topic), name="clear-elr"
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _post_state(self, tp: TopicPartition, state: LeaderAndIsr) -> None:
        """Queue a state this broker wrote, to be applied in order with the watches' events
        (its watch brings it again, and that copy is ignored as not newer)."""
        self._events.put_nowait(_StateChanged(tp, state))

    async def _applied(self) -> None:
        """Return once every event queued so far has been applied."""
        barrier = _Barrier(asyncio.Event())
        self._events.put_nowait(barrier)
        await barrier.applied.wait()

    async def _record_state(self, tp: TopicPartition, state: LeaderAndIsr) -> None:
        """Take ``state`` if newer than what the cache holds, and act on it."""
        if self.cache.set_partition_state(tp, state):
            self.elect_leader_purgatory.check_and_complete(
                TopicPartitionOperationKey(tp.topic, tp.partition)
            )
            await self._reconcile(tp)
            await self.controller.on_partition_state(tp)

    async def _delete_local(self, name: str) -> None:
        await self._drop_replicas(self.cache.remove_topic(name))
        if self.topic_listener is not None:
            self.topic_listener(name, None)
        _log.info("topic %s deleted", name)

    async def _reconcile(self, tp: TopicPartition) -> None:
        """Make this broker's replica of ``tp`` what its cached state says, and tell it
        the replicas a reassignment adds and removes."""
        await self._reconcile_leadership(tp)
        partition = self._replica_manager.get_partition(tp)
        if partition is not None:
            assignment = self.cache.assignment(tp)
            partition.adding_replicas = assignment.adding
            partition.removing_replicas = assignment.removing

    async def _reconcile_leadership(self, tp: TopicPartition) -> None:
        cache = self.cache
        replicas = cache.replicas(tp)
        state = cache.partition_states.get(tp)
        if self.broker_id not in replicas and replicas:
            await self._stop_replica(tp)
            return
        if state is None:
            return
        try:
            log_config = self._log_config_for(cache.topics[tp.topic].configs)
        except ValueError as exc:
            _log.error("cannot host %s: invalid topic config: %s", tp, exc)
            return
        partition = self._replica_manager.get_partition(tp)
        same_epoch = partition is not None and partition.leader_epoch == state.leader_epoch
        if state.leader == self.broker_id:
            if same_epoch and partition is not None and partition.is_leader:
                if partition.assigned_replicas != replicas:
                    self.isr_manager.replicas_changed(partition, replicas)
                self.isr_manager.state_changed(tp, state)
                return
            await self._fetchers.unfollow([tp])
            partition = become_leader(self._replica_manager, tp, state, replicas, log_config)
            self.isr_manager.became_leader(partition, state)
            self._leadership_changed(tp, leading=True)
            _log.info("%s: leader at epoch %d, ISR %s", tp, state.leader_epoch, list(state.isr))
        elif state.leader != NO_LEADER:
            if same_epoch and partition is not None and partition.leader_id == state.leader:
                partition.isr = set(state.isr)
                partition.assigned_replicas = replicas
                return
            self.isr_manager.stopped_leading(tp)
            become_follower(self._replica_manager, tp, state, replicas, log_config)
            self._leadership_changed(tp, leading=False)
            await self._fetchers.follow(tp, state.leader, state.leader_epoch)
            _log.info("%s: following %d at epoch %d", tp, state.leader, state.leader_epoch)
        else:
            # Offline: neither lead nor follow (a leader that was taken for dead, say,
            # while it restarted), until the controller elects a leader again.
            if same_epoch and partition is not None and partition.leader_id == NO_LEADER:
                return
            self.isr_manager.stopped_leading(tp)
            await self._fetchers.unfollow([tp])
            become_follower(self._replica_manager, tp, state, replicas, log_config)
            self._leadership_changed(tp, leading=False)
            _log.warning("%s: offline at epoch %d, no leader", tp, state.leader_epoch)

    async def _stop_replica(self, tp: TopicPartition) -> None:
        """Delete this broker's replica of ``tp``, no longer assigned here (a
        reassignment moved it: Kafka's StopReplica with delete)."""
        if self._replica_manager.get_partition(tp) is None:
            return
        await self._drop_replicas([tp])
        _log.info("%s: replica removed from this broker (no longer assigned)", tp)

    async def _drop_replicas(self, tps: list[TopicPartition]) -> None:
        """Stop fetching, leading and hosting ``tps``, and delete their logs."""
        await self._fetchers.unfollow(tps)
        for tp in tps:
            self.isr_manager.stopped_leading(tp)
        self._replica_manager.delete_partitions(tps)
        for tp in tps:
            self._leadership_changed(tp, leading=False)

    def _leadership_changed(self, tp: TopicPartition, *, leading: bool) -> None:
        if self.leadership_listener is not None:
            self.leadership_listener(tp, leading)

    async def _write_state(self, tp: TopicPartition, proposed: LeaderAndIsr) -> LeaderAndIsr | None:
        cached = self.cache.partition_states.get(tp)
        if cached is not None and cached.version == proposed.version:
            proposed = self.controller.with_elr(tp, cached, proposed)
        written = await asyncio.to_thread(self._zk.set_partition_state, tp, proposed)
        if written is not None:
            self.cache.set_partition_state(tp, written)
            # Its watch will bring it again as not newer: the controller hears of it now
            # (a reassignment completes once its target joined the ISR).
            if self.controller.active:
                self._in_background(self.controller.on_partition_state(tp), f"isr-change-{tp}")
        return written

    async def wait_until(self, predicate: Callable[[], bool], timeout_ms: int) -> bool:
        """Wait until ``predicate()`` holds after some metadata change; False on timeout."""
        try:
            async with asyncio.timeout(timeout_ms / _MS_PER_S), self._changed:
                await self._changed.wait_for(predicate)
        except TimeoutError:
            return predicate()
        return True

    # -- topic administration --------------------------------------------------------

    async def live_broker_ids(self) -> list[int]:
        """The brokers registered in ZooKeeper now: what new topics are checked against
        (as Kafka's admin path reads them), fresher than the cache's watch."""
        return parse_int_children(await asyncio.to_thread(self._zk.children, BROKER_IDS_PATH))

    async def plan_assignment(
        self,
        num_partitions: int,
        replication_factor: int,
        assignment: Mapping[int, Sequence[int]] | None = None,
        *,
        start_partition: int = 0,
    ) -> dict[int, tuple[int, ...]]:
        """The replicas of new partitions: ``assignment`` checked, or Kafka's.

        Raises ``AssignmentError`` (INVALID_REPLICATION_FACTOR, INVALID_PARTITIONS or
        INVALID_REPLICA_ASSIGNMENT) when it cannot be made with the live brokers.
        """
        live = set(await self.live_broker_ids())
        if assignment is None:
            return assign_replicas(
                live, num_partitions, replication_factor, start_partition=start_partition
            )
        planned = {p: tuple(replicas) for p, replicas in assignment.items()}
        sizes = {len(replicas) for replicas in planned.values()}
        for partition, replicas in planned.items():
            if not replicas or len(set(replicas)) != len(replicas):
                raise AssignmentError(
                    ErrorCode.invalid_replica_assignment,
                    f"partition {partition} has an empty or duplicated replica list",
                )
            unknown = set(replicas) - live
            if unknown:
                raise AssignmentError(
                    ErrorCode.invalid_replica_assignment,
                    f"partition {partition} names brokers that are not live: {sorted(unknown)}",
                )
        if len(sizes) > 1:
            raise AssignmentError(
                ErrorCode.invalid_replica_assignment,
                "every partition must have the same number of replicas",
            )
        expected = list(range(start_partition, start_partition + len(planned)))
        if sorted(planned) != expected:
            raise AssignmentError(
                ErrorCode.invalid_replica_assignment,
                f"partitions must be numbered {expected[:1]}..{expected[-1:]} consecutively",
            )
        return planned

    def _initial_states(self, assignment: Mapping[int, tuple[int, ...]]) -> dict[int, LeaderAndIsr]:
        """Each new partition's first state: its first live replica leads, the live
        replicas are in sync (called in a worker thread: it reads ZooKeeper)."""
        live = set(parse_int_children(self._zk.children(BROKER_IDS_PATH)))
        states = {}
        for partition, replicas in assignment.items():
            isr = tuple(r for r in replicas if r in live)
            states[partition] = LeaderAndIsr(
                leader=isr[0] if isr else NO_LEADER,
                leader_epoch=_INITIAL_LEADER_EPOCH,
                isr=isr,
                controller_epoch=self._controller_epoch(),
            )
        return states

    def _controller_epoch(self) -> int:
        found = self._zk.get(CONTROLLER_EPOCH_PATH)
        if found is None:
            return 0
        return int(found[0].decode("ascii"))

    def _leaders_known(self, name: str, partitions: Sequence[int]) -> Callable[[], bool]:
        def known() -> bool:
            return all(TopicPartition(name, p) in self.cache.partition_states for p in partitions)

        return known

    async def create_topic(
        self,
        name: str,
        assignment: Mapping[int, tuple[int, ...]],
        configs: Mapping[str, str],
        *,
        timeout_ms: int,
    ) -> None:
        """Write a topic planned by ``plan_assignment`` and wait until its leaders are known.

        Raises ``TopicExistsError`` if the topic exists.
        """

        def write() -> None:
            self._zk.create_topic(
                name,
                TopicAssignment(dict(assignment), new_topic_id()),
                configs,
                self._initial_states(assignment),
            )

        await asyncio.to_thread(write)
        _log.info("created topic %s: %s", name, dict(assignment))
        await self.wait_until(self._leaders_known(name, list(assignment)), timeout_ms)

    def create_topic_later(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
    ) -> None:
        """Create ``name`` in the background, for callers that cannot wait (errors are
        logged; a topic created meanwhile by another broker is left as it is)."""

        async def create() -> None:
            try:
                assignment = await self.plan_assignment(num_partitions, replication_factor)
                await self.create_topic(
                    name, assignment, configs, timeout_ms=_BACKGROUND_CREATE_TIMEOUT_MS
                )
            except TopicExistsError:
                pass
            except AssignmentError as exc:
                _log.error("cannot create topic %s: %s", name, exc)

        self._in_background(create(), f"create-topic-{name}")

    def _in_background(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``work`` as a task of this node (cancelled when it stops)."""
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def add_partitions(
        self, name: str, assignment: Mapping[int, tuple[int, ...]], *, timeout_ms: int
    ) -> None:
        """Add the partitions of ``assignment`` (planned from the current count) to ``name``."""
        info = self.cache.topics[name]

        def write() -> None:
            version = self._zk.topic_version(name)
            whole = {**info.assignment, **assignment}
            self._zk.add_partitions(
                name,
                TopicAssignment(whole, info.topic_id, info.adding, info.removing),
                version,
                self._initial_states(assignment),
            )

        await asyncio.to_thread(write)
        _log.info("added partitions to %s: %s", name, dict(assignment))
        await self.wait_until(self._leaders_known(name, list(assignment)), timeout_ms)

    async def delete_topic(self, name: str, *, timeout_ms: int) -> None:
        """Delete ``name`` from the cluster and wait until this broker has dropped it."""
        await asyncio.to_thread(self._zk.delete_topic, name)
        await self.wait_until(lambda: name not in self.cache.topics, timeout_ms)

    async def alter_config(
        self, entity_type: str, name: str, configs: Mapping[str, str], *, timeout_ms: int
    ) -> None:
        """Replace the configs of a topic or broker entity (``<default>``, a broker id)
        in ZooKeeper, notify every broker, and wait until this one has applied it."""
        sequence = await asyncio.to_thread(self._zk.set_entity_config, entity_type, name, configs)
        # A user's configs are SCRAM credentials (salt and keys): their names only.
        shown = sorted(configs) if entity_type == USER_ENTITY else dict(configs)
        _log.info("set the config of %s/%s to %s", entity_type, name, shown)
        await self.wait_until(lambda: self._applied_config_change >= sequence, timeout_ms)

    async def update_acls(
        self,
        pattern: ResourcePattern,
        add: Iterable[AccessControlEntry],
        remove: Iterable[AccessControlEntry],
        *,
        timeout_ms: int,
    ) -> None:
        """Add and remove entries of ``pattern``'s ACLs in ZooKeeper, notify every
        broker, and wait until this one has applied the change."""
        written = await asyncio.to_thread(self._acls.update, pattern, tuple(add), tuple(remove))
        if written is None:
            return
        changes_path, sequence = written
        await self.wait_until(
            lambda: self._applied_acl_changes.get(changes_path, -1) >= sequence, timeout_ms
        )

    async def update_entity_config(
        self,
        entity_type: str,
        name: str,
        update: Callable[[dict[str, str]], dict[str, str]],
        *,
        timeout_ms: int,
    ) -> None:
        """Rewrite an entity's configs as ``update`` makes them from the stored ones (a
        user's quotas beside its credentials), notify every broker, and wait until this
        one has applied it."""

        def write() -> int:
            configs = update(self._zk.entity_config(entity_type, name))
            return self._zk.set_entity_config(entity_type, name, configs)

        sequence = await asyncio.to_thread(write)
        _log.info("updated the config of %s/%s", entity_type, name)
        await self.wait_until(lambda: self._applied_config_change >= sequence, timeout_ms)

    async def alter_user_config(
        self, user: str, configs: Mapping[str, str], *, timeout_ms: int
    ) -> None:
        """Replace ``user``'s config (its SCRAM credentials) at ``/config/users/<user>``
        and wait until this broker has applied it."""
        await self.alter_config(USER_ENTITY, sanitize_user(user), configs, timeout_ms=timeout_ms)

    async def update_features(
        self, levels: Mapping[str, int], planned_epoch: int, *, timeout_ms: int
    ) -> int | None:
        """Replace the finalized levels with ``levels``, planned from those at
        ``planned_epoch``; the new epoch once this broker has applied it, or None if
        another update came first (plan again from the newer levels)."""
        epoch = await asyncio.to_thread(self._zk.set_features, levels, planned_epoch)
        if epoch is None:
            await self.wait_until(lambda: self.features_epoch != planned_epoch, timeout_ms)
            return None
        _log.info("finalized features set to %s (epoch %d)", dict(levels), epoch)
        await self.wait_until(lambda: self.features_epoch >= epoch, timeout_ms)
        return epoch

    async def allocate_producer_id(self) -> int:
        """A producer id never handed out before by any broker of the cluster."""
        async with self._producer_id_lock:
            if self._next_producer_id >= self._producer_id_block_end:
                block = await asyncio.to_thread(
                    self._zk.claim_producer_id_block, self.broker_id, PRODUCER_ID_BLOCK_SIZE
                )
                self._next_producer_id, self._producer_id_block_end = block.first, block.last + 1
            producer_id = self._next_producer_id
            self._next_producer_id += 1
            return producer_id

    async def elect_leaders(
        self, tps: Sequence[TopicPartition] | None, *, preferred: bool, timeout_ms: int
    ) -> dict[TopicPartition, ErrorCode]:
        """ElectLeaders on the controller: elect each of ``tps`` (None: every partition,
        answering only those that needed an election), then wait in a
        ``DelayedElectLeader`` until this broker has applied the new leaders. Any other
        broker answers NOT_CONTROLLER for each partition, as Kafka's does."""
        requested = sorted(self.cache.partition_states) if tps is None else list(tps)
        if not self.controller.active:
            return dict.fromkeys(requested, ErrorCode.not_controller)
        decisions = await self.controller.elect_leaders(requested, preferred=preferred)
        results = {tp: decision.error_code for tp, decision in decisions.items()}
        if tps is None:
            results = {
                tp: error for tp, error in results.items() if error != ErrorCode.election_not_needed
            }
        expected = {
            tp: decision.written.leader
            for tp, decision in decisions.items()
            if tp in results and decision.written is not None
        }
        answered: asyncio.Future[dict[TopicPartition, ErrorCode]] = (
            asyncio.get_running_loop().create_future()
        )

        def resolve(final: dict[TopicPartition, ErrorCode]) -> None:
            if not answered.done():
                answered.set_result(final)

        operation = DelayedElectLeader(timeout_ms, expected, results, self.cache.leader, resolve)
        if expected:
            self.elect_leader_purgatory.try_complete_else_watch(
                operation, [TopicPartitionOperationKey(tp.topic, tp.partition) for tp in expected]
            )
        else:
            operation.try_complete()
        return await answered

    async def controlled_shutdown(self) -> bool:
        """Before stopping: move this broker's leaderships away; whether it did.

        Kafka's ``controlled.shutdown.*``: up to ``max_retries`` attempts, each bounded
        by ``request_timeout_ms``, ``retry_backoff_ms`` apart, while leaderships
        remain. When they are spent, or ZooKeeper is not connected to begin with, one
        WARNING says the broker proceeds to an unclean shutdown (its leaderships move
        when its registration goes) and it returns False: the broker stops anyway.
        """
        settings = self.settings
        if not settings.controlled_shutdown_enable or self._apply_task is None:
            # Never started (the broker failed before joining): it leads nothing, and no
            # task would apply the barrier that an attempt waits for.
            return True
        if not self._zk.connected:
            _log.warning(
                "controlled shutdown skipped: ZooKeeper is not connected; "
                "proceeding to do an unclean shutdown"
            )
            return False
        retries = settings.controlled_shutdown_max_retries
        for attempt in range(1, retries + 1):
            try:
                async with asyncio.timeout(settings.request_timeout_ms / _MS_PER_S):
                    remaining = await self._request_controlled_shutdown()
            except TimeoutError:
                _log.info(
                    "controlled shutdown attempt %d of %d: no answer within %d ms "
                    "(request.timeout.ms)",
                    attempt,
                    retries,
                    settings.request_timeout_ms,
                )
            except Exception as exc:  # ZooKeeper gone, a topic deleted meanwhile, ...
                # The broker must stop whatever happens here: its logs still need closing.
                _log.info("controlled shutdown attempt %d of %d failed: %r", attempt, retries, exc)
            else:
                if not remaining:
                    _log.info("controlled shutdown done: this broker leads nothing")
                    return True
                _log.info(
                    "controlled shutdown attempt %d of %d: %d leaderships remain",
                    attempt,
                    retries,
                    len(remaining),
                )
            if attempt < retries:
                await asyncio.sleep(settings.controlled_shutdown_retry_backoff_ms / _MS_PER_S)
        _log.warning(
            "controlled shutdown failed after %d attempts "
            "(controlled.shutdown.max.retries); proceeding to do an unclean shutdown",
            retries,
        )
        return False

    async def _request_controlled_shutdown(self) -> list[TopicPartition]:
        if self.controller.active:
            remaining = await self.controller.controlled_shutdown(self.broker_id)
        else:
            remaining = await self._hand_over_leaderships(self._leading())
        # Follow the new leaders before going on: a produce accepted here now would be
        # acknowledged by a broker that no longer leads.
        await self._applied()
        return remaining

    def _on_log_dir_failure(self, log_dir: Path, tps: list[TopicPartition]) -> None:
        """Hand the leaderships of a failed log directory's partitions to other replicas."""
        del log_dir
        leading = self._leading() & set(tps)
        if not leading or self._stopping:
            return

        async def hand_over() -> None:
            remaining = await self._hand_over_leaderships(leading)
            if remaining:
                _log.warning("leaderships of a failed log directory kept: %s", remaining)

        self._in_background(hand_over(), "log-dir-failure")

    async def _hand_over_leaderships(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Give each of ``tps`` (led here) to its next live in-sync replica.

        The leader's own decision, written like its ISR changes (conditional on the
        state's version); the controller re-checks every partition when this broker's
        registration goes. Returns the partitions whose hand-over lost a race (one with
        no other live in-sync replica stays: there is no one to hand it to).
        """
        others = set(self.cache.brokers) - {self.broker_id}
        remaining = []
        for tp in sorted(tps):
            state = self.cache.partition_states.get(tp)
            if state is None:
                continue  # Deleted meanwhile.
            moved = elect_offline(
                self.cache.replicas(tp),
                state,
                others,
                unclean=False,
                controller_epoch=state.controller_epoch,
            )
            if moved is None or moved.leader == NO_LEADER:
                continue
            moved = self.controller.with_elr(tp, state, moved)
            written = await asyncio.to_thread(self._zk.set_partition_state, tp, moved)
            if written is None:
                remaining.append(tp)
            else:
                self._post_state(tp, written)
        return remaining

    def _leading(self) -> set[TopicPartition]:
        return {
            tp
            for tp, state in self.cache.partition_states.items()
            if state.leader == self.broker_id
        }

    def partition_known(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` exists in the cluster, hosted here or not."""
        return self.cache.contains_partition(tp)
