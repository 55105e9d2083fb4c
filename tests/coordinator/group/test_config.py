"""``GroupConfig`` from Kafka's properties, as a broker hands them over."""

from __future__ import annotations

import pytest

from tickwheel.coordinator.group import CLUSTER_OFFSETS_TOPIC_REPLICATION_FACTOR, GroupConfig
from tickwheel.server import BrokerConfig


def test_kafka_defaults_for_offset_retention() -> None:
    config = GroupConfig()
    assert config.offsets_retention_minutes == 10_080
    assert config.offsets_retention_ms == 7 * 24 * 3600 * 1000
    assert config.offsets_retention_check_interval_ms == 600_000


def test_retention_is_read_in_minutes_and_held_in_milliseconds() -> None:
    config = GroupConfig.from_properties(
        {"offsets.retention.minutes": "3", "offsets.retention.check.interval.ms": "200"}
    )
    assert config.offsets_retention_ms == 180_000
    assert config.offsets_retention_check_interval_ms == 200


@pytest.mark.parametrize(
    "properties",
    [{"offsets.retention.minutes": "0"}, {"offsets.retention.check.interval.ms": "0"}],
)
def test_retention_settings_must_be_positive(properties: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        GroupConfig.from_properties(properties)


def test_a_broker_passes_its_retention_settings_to_the_coordinator() -> None:
    broker = BrokerConfig.from_properties(
        {"offsets.retention.minutes": "5", "offsets.retention.check.interval.ms": "1000"}
    )
    config = GroupConfig.from_properties(broker.as_properties())
    assert config.offsets_retention_ms == 300_000
    assert config.offsets_retention_check_interval_ms == 1000
    assert GroupConfig.from_properties(BrokerConfig().as_properties()) == GroupConfig()


def test_offsets_topic_replication_factor_is_three_in_a_cluster_and_one_alone() -> None:
    alone = BrokerConfig.from_properties({})
    cluster = BrokerConfig.from_properties({"zookeeper.connect": "127.0.0.1:2181"})
    chosen = BrokerConfig.from_properties(
        {"zookeeper.connect": "127.0.0.1:2181", "offsets.topic.replication.factor": "2"}
    )
    assert alone.offsets_topic_replication_factor == 1
    assert cluster.offsets_topic_replication_factor == CLUSTER_OFFSETS_TOPIC_REPLICATION_FACTOR == 3
    assert chosen.offsets_topic_replication_factor == 2
