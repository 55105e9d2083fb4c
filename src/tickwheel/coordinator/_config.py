"""Settings of the group coordinator, under Kafka's broker property names.

Frozen value object; share it freely between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

_INT32_MAX = 2**31 - 1
_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """Coordinator settings; each field is the Kafka property with dots as underscores."""

    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = _INT32_MAX
    offsets_topic_num_partitions: int = 50
    # Kafka's default is 3, and its shipped server.properties sets 1 for a single broker;
    # tickwheel starts as a single broker, so 1 it is.
    offsets_topic_replication_factor: int = 1
    offsets_topic_segment_bytes: int = 100 * _MIB
    offset_metadata_max_bytes: int = 4096
    offsets_commit_timeout_ms: int = 5_000

    def __post_init__(self) -> None:
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms exceeds group.max.session.timeout.ms")
        if self.offsets_topic_num_partitions <= 0:
            raise ValueError("offsets.topic.num.partitions must be positive")
        if self.group_initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must not be negative")
        if self.group_max_size <= 0:
            raise ValueError("group.max.size must be positive")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> GroupConfig:
        """Build from Kafka's dotted property names; other properties are ignored."""
        values: dict[str, int] = {}
        for config_field in fields(cls):
            name = config_field.name.replace("_", ".")
            if name in properties:
                try:
                    values[config_field.name] = int(properties[name])
                except ValueError as error:
                    raise ValueError(f"{name} must be an integer: {properties[name]!r}") from error
        return cls(**values)
