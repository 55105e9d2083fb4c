"""Settings of the group coordinator, under Kafka's broker property names.

Each field is a Kafka property with dots as underscores, with one exception: the offsets'
retention is held in milliseconds (``offsets_retention_ms``) and read from Kafka's
``offsets.retention.minutes``, the way ``BrokerConfig`` reads ``log.retention.hours``
into ``log_retention_ms``. Tests build a ``GroupConfig`` with a retention of a few
hundred milliseconds; the property itself stays in whole minutes, as in Kafka.

The consumer-protocol groups' settings (KIP-848, ``group.consumer.*``) follow Kafka's
GroupCoordinatorConfig: their defaults, and its checks between them (the default session
timeout and heartbeat interval within their bounds, the interval below the timeout).
``group.consumer.assignors`` is a comma-separated list of assignor names (the first is
the default) and ``group.consumer.migration.policy`` one of ``CONSUMER_MIGRATION_POLICIES``;
both stay strings, as the properties are.

Frozen value object; share it freely between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

_INT32_MAX = 2**31 - 1
_MIB = 1024 * 1024
_MS_PER_MINUTE = 60_000

_BIDIRECTIONAL = "bidirectional"
CONSUMER_MIGRATION_POLICIES = frozenset({_BIDIRECTIONAL, "upgrade", "downgrade", "disabled"})
"""``group.consumer.migration.policy`` values (Kafka's ConsumerGroupMigrationPolicy)."""
_KNOWN_ASSIGNORS = frozenset({"uniform", "range"})

CLUSTER_OFFSETS_TOPIC_REPLICATION_FACTOR = 3
"""Kafka's default ``offsets.topic.replication.factor``, the one a ZooKeeper cluster gets."""

# Fields read from a property in another unit: field -> (property, milliseconds per unit).
_SCALED_PROPERTIES: Mapping[str, tuple[str, int]] = {
    "offsets_retention_ms": ("offsets.retention.minutes", _MS_PER_MINUTE),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """Coordinator settings; each field is the Kafka property with dots as underscores."""

    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = _INT32_MAX
    offsets_topic_num_partitions: int = 50
    # Kafka's default is 3 (CLUSTER_OFFSETS_TOPIC_REPLICATION_FACTOR, which a broker in
    # a ZooKeeper cluster gets), and its shipped server.properties sets 1 for a single
    # broker; a single tickwheel broker keeps 1.
    offsets_topic_replication_factor: int = 1
    offsets_topic_segment_bytes: int = 100 * _MIB
    offset_metadata_max_bytes: int = 4096
    offsets_commit_timeout_ms: int = 5_000
    # offsets.retention.minutes (Kafka: 10080, seven days), in milliseconds.
    offsets_retention_ms: int = 10_080 * _MS_PER_MINUTE
    offsets_retention_check_interval_ms: int = 600_000
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_min_session_timeout_ms: int = 45_000
    group_consumer_max_session_timeout_ms: int = 60_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_min_heartbeat_interval_ms: int = 5_000
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    group_consumer_max_size: int = _INT32_MAX
    group_consumer_assignors: str = "uniform,range"
    group_consumer_migration_policy: str = _BIDIRECTIONAL

    def __post_init__(self) -> None:
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms exceeds group.max.session.timeout.ms")
        if self.offsets_topic_num_partitions <= 0:
            raise ValueError("offsets.topic.num.partitions must be positive")
        if self.group_initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must not be negative")
        if self.group_max_size <= 0:
            raise ValueError("group.max.size must be positive")
        if self.offsets_retention_ms <= 0:
            raise ValueError("offsets.retention.minutes must be positive")
        if self.offsets_retention_check_interval_ms <= 0:
            raise ValueError("offsets.retention.check.interval.ms must be positive")
        self._check_consumer_groups()

    def _check_consumer_groups(self) -> None:
        """Kafka's GroupCoordinatorConfig checks of the ``group.consumer.*`` settings."""
        for name in (
            "group_consumer_session_timeout_ms",
            "group_consumer_min_session_timeout_ms",
            "group_consumer_max_session_timeout_ms",
            "group_consumer_heartbeat_interval_ms",
            "group_consumer_min_heartbeat_interval_ms",
            "group_consumer_max_heartbeat_interval_ms",
            "group_consumer_max_size",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', '.')} must be at least 1")
        session_ms = self.group_consumer_session_timeout_ms
        interval_ms = self.group_consumer_heartbeat_interval_ms
        if not (
            self.group_consumer_min_session_timeout_ms
            <= session_ms
            <= self.group_consumer_max_session_timeout_ms
        ):
            raise ValueError(
                "group.consumer.session.timeout.ms must be within "
                "group.consumer.min/max.session.timeout.ms"
            )
        if not (
            self.group_consumer_min_heartbeat_interval_ms
            <= interval_ms
            <= self.group_consumer_max_heartbeat_interval_ms
        ):
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be within "
                "group.consumer.min/max.heartbeat.interval.ms"
            )
        if interval_ms >= session_ms:
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be less than "
                "group.consumer.session.timeout.ms"
            )
        unknown = set(self.consumer_assignors) - _KNOWN_ASSIGNORS
        if not self.consumer_assignors or unknown:
            raise ValueError(
                f"group.consumer.assignors must name some of {sorted(_KNOWN_ASSIGNORS)}: "
                f"{self.group_consumer_assignors!r}"
            )
        policy = self.group_consumer_migration_policy.lower()
        if policy not in CONSUMER_MIGRATION_POLICIES:
            raise ValueError(f"group.consumer.migration.policy: unknown value {policy!r}")

    @property
    def consumer_assignors(self) -> tuple[str, ...]:
        """``group.consumer.assignors`` as names, the default first."""
        return tuple(
            name.strip().lower()
            for name in self.group_consumer_assignors.split(",")
            if name.strip()
        )

    def consumer_migration_allows(self, direction: str) -> bool:
        """True if ``group.consumer.migration.policy`` allows ``direction`` ("upgrade":
        classic to consumer, "downgrade": consumer to classic)."""
        policy = self.group_consumer_migration_policy.lower()
        return policy in {_BIDIRECTIONAL, direction}

    @property
    def offsets_retention_minutes(self) -> int:
        """``offsets.retention.minutes``, as Kafka's property gives it."""
        return self.offsets_retention_ms // _MS_PER_MINUTE

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> GroupConfig:
        """Build from Kafka's dotted property names; other properties are ignored."""
        values: dict[str, int | str] = {}
        for config_field in fields(cls):
            name, scale = _SCALED_PROPERTIES.get(
                config_field.name, (config_field.name.replace("_", "."), 1)
            )
            if name in properties and isinstance(config_field.default, str):
                values[config_field.name] = properties[name].strip()
            elif name in properties:
                try:
                    values[config_field.name] = int(properties[name]) * scale
                except ValueError as error:
                    raise ValueError(f"{name} must be an integer: {properties[name]!r}") from error
        return cls(**values)  # type: ignore[arg-type]
