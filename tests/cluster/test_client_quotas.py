"""Client quotas in a cluster: altered through one broker, kept in ZooKeeper where Kafka
keeps them (``/config/users/<user>``, ``/config/users/<user>/clients/<client>``,
``/config/clients/<client>``), described through every broker, including one restarted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from server.client_quotas import alter_quotas, describe_quotas, described_quotas
from server.wire import WireClient
from tickwheel.cluster import LocalCluster

from .helpers import WAIT_S, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

EXPECTED = {
    (("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 1024.0},
    (("user", "alice"),): {"request_percentage": 25.0},
    (("client-id", None),): {"consumer_byte_rate": 2048.0},
}


def _everything(bootstrap_servers: str) -> dict[Any, dict[str, float]]:
    client = WireClient(bootstrap_servers)
    try:
        return described_quotas(describe_quotas(client, []))
    finally:
        client.close()


def _config(cluster: LocalCluster, path: str) -> dict[str, str]:
    stored = cluster.read_znode(path)
    assert stored is not None, path
    config: dict[str, str] = json.loads(stored)["config"]
    return config


def _add_scram(bootstrap_servers: str, mechanism: ScramMechanism) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    upsertion = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(mechanism, 4096), b"alice-secret"
    )
    admin.alter_user_scram_credentials([upsertion])["alice"].result(WAIT_S)


def test_quotas_reach_every_broker_through_zookeeper(cluster: LocalCluster) -> None:
    # Alice's credentials and her quota share her znode, as in Kafka: neither write
    # loses the other.
    _add_scram(cluster.brokers[0].bootstrap_servers, ScramMechanism.SCRAM_SHA_256)
    first = WireClient(cluster.brokers[0].bootstrap_servers)
    second = WireClient(cluster.brokers[1].bootstrap_servers)
    try:
        for client, entity, key, value in [
            (first, [("user", "alice"), ("client-id", "app")], "producer_byte_rate", 1024.0),
            (second, [("user", "alice")], "request_percentage", 25.0),
            (second, [("client-id", None)], "consumer_byte_rate", 2048.0),
        ]:
            assert alter_quotas(client, entity, [(key, value)]).error_code == 0
    finally:
        first.close()
        second.close()
    assert _config(cluster, "/config/users/alice/clients/app") == {"producer_byte_rate": "1024"}
    alice = _config(cluster, "/config/users/alice")
    assert alice["request_percentage"] == "25.0"
    assert sorted(alice) == ["SCRAM-SHA-256", "request_percentage"]
    _add_scram(cluster.brokers[1].bootstrap_servers, ScramMechanism.SCRAM_SHA_512)
    alice = _config(cluster, "/config/users/alice")
    assert sorted(alice) == ["SCRAM-SHA-256", "SCRAM-SHA-512", "request_percentage"]
    assert _config(cluster, "/config/clients/<default>") == {"consumer_byte_rate": "2048"}
    for broker in cluster.brokers:
        wait_for(
            lambda b=broker.bootstrap_servers: _everything(b) == EXPECTED,
            f"broker {broker.broker_id} to apply the quotas",
        )
    restarted = cluster.brokers[2]
    restarted.stop()
    restarted.start()
    cluster.wait_registered(restarted.broker_id)
    assert _everything(restarted.bootstrap_servers) == EXPECTED
