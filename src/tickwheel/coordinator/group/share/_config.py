"""Settings of share-group membership, under Kafka's broker property names.

Kafka's ``group.share.*`` membership properties (``GroupCoordinatorConfig``), with its
defaults: a member's session timeout and heartbeat interval, each with the bounds a
group config may move it within, and the most members a share group may have.

Frozen value object; share it freely between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tickwheel._settings import int_settings


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupConfig:
    """Membership settings; each field is the Kafka property with dots as underscores."""

    group_share_session_timeout_ms: int = 45_000
    group_share_min_session_timeout_ms: int = 45_000
    group_share_max_session_timeout_ms: int = 60_000
    group_share_heartbeat_interval_ms: int = 5_000
    group_share_min_heartbeat_interval_ms: int = 5_000
    group_share_max_heartbeat_interval_ms: int = 15_000
    group_share_max_size: int = 200

    def __post_init__(self) -> None:
        for name in ("session_timeout_ms", "heartbeat_interval_ms"):
            least = getattr(self, f"group_share_min_{name}")
            value = getattr(self, f"group_share_{name}")
            greatest = getattr(self, f"group_share_max_{name}")
            if not 0 < least <= value <= greatest:
                prop = f"group.share.{name.replace('_', '.')}"
                raise ValueError(f"{prop} must be in [{least}, {greatest}]: {value}")
        if self.group_share_heartbeat_interval_ms >= self.group_share_session_timeout_ms:
            raise ValueError(
                "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"
            )
        if not 1 <= self.group_share_max_size <= 1_000:
            raise ValueError(
                f"group.share.max.size must be in [1, 1000]: {self.group_share_max_size}"
            )

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> ShareGroupConfig:
        """Build from Kafka's dotted property names; other properties are ignored."""
        return cls(**int_settings(cls, properties))
