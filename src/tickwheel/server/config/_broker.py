"""``BrokerConfig``: the broker's settings under Kafka's ``server.properties`` names.

One frozen object built once at start-up, from a properties file, a dict, or keyword
arguments; ``BrokerConfig.load`` layers the sources ``tickwheel serve`` reads, later
ones winning: the ``server.properties`` file (``_properties`` parses it as
``java.util.Properties`` does), ``KAFKA_*`` environment variables (named as the
apache/kafka image names them, ``environment_properties``), then ``--override``
pairs. The config records where each value came from (``source``), which
DescribeConfigs reports. Every field is named after its Kafka property with dots turned into
underscores (``log.dirs`` → ``log_dirs``). Topic-level defaults (``log.segment.bytes``
and friends) are kept as the broker's ``log.*`` properties and mapped to the topic
names that ``LogConfig`` reads (``segment.bytes``), as Kafka does; those are the
settings that may change while the broker runs, and ``with_values`` gives the copy of
a config that such dynamic changes make (``DynamicBrokerConfig`` keeps them).

Immutable; safe from any thread.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tickwheel.coordinator.group import CLUSTER_OFFSETS_TOPIC_REPLICATION_FACTOR, GroupConfig
from tickwheel.coordinator.group.share import ShareGroupConfig
from tickwheel.coordinator.share_state import (
    CLUSTER_SHARE_STATE_MIN_ISR,
    CLUSTER_SHARE_STATE_REPLICATION_FACTOR,
    ShareCoordinatorConfig,
)
from tickwheel.coordinator.transaction import (
    CLUSTER_TRANSACTION_STATE_MIN_ISR,
    CLUSTER_TRANSACTION_STATE_REPLICATION_FACTOR,
    TransactionConfig,
)
from tickwheel.replica import UNBOUNDED_RATE
from tickwheel.security import LISTENER_PREFIX, listener_prefix
from tickwheel.server._meta_properties import cluster_id_error
from tickwheel.server.config._listeners import (
    DEFAULT_PROTOCOL_MAP,
    ListenerError,
    ListenerSpec,
    inter_broker_listener,
    parse_advertised,
    parse_listeners,
)
from tickwheel.server.config._properties import parse_properties
from tickwheel.server.net._quotas import (
    NO_LIMIT,
    QuotaConfigError,
    QuotaSettings,
    check_limit,
    parse_per_ip_overrides,
)
from tickwheel.share_delivery import ShareConfig

__all__ = [
    "BROKER_TO_TOPIC_CONFIG",
    "DEFAULT_LISTENERS",
    "SENSITIVE_PROPERTIES",
    "BrokerConfig",
    "ConfigError",
    "ConfigSource",
    "environment_properties",
    "parse_overrides",
    "parse_properties",
]

_log = logging.getLogger(__name__)

DEFAULT_LISTENERS = "PLAINTEXT://127.0.0.1:9092"
SENSITIVE_PROPERTIES = frozenset({"ssl.key.password", "ssl.keystore.key", "sasl.jaas.config"})
"""Settings whose values are secrets (Kafka's PASSWORD type): DescribeConfigs answers
them without their value, as Kafka does, and the config's repr leaves them out."""
_MS_PER_HOUR = 3_600_000
_GROUPS = GroupConfig()
_TXNS = TransactionConfig()
_SHARE_STATE = ShareCoordinatorConfig()
_SHARE_GROUPS = ShareGroupConfig()
_SHARES = ShareConfig()

# Broker property -> topic-level property it provides the default for (Kafka's
# "server default property" of each topic config).
BROKER_TO_TOPIC_CONFIG: Mapping[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.message.timestamp.type": "message.timestamp.type",
    "message.max.bytes": "max.message.bytes",
    "min.insync.replicas": "min.insync.replicas",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
}


# The apache/kafka image's environment mapping (its kafka-propertiesSpec.json, after
# Confluent's): ``KAFKA_`` prefixed variables become properties except these, which
# configure the JVM and the start-up scripts.
_ENV_PREFIX = "KAFKA_"
_ENV_EXCLUDED = frozenset(
    {
        "KAFKA_VERSION",
        "KAFKA_HEAP_OPTS",
        "KAFKA_LOG4J_OPTS",
        "KAFKA_OPTS",
        "KAFKA_JMX_OPTS",
        "KAFKA_JVM_PERFORMANCE_OPTS",
        "KAFKA_GC_LOG_OPTS",
        "KAFKA_LOG4J_ROOT_LOGLEVEL",
        "KAFKA_LOG4J_LOGGERS",
        "KAFKA_TOOLS_LOG4J_LOGLEVEL",
    }
)


class ConfigError(ValueError):
    """A property that is unknown in type or out of range."""


class ConfigSource(enum.Enum):
    """Where a setting's value came from, lowest precedence first."""

    DEFAULT = "default"
    FILE = "file"
    ENVIRONMENT = "environment"
    OVERRIDE = "override"


def _kafka(name: str) -> dict[str, str]:
    return {"kafka": name}


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    """Broker settings; each field's Kafka property name is in its metadata."""

    broker_id: int = field(default=0, metadata=_kafka("broker.id"))
    listeners: str = field(default=DEFAULT_LISTENERS, metadata=_kafka("listeners"))
    advertised_listeners: str = field(default="", metadata=_kafka("advertised.listeners"))
    listener_security_protocol_map: str = field(
        default=DEFAULT_PROTOCOL_MAP, metadata=_kafka("listener.security.protocol.map")
    )
    inter_broker_listener_name: str = field(
        default="", metadata=_kafka("inter.broker.listener.name")
    )
    # Empty: unset (Kafka's default PLAINTEXT, else the first listener; ``_listener_config``).
    security_inter_broker_protocol: str = field(
        default="", metadata=_kafka("security.inter.broker.protocol")
    )
    log_dirs: str = field(default="/tmp/kafka-logs", metadata=_kafka("log.dirs"))
    num_partitions: int = field(default=1, metadata=_kafka("num.partitions"))
    default_replication_factor: int = field(
        default=1, metadata=_kafka("default.replication.factor")
    )
    auto_create_topics_enable: bool = field(
        default=True, metadata=_kafka("auto.create.topics.enable")
    )
    delete_topic_enable: bool = field(default=True, metadata=_kafka("delete.topic.enable"))
    message_max_bytes: int = field(default=1_048_588, metadata=_kafka("message.max.bytes"))
    socket_request_max_bytes: int = field(
        default=104_857_600, metadata=_kafka("socket.request.max.bytes")
    )
    # The most partitions one DescribeTopicPartitions response describes (a request's own
    # response_partition_limit is capped by it).
    max_request_partition_size_limit: int = field(
        default=2000, metadata=_kafka("max.request.partition.size.limit")
    )
    # Kafka's default, -1: no bound (0 or below). Bytes are held as they arrive, never as announced
    # (server.net._memory_pool), so a client that announces a large frame and goes quiet
    # holds only what it sent, bounded or not.
    queued_max_request_bytes: int = field(default=-1, metadata=_kafka("queued.max.request.bytes"))
    # Frames a SASL client may send before it has authenticated (Kafka's default, 512 KiB).
    sasl_server_max_receive_size: int = field(
        default=524_288, metadata=_kafka("sasl.server.max.receive.size")
    )
    # Connection quotas (server.net._quotas), Kafka's defaults: no limit. The listener
    # forms (listener.name.<l>.max.connections, ...max.connection.creation.rate) are
    # read by ``listener_connection_limits``.
    max_connections: int = field(default=NO_LIMIT, metadata=_kafka("max.connections"))
    max_connections_per_ip: int = field(default=NO_LIMIT, metadata=_kafka("max.connections.per.ip"))
    max_connections_per_ip_overrides: str = field(
        default="", metadata=_kafka("max.connections.per.ip.overrides")
    )
    max_connection_creation_rate: int = field(
        default=NO_LIMIT, metadata=_kafka("max.connection.creation.rate")
    )
    connections_max_idle_ms: int = field(
        default=600_000, metadata=_kafka("connections.max.idle.ms")
    )
    # Client quotas' rate windows (server.quotas), Kafka's defaults; the controller
    # mutation quota has its own.
    quota_window_num: int = field(default=11, metadata=_kafka("quota.window.num"))
    quota_window_size_seconds: int = field(default=1, metadata=_kafka("quota.window.size.seconds"))
    controller_quota_window_num: int = field(
        default=11, metadata=_kafka("controller.quota.window.num")
    )
    controller_quota_window_size_seconds: int = field(
        default=1, metadata=_kafka("controller.quota.window.size.seconds")
    )
    # Replication throttles (``replica.ReplicationQuota``): bytes/s, Kafka's unbounded
    # default, and the rate's windows.
    leader_replication_throttled_rate: int = field(
        default=UNBOUNDED_RATE, metadata=_kafka("leader.replication.throttled.rate")
    )
    follower_replication_throttled_rate: int = field(
        default=UNBOUNDED_RATE, metadata=_kafka("follower.replication.throttled.rate")
    )
    replication_quota_window_num: int = field(
        default=11, metadata=_kafka("replication.quota.window.num")
    )
    replication_quota_window_size_seconds: int = field(
        default=1, metadata=_kafka("replication.quota.window.size.seconds")
    )
    producer_purgatory_purge_interval_requests: int = field(
        default=1000, metadata=_kafka("producer.purgatory.purge.interval.requests")
    )
    fetch_purgatory_purge_interval_requests: int = field(
        default=1000, metadata=_kafka("fetch.purgatory.purge.interval.requests")
    )
    delete_records_purgatory_purge_interval_requests: int = field(
        default=1, metadata=_kafka("delete.records.purgatory.purge.interval.requests")
    )
    min_insync_replicas: int = field(default=1, metadata=_kafka("min.insync.replicas"))
    replica_lag_time_max_ms: int = field(default=30_000, metadata=_kafka("replica.lag.time.max.ms"))
    # Cluster mode (tickwheel.cluster): empty zookeeper.connect keeps the single node.
    zookeeper_connect: str = field(default="", metadata=_kafka("zookeeper.connect"))
    zookeeper_session_timeout_ms: int = field(
        default=18_000, metadata=_kafka("zookeeper.session.timeout.ms")
    )
    zookeeper_connection_timeout_ms: int = field(
        default=18_000, metadata=_kafka("zookeeper.connection.timeout.ms")
    )
    # Leader failover (the controller; tickwheel.cluster.ControllerSettings).
    unclean_leader_election_enable: bool = field(
        default=False, metadata=_kafka("unclean.leader.election.enable")
    )
    auto_leader_rebalance_enable: bool = field(
        default=True, metadata=_kafka("auto.leader.rebalance.enable")
    )
    leader_imbalance_check_interval_seconds: int = field(
        default=300, metadata=_kafka("leader.imbalance.check.interval.seconds")
    )
    leader_imbalance_per_broker_percentage: int = field(
        default=10, metadata=_kafka("leader.imbalance.per.broker.percentage")
    )
    controlled_shutdown_enable: bool = field(
        default=True, metadata=_kafka("controlled.shutdown.enable")
    )
    controlled_shutdown_max_retries: int = field(
        default=3, metadata=_kafka("controlled.shutdown.max.retries")
    )
    controlled_shutdown_retry_backoff_ms: int = field(
        default=5_000, metadata=_kafka("controlled.shutdown.retry.backoff.ms")
    )
    # What bounds each controlled shutdown attempt, as Kafka's request to its controller.
    request_timeout_ms: int = field(default=30_000, metadata=_kafka("request.timeout.ms"))
    replica_fetch_wait_max_ms: int = field(
        default=500, metadata=_kafka("replica.fetch.wait.max.ms")
    )
    replica_fetch_min_bytes: int = field(default=1, metadata=_kafka("replica.fetch.min.bytes"))
    replica_fetch_max_bytes: int = field(
        default=1_048_576, metadata=_kafka("replica.fetch.max.bytes")
    )
    replica_fetch_response_max_bytes: int = field(
        default=10_485_760, metadata=_kafka("replica.fetch.response.max.bytes")
    )
    replica_fetch_backoff_ms: int = field(default=1000, metadata=_kafka("replica.fetch.backoff.ms"))
    replica_socket_timeout_ms: int = field(
        default=30_000, metadata=_kafka("replica.socket.timeout.ms")
    )
    log_segment_bytes: int = field(default=1_073_741_824, metadata=_kafka("log.segment.bytes"))
    log_roll_ms: int = field(default=7 * 24 * _MS_PER_HOUR, metadata=_kafka("log.roll.ms"))
    log_retention_ms: int = field(
        default=7 * 24 * _MS_PER_HOUR, metadata=_kafka("log.retention.ms")
    )
    log_retention_bytes: int = field(default=-1, metadata=_kafka("log.retention.bytes"))
    log_index_interval_bytes: int = field(default=4096, metadata=_kafka("log.index.interval.bytes"))
    log_flush_interval_messages: int = field(
        default=2**63 - 1, metadata=_kafka("log.flush.interval.messages")
    )
    log_flush_interval_ms: int = field(default=2**63 - 1, metadata=_kafka("log.flush.interval.ms"))
    log_message_timestamp_type: str = field(
        default="CreateTime", metadata=_kafka("log.message.timestamp.type")
    )
    # Log compaction (tickwheel.log.LogCleaner); the topic-level ones are defaults
    # (BROKER_TO_TOPIC_CONFIG).
    log_cleanup_policy: str = field(default="delete", metadata=_kafka("log.cleanup.policy"))
    log_cleaner_enable: bool = field(default=True, metadata=_kafka("log.cleaner.enable"))
    log_cleaner_threads: int = field(default=1, metadata=_kafka("log.cleaner.threads"))
    log_cleaner_dedupe_buffer_size: int = field(
        default=134_217_728, metadata=_kafka("log.cleaner.dedupe.buffer.size")
    )
    log_cleaner_io_buffer_size: int = field(
        default=524_288, metadata=_kafka("log.cleaner.io.buffer.size")
    )
    log_cleaner_io_buffer_load_factor: float = field(
        default=0.9, metadata=_kafka("log.cleaner.io.buffer.load.factor")
    )
    log_cleaner_backoff_ms: int = field(default=15_000, metadata=_kafka("log.cleaner.backoff.ms"))
    log_cleaner_min_cleanable_ratio: float = field(
        default=0.5, metadata=_kafka("log.cleaner.min.cleanable.ratio")
    )
    log_cleaner_delete_retention_ms: int = field(
        default=86_400_000, metadata=_kafka("log.cleaner.delete.retention.ms")
    )
    log_cleaner_min_compaction_lag_ms: int = field(
        default=0, metadata=_kafka("log.cleaner.min.compaction.lag.ms")
    )
    log_cleaner_max_compaction_lag_ms: int = field(
        default=2**63 - 1, metadata=_kafka("log.cleaner.max.compaction.lag.ms")
    )
    log_retention_check_interval_ms: int = field(
        default=300_000, metadata=_kafka("log.retention.check.interval.ms")
    )
    producer_id_expiration_ms: int = field(
        default=86_400_000, metadata=_kafka("producer.id.expiration.ms")
    )
    producer_id_expiration_check_interval_ms: int = field(
        default=600_000, metadata=_kafka("producer.id.expiration.check.interval.ms")
    )
    replica_high_watermark_checkpoint_interval_ms: int = field(
        default=5_000, metadata=_kafka("replica.high.watermark.checkpoint.interval.ms")
    )
    log_flush_offset_checkpoint_interval_ms: int = field(
        default=60_000, metadata=_kafka("log.flush.offset.checkpoint.interval.ms")
    )
    log_flush_start_offset_checkpoint_interval_ms: int = field(
        default=60_000, metadata=_kafka("log.flush.start.offset.checkpoint.interval.ms")
    )
    # The group coordinator's settings; tickwheel.coordinator.GroupConfig holds the
    # defaults and reads these from ``as_properties()``.
    group_initial_rebalance_delay_ms: int = field(
        default=_GROUPS.group_initial_rebalance_delay_ms,
        metadata=_kafka("group.initial.rebalance.delay.ms"),
    )
    group_min_session_timeout_ms: int = field(
        default=_GROUPS.group_min_session_timeout_ms,
        metadata=_kafka("group.min.session.timeout.ms"),
    )
    group_max_session_timeout_ms: int = field(
        default=_GROUPS.group_max_session_timeout_ms,
        metadata=_kafka("group.max.session.timeout.ms"),
    )
    group_max_size: int = field(default=_GROUPS.group_max_size, metadata=_kafka("group.max.size"))
    offsets_topic_num_partitions: int = field(
        default=_GROUPS.offsets_topic_num_partitions,
        metadata=_kafka("offsets.topic.num.partitions"),
    )
    offsets_topic_replication_factor: int = field(
        default=_GROUPS.offsets_topic_replication_factor,
        metadata=_kafka("offsets.topic.replication.factor"),
    )
    offsets_topic_segment_bytes: int = field(
        default=_GROUPS.offsets_topic_segment_bytes,
        metadata=_kafka("offsets.topic.segment.bytes"),
    )
    offset_metadata_max_bytes: int = field(
        default=_GROUPS.offset_metadata_max_bytes, metadata=_kafka("offset.metadata.max.bytes")
    )
    offsets_commit_timeout_ms: int = field(
        default=_GROUPS.offsets_commit_timeout_ms, metadata=_kafka("offsets.commit.timeout.ms")
    )
    offsets_retention_minutes: int = field(
        default=_GROUPS.offsets_retention_minutes, metadata=_kafka("offsets.retention.minutes")
    )
    offsets_retention_check_interval_ms: int = field(
        default=_GROUPS.offsets_retention_check_interval_ms,
        metadata=_kafka("offsets.retention.check.interval.ms"),
    )
    # Share groups' settings (KIP-932); tickwheel.coordinator.group.share.ShareGroupConfig
    # and tickwheel.share_delivery.ShareConfig hold the defaults and read these from
    # ``as_properties()``.
    group_share_session_timeout_ms: int = field(
        default=_SHARE_GROUPS.group_share_session_timeout_ms,
        metadata=_kafka("group.share.session.timeout.ms"),
    )
    group_share_min_session_timeout_ms: int = field(
        default=_SHARE_GROUPS.group_share_min_session_timeout_ms,
        metadata=_kafka("group.share.min.session.timeout.ms"),
    )
    group_share_max_session_timeout_ms: int = field(
        default=_SHARE_GROUPS.group_share_max_session_timeout_ms,
        metadata=_kafka("group.share.max.session.timeout.ms"),
    )
    group_share_heartbeat_interval_ms: int = field(
        default=_SHARE_GROUPS.group_share_heartbeat_interval_ms,
        metadata=_kafka("group.share.heartbeat.interval.ms"),
    )
    group_share_min_heartbeat_interval_ms: int = field(
        default=_SHARE_GROUPS.group_share_min_heartbeat_interval_ms,
        metadata=_kafka("group.share.min.heartbeat.interval.ms"),
    )
    group_share_max_heartbeat_interval_ms: int = field(
        default=_SHARE_GROUPS.group_share_max_heartbeat_interval_ms,
        metadata=_kafka("group.share.max.heartbeat.interval.ms"),
    )
    group_share_max_size: int = field(
        default=_SHARE_GROUPS.group_share_max_size, metadata=_kafka("group.share.max.size")
    )
    group_share_delivery_count_limit: int = field(
        default=_SHARES.group_share_delivery_count_limit,
        metadata=_kafka("group.share.delivery.count.limit"),
    )
    group_share_record_lock_duration_ms: int = field(
        default=_SHARES.group_share_record_lock_duration_ms,
        metadata=_kafka("group.share.record.lock.duration.ms"),
    )
    group_share_min_record_lock_duration_ms: int = field(
        default=_SHARES.group_share_min_record_lock_duration_ms,
        metadata=_kafka("group.share.min.record.lock.duration.ms"),
    )
    group_share_max_record_lock_duration_ms: int = field(
        default=_SHARES.group_share_max_record_lock_duration_ms,
        metadata=_kafka("group.share.max.record.lock.duration.ms"),
    )
    group_share_partition_max_record_locks: int = field(
        default=_SHARES.group_share_partition_max_record_locks,
        metadata=_kafka("group.share.partition.max.record.locks"),
    )
    group_share_max_share_sessions: int = field(
        default=_SHARES.group_share_max_share_sessions,
        metadata=_kafka("group.share.max.share.sessions"),
    )
    share_fetch_purgatory_purge_interval_requests: int = field(
        default=_SHARES.share_fetch_purgatory_purge_interval_requests,
        metadata=_kafka("share.fetch.purgatory.purge.interval.requests"),
    )
    # The consumer group protocol's settings (KIP-848); GroupConfig holds the defaults.
    group_consumer_session_timeout_ms: int = field(
        default=_GROUPS.group_consumer_session_timeout_ms,
        metadata=_kafka("group.consumer.session.timeout.ms"),
    )
    group_consumer_min_session_timeout_ms: int = field(
        default=_GROUPS.group_consumer_min_session_timeout_ms,
        metadata=_kafka("group.consumer.min.session.timeout.ms"),
    )
    group_consumer_max_session_timeout_ms: int = field(
        default=_GROUPS.group_consumer_max_session_timeout_ms,
        metadata=_kafka("group.consumer.max.session.timeout.ms"),
    )
    group_consumer_heartbeat_interval_ms: int = field(
        default=_GROUPS.group_consumer_heartbeat_interval_ms,
        metadata=_kafka("group.consumer.heartbeat.interval.ms"),
    )
    group_consumer_min_heartbeat_interval_ms: int = field(
        default=_GROUPS.group_consumer_min_heartbeat_interval_ms,
        metadata=_kafka("group.consumer.min.heartbeat.interval.ms"),
    )
    group_consumer_max_heartbeat_interval_ms: int = field(
        default=_GROUPS.group_consumer_max_heartbeat_interval_ms,
        metadata=_kafka("group.consumer.max.heartbeat.interval.ms"),
    )
    group_consumer_max_size: int = field(
        default=_GROUPS.group_consumer_max_size, metadata=_kafka("group.consumer.max.size")
    )
    group_consumer_assignors: str = field(
        default=_GROUPS.group_consumer_assignors, metadata=_kafka("group.consumer.assignors")
    )
    group_consumer_migration_policy: str = field(
        default=_GROUPS.group_consumer_migration_policy,
        metadata=_kafka("group.consumer.migration.policy"),
    )
    # The transaction coordinator's settings; TransactionConfig holds the defaults and
    # reads these from ``as_properties()``.
    transaction_state_log_num_partitions: int = field(
        default=_TXNS.transaction_state_log_num_partitions,
        metadata=_kafka("transaction.state.log.num.partitions"),
    )
    transaction_state_log_replication_factor: int = field(
        default=_TXNS.transaction_state_log_replication_factor,
        metadata=_kafka("transaction.state.log.replication.factor"),
    )
    transaction_state_log_min_isr: int = field(
        default=_TXNS.transaction_state_log_min_isr,
        metadata=_kafka("transaction.state.log.min.isr"),
    )
    transaction_state_log_segment_bytes: int = field(
        default=_TXNS.transaction_state_log_segment_bytes,
        metadata=_kafka("transaction.state.log.segment.bytes"),
    )
    transaction_state_log_load_buffer_size: int = field(
        default=_TXNS.transaction_state_log_load_buffer_size,
        metadata=_kafka("transaction.state.log.load.buffer.size"),
    )
    transaction_max_timeout_ms: int = field(
        default=_TXNS.transaction_max_timeout_ms,
        metadata=_kafka("transaction.max.timeout.ms"),
    )
    transactional_id_expiration_ms: int = field(
        default=_TXNS.transactional_id_expiration_ms,
        metadata=_kafka("transactional.id.expiration.ms"),
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = field(
        default=_TXNS.transaction_abort_timed_out_transaction_cleanup_interval_ms,
        metadata=_kafka("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = field(
        default=_TXNS.transaction_remove_expired_transaction_cleanup_interval_ms,
        metadata=_kafka("transaction.remove.expired.transaction.cleanup.interval.ms"),
    )
    # A partition leader asks the coordinator before a transactional produce opens a
    # transaction on it (KIP-890 part 1; ``server.apis._produce``).
    transaction_partition_verification_enable: bool = field(
        default=True, metadata=_kafka("transaction.partition.verification.enable")
    )
    # The share coordinator's settings; ShareCoordinatorConfig holds the defaults and
    # reads these from ``as_properties()``.
    share_coordinator_state_topic_num_partitions: int = field(
        default=_SHARE_STATE.share_coordinator_state_topic_num_partitions,
        metadata=_kafka("share.coordinator.state.topic.num.partitions"),
    )
    share_coordinator_state_topic_replication_factor: int = field(
        default=_SHARE_STATE.share_coordinator_state_topic_replication_factor,
        metadata=_kafka("share.coordinator.state.topic.replication.factor"),
    )
    share_coordinator_state_topic_min_isr: int = field(
        default=_SHARE_STATE.share_coordinator_state_topic_min_isr,
        metadata=_kafka("share.coordinator.state.topic.min.isr"),
    )
    share_coordinator_state_topic_segment_bytes: int = field(
        default=_SHARE_STATE.share_coordinator_state_topic_segment_bytes,
        metadata=_kafka("share.coordinator.state.topic.segment.bytes"),
    )
    share_coordinator_write_timeout_ms: int = field(
        default=_SHARE_STATE.share_coordinator_write_timeout_ms,
        metadata=_kafka("share.coordinator.write.timeout.ms"),
    )
    share_coordinator_load_buffer_size: int = field(
        default=_SHARE_STATE.share_coordinator_load_buffer_size,
        metadata=_kafka("share.coordinator.load.buffer.size"),
    )
    # Security, TLS (tickwheel.security._ssl): the ssl.* settings every TLS listener and
    # the inter-broker client use; ``listener.name.<listener>.ssl.*`` overrides them per
    # listener (``listener_properties``, ``listener_view``).
    ssl_keystore_type: str = field(default="JKS", metadata=_kafka("ssl.keystore.type"))
    ssl_keystore_location: str = field(default="", metadata=_kafka("ssl.keystore.location"))
    ssl_keystore_key: str = field(default="", repr=False, metadata=_kafka("ssl.keystore.key"))
    ssl_keystore_certificate_chain: str = field(
        default="", metadata=_kafka("ssl.keystore.certificate.chain")
    )
    ssl_key_password: str = field(default="", repr=False, metadata=_kafka("ssl.key.password"))
    ssl_truststore_type: str = field(default="JKS", metadata=_kafka("ssl.truststore.type"))
    ssl_truststore_location: str = field(default="", metadata=_kafka("ssl.truststore.location"))
    ssl_truststore_certificates: str = field(
        default="", metadata=_kafka("ssl.truststore.certificates")
    )
    ssl_client_auth: str = field(default="none", metadata=_kafka("ssl.client.auth"))
    ssl_enabled_protocols: str = field(
        default="TLSv1.2,TLSv1.3", metadata=_kafka("ssl.enabled.protocols")
    )
    ssl_cipher_suites: str = field(default="", metadata=_kafka("ssl.cipher.suites"))
    ssl_endpoint_identification_algorithm: str = field(
        default="https", metadata=_kafka("ssl.endpoint.identification.algorithm")
    )
    ssl_principal_mapping_rules: str = field(
        default="DEFAULT", metadata=_kafka("ssl.principal.mapping.rules")
    )
    # acl: the authorizer; an empty class name authorizes nothing (all allowed).
    authorizer_class_name: str = field(default="", metadata=_kafka("authorizer.class.name"))
    super_users: str = field(default="", metadata=_kafka("super.users"))
    allow_everyone_if_no_acl_found: bool = field(
        default=False, metadata=_kafka("allow.everyone.if.no.acl.found")
    )
    # SASL (tickwheel.security.SaslListenerConfig reads these; each may also be set for
    # one listener under ``listener.name.<listener>.``, kept in ``listener_properties``).
    # Kafka's default mechanism GSSAPI is not served: a SASL listener needs this set.
    sasl_enabled_mechanisms: str = field(
        default="GSSAPI", metadata=_kafka("sasl.enabled.mechanisms")
    )
    sasl_mechanism_inter_broker_protocol: str = field(
        default="GSSAPI", metadata=_kafka("sasl.mechanism.inter.broker.protocol")
    )
    sasl_jaas_config: str = field(default="", repr=False, metadata=_kafka("sasl.jaas.config"))
    connections_max_reauth_ms: int = field(default=0, metadata=_kafka("connections.max.reauth.ms"))
    connection_failed_authentication_delay_ms: int = field(
        default=100, metadata=_kafka("connection.failed.authentication.delay.ms")
    )
    # Not one property: the ``listener.name.<listener>.<property>`` settings as given,
    # each a listener's own value of a property (its JAAS line; ``listener_view``).
    listener_properties: Mapping[str, str] = field(default_factory=dict, repr=False, metadata={})
    # Kafka makes the cluster id (``kafka-storage format``, or the first broker in
    # ZooKeeper mode); empty means the same here (``_meta_properties``).
    cluster_id: str = field(default="", metadata=_kafka("cluster.id"))
    # Not a Kafka property: Kafka exports metrics over JMX, tickwheel over HTTP in
    # Prometheus's format; -1 disables the endpoint, 0 picks a free port.
    metrics_port: int = field(default=-1, metadata=_kafka("tickwheel.metrics.port"))
    # Not a Kafka property: the fault plan's HTTP endpoint beside /metrics
    # (``tickwheel.faults``); off, since it makes the broker fail on demand.
    faults_endpoint_enable: bool = field(
        default=False, metadata=_kafka("tickwheel.faults.endpoint.enable")
    )
    # Not a Kafka property: Confluent Schema Registry's ``listeners``, served by the broker
    # (``tickwheel.registry``); empty: no registry.
    schema_registry_listeners: str = field(default="", metadata=_kafka("schema.registry.listeners"))
    # NONE, or BASIC: HTTP basic authentication against the broker's SCRAM users.
    schema_registry_authentication_method: str = field(
        default="NONE", metadata=_kafka("schema.registry.authentication.method")
    )
    # Not a setting: where each property named here came from (``source``).
    sources: Mapping[str, ConfigSource] = field(
        default_factory=dict, compare=False, repr=False, metadata={}
    )

    def __post_init__(self) -> None:
        try:
            self.inter_broker_listener()
            parse_advertised(self.advertised_listeners)
        except ListenerError as exc:
            raise ConfigError(str(exc)) from exc
        for name, value in (
            ("num.partitions", self.num_partitions),
            ("socket.request.max.bytes", self.socket_request_max_bytes),
            ("sasl.server.max.receive.size", self.sasl_server_max_receive_size),
            ("max.request.partition.size.limit", self.max_request_partition_size_limit),
            ("request.timeout.ms", self.request_timeout_ms),
            ("quota.window.num", self.quota_window_num),
            ("quota.window.size.seconds", self.quota_window_size_seconds),
            ("controller.quota.window.num", self.controller_quota_window_num),
            ("controller.quota.window.size.seconds", self.controller_quota_window_size_seconds),
            ("replication.quota.window.num", self.replication_quota_window_num),
            ("replication.quota.window.size.seconds", self.replication_quota_window_size_seconds),
        ):
            if value < 1:
                raise ConfigError(f"{name} must be at least 1")
        for name, value in (
            ("leader.replication.throttled.rate", self.leader_replication_throttled_rate),
            ("follower.replication.throttled.rate", self.follower_replication_throttled_rate),
        ):
            if value < 0:
                raise ConfigError(f"{name} must be at least 0")
        if 0 < self.queued_max_request_bytes < self.socket_request_max_bytes:
            # Kafka's rule; 0 or below is no bound, as in Kafka.
            raise ConfigError(
                "queued.max.request.bytes must be at least socket.request.max.bytes "
                f"({self.socket_request_max_bytes}), or 0 or below for no bound"
            )
        self.connection_quotas()
        for spec in self.listener_specs():
            self.listener_connection_limits(spec.name)
        if self.cluster_id and (problem := cluster_id_error(self.cluster_id)) is not None:
            raise ConfigError(f"cluster.id: {problem}")
        if self.faults_endpoint_enable and self.metrics_port < 0:
            raise ConfigError(
                "tickwheel.faults.endpoint.enable needs tickwheel.metrics.port: the fault "
                "endpoint is served beside /metrics"
            )
        for name, value in (
            (
                "connection.failed.authentication.delay.ms",
                self.connection_failed_authentication_delay_ms,
            ),
            ("controlled.shutdown.max.retries", self.controlled_shutdown_max_retries),
            ("controlled.shutdown.retry.backoff.ms", self.controlled_shutdown_retry_backoff_ms),
        ):
            if value < 0:
                raise ConfigError(f"{name} must not be negative")

    @classmethod
    def from_properties(
        cls,
        properties: Mapping[str, str],
        sources: Mapping[str, ConfigSource] = {},
    ) -> BrokerConfig:
        """A config from Kafka-named string properties; unknown names are logged.

        ``sources`` says where each property came from; a property it does not name
        counts as an override (it was set on purpose, by the caller).
        """
        by_name = {f.metadata["kafka"]: f for f in _settings()}
        values: dict[str, Any] = {}
        recorded: dict[str, ConfigSource] = {}
        listener_properties: dict[str, str] = {}
        for given, raw in properties.items():
            source = sources.get(given, ConfigSource.OVERRIDE)
            name = given
            if name.startswith(LISTENER_PREFIX):
                listener_properties[name] = raw.strip()
                recorded[name] = source
                continue
            if name == "log.dir" and "log.dirs" not in properties:
                name = "log.dirs"  # Kafka's older single-directory spelling
            if name == "node.id":
                name = "broker.id"  # the KRaft spelling of the same id
            if name == "log.retention.hours":
                values["log_retention_ms"] = _parse_int(name, raw) * _MS_PER_HOUR
                recorded["log.retention.ms"] = source
                continue
            target = by_name.get(name)
            if target is None:
                _log.warning("ignoring unknown broker property %s", name)
                continue
            values[target.name] = _parse(name, raw, target.default)
            recorded[name] = source
        if values.get("zookeeper_connect") and "offsets_topic_replication_factor" not in values:
            # Kafka's default; only a single broker keeps the 1 of its server.properties.
            values["offsets_topic_replication_factor"] = CLUSTER_OFFSETS_TOPIC_REPLICATION_FACTOR
            recorded["offsets.topic.replication.factor"] = ConfigSource.DEFAULT
        if values.get("zookeeper_connect"):
            for name, cluster_default in (
                (
                    "transaction_state_log_replication_factor",
                    CLUSTER_TRANSACTION_STATE_REPLICATION_FACTOR,
                ),
                ("transaction_state_log_min_isr", CLUSTER_TRANSACTION_STATE_MIN_ISR),
                (
                    "share_coordinator_state_topic_replication_factor",
                    CLUSTER_SHARE_STATE_REPLICATION_FACTOR,
                ),
                ("share_coordinator_state_topic_min_isr", CLUSTER_SHARE_STATE_MIN_ISR),
            ):
                if name not in values:
                    values[name] = cluster_default
                    recorded[name.replace("_", ".")] = ConfigSource.DEFAULT
        return cls(**values, sources=recorded, listener_properties=listener_properties)

    @classmethod
    def from_file(cls, path: str | Path, overrides: Mapping[str, str] = {}) -> BrokerConfig:
        """A config from a ``server.properties`` file, with ``overrides`` on top."""
        return cls.load(path, {}, overrides)

    @classmethod
    def load(
        cls,
        path: str | Path | None,
        environ: Mapping[str, str],
        overrides: Mapping[str, str] = {},
    ) -> BrokerConfig:
        """A config from the file at ``path`` (if any), then ``KAFKA_*`` variables of
        ``environ``, then ``overrides``: each layer replaces the one before.

        A file that cannot be read raises ``OSError``; one that is not valid
        properties text, or a bad value anywhere, raises ``ConfigError``.
        """
        properties: dict[str, str] = {}
        sources: dict[str, ConfigSource] = {}
        layers: list[tuple[Mapping[str, str], ConfigSource]] = []
        if path is not None:
            try:
                from_file = parse_properties(Path(path).read_text(encoding="utf-8"))
            except ValueError as exc:  # a malformed escape, or text that is not UTF-8
                raise ConfigError(f"{path}: {exc}") from None
            layers.append((from_file, ConfigSource.FILE))
        layers.append((environment_properties(environ), ConfigSource.ENVIRONMENT))
        layers.append((overrides, ConfigSource.OVERRIDE))
        for layer, source in layers:
            properties.update(layer)
            sources.update(dict.fromkeys(layer, source))
        return cls.from_properties(properties, sources)

    def source(self, name: str) -> ConfigSource:
        """Where the property ``name``'s value came from.

        A config built from keyword arguments records nothing: there a value other
        than the default counts as an override.
        """
        recorded = self.sources.get(name)
        if recorded is not None:
            return recorded
        target = next((f for f in _settings() if f.metadata["kafka"] == name), None)
        if target is None or getattr(self, target.name) == target.default:
            return ConfigSource.DEFAULT
        return ConfigSource.OVERRIDE

    def with_values(self, properties: Mapping[str, str]) -> BrokerConfig:
        """This config with the Kafka-named ``properties`` replacing their values
        (dynamic broker configs); ``ConfigError`` names an unknown or bad one."""
        by_name = {f.metadata["kafka"]: f for f in _settings()}
        values: dict[str, Any] = {}
        for name, raw in properties.items():
            target = by_name.get(name)
            if target is None:
                raise ConfigError(f"unknown broker config {name!r}")
            values[target.name] = _parse(name, raw, target.default)
        return dataclasses.replace(self, **values)

    def listener_specs(self) -> tuple[ListenerSpec, ...]:
        """Every listener ``listeners`` declares, with its security protocol."""
        return parse_listeners(self.listeners, self.listener_security_protocol_map)

    def inter_broker_listener(self) -> ListenerSpec:
        """The listener other brokers connect to (``_listener_config.inter_broker_listener``)."""
        return inter_broker_listener(
            self.listener_specs(),
            self.inter_broker_listener_name,
            self.security_inter_broker_protocol,
        )

    def connection_quotas(self) -> QuotaSettings:
        """The broker-wide connection limits (``ConfigError`` names a bad property)."""
        try:
            return QuotaSettings(
                max_connections=self.max_connections,
                max_connections_per_ip=self.max_connections_per_ip,
                per_ip_overrides=parse_per_ip_overrides(self.max_connections_per_ip_overrides),
                max_connection_creation_rate=self.max_connection_creation_rate,
            )
        except QuotaConfigError as exc:
            raise ConfigError(str(exc)) from exc

    def listener_connection_limits(self, listener_name: str) -> tuple[int, int]:
        """``listener.name.<l>.max.connections`` and ``...max.connection.creation.rate``
        of one listener (no limit when unset; the broker-wide ones apply besides)."""
        prefix = listener_prefix(listener_name)
        limits = []
        for name in ("max.connections", "max.connection.creation.rate"):
            raw = self.listener_properties.get(prefix + name)
            value = NO_LIMIT if raw is None else _parse_int(prefix + name, raw)
            try:
                limits.append(check_limit(prefix + name, value))
            except QuotaConfigError as exc:
                raise ConfigError(str(exc)) from exc
        return limits[0], limits[1]

    def listener_view(self, listener_name: str) -> dict[str, str]:
        """Every property as ``listener_name`` sees it: the broker's, with the listener's
        own values (``listener.name.<l>.`` dropped) on top; other listeners' left out."""
        prefix = listener_prefix(listener_name)
        view = self.as_properties()
        for name, value in self.listener_properties.items():
            if name.startswith(prefix):
                view[name[len(prefix) :]] = value
        return view

    def topic_defaults(self) -> dict[str, str]:
        """The topic-level defaults this broker gives, under topic config names."""
        by_name = {f.metadata["kafka"]: f.name for f in _settings()}
        return {
            topic_name: _render(getattr(self, by_name[broker_name]))
            for broker_name, topic_name in BROKER_TO_TOPIC_CONFIG.items()
        }

    def as_properties(self) -> dict[str, str]:
        """Every setting under its Kafka name, as strings."""
        return {f.metadata["kafka"]: _render(getattr(self, f.name)) for f in _settings()}


def _settings() -> tuple[dataclasses.Field[Any], ...]:
    """The fields that are Kafka properties (all but ``sources``)."""
    return tuple(f for f in dataclasses.fields(BrokerConfig) if "kafka" in f.metadata)


def environment_properties(environ: Mapping[str, str]) -> dict[str, str]:
    """The properties that ``KAFKA_*`` variables of ``environ`` set, named as the
    apache/kafka image names them: the prefix dropped, lower case, ``___`` → ``-``,
    ``__`` → ``_``, ``_`` → ``.`` (``KAFKA_LOG_DIRS`` → ``log.dirs``)."""
    return {
        _property_name(name[len(_ENV_PREFIX) :]): value
        for name, value in sorted(environ.items())
        if name.startswith(_ENV_PREFIX) and name not in _ENV_EXCLUDED
    }


def _property_name(variable: str) -> str:
    # Longest runs first, as the image's envToProp does: "___" then "__" then "_".
    dash, underscore = "\x00", "\x01"  # placeholders no variable name contains
    named = variable.lower().replace("___", dash).replace("__", underscore)
    return named.replace("_", ".").replace(dash, "-").replace(underscore, "_")


def _render(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _parse_int(name: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None


def _parse(name: str, raw: str, default: object) -> object:
    if isinstance(default, bool):
        lowered = raw.strip().lower()
        if lowered not in {"true", "false"}:
            raise ConfigError(f"{name}={raw!r} is not true or false")
        return lowered == "true"
    if isinstance(default, int):
        return _parse_int(name, raw)
    if isinstance(default, float):
        try:
            return float(raw.strip())
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not a number") from None
    return raw.strip()


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    """Command-line ``NAME=VALUE`` pairs (``--override``) as properties."""
    overrides: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--override expects NAME=VALUE, got {pair!r}")
        overrides[name.strip()] = value.strip()
    return overrides
