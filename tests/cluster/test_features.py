"""Finalized features in a cluster: ZooKeeper's ``/feature`` znode as Kafka's controller
writes it, an update made on any broker advertised by every broker's ApiVersions, and
kept over a broker's restart."""

from __future__ import annotations

import json

import pytest
from kio.schema.errors import ErrorCode

from server.wire import WireClient
from tickwheel.cluster import BrokerProcess, LocalCluster
from tickwheel.protocol import ApiKey

from .helpers import SESSION_TIMEOUT_MS, WAIT_S, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

API_VERSIONS = ApiKey.API_VERSIONS
UPDATE_FEATURES = ApiKey.UPDATE_FEATURES
SAFE_DOWNGRADE, UPGRADE = 2, 1
ELR = "eligible.leader.replicas.version"
SERVED = {ELR: 1, "group.version": 1, "share.version": 1, "transaction.version": 2}
_MS_PER_S = 1000


def finalized(broker: BrokerProcess) -> tuple[int, dict[str, int]]:
    client = WireClient(broker.bootstrap_servers)
    try:
        body = client.call(
            API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"}
        )
    finally:
        client.close()
    return body.finalized_features_epoch, {
        f.name: f.max_version_level for f in body.finalized_features
    }


def update(broker: BrokerProcess, feature: str, level: int, upgrade_type: int) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        response = client.call(
            UPDATE_FEATURES,
            2,
            {
                "timeout": 10_000,
                "feature_updates": [
                    {"feature": feature, "max_version_level": level, "upgrade_type": upgrade_type}
                ],
            },
        )
    finally:
        client.close()
    assert (response.error_code, response.error_message) == (ErrorCode.none, None)


def everyone_sees(cluster: LocalCluster, expected: tuple[int, dict[str, int]]) -> None:
    wait_for(
        lambda: all(finalized(b) == expected for b in cluster.brokers),
        f"every broker to advertise {expected}",
    )


def test_an_update_on_one_broker_reaches_every_broker_and_survives_a_restart(
    cluster: LocalCluster,
) -> None:
    everyone_sees(cluster, (0, SERVED))
    controller = cluster.controller_id()
    others = [b for b in cluster.brokers if b.broker_id != controller]
    update(others[0], "group.version", 0, SAFE_DOWNGRADE)
    # The broker that took the update answers once it advertises it itself.
    assert finalized(others[0]) == (1, {ELR: 1, "share.version": 1, "transaction.version": 2})
    everyone_sees(cluster, (1, {ELR: 1, "share.version": 1, "transaction.version": 2}))
    update(others[1], "group.version", 1, UPGRADE)
    everyone_sees(cluster, (2, SERVED))
    document = cluster.read_znode("/feature")
    assert document is not None
    assert json.loads(document) == {
        "version": 2,
        "status": 1,
        "features": {name: {"max_version_level": level} for name, level in SERVED.items()},
    }

    restarted = others[1]
    restarted.stop()
    restarted.start()
    cluster.wait_registered(restarted.broker_id, timeout_s=SESSION_TIMEOUT_MS / _MS_PER_S + WAIT_S)
    assert finalized(restarted) == (2, SERVED)
