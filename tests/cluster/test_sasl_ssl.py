"""A ZooKeeper cluster secured end to end: three in-process brokers replicate over a
SASL_SSL inter-broker listener (SCRAM-SHA-512 over TLS with the test CA, the broker
user a super user, the ACL authorizer on), clients log in on a SASL_SSL listener of their
own.

acks=all with min.insync.replicas=3 is delivered only once both followers fetched, so a
delivery shows that followers logged in with SCRAM over TLS and replicated. An ACL
created through one broker lets alice produce to partitions led by every broker; a SCRAM
user created through one broker logs in through each of the others.

One cluster serves the module; each test uses its own topics and users.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType

from security.certs import Certificates, write_certificates
from server.acls import FAST_CLIENT, acl, create_acls
from server.sasl import (
    ADMIN,
    ADMIN_PASSWORD,
    ALICE,
    ALICE_PASSWORD,
    PLAIN_JAAS,
    auth_error,
    client_config,
    create_scram_user,
)
from tickwheel.cluster import ZooKeeperServer
from tickwheel.server import BackgroundBroker, BrokerConfig, ConfigError

from .helpers import CLUSTER_PROPERTIES, WAIT_S, ZOOKEEPER_TICK_MS, wait_for
from .sasl import BROKERS, in_process_brokers, scram_jaas, write_scram_credential

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

INTER_BROKER_MECHANISM = "SCRAM-SHA-512"
MESSAGES = 20
LEADS_EACH_BROKER = [[b, (b + 1) % BROKERS, (b + 2) % BROKERS] for b in range(BROKERS)]
"""A replica assignment whose partition ``b`` is led by broker ``b``."""


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return write_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """ZooKeeper, holding ``admin``'s SCRAM-SHA-512 credential before any broker starts."""
    directory = tmp_path_factory.mktemp("zookeeper")
    with ZooKeeperServer(directory, tick_ms=ZOOKEEPER_TICK_MS) as server:
        write_scram_credential(server, ADMIN, ADMIN_PASSWORD, INTER_BROKER_MECHANISM)
        yield server


def cluster_properties(certificates: Certificates) -> dict[str, str]:
    """CLIENT (SASL_SSL, PLAIN and SCRAM) for clients, INTERNAL (SASL_SSL, SCRAM-SHA-512
    only, logging in as ``admin``) between brokers."""
    return {
        **certificates.broker_properties(),
        "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.client.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.mechanism.inter.broker.protocol": INTER_BROKER_MECHANISM,
        "listener.name.internal.sasl.enabled.mechanisms": INTER_BROKER_MECHANISM,
        "listener.name.internal.scram-sha-512.sasl.jaas.config": scram_jaas(ADMIN, ADMIN_PASSWORD),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{ADMIN}",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "1",
    }


@pytest.fixture(scope="module")
def brokers(
    tmp_path_factory: pytest.TempPathFactory,
    zookeeper: ZooKeeperServer,
    certificates: Certificates,
) -> Iterator[list[BackgroundBroker]]:
    base_dir = tmp_path_factory.mktemp("sasl-ssl-cluster")
    with in_process_brokers(base_dir, zookeeper, cluster_properties(certificates)) as running:
        yield running


def client_servers(*brokers: BackgroundBroker) -> str:
    return ",".join(str(b.endpoint("CLIENT")) for b in brokers)


def login(
    servers: str,
    certificates: Certificates,
    user: str = ADMIN,
    password: str = ADMIN_PASSWORD,
    mechanism: str = "PLAIN",
) -> dict[str, Any]:
    """confluent-kafka's settings for ``user`` on the CLIENT listener of ``servers``."""
    tls = certificates.client_properties("SASL_SSL")
    return {**client_config(servers, mechanism, user, password, tls), **FAST_CLIENT}


def create_topic(admin: AdminClient, name: str, config: dict[str, str] | None = None) -> None:
    topic = NewTopic(
        name, num_partitions=BROKERS, replica_assignment=LEADS_EACH_BROKER, config=config or {}
    )
    admin.create_topics([topic], operation_timeout=WAIT_S)[name].result(WAIT_S)


def delivered(config: dict[str, Any], topic: str, partition: int, value: bytes) -> bool:
    """Whether one record produced with ``config`` to ``topic``/``partition`` is delivered."""
    producer = Producer(config)
    outcome: list[KafkaError | None] = []
    try:
        producer.produce(
            topic, value, partition=partition, on_delivery=lambda e, _m: outcome.append(e)
        )
    except KafkaException:
        return False
    producer.flush(WAIT_S)
    # KafkaError refuses to be compared with None: test each outcome with ``is``.
    return len(outcome) == 1 and outcome[0] is None


