"""The ``group.consumer.*`` settings: Kafka's names, defaults and checks."""

from __future__ import annotations

import pytest

from tickwheel.coordinator.group import GroupConfig


def test_kafka_defaults() -> None:
    config = GroupConfig()
    assert config.group_consumer_session_timeout_ms == 45_000
    assert config.group_consumer_heartbeat_interval_ms == 5_000
    assert config.consumer_assignors == ("uniform", "range")
    assert config.consumer_migration_allows("upgrade")
    assert config.consumer_migration_allows("downgrade")


def test_read_from_kafka_property_names() -> None:
    config = GroupConfig.from_properties(
        {
            "group.consumer.session.timeout.ms": "50000",
            "group.consumer.heartbeat.interval.ms": "3000",
            "group.consumer.min.heartbeat.interval.ms": "1000",
            "group.consumer.assignors": "range, uniform",
            "group.consumer.migration.policy": "upgrade",
            "group.consumer.max.size": "8",
        }
    )
    assert config.group_consumer_session_timeout_ms == 50_000
    assert config.consumer_assignors == ("range", "uniform")
    assert config.consumer_migration_allows("upgrade")
    assert not config.consumer_migration_allows("downgrade")
    assert config.group_consumer_max_size == 8


@pytest.mark.parametrize(
    "properties",
    [
        {"group.consumer.session.timeout.ms": "1000"},  # below the minimum
        {"group.consumer.session.timeout.ms": "70000"},  # above the maximum
        {"group.consumer.heartbeat.interval.ms": "20000"},  # above the maximum
        {
            "group.consumer.session.timeout.ms": "45000",
            "group.consumer.heartbeat.interval.ms": "45000",
            "group.consumer.max.heartbeat.interval.ms": "60000",
        },  # not below the session timeout
        {"group.consumer.max.size": "0"},
        {"group.consumer.assignors": "sticky"},
        {"group.consumer.assignors": ""},
        {"group.consumer.migration.policy": "sideways"},
    ],
)
def test_out_of_bounds_settings_are_refused(properties: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"group\.consumer"):
        GroupConfig.from_properties(properties)
