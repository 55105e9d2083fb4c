"""``ShareCoordinatorConfig``: the share coordinator's settings, with Kafka's names.

``share.coordinator.state.topic.*`` shape ``__share_group_state`` when it is created
(partitions, replication factor, ``min.insync.replicas``, segment size; compacted);
``share.coordinator.write.timeout.ms`` bounds one state write (an append with acks=all)
and ``share.coordinator.load.buffer.size`` is the read size when a partition is loaded.
Kafka's defaults, except that a single broker creates the topic with one replica and
``min.insync.replicas=1`` (the broker config puts Kafka's 3 and 2 in place in a cluster,
``CLUSTER_SHARE_STATE_*``, as it does for the other internal topics).

Immutable; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from tickwheel._settings import int_settings

_MIB = 1024 * 1024

CLUSTER_SHARE_STATE_REPLICATION_FACTOR = 3
"""Kafka's default ``share.coordinator.state.topic.replication.factor``."""
CLUSTER_SHARE_STATE_MIN_ISR = 2
"""Kafka's default ``share.coordinator.state.topic.min.isr``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareCoordinatorConfig:
    """Settings; each field is the Kafka property with dots as underscores."""

    share_coordinator_state_topic_num_partitions: int = 50
    share_coordinator_state_topic_replication_factor: int = 1
    share_coordinator_state_topic_min_isr: int = 1
    share_coordinator_state_topic_segment_bytes: int = 100 * _MIB
    share_coordinator_write_timeout_ms: int = 5000
    share_coordinator_load_buffer_size: int = 5 * _MIB

    def __post_init__(self) -> None:
        for config_field in fields(self):
            if getattr(self, config_field.name) <= 0:
                name = config_field.name.replace("_", ".")
                raise ValueError(f"{name} must be positive")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> ShareCoordinatorConfig:
        """Build from Kafka's dotted property names; other properties are ignored."""
        return cls(**int_settings(cls, properties))

    def topic_configs(self) -> dict[str, str]:
        """The configs ``__share_group_state`` is created with (Kafka's)."""
        return {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "min.insync.replicas": str(self.share_coordinator_state_topic_min_isr),
            "segment.bytes": str(self.share_coordinator_state_topic_segment_bytes),
            "unclean.leader.election.enable": "false",
        }
