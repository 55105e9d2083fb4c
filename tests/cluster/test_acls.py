"""ACLs in a three-broker cluster: stored in ZooKeeper in Kafka's layout, and a change
made through one broker applied at once by every broker."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tickwheel.cluster import BrokerChannel, BrokerEndpoint, LocalCluster
from tickwheel.protocol import ApiKey

from .helpers import WAIT_S, create_topic, local_cluster, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

DESCRIBE_ACLS = ApiKey.DESCRIBE_ACLS
ANONYMOUS = "User:ANONYMOUS"
ACL_PROPERTIES = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    # Nobody may administer ACLs before the first one exists otherwise: the clients here
    # are all User:ANONYMOUS, and the cluster resource keeps no ACL.
    "allow.everyone.if.no.acl.found": "true",
}


@pytest.fixture
def acl_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path, properties=ACL_PROPERTIES) as running:
        yield running


async def _described_on(bootstrap_servers: str) -> list[tuple[int, str, int, str, int, int]]:
    """Every ACL one broker holds: (resource type, name, pattern, principal, op, permission)."""
    host, _, port = bootstrap_servers.rpartition(":")
    channel = BrokerChannel(
        BrokerEndpoint(-1, host, int(port)), client_id="acl-test", timeout_ms=30_000
    )
    request: dict[str, Any] = {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    try:
        response = await channel.request(DESCRIBE_ACLS, 3, request)
    finally:
        await channel.close()
    assert response.error_code == 0
    return sorted(
        (
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            a.principal,
            a.operation,
            a.permission_type,
        )
        for r in response.resources
        for a in r.acls
    )


def described_on(bootstrap_servers: str) -> list[tuple[int, str, int, str, int, int]]:
    return asyncio.run(_described_on(bootstrap_servers))


def produce_error(bootstrap_servers: str, topic: str) -> int | None:
    """The error code producing one record to ``topic`` ends with (None: delivered);
    librdkafka raises at once when its metadata already says the topic is refused."""
    producer = Producer({"bootstrap.servers": bootstrap_servers, "message.timeout.ms": 5000})
    outcome: list[KafkaError | None] = []
    try:
        producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    except KafkaException as exc:
        return int(exc.args[0].code())
    producer.flush(WAIT_S)
    return None if outcome[0] is None else int(outcome[0].code())


def test_an_acl_change_on_one_broker_applies_on_every_broker(acl_cluster: LocalCluster) -> None:
    create_topic(acl_cluster, "orders", [[0, 1, 2]])
    first = acl_cluster.brokers[0].bootstrap_servers
    admin = AdminClient({"bootstrap.servers": first})
    deny = AclBinding(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.LITERAL,
        ANONYMOUS,
        "*",
        AclOperation.WRITE,
        AclPermissionType.DENY,
    )
    allow = AclBinding(
        ResourceType.GROUP,
        "pay",
        ResourcePatternType.PREFIXED,
        "User:*",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([deny, allow]).values():
        future.result(WAIT_S)
    expected = [
        (2, "orders", 3, ANONYMOUS, int(AclOperation.WRITE.value), 2),
        (3, "pay", 4, "User:*", int(AclOperation.READ.value), 3),
    ]
    for broker in acl_cluster.brokers:
        wait_for(
            lambda b=broker.bootstrap_servers: described_on(b) == expected,
            f"broker {broker.broker_id} to hold the new ACLs",
        )

    # Kafka's ZooKeeper layout, readable by Kafka's tools.
    literal = acl_cluster.read_znode("/kafka-acl/Topic/orders")
    assert literal is not None
    assert json.loads(literal) == {
        "version": 1,
        "acls": [
            {"principal": ANONYMOUS, "permissionType": "Deny", "operation": "Write", "host": "*"}
        ],
    }
    assert acl_cluster.read_znode("/kafka-acl-extended/prefixed/Group/pay") is not None

    # A broker that restarts reads them back from ZooKeeper.
    restarted = acl_cluster.brokers[1]
    restarted.stop()
    restarted.start()
    acl_cluster.wait_registered(restarted.broker_id)
    wait_for(
        lambda: described_on(restarted.bootstrap_servers) == expected,
        "the restarted broker to hold the ACLs",
    )

    # The topic now has an ACL, so allow.everyone.if.no.acl.found no longer applies to
    # it: nothing allows even DESCRIBE, and the producer is refused.
    assert produce_error(first, "orders") == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # Deleted through another broker: gone everywhere, and from ZooKeeper.
    other = AdminClient({"bootstrap.servers": acl_cluster.brokers[2].bootstrap_servers})
    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    (deleted,) = other.delete_acls([everything]).values()
    assert sorted(map(str, deleted.result(WAIT_S))) == sorted([str(deny), str(allow)])
    for broker in acl_cluster.brokers:
        wait_for(
            lambda b=broker.bootstrap_servers: described_on(b) == [],
            f"broker {broker.broker_id} to drop the ACLs",
        )
    assert acl_cluster.read_znode("/kafka-acl/Topic/orders") is None
