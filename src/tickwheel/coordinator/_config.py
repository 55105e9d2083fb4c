"""Settings of the group coordinator, under Kafka's broker property names.

Each field is a Kafka property with dots as underscores, with one exception: the offsets'
retention is held in milliseconds (``offsets_retention_ms``) and read from Kafka's
``offsets.retention.minutes``, the way ``BrokerConfig`` reads ``log.retention.hours``
into ``log_retention_ms``. Tests build a ``GroupConfig`` with a retention of a few
hundred milliseconds; the property itself stays in whole minutes, as in Kafka.

Frozen value object; share it freely between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

_INT32_MAX = 2**31 - 1
_MIB = 1024 * 1024
_MS_PER_MINUTE = 60_000

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

    @property
    def offsets_retention_minutes(self) -> int:
        """``offsets.retention.minutes``, as Kafka's property gives it."""
        return self.offsets_retention_ms // _MS_PER_MINUTE

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> GroupConfig:
        """Build from Kafka's dotted property names; other properties are ignored."""
        values: dict[str, int] = {}
        for config_field in fields(cls):
            name, scale = _SCALED_PROPERTIES.get(
                config_field.name, (config_field.name.replace("_", "."), 1)
            )
            if name in properties:
                try:
                    values[config_field.name] = int(properties[name]) * scale
                except ValueError as error:
                    raise ValueError(f"{name} must be an integer: {properties[name]!r}") from error
        return cls(**values)
