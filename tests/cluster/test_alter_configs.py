"""Live config changes in a cluster: stored in ZooKeeper in Kafka's layout and applied
by every broker, a topic's overrides and the cluster-wide broker defaults alike."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kio.schema.errors import ErrorCode

from tickwheel.cluster import BrokerChannel, BrokerEndpoint, LocalCluster
from tickwheel.protocol import ApiKey

from .helpers import WAIT_S, create_topic, produce_raw, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

INCREMENTAL_ALTER_CONFIGS = ApiKey.INCREMENTAL_ALTER_CONFIGS
DESCRIBE_CONFIGS = ApiKey.DESCRIBE_CONFIGS
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SET = 0
SMALL_MAX_MESSAGE_BYTES = 100
LARGE_VALUE = b"x" * 300


def _channel(bootstrap_servers: str) -> BrokerChannel:
    host, _, port = bootstrap_servers.rpartition(":")
    return BrokerChannel(
        BrokerEndpoint(-1, host, int(port)), client_id="cluster-test", timeout_ms=60_000
    )


async def _describe_topic_on(bootstrap_servers: str, topic: str) -> dict[str, tuple[str, int]]:
    """DescribeConfigs of ``topic`` asked of one broker: name -> (value, source)."""
    channel = _channel(bootstrap_servers)
    request: dict[str, Any] = {
        "resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configuration_keys": None}
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }
    try:
        response = await channel.request(DESCRIBE_CONFIGS, 4, request)
    finally:
        await channel.close()
    return {c.name: (c.value, int(c.config_source)) for c in response.results[0].configs}


async def _alter_cluster_default(bootstrap_servers: str, name: str, value: str) -> int:
    channel = _channel(bootstrap_servers)
    request: dict[str, Any] = {
        "resources": [
            {
                "resource_type": BROKER_RESOURCE,
                "resource_name": "",
                "configs": [{"name": name, "config_operation": SET, "value": value}],
            }
        ],
        "validate_only": False,
    }
    try:
        response = await channel.request(INCREMENTAL_ALTER_CONFIGS, 1, request)
    finally:
        await channel.close()
    return int(response.responses[0].error_code)


def test_config_changes_reach_every_broker(cluster: LocalCluster) -> None:
    # Each broker leads one topic and follows another.
    topics = {f"led-by-{b}": [[b, (b + 1) % 3]] for b in range(3)}
    for name, replicas in topics.items():
        create_topic(cluster, name, replicas)
    leaders = {name: cluster.brokers[r[0][0]].bootstrap_servers for name, r in topics.items()}

    def errors(value: bytes) -> set[int]:
        return {produce_raw(s, n, value, timeout_ms=5000)[0] for n, s in leaders.items()}

    assert errors(LARGE_VALUE) == {ErrorCode.none}
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap_servers})
    resources = [
        ConfigResource(
            ConfigResource.Type.TOPIC,
            name,
            incremental_configs=[
                ConfigEntry(
                    "max.message.bytes",
                    str(SMALL_MAX_MESSAGE_BYTES),
                    incremental_operation=AlterConfigOpType.SET,
                )
            ],
        )
        for name in topics
    ]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(WAIT_S)
    wait_for(
        lambda: errors(LARGE_VALUE) == {ErrorCode.message_too_large},
        "every leader to refuse a message above the new max.message.bytes",
    )
    stored = cluster.read_znode("/config/topics/led-by-0")
    assert stored is not None
    assert json.loads(stored)["config"] == {"max.message.bytes": str(SMALL_MAX_MESSAGE_BYTES)}
    change = cluster.read_znode("/config/changes/config_change_0000000000")
    assert change is not None
    assert json.loads(change)["version"] == 2

    # A cluster-wide broker default, set through broker 2, reaches every broker's logs.
    code = asyncio.run(
        _alter_cluster_default(cluster.brokers[2].bootstrap_servers, "min.insync.replicas", "3")
    )
    assert code == ErrorCode.none
    wait_for(
        lambda: errors(b"small") == {ErrorCode.not_enough_replicas},
        "every leader to refuse acks=all with two in-sync replicas of three required",
    )
    stored = cluster.read_znode("/config/brokers/<default>")
    assert stored is not None
    assert json.loads(stored)["config"] == {"min.insync.replicas": "3"}

    # A broker that restarts reads both from ZooKeeper again.
    restarted = cluster.brokers[2]
    restarted.stop()
    restarted.start()
    cluster.wait_registered(restarted.broker_id)
    configs = asyncio.run(_describe_topic_on(restarted.bootstrap_servers, "led-by-1"))
    assert configs["max.message.bytes"] == (str(SMALL_MAX_MESSAGE_BYTES), DYNAMIC_TOPIC_CONFIG)
    assert configs["min.insync.replicas"] == ("3", DYNAMIC_DEFAULT_BROKER_CONFIG)
