"""A cluster whose brokers replicate over TLS: clients on a PLAINTEXT listener, followers
on an SSL inter-broker listener that requires their certificate.

acks=all with min.insync.replicas=2 succeeds only if the followers fetch, so a
delivered message shows that they fetched over TLS, presenting the broker key store as
their client certificate. A consumer group then finds its coordinator on the PLAINTEXT
listener and commits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from security.certs import write_certificates
from tickwheel.cluster import LocalCluster

from .helpers import CLUSTER_PROPERTIES, WAIT_S, ZOOKEEPER_TICK_MS, create_topic, isr, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

TOPIC = "replicated-over-tls"
MESSAGES = 50


@pytest.fixture
def tls_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """Three brokers: PLAINTEXT for clients, INTERNAL (SSL, client certificates
    required) between brokers."""
    certificates = write_certificates(tmp_path / "certs")
    properties = {
        **CLUSTER_PROPERTIES,
        **certificates.broker_properties(),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.internal.ssl.client.auth": "required",
        "group.initial.rebalance.delay.ms": "0",
    }
    cluster = LocalCluster(
        tmp_path / "cluster",
        3,
        properties=properties,
        chroot="/tickwheel-tls-test",
        zookeeper_tick_ms=ZOOKEEPER_TICK_MS,
        listeners=("PLAINTEXT", "INTERNAL"),
    )
    with cluster:
        yield cluster
    for broker in cluster.brokers:
        lines = broker.output.read_text(encoding="utf-8", errors="replace").splitlines()
        print(f"--- broker {broker.broker_id} ({broker.output}) ---")
        print("\n".join(lines[-40:]))


def test_followers_replicate_over_the_ssl_inter_broker_listener(tls_cluster: LocalCluster) -> None:
    # Every listener is registered, as Kafka registers it.
    broker = tls_cluster.brokers[1]
    registration = tls_cluster.read_znode("/brokers/ids/1")
    assert registration is not None
    document = json.loads(registration)
    assert document["endpoints"] == [
        f"PLAINTEXT://{broker.address('PLAINTEXT')}",
        f"INTERNAL://{broker.address('INTERNAL')}",
    ]
    assert document["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT",
        "INTERNAL": "SSL",
    }
    # Clients are told every broker's PLAINTEXT endpoint.
    admin = AdminClient({"bootstrap.servers": tls_cluster.bootstrap_servers})
    brokers = admin.list_topics(timeout=WAIT_S).brokers
    assert sorted(f"{b.host}:{b.port}" for b in brokers.values()) == sorted(
        b.bootstrap_servers for b in tls_cluster.brokers
    )

    create_topic(tls_cluster, TOPIC, [[0, 1, 2]], {"min.insync.replicas": "2"})
    wait_for(lambda: sorted(isr(tls_cluster, TOPIC)) == [0, 1, 2], "every replica in sync")
    producer = Producer(
        {"bootstrap.servers": tls_cluster.bootstrap_servers, "acks": "all", "linger.ms": 5}
    )
    errors: list[object] = []
    for i in range(MESSAGES):
        producer.produce(
            TOPIC,
            b"m-%d" % i,
            on_delivery=lambda error, _m: errors.append(error) if error else None,
        )
    assert producer.flush(WAIT_S) == 0
    assert errors == []
    # Each follower caught up over TLS: their logs hold what the leader holds.
    leader_dir = tls_cluster.brokers[0].log_dir / f"{TOPIC}-0"
    size = sum(p.stat().st_size for p in leader_dir.glob("*.log"))
    for follower in tls_cluster.brokers[1:]:
        directory = follower.log_dir / f"{TOPIC}-0"
        wait_for(
            lambda d=directory: sum(p.stat().st_size for p in d.glob("*.log")) == size,
            f"broker {follower.broker_id} to hold the leader's log",
        )

    # A group's coordinator is found on the client's listener too (FindCoordinator).
    consumer = Consumer(
        {
            "bootstrap.servers": tls_cluster.bootstrap_servers,
            "group.id": "tls-cluster-group",
            "auto.offset.reset": "earliest",
        }
    )
    values: list[bytes] = []

    def consumed_all() -> bool:
        values.extend(m.value() or b"" for m in consumer.consume(MESSAGES, 0.2) if not m.error())
        return len(values) >= MESSAGES

    try:
        consumer.subscribe([TOPIC])
        wait_for(consumed_all, "the group to consume every message")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert values == [b"m-%d" % i for i in range(MESSAGES)]
