"""Settings of share-partitions and share sessions, under Kafka's broker property names.

Each field is a Kafka property with dots as underscores (``ShareGroupConfig`` and
``ShareCoordinatorConfig`` in Kafka), with Kafka 4.1's defaults and ranges. The lock
duration a group gets is the group config ``share.record.lock.duration.ms`` when set,
else ``group.share.record.lock.duration.ms``; either must lie within
``group.share.min.record.lock.duration.ms`` .. ``group.share.max.record.lock.duration.ms``.

Frozen value object; share it freely between threads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from tickwheel._settings import int_settings

SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
"""Group config: where a share group starts on a partition it never consumed."""
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
"""Group config: the acquisition lock duration of the group's records."""
SHARE_ISOLATION_LEVEL = "share.isolation.level"
"""Group config: ``read_uncommitted`` (the default) or ``read_committed``."""
READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"
LATEST = "latest"
EARLIEST = "earliest"
BY_DURATION = "by_duration:"
"""``share.auto.offset.reset=by_duration:<ISO-8601 duration>``: start at the first record
no older than the duration (``by_duration:PT1H``: the last hour), else at the end."""
_ISO_DURATION = re.compile(
    r"P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?"
)
_MS_PER = {"days": 86_400_000, "hours": 3_600_000, "minutes": 60_000, "seconds": 1_000}


def by_duration_ms(reset: str) -> int | None:
    """The duration of a ``by_duration:`` reset in milliseconds; None if ``reset`` is not
    one (or its duration is not an ISO-8601 ``PnDTnHnMnS``)."""
    if not reset.startswith(BY_DURATION):
        return None
    found = _ISO_DURATION.fullmatch(reset.removeprefix(BY_DURATION))
    if found is None or not any(found.groupdict().values()):
        return None
    return round(sum(float(v) * _MS_PER[k] for k, v in found.groupdict().items() if v))


# Kafka's ranges: property -> (least, greatest).
_RANGES: Mapping[str, tuple[int, int]] = {
    "group_share_delivery_count_limit": (2, 10),
    "group_share_record_lock_duration_ms": (1_000, 3_600_000),
    "group_share_min_record_lock_duration_ms": (1_000, 30_000),
    "group_share_max_record_lock_duration_ms": (30_000, 3_600_000),
    "group_share_partition_max_record_locks": (100, 10_000),
    "group_share_max_share_sessions": (1, 2**31 - 1),
    "share_fetch_purgatory_purge_interval_requests": (1, 2**31 - 1),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareConfig:
    """Share-partition settings; each field is the Kafka property with dots as underscores."""

    group_share_delivery_count_limit: int = 5
    group_share_record_lock_duration_ms: int = 30_000
    group_share_min_record_lock_duration_ms: int = 15_000
    group_share_max_record_lock_duration_ms: int = 60_000
    group_share_partition_max_record_locks: int = 2_000
    group_share_max_share_sessions: int = 2_000
    share_fetch_purgatory_purge_interval_requests: int = 1_000

    def __post_init__(self) -> None:
        for name, (least, greatest) in _RANGES.items():
            value = getattr(self, name)
            if not least <= value <= greatest:
                prop = name.replace("_", ".")
                raise ValueError(f"{prop} must be in [{least}, {greatest}]: {value}")
        self.check_lock_duration(self.group_share_record_lock_duration_ms)

    def check_lock_duration(self, duration_ms: int) -> None:
        """ValueError unless ``duration_ms`` is within the min and max lock durations."""
        least = self.group_share_min_record_lock_duration_ms
        greatest = self.group_share_max_record_lock_duration_ms
        if not least <= duration_ms <= greatest:
            raise ValueError(
                f"record lock duration must be in [{least}, {greatest}]: {duration_ms}"
            )

    def lock_duration_ms(self, group_configs: Mapping[str, str]) -> int:
        """The lock duration of a group with configs ``group_configs`` (bad values ignored)."""
        override = group_configs.get(SHARE_RECORD_LOCK_DURATION_MS)
        if override is not None:
            try:
                duration_ms = int(override)
                self.check_lock_duration(duration_ms)
            except ValueError:
                return self.group_share_record_lock_duration_ms
            return duration_ms
        return self.group_share_record_lock_duration_ms

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> ShareConfig:
        """Build from Kafka's dotted property names; other properties are ignored."""
        return cls(**int_settings(cls, properties))