def test_acks_all_with_three_in_sync_replicas_is_delivered(
    brokers: list[BackgroundBroker], certificates: Certificates
) -> None:
    config = login(client_servers(*brokers), certificates)
    create_topic(AdminClient(config), "replicated", {"min.insync.replicas": "3"})
    acks_all = {**config, "acks": "all"}
    # The followers log in over SASL_SSL and join the ISR: then every produce succeeds.
    wait_for(
        lambda: all(delivered(acks_all, "replicated", p, b"first") for p in range(BROKERS)),
        "an acks=all produce to each partition with three in-sync replicas",
    )
    producer = Producer(acks_all)
    offsets: list[int] = []
    for i in range(MESSAGES):
        producer.produce(
            "replicated",
            b"m-%d" % i,
            partition=0,
            on_delivery=lambda e, m: offsets.append(e or m.offset()),
        )
    assert producer.flush(WAIT_S) == 0
    first = offsets[0]
    assert offsets == list(range(first, first + MESSAGES))
    consumer = Consumer({**config, "group.id": "replicated-reader"})
    consumer.assign([TopicPartition("replicated", 0, first)])
    received: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(received) < MESSAGES and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                received.append(message.value() or b"")
    finally:
        consumer.close()
    assert received == [b"m-%d" % i for i in range(MESSAGES)]


def test_an_acl_created_through_one_broker_applies_on_every_broker(
    brokers: list[BackgroundBroker], certificates: Certificates
) -> None:
    create_topic(AdminClient(login(client_servers(*brokers), certificates)), "orders")
    alice = login(client_servers(*brokers), certificates, ALICE, ALICE_PASSWORD)
    assert not delivered(alice, "orders", 0, b"refused")
    first = AdminClient(login(client_servers(brokers[0]), certificates))
    create_acls(
        first, acl(ResourceType.TOPIC, "orders", AclOperation.WRITE, principal="User:alice")
    )
    # Partition b is led by broker b: each broker authorizes alice's Produce itself.
    for partition in range(BROKERS):
        wait_for(
            lambda p=partition: delivered(alice, "orders", p, b"allowed"),
            f"broker {partition} to let alice produce",
        )


def test_a_scram_user_created_through_one_broker_logs_in_through_another(
    brokers: list[BackgroundBroker], certificates: Certificates
) -> None:
    tls = certificates.client_properties("SASL_SSL")
    create_scram_user(
        client_servers(brokers[0]), "dave", "dave-secret", "SCRAM-SHA-256", settings=tls
    )

    def logs_in(broker: BackgroundBroker) -> bool:
        config = login(client_servers(broker), certificates, "dave", "dave-secret", "SCRAM-SHA-256")
        try:
            return bool(AdminClient(config).list_topics(timeout=2).brokers)
        except KafkaException:
            return False

    # librdkafka sends the request to a broker of its choice: every other one must take
    # the credential from ZooKeeper.
    for broker in brokers:
        wait_for(lambda b=broker: logs_in(b), f"dave to log in through {broker.endpoint('CLIENT')}")
    # The check means something: a wrong password is refused there.
    wrong = login(client_servers(brokers[2]), certificates, "dave", "wrong", "SCRAM-SHA-256")
    assert auth_error(wrong).code() == KafkaError._AUTHENTICATION


def test_a_sasl_listener_without_its_login_stops_a_cluster_broker_at_start(
    tmp_path: Path, zookeeper: ZooKeeperServer, certificates: Certificates
) -> None:
    """PLAIN enabled on INTERNAL with no JAAS line for it: the broker refuses to start,
    at once, although it had already joined the cluster's ZooKeeper."""
    properties = cluster_properties(certificates)
    del properties["listener.name.internal.sasl.enabled.mechanisms"]
    config = BrokerConfig.from_properties(
        {
            **CLUSTER_PROPERTIES,
            **properties,
            "broker.id": str(BROKERS),
            "log.dirs": str(tmp_path),
            "zookeeper.connect": zookeeper.connect,
        }
    )
    started = time.monotonic()
    with pytest.raises(
        ConfigError, match=r"no listener\.name\.internal\.plain\.sasl\.jaas\.config"
    ):
        BackgroundBroker(config).start()
    assert time.monotonic() - started < WAIT_S
