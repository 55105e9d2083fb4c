"""``Broker`` and ``BackgroundBroker``: a running single-node Kafka-compatible broker.

``Broker`` is the asyncio server: ``async with Broker(config) as broker`` checks that
every ``log.dirs`` entry is a usable directory (``LogDirError`` otherwise), opens the
logs in them (recovering every partition; the topic registry lives in the first),
starts the purgatories' timer drivers, listens on each of its ``listeners`` (port 0
takes a free port; ``endpoint`` tells which; SSL and SASL_SSL listeners serve TLS, and a
TLS client's certificate names its principal, ``_tls``; a SASL listener's connections
log in through a ``SaslListener``, ``_sasl``), optionally serves metrics and the
schema registry (``schema.registry.listeners``, read from its ``_schemas`` topic before
it listens; ``tickwheel.registry``; its validator checks the records of topics that
validate schema ids), starts the log cleaner's threads
(``log.cleaner.enable``; they compact logs with ``cleanup.policy=compact``, see
``tickwheel.log._cleaner``), and schedules the housekeeping on its ``Scheduler``:
retention and flushing every ``log.retention.check.interval.ms``; the high watermark
checkpoints every
``replica.high.watermark.checkpoint.interval.ms``, the recovery point checkpoints every
``log.flush.offset.checkpoint.interval.ms`` and the log start checkpoints every
``log.flush.start.offset.checkpoint.interval.ms`` (on a worker thread, since they
fsync; a failed write takes its log directory offline); forgetting producers idle for
``producer.id.expiration.ms`` every ``producer.id.expiration.check.interval.ms``; and
closing connections idle for longer than ``connections.max.idle.ms``. The coordinators
and share-group services (``BrokerServices``) start, over the hosted partitions, as the
``BrokerContext`` is built, and the listeners accept connections only after: no request
finds a service missing.

``stop`` is bounded in time whatever the cluster's state. In a cluster it first hands
this broker's leaderships to other in-sync replicas (Kafka's controlled shutdown, its
attempts bounded and retried as ``controlled.shutdown.*`` and ``request.timeout.ms``
say; when they are spent, or ZooKeeper is unreachable, it goes on regardless: see
``ClusterNode.controlled_shutdown``). Then it stops listening, completes every
operation waiting in the purgatories as their timeouts would, gives connections
``CLOSE_GRACE_S`` to send those answers and closes them (dropping a client that reads
nothing more, or one half-way through sending a request), leaves the cluster (its
ZooKeeper session closed within ``ZK_CLOSE_TIMEOUT_MS``), stops the coordinators and
the cleaner, then flushes and closes the logs, which write their checkpoints: the next
start recovers nothing. Last, it writes Kafka's clean shutdown marker into every log
directory (``tickwheel.log._clean_shutdown``); ``start`` reads and deletes it before the
logs open and, in a cluster, registers with its epoch (none: an unclean shutdown).
``flush_logs`` is for a stop that cannot wait for all that.

``BackgroundBroker`` runs a ``Broker`` on an event loop in its own thread, for
synchronous programs and tests: ``with BackgroundBroker(config) as broker``.

Time: both take ``clock=`` -- none (the system clock), or a ``ManualClock`` for tests:
then every timeout of the broker (purgatories, group sessions and rebalances, the
housekeeping above) fires only when the test calls ``clock.advance(ms)``, before that
call returns (``BrokerTime`` tells how).

Concurrency: a ``Broker`` lives on one event loop and every method must be awaited
there. ``BackgroundBroker``'s methods may be called from any thread; they hand work
to the broker's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

from tickwheel.faults import FaultPlan
from tickwheel.log import (
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    CleanerConfig,
    Log,
    LogCleaner,
    LogError,
    take_clean_shutdown,
    write_clean_shutdown,
)
from tickwheel.replica import PurgatoryConfig, ReplicaManager, ReplicationQuota, check_log_dir
from tickwheel.security import (
    SASL_PLAINTEXT,
    SASL_SSL,
    SSL,
    SSL_PREFIX,
    AclOperation,
    Action,
    KafkaPrincipal,
    NoMatchingRuleError,
    ResourceType,
    SaslConfigError,
    SaslListenerConfig,
    Session,
    SslConfigError,
    SslSettings,
)
from tickwheel.server._authorization import start_authorizer
from tickwheel.server._cluster import join_cluster, start_cluster
from tickwheel.server._context import (
    BrokerContext,
    BrokerParts,
    BrokerServices,
    BrokerState,
    Endpoint,
)
from tickwheel.server._descriptors import raise_descriptor_limit
from tickwheel.server._fault_endpoint import FaultEndpoint
from tickwheel.server._meta_properties import (
    MetaProperties,
    choose_cluster_id,
    read_meta_properties,
    write_meta_properties,
)
from tickwheel.server._metrics import BrokerMetrics, PurgatoryMetrics, serve_metrics
from tickwheel.server._time import BrokerTime
from tickwheel.server._topics import TopicRegistry
from tickwheel.server._users import UserConfigs
from tickwheel.server.apis import ADVERTISED_VERSIONS, API_SPECS
from tickwheel.server.apis._groups import start_groups
from tickwheel.server.apis._share import start_share
from tickwheel.server.apis._share_state import start_share_coordinator
from tickwheel.server.apis._transactions import start_transactions
from tickwheel.server.config._broker import BrokerConfig, ConfigError
from tickwheel.server.config._listeners import ListenerSpec, parse_advertised
from tickwheel.server.net._connection import Connection, ConnectionProtocol
from tickwheel.server.net._dispatch import Dispatcher
from tickwheel.server.net._fault_effects import FAULT_DELAY_TIMER
from tickwheel.server.net._listener import Listener
from tickwheel.server.net._memory_pool import UNBOUNDED, MemoryPool
from tickwheel.server.net._quotas import ConnectionQuotas
from tickwheel.server.net._sasl import DELAYED_CLOSE_TIMER, SaslListener
from tickwheel.server.net._throttled_channel import THROTTLE_TIMER
from tickwheel.server.net._tls import ListenerTls, listener_tls
from tickwheel.server.quotas import ClientQuotas, QuotaWindows, WindowedRate
from tickwheel.timer import Clock, ManualClock, SystemTimer

if TYPE_CHECKING:
    from tickwheel.registry import RegistryService

_log = logging.getLogger(__name__)

_IDLE_CHECKS_PER_TIMEOUT = 10
"""How many times per ``connections.max.idle.ms`` idle connections are looked for."""
_ANY_INTERFACE = "0.0.0.0"
_LOOPBACK = "127.0.0.1"
_THREAD_START_TIMEOUT_S = 30.0
CLOSE_GRACE_S = 1.0
"""How long a stopping broker lets its connections send the answers they have, and
then lets their sockets close: a client that stopped reading (its socket buffer full)
is dropped after it, unsent bytes and all, as are requests still being read."""
_ANSWER_POLL_S = 0.01
# How the schema registry's requests are named to the authorizer's audit log.
_REGISTRY_LISTENER = "SCHEMA_REGISTRY"
_REGISTRY_REQUEST = "SchemaRegistry"


class Broker:
    """A single-node broker on the running asyncio event loop."""

    def __init__(
        self, config: BrokerConfig | None = None, *, clock: ManualClock | None = None
    ) -> None:
        self.config = config or BrokerConfig()
        self.time = BrokerTime(clock)
        # The fault rules the dispatcher applies (``tickwheel.faults``); empty: none.
        self.faults = FaultPlan()
        # Each listener with the spec it serves; empty until started and after ``stop``.
        self._listeners: list[tuple[ListenerSpec, Listener]] = []
        self._accepting = False
        self._stopped = False
        self._metrics_server: asyncio.Server | None = None
        self._registry: RegistryService | None = None
        self._cleaner: LogCleaner | None = None
        self._replica_manager: ReplicaManager | None = None
        self._context: BrokerContext | None = None
        self._connections: dict[asyncio.Task[None], Connection] = {}
        self._endpoints: dict[str, Endpoint] = {}
        self._metrics_port = -1
        # The timer failed SASL logins wait on (``_delayed_close``), made with the first
        # SASL listener.
        self._close_timer: SystemTimer | None = None
        # The timer throttled channels wait on (``_throttled_channel``), made at start.
        self._throttle_timer: SystemTimer | None = None
        self._ready = False  # /readyz: listening, logs loaded, registered in a cluster
        # Request bytes being read or served, over all connections (queued.max.request.bytes).
        self.memory_pool = MemoryPool(max(self.config.queued_max_request_bytes, UNBOUNDED))
        # How many connections the listeners take, from whom, how fast (max.connections...).
        self.connection_quotas = ConnectionQuotas(self.config.connection_quotas(), self.time.clock)
        self.connection_quotas.close_excess = self._close_excess_connection

    @property
    def clock(self) -> Clock:
        """The clock every timeout of this broker follows."""
        return self.time.clock

    @property
    def log_dirs(self) -> list[Path]:
        """The log directories, as ``log.dirs`` lists them."""
        return [Path(entry.strip()) for entry in self.config.log_dirs.split(",") if entry.strip()]

    @property
    def log_dir(self) -> Path:
        """The first log directory, which also holds the topic registry."""
        return self.log_dirs[0]

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the first listener, for clients, once started."""
        return str(self.endpoint())

    @property
    def port(self) -> int:
        """The port of the first listener, once started."""
        return self.endpoint().port

    def endpoint(self, listener_name: str | None = None) -> Endpoint:
        """Where clients reach the listener named (the first listener by default)."""
        if listener_name is None:
            listener_name = self.config.listener_specs()[0].name
        return self._endpoints.get(listener_name.upper(), Endpoint(_LOOPBACK, 0))

    @property
    def metrics_port(self) -> int:
        """The metrics HTTP port, or -1 when metrics are not served."""
        return self._metrics_port

    @property
    def schema_registry_ports(self) -> list[int]:
        """The port of each ``schema.registry.listeners`` entry (empty when off)."""
        return [] if self._registry is None else self._registry.ports

    @property
    def context(self) -> BrokerContext:
        """The broker's state as handlers see it (started brokers only)."""
        if self._context is None:
            raise RuntimeError("the broker is not started")
        return self._context

    @property
    def replica_manager(self) -> ReplicaManager:
        """The replica manager (started brokers only)."""
        return self.context.replica_manager

    def metrics(self) -> dict[str, PurgatoryMetrics]:
        """Each purgatory's counters, by name (Produce, Fetch, DeleteRecords, ShareFetch)."""
        return self.context.metrics.purgatory_snapshot()

    def _start_services(self, stored_cluster_id: str | None, state: BrokerState) -> BrokerServices:
        """Join the cluster (``zookeeper.connect``), build the authorizer, lead the hosted
        partitions (on a single node), then start the coordinators over them."""
        config = self.config
        if config.zookeeper_connect:
            cluster = join_cluster(state, stored_cluster_id)
            # Kept before registering, as Kafka does: a registered broker has its file.
            cluster.cluster_id_listener = lambda cluster_id: write_meta_properties(
                self.log_dirs, MetaProperties(config.broker_id, cluster_id)
            )
        start_authorizer(state, self.log_dir)
        for info in state.topics.topics.values():
            state.open_partitions(info)
        broker_time = self.time
        groups = start_groups(state, broker_time)
        # After the groups: markers a load sends may land in __consumer_offsets.
        transactions = start_transactions(state, broker_time, groups)
        share_coordinator = start_share_coordinator(state, broker_time)
        # After the share coordinator: share-partitions keep their state through it.
        share_groups, share_partitions, share_admin = start_share(
            state, broker_time, groups, share_coordinator
        )
        return BrokerServices(
            groups, transactions, share_coordinator, share_groups, share_partitions, share_admin
        )

    def _check_resources(self) -> None:
        """Raise the descriptor limit as far as allowed; refuse unusable log dirs."""
        raise_descriptor_limit()
        for log_dir in self.log_dirs:
            check_log_dir(log_dir)

    async def start(self) -> None:
        """Open the logs, then listen."""
        config = self.config
        self._check_resources()
        stored = read_meta_properties(self.log_dirs, config.broker_id)
        cluster_id = choose_cluster_id(stored, config.cluster_id)
        # Read before the logs open; the controller hears it with the registration.
        previous_broker_epoch = take_clean_shutdown(self.log_dirs)
        if not config.zookeeper_connect:
            write_meta_properties(self.log_dirs, MetaProperties(config.broker_id, cluster_id))
        broker_time = self.time
        broker_time.start()
        replica_manager = ReplicaManager(
            config.broker_id,
            self.log_dirs,
            PurgatoryConfig(
                produce_purge_interval_requests=config.producer_purgatory_purge_interval_requests,
                fetch_purge_interval_requests=config.fetch_purgatory_purge_interval_requests,
                delete_records_purge_interval_requests=config.delete_records_purgatory_purge_interval_requests,
            ),
            timers=broker_time.timers,
            clock_ms=broker_time.wall_clock_ms,
        )
        self._replica_manager = replica_manager
        replication_windows = (
            config.replication_quota_window_num,
            config.replication_quota_window_size_seconds * 1000,
        )
        replica_manager.leader_quota = ReplicationQuota(
            WindowedRate(*replication_windows), self.time.clock
        )
        replica_manager.follower_quota = ReplicationQuota(
            WindowedRate(*replication_windows), self.time.clock
        )
        replica_manager.start()
        topics = TopicRegistry(self.log_dir)
        topics.load()
        on_disk: dict[str, int] = {}
        for tp in replica_manager.log_manager.existing_partitions():
            on_disk[tp.topic] = max(on_disk.get(tp.topic, 0), tp.partition + 1)
        for name, count in on_disk.items():
            topics.adopt(name, count)
        cleaner = (
            LogCleaner(
                CleanerConfig(
                    threads=config.log_cleaner_threads,
                    dedupe_buffer_bytes=config.log_cleaner_dedupe_buffer_size,
                    io_buffer_bytes=config.log_cleaner_io_buffer_size,
                    io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
                    backoff_ms=config.log_cleaner_backoff_ms,
                ),
                replica_manager.log_manager.logs,
                # Lags and delete horizons follow the broker's clock (a manual one in
                # tests); the threads' backoff between rounds is real time.
                clock_ms=broker_time.wall_clock_ms,
            )
            if config.log_cleaner_enable
            else None
        )
        self._cleaner = cleaner
        client_quotas = ClientQuotas(
            self.time.clock,
            QuotaWindows(config.quota_window_num, config.quota_window_size_seconds * 1000),
            QuotaWindows(
                config.controller_quota_window_num,
                config.controller_quota_window_size_seconds * 1000,
            ),
        )
        metrics = BrokerMetrics(
            lambda: (*replica_manager.purgatories, context.share_partitions.purgatory),
            lambda: replica_manager.log_manager.offline_dir_count,
            partitions=lambda: list(replica_manager.partitions.values()),
            controller_active=lambda: context.cluster is None or context.cluster.controller.active,
            cleaner=lambda: None if cleaner is None else cleaner.metrics,
            network=lambda: (self.connection_quotas, self.memory_pool),
            client_quotas=lambda: client_quotas,
            faults_applied=lambda: self.faults.applied,
            replication=lambda: (replica_manager.leader_quota, replica_manager.follower_quota),
        )
        users = UserConfigs(self.log_dir)
        if not config.zookeeper_connect:
            users.load()
        context = BrokerContext(
            BrokerParts(
                config,
                replica_manager,
                topics,
                metrics,
                ADVERTISED_VERSIONS,
                cluster_id,
                users,
                client_quotas,
            ),
            functools.partial(self._start_services, stored.cluster_id if stored else None),
        )
        self._context = context
        cluster = context.cluster
        dispatcher = Dispatcher(
            context, API_SPECS, self.faults, self.time.timers.new_timer(FAULT_DELAY_TIMER)
        )
        self._throttle_timer = self.time.timers.new_timer(THROTTLE_TIMER)
        self._open_listeners(dispatcher, context)
        if config.metrics_port >= 0:
            # Served before joining the cluster, so /readyz says 503 until registered.
            await self._serve_metrics(metrics, context)
        if cluster is not None:
            await start_cluster(context, cluster, previous_broker_epoch)
        await self._start_registry(context)
        if cleaner is not None:
            # A start-up that fails before this point leaves no thread behind.
            cleaner.start()
        # Requests are read only now, as Kafka enables request processing last: before,
        # a broker rejoining its cluster does not host its partitions yet and would
        # answer UNKNOWN_TOPIC_OR_PARTITION for them. Meanwhile connections wait in the
        # listen backlog.
        for _, listener in self._listeners:
            listener.start()
        self._accepting = True
        self._ready = True
        self._schedule_housekeeping(broker_time)
        _log.info(
            "tickwheel broker %d listening on %s (advertised %s), log dirs %s, %d topics",
            config.broker_id,
            # The first listener's host:port first: scripts read it from this line.
            ", ".join(f"{spec.host}:{lsn.port} ({spec.name})" for spec, lsn in self._listeners),
            ", ".join(f"{name}://{endpoint}" for name, endpoint in self._endpoints.items()),
            ",".join(map(str, self.log_dirs)),
            len(topics.topics),
        )
        if self._metrics_server is not None:
            _log.info(
                "metrics on http://%s:%d/metrics (health /healthz, readiness /readyz)",
                config.listener_specs()[0].host,
                self._metrics_port,
            )

    async def _start_registry(self, context: BrokerContext) -> None:
        """Serve the schema registry when ``schema.registry.listeners`` is set (one
        broker only: in a cluster its ``_schemas`` writer would need electing)."""
        config = self.config
        if not config.schema_registry_listeners.strip():
            return
        # Imported only when served: its dependencies are the ``registry`` extra's.
        try:
            from tickwheel.registry import (  # noqa: PLC0415
                METHOD_PROPERTY,
                METHODS,
                SCHEMAS_TOPIC,
                SCHEMAS_TOPIC_CONFIGS,
                RegistryAccess,
                RegistryListenerError,
                RegistryService,
                parse_listeners,
            )
        except ModuleNotFoundError as exc:
            raise ConfigError(
                f"schema.registry.listeners: the schema registry needs {exc.name}, of the "
                "registry extra: pip install 'tickwheel[registry]'"
            ) from None

        try:
            listeners = parse_listeners(config.schema_registry_listeners)
        except RegistryListenerError as exc:
            raise ConfigError(str(exc)) from exc
        if not listeners:
            return
        if config.zookeeper_connect:
            raise ConfigError(
                "schema.registry.listeners: the schema registry serves a single broker; "
                "unset zookeeper.connect or schema.registry.listeners"
            )
        method = config.schema_registry_authentication_method.strip().upper()
        if method not in METHODS:
            raise ConfigError(f"{METHOD_PROPERTY}={method!r} is not one of {', '.join(METHODS)}")

        def authorize(principal: KafkaPrincipal, host: str, operation: AclOperation) -> bool:
            authorizer = context.authorizer
            if authorizer is None:
                return True
            session = Session(principal, host, _REGISTRY_LISTENER, _REGISTRY_LISTENER)
            action = Action(operation, ResourceType.TOPIC, SCHEMAS_TOPIC)
            return authorizer.authorize(session, _REGISTRY_REQUEST, action)

        access = RegistryAccess(
            method=method, credential_of=context.users.credentials.lookup, authorize=authorize
        )
        tls = None
        if any(listener.tls for listener in listeners):
            # https listeners serve with the broker-wide ssl.* settings.
            ssl_properties = {
                name: value
                for name, value in config.as_properties().items()
                if name.startswith(SSL_PREFIX)
            }
            try:
                tls = SslSettings.from_properties(ssl_properties).server_context()
            except SslConfigError as exc:
                raise ConfigError(f"schema.registry.listeners: {exc}") from None

        def create_topic() -> None:
            if SCHEMAS_TOPIC not in context.topics.topics:
                context.create_topic(SCHEMAS_TOPIC, 1, SCHEMAS_TOPIC_CONFIGS)

        self._registry = RegistryService(
            listeners,
            context.replica_manager,
            create_topic=create_topic,
            clock_ms=self.time.wall_clock_ms,
            write_timeout_ms=config.request_timeout_ms,
            access=access,
            tls=tls,
        )
        try:
            await self._registry.start()
        except RegistryListenerError as exc:
            raise ConfigError(str(exc)) from None
        context.schema_validator = self._registry.validator
        _log.info(
            "schema registry on %s",
            ", ".join(
                f"{'https' if lsn.tls else 'http'}://{lsn.host}:{port}"
                for lsn, port in zip(listeners, self._registry.ports, strict=True)
            ),
        )

    async def _serve_metrics(self, metrics: BrokerMetrics, context: BrokerContext) -> None:
        """Serve /metrics, the probes and, when enabled, the fault endpoint."""
        config = self.config
        faults = (
            FaultEndpoint(self.faults, lambda: context.authorizer, context.users.credentials)
            if config.faults_endpoint_enable
            else None
        )
        host = config.listener_specs()[0].host
        self._metrics_server = await serve_metrics(
            metrics, host, config.metrics_port, lambda: self._ready, faults
        )
        self._metrics_port = self._metrics_server.sockets[0].getsockname()[1]

    def _open_listeners(self, dispatcher: Dispatcher, context: BrokerContext) -> None:
        """Bind every listener (not accepting yet) and tell ``context`` where each is
        advertised."""
        advertised = parse_advertised(self.config.advertised_listeners)
        inter_broker = self.config.inter_broker_listener().name
        for spec in self.config.listener_specs():
            tls = listener_tls(self.config, spec)
            sasl = (
                self._sasl_listener(spec, context.users)
                if spec.security_protocol in (SASL_PLAINTEXT, SASL_SSL)
                else None
            )
            listener = Listener(
                spec.host,
                spec.port,
                functools.partial(
                    ConnectionProtocol,
                    functools.partial(self._accept, dispatcher, spec, tls, sasl),
                ),
                tls=None if tls is None else tls.context,
                name=spec.name,
                quotas=(
                    self.connection_quotas,
                    self.connection_quotas.add_listener(
                        spec.name,
                        *self.config.listener_connection_limits(spec.name),
                        inter_broker=spec.name == inter_broker,
                    ),
                ),
            )
            self._listeners.append((spec, listener))
            self._endpoints[spec.name] = self._advertised(spec, listener.port, advertised)
        context.listener_endpoints = dict(self._endpoints)

    def _sasl_listener(self, spec: ListenerSpec, users: UserConfigs) -> SaslListener:
        """How the SASL listener ``spec`` authenticates (``ConfigError`` if it cannot)."""
        config = self.config.listener_view(spec.name)
        try:
            sasl_config = SaslListenerConfig.from_properties(spec.name, config.get)
        except SaslConfigError as exc:
            raise ConfigError(str(exc)) from exc
        if self._close_timer is None:
            self._close_timer = self.time.timers.new_timer(DELAYED_CLOSE_TIMER)
        return SaslListener(
            sasl_config,
            users.credentials,
            self.time.clock,
            self._close_timer,
            self.config.connection_failed_authentication_delay_ms,
            self.config.sasl_server_max_receive_size,
        )

    @staticmethod
    def _advertised(
        spec: ListenerSpec, bound_port: int, advertised: dict[str, tuple[str, int]]
    ) -> Endpoint:
        """Where clients reach ``spec``: ``advertised.listeners``, else its bound address."""
        if spec.name in advertised:
            adv_host, adv_port = advertised[spec.name]
            return Endpoint(adv_host or _LOOPBACK, adv_port or bound_port)
        return Endpoint(_LOOPBACK if spec.host == _ANY_INTERFACE else spec.host, bound_port)

    def _accept(
        self,
        dispatcher: Dispatcher,
        spec: ListenerSpec,
        tls: ListenerTls | None,
        sasl: SaslListener | None,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        connection = Connection(
            dispatcher,
            reader,
            writer,
            self.config.socket_request_max_bytes,
            self.memory_pool,
            clock=self.time.clock,
            on_closed=self._connection_closed,
            listener=spec,
            sasl=sasl,
            throttle_timer=self._throttle_timer,
        )
        if not self._accepting:
            # Handed over while ``stop`` runs: nothing will serve it.
            connection.close()
            return
        # On SSL the certificate names the client; on SASL_SSL, SASL does (Kafka's rule).
        if (
            tls is not None
            and spec.security_protocol == SSL
            and not self._authenticate_tls(connection, tls, writer)
        ):
            connection.close()
            return
        task = asyncio.get_running_loop().create_task(connection.run())
        self._connections[task] = connection
        task.add_done_callback(self._connections.pop)

    @staticmethod
    def _authenticate_tls(
        connection: Connection, tls: ListenerTls, writer: asyncio.StreamWriter
    ) -> bool:
        """Set the principal of a TLS client from its certificate; False if no
        ``ssl.principal.mapping.rules`` rule maps it (the connection is refused)."""
        try:
            principal = tls.principal(writer.get_extra_info("peercert"))
        except NoMatchingRuleError as exc:
            _log.warning("refusing the TLS connection from %s: %s", connection.peer, exc)
            return False
        connection.session.principal = principal
        _log.debug(
            "TLS connection from %s on listener %s as %s",
            connection.peer,
            connection.listener.name,
            principal,
        )
        return True

    def _connection_closed(self, connection_id: int) -> None:
        """A client's connection closed: the share sessions it opened close with it."""
        context = self._context
        if not self._stopped and context is not None:
            context.share_partitions.connection_closed(connection_id)

    def _schedule_housekeeping(self, broker_time: BrokerTime) -> None:
        """The periodic tasks, under Kafka's task names (LogManager, ReplicaManager,
        SocketServer)."""
        config = self.config
        schedule = broker_time.scheduler.schedule
        schedule(
            "kafka-log-retention", self._log_maintenance, config.log_retention_check_interval_ms
        )
        schedule(
            "PeriodicProducerExpirationCheck",
            functools.partial(
                self.replica_manager.remove_expired_producers, config.producer_id_expiration_ms
            ),
            config.producer_id_expiration_check_interval_ms,
        )
        for name, interval_ms, stage, checkpoint in (
            (
                "highwatermark-checkpoint",
                config.replica_high_watermark_checkpoint_interval_ms,
                Log.checkpoint_high_watermark,
                HIGH_WATERMARK_CHECKPOINT,
            ),
            (
                "kafka-recovery-point-checkpoint",
                config.log_flush_offset_checkpoint_interval_ms,
                Log.checkpoint_recovery_point,
                RECOVERY_POINT_CHECKPOINT,
            ),
            (
                "kafka-log-start-offset-checkpoint",
                config.log_flush_start_offset_checkpoint_interval_ms,
                Log.checkpoint_log_start_offset,
                LOG_START_OFFSET_CHECKPOINT,
            ),
        ):
            schedule(name, functools.partial(self._checkpoint, stage, checkpoint), interval_ms)
        schedule(
            "idle-connection-check",
            self._close_idle_connections,
            config.connections_max_idle_ms // _IDLE_CHECKS_PER_TIMEOUT,
        )

    def _log_maintenance(self) -> None:
        replica_manager = self.replica_manager
        for tp, partition in list(replica_manager.partitions.items()):
            if partition.offline:
                continue
            try:
                partition.log.apply_retention()
                partition.log.maybe_flush()
            except (LogError, OSError) as error:
                replica_manager.handle_storage_error(tp, error)

    async def _checkpoint(self, stage: Callable[[Log], None], checkpoint: str) -> None:
        log_manager = self.replica_manager.log_manager
        plan = log_manager.checkpoint_plan()
        failures = await asyncio.to_thread(log_manager.checkpoint, plan, stage, checkpoint)
        for log_dir, error in failures:
            log_manager.fail_dir(log_dir, error)

    def _close_excess_connection(self) -> bool:
        """The inter-broker listener took the broker past ``max.connections``: close the
        least recently active connection of another listener, as Kafka does."""
        inter_broker = self.config.inter_broker_listener().name
        candidates = [
            connection
            for connection in self._connections.values()
            if connection.listener.name != inter_broker and not connection.closing
        ]
        if not candidates:
            return False
        victim = min(candidates, key=lambda connection: connection.last_active_ms)
        _log.info(
            "closing connection from %s on listener %s: max.connections=%d reached and an "
            "inter-broker connection came in",
            victim.peer,
            victim.listener.name,
            self.config.max_connections,
        )
        victim.abort()
        return True

    def _close_idle_connections(self) -> None:
        deadline_ms = self.time.clock.now_ms() - self.config.connections_max_idle_ms
        for connection in list(self._connections.values()):
            if not connection.busy and connection.last_active_ms < deadline_ms:
                # Dropped, not closed: a close would wait for a client that stopped reading.
                _log.info("closing idle connection from %s", connection.peer)
                connection.abort()

    async def stop(self) -> None:
        """Stop listening, answer what waits, close connections, flush and close the
        logs; idempotent. Bounded in time whatever state the cluster is in."""
        if self._stopped:
            return
        self._stopped = True
        self._ready = False
        if self._context is not None and self._context.cluster is not None:
            # Kafka's controlled shutdown: leaderships move while clients are served.
            await self._context.cluster.controlled_shutdown()
        self._accepting = False
        listeners, self._listeners = self._listeners, []
        for _, listener in listeners:
            # Returns once every socket it accepted reached ``_accept``, which closed it.
            await listener.close()
        if self._metrics_server is not None:
            self._metrics_server.close()
        if self._registry is not None:
            await self._registry.stop()
        await self.time.scheduler.shutdown()
        await self._close_connections()
        if self._context is not None and self._context.cluster is not None:
            await self._context.cluster.stop()
        if self._context is not None:
            await self._context.services.shutdown()
        if self._cleaner is not None:
            # Before the logs close: a cleaning in progress is killed and swaps nothing.
            await asyncio.to_thread(self._cleaner.stop)
        if self._replica_manager is not None:
            self._replica_manager.shutdown()
            cluster = self._context.cluster if self._context is not None else None
            broker_epoch = cluster.broker_epoch if cluster is not None else 0
            # Every log is closed: a clean shutdown, whatever the cluster answered. An
            # offline directory gets no marker: its logs may have lost records.
            online = self._replica_manager.log_manager.online_log_dirs
            await asyncio.to_thread(write_clean_shutdown, online, broker_epoch)
        self.time.timers.stop()
        _log.info("tickwheel broker %d stopped", self.config.broker_id)

    async def _close_connections(self) -> None:
        """Complete what waits in the purgatories and let each connection send its answer
        (``CLOSE_GRACE_S`` at most), then close them all; a client that reads nothing
        more has its socket dropped."""
        connections = dict(self._connections)
        loop = asyncio.get_running_loop()
        deadline_s = loop.time() + CLOSE_GRACE_S
        while True:
            # Again each round: a follower answered fetches again at once, and that
            # fetch must not wait in the purgatory for the rest of the grace.
            if self._replica_manager is not None:
                self._replica_manager.complete_delayed()
            if not any(c.busy for c in connections.values()) or loop.time() >= deadline_s:
                break
            await asyncio.sleep(_ANSWER_POLL_S)
        for task, connection in connections.items():
            task.cancel()
            connection.close()
        await asyncio.gather(*connections, return_exceptions=True)
        closing = {
            asyncio.ensure_future(connection.wait_closed()): connection
            for connection in connections.values()
        }
        if not closing:
            return
        _, stuck = await asyncio.wait(closing, timeout=CLOSE_GRACE_S)
        for waiter in stuck:
            closing[waiter].abort()
        if stuck:
            await asyncio.wait(stuck)

    def flush_logs(self) -> None:
        """Flush every open log now and write the checkpoints of what was flushed (a
        stop that cannot wait: the next start recovers nothing); failures are logged."""
        if self._replica_manager is None:
            return
        log_manager = self._replica_manager.log_manager
        for log in log_manager.logs():
            try:
                log.flush()
            except (LogError, OSError) as error:
                _log.error("log %s failed to flush: %s", log.dir_path, error)
        try:
            log_manager.write_checkpoints()
        except OSError as error:
            _log.error("writing the checkpoints failed: %s", error)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


class BackgroundBroker:
    """A ``Broker`` running on its own event-loop thread."""

    def __init__(
        self, config: BrokerConfig | None = None, *, clock: ManualClock | None = None
    ) -> None:
        self.broker = Broker(config, clock=clock)
        # Rules may be added and removed from any thread (``FaultPlan``).
        self.faults = self.broker.faults
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for clients."""
        return self.broker.bootstrap_servers

    def endpoint(self, listener_name: str | None = None) -> Endpoint:
        """Where clients reach the listener named (the first listener by default)."""
        return self.broker.endpoint(listener_name)

    @property
    def port(self) -> int:
        """The port the broker listens on."""
        return self.broker.port

    @property
    def metrics_port(self) -> int:
        """The metrics HTTP port, or -1."""
        return self.broker.metrics_port

    @property
    def schema_registry_ports(self) -> list[int]:
        """The schema registry's ports (empty when off)."""
        return self.broker.schema_registry_ports

    @property
    def clock(self) -> Clock:
        """The clock every timeout of the broker follows."""
        return self.broker.clock

    def start(self) -> Self:
        """Start the thread and wait until the broker listens (re-raises its failure)."""
        self._thread = threading.Thread(target=self._run, name="tickwheel-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(_THREAD_START_TIMEOUT_S):
            raise TimeoutError("the broker did not start")
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        try:
            await self.broker.start()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            await self.broker.stop()
            return
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            await self.broker.stop()

    def call(
        self, fn: Callable[[Broker], Awaitable[object]] | Callable[[Broker], object]
    ) -> object:
        """Run ``fn(broker)`` on the broker's loop and return its result."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the broker is not running")

        async def run() -> object:
            result = fn(self.broker)
            if isinstance(result, Awaitable):
                return await result
            return result

        return asyncio.run_coroutine_threadsafe(run(), loop).result()

    def metrics(self) -> dict[str, PurgatoryMetrics]:
        """Each purgatory's counters, by name, read on the broker's loop."""
        snapshot = self.call(lambda broker: broker.metrics())
        assert isinstance(snapshot, dict)
        return snapshot

    def stop(self) -> None:
        """Stop the broker and wait for its thread; idempotent."""
        loop, stopping, thread = self._loop, self._stopping, self._thread
        if loop is None or stopping is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop already closed
            loop.call_soon_threadsafe(stopping.set)
        thread.join()
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
