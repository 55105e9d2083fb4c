"""DescribeConfigs reports where each broker setting came from, as Kafka's config_source."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource, ConfigSource

from tickwheel.server import BackgroundBroker, BrokerConfig

pytestmark = pytest.mark.integration

TIMEOUT_S = 15.0


def test_broker_config_sources(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(
        "listeners PLAINTEXT://127.0.0.1:0\n"
        f"log.dirs={tmp_path / 'logs'}\n"
        "offsets.topic.num.partitions=1\n"
        "num.partitions=2\n"
    )
    config = BrokerConfig.load(
        properties,
        {"KAFKA_NUM_PARTITIONS": "3", "KAFKA_DEFAULT_REPLICATION_FACTOR": "1"},
        {"num.partitions": "4"},
    )
    with BackgroundBroker(config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        (future,) = admin.describe_configs(
            [ConfigResource(ConfigResource.Type.BROKER, "0")]
        ).values()
        entries = future.result(TIMEOUT_S)
    assert entries["num.partitions"].value == "4"
    static = ConfigSource.STATIC_BROKER_CONFIG.value
    assert entries["num.partitions"].source == static  # --override
    assert entries["default.replication.factor"].source == static  # the environment
    assert entries["listeners"].source == static  # the file
    assert entries["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
