"""Group configs in a cluster: set through one broker, kept in ZooKeeper under
``/config/groups``, and read back through every broker, including one started later."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tickwheel.cluster import LocalCluster

from .helpers import WAIT_S, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]


def _lock_duration(bootstrap_servers: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.GROUP, "clustered")
    (future,) = admin.describe_configs([resource]).values()
    return str(future.result(WAIT_S)["share.record.lock.duration.ms"].value)


def test_a_group_config_reaches_every_broker(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap_servers})
    resource = ConfigResource(
        ConfigResource.Type.GROUP,
        "clustered",
        incremental_configs=[
            ConfigEntry(
                "share.record.lock.duration.ms",
                "16000",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(WAIT_S)
    stored = cluster.read_znode("/config/groups/clustered")
    assert stored is not None
    assert json.loads(stored)["config"] == {"share.record.lock.duration.ms": "16000"}
    for broker in cluster.brokers:
        wait_for(
            lambda b=broker.bootstrap_servers: _lock_duration(b) == "16000",
            f"broker {broker.broker_id} to apply the group config",
        )
    restarted = cluster.brokers[2]
    restarted.stop()
    restarted.start()
    cluster.wait_registered(restarted.broker_id)
    wait_for(
        lambda: _lock_duration(restarted.bootstrap_servers) == "16000",
        "the restarted broker to read the group config at start-up",
    )
