"""Group configs (KIP-848, KIP-932): per-group overrides of the broker's group settings.

Kafka 4 lets an administrator set a few settings for one group through
IncrementalAlterConfigs on a GROUP resource (resource type 32) and read them back with
DescribeConfigs: each is the group-level twin of a broker setting, which gives its
default, and must lie within that setting's broker bounds:

=================================  ===============================================
group config                       broker default (and bounds)
=================================  ===============================================
consumer.session.timeout.ms        group.consumer.session.timeout.ms (min/max)
consumer.heartbeat.interval.ms     group.consumer.heartbeat.interval.ms (min/max)
share.session.timeout.ms           group.share.session.timeout.ms (min/max)
share.heartbeat.interval.ms        group.share.heartbeat.interval.ms (min/max)
share.record.lock.duration.ms      group.share.record.lock.duration.ms (min/max)
share.auto.offset.reset            latest (earliest, latest, by_duration:<ISO-8601>)
share.isolation.level              read_uncommitted (read_committed)
=================================  ===============================================

The coordinators read a group's overrides through ``GroupConfigs.overrides_of`` when
they need them (a member's next session, a share-partition's next lock), each falling
back to the broker setting it already holds, so a change applies without a restart and
no default is computed per request; ``GroupConfigs.effective`` is what DescribeConfigs
shows. Overrides are kept by the ``BrokerContext``: in the
registry file on a single node, under ``/config/groups/<group>`` in ZooKeeper in a
cluster (Kafka keeps them in its metadata log).

Pure functions over mappings; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tickwheel.share_delivery import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    by_duration_ms,
)

GROUP_RESOURCE = 32
"""Kafka's ``ConfigResource.Type.GROUP``."""

_ISOLATION_LEVELS = frozenset({READ_UNCOMMITTED, READ_COMMITTED})


class GroupConfigError(ValueError):
    """A group config that is unknown or out of its bounds."""


@dataclass(frozen=True, slots=True)
class _Bounded:
    """A duration whose default and bounds are broker settings."""

    broker_name: str
    default_ms: int
    min_name: str
    min_default_ms: int
    max_name: str
    max_default_ms: int


_BOUNDED: Mapping[str, _Bounded] = {
    "consumer.session.timeout.ms": _Bounded(
        "group.consumer.session.timeout.ms",
        45_000,
        "group.consumer.min.session.timeout.ms",
        45_000,
        "group.consumer.max.session.timeout.ms",
        60_000,
    ),
    "consumer.heartbeat.interval.ms": _Bounded(
        "group.consumer.heartbeat.interval.ms",
        5_000,
        "group.consumer.min.heartbeat.interval.ms",
        5_000,
        "group.consumer.max.heartbeat.interval.ms",
        15_000,
    ),
    "share.session.timeout.ms": _Bounded(
        "group.share.session.timeout.ms",
        45_000,
        "group.share.min.session.timeout.ms",
        45_000,
        "group.share.max.session.timeout.ms",
        60_000,
    ),
    "share.heartbeat.interval.ms": _Bounded(
        "group.share.heartbeat.interval.ms",
        5_000,
        "group.share.min.heartbeat.interval.ms",
        5_000,
        "group.share.max.heartbeat.interval.ms",
        15_000,
    ),
    "share.record.lock.duration.ms": _Bounded(
        "group.share.record.lock.duration.ms",
        30_000,
        "group.share.min.record.lock.duration.ms",
        15_000,
        "group.share.max.record.lock.duration.ms",
        60_000,
    ),
}
_CHOICES: Mapping[str, tuple[str, Callable[[str], bool]]] = {
    "share.auto.offset.reset": (
        LATEST,
        lambda value: value in {EARLIEST, LATEST} or by_duration_ms(value) is not None,
    ),
    "share.isolation.level": (READ_UNCOMMITTED, lambda value: value in _ISOLATION_LEVELS),
}
GROUP_CONFIG_NAMES = frozenset(_BOUNDED) | frozenset(_CHOICES)
GROUP_INT_CONFIGS = frozenset(_BOUNDED)
"""The group configs of Kafka's INT type; the others are STRINGs."""
_NO_OVERRIDES: Mapping[str, str] = {}


def _broker_int(broker: Mapping[str, str], name: str, default: int) -> int:
    raw = broker.get(name)
    try:
        return default if raw is None else int(raw)
    except ValueError:
        return default


def group_defaults(broker: Mapping[str, str]) -> dict[str, str]:
    """Every group config's default, from the broker's properties ``broker``."""
    defaults = {
        name: str(_broker_int(broker, spec.broker_name, spec.default_ms))
        for name, spec in _BOUNDED.items()
    }
    defaults.update({name: default for name, (default, _valid) in _CHOICES.items()})
    return defaults


def validate_group_overrides(overrides: Mapping[str, str], broker: Mapping[str, str]) -> None:
    """Raise ``GroupConfigError`` naming the first unknown or invalid override."""
    for name, value in overrides.items():
        if name in _BOUNDED:
            spec = _BOUNDED[name]
            try:
                number = int(value)
            except ValueError:
                raise GroupConfigError(
                    f"Invalid value {value} for configuration {name}: Not a number of type INT"
                ) from None
            low = _broker_int(broker, spec.min_name, spec.min_default_ms)
            high = _broker_int(broker, spec.max_name, spec.max_default_ms)
            if not low <= number <= high:
                raise GroupConfigError(
                    f"{name} must be between {low} ({spec.min_name}) and "
                    f"{high} ({spec.max_name}), got {number}"
                )
        elif name in _CHOICES:
            _default, valid = _CHOICES[name]
            if not valid(value):
                raise GroupConfigError(f"Invalid value {value} for configuration {name}")
        else:
            raise GroupConfigError(f"Unknown group config name: {name}")


class GroupConfigs:
    """Every group's overrides, and the values a coordinator should use."""

    def __init__(self, broker_properties: Callable[[], Mapping[str, str]]) -> None:
        self._broker_properties = broker_properties
        self.overrides: dict[str, dict[str, str]] = {}

    def set(self, group_id: str, overrides: Mapping[str, str]) -> None:
        """Replace the overrides of ``group_id`` (none: forget the group)."""
        if overrides:
            self.overrides[group_id] = dict(overrides)
        else:
            self.overrides.pop(group_id, None)

    def overrides_of(self, group_id: str) -> Mapping[str, str]:
        """The overrides of ``group_id`` alone (what the coordinators read: each falls
        back to its own broker setting, so no default is computed per request)."""
        return self.overrides.get(group_id, _NO_OVERRIDES)

    def effective(self, group_id: str) -> dict[str, str]:
        """The value of every group config for ``group_id``: override, else default."""
        return {
            **group_defaults(self._broker_properties()),
            **self.overrides.get(group_id, {}),
        }
