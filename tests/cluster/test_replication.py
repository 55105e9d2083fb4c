"""Three brokers, RF 3, acks=all: every replica's log ends byte-identical, and a
consumer bootstrapped from any broker reads every message exactly once."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicCollection
from confluent_kafka import TopicPartition as ConsumerPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.cluster import LocalCluster
from tickwheel.server._topics import decode_topic_id

from .helpers import WAIT_S, isr, log_bytes, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

TOPIC = "replicated"
PARTITIONS = 3
MESSAGES = 600


def _consume_all(bootstrap_servers: str, expected: int) -> list[bytes]:
    """Every value in the topic, read through ``bootstrap_servers`` with assign()."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "replication-test",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([ConsumerPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []

    def received_all() -> bool:
        for message in consumer.consume(expected, 0.2):
            assert message.error() is None, message.error()
            values.append(message.value())
        return len(values) >= expected

    try:
        wait_for(received_all, f"{expected} messages through {bootstrap_servers}")
        # Nothing more may come: every message once, none twice.
        assert consumer.consume(expected, 0.5) == []
    finally:
        consumer.close()
    return values


def test_acks_all_replicates_every_message_to_identical_logs(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(WAIT_S)
    metadata = admin.list_topics(TOPIC, timeout=WAIT_S).topics[TOPIC]
    assert len(metadata.partitions) == PARTITIONS
    for partition in metadata.partitions.values():
        assert sorted(partition.replicas) == [0, 1, 2]
        assert sorted(partition.isrs) == [0, 1, 2]
        assert partition.leader == partition.replicas[0]
    # Kafka's layout in ZooKeeper: the assignment, and each partition's state.
    assert sorted(isr(cluster, TOPIC, 0)) == [0, 1, 2]

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            # Spread the messages over every partition (librdkafka's default is sticky).
            "partitioner": "murmur2_random",
        }
    )
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error)

    sent = [f"message-{i}".encode() for i in range(MESSAGES)]
    for index, value in enumerate(sent):
        producer.produce(TOPIC, key=str(index).encode(), value=value, on_delivery=delivered)
    assert producer.flush(WAIT_S) == 0
    assert failures == []

    for partition in range(PARTITIONS):
        logs = [b.log_dir for b in cluster.brokers]
        wait_for(
            lambda p=partition, dirs=logs: len({log_bytes(d, TOPIC, p) for d in dirs}) == 1,
            f"identical replicas of {TOPIC}-{partition}",
        )
        assert log_bytes(logs[0], TOPIC, partition)

    for broker in cluster.brokers:
        received = _consume_all(broker.bootstrap_servers, MESSAGES)
        assert sorted(received) == sorted(sent)


def test_every_broker_names_the_topic_id_written_in_zookeeper(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("with-id", 2, 3)])["with-id"].result(WAIT_S)
    znode = cluster.read_znode("/brokers/topics/with-id")
    assert znode is not None
    written = decode_topic_id(json.loads(znode)["topic_id"])
    assert written is not None

    def described_id(broker_admin: AdminClient) -> uuid.UUID | None:
        # librdkafka prints ids in standard base64, Kafka writes them URL-safe.
        collection = TopicCollection(["with-id"])
        description = broker_admin.describe_topics(collection)["with-id"].result(WAIT_S)
        return decode_topic_id(str(description.topic_id))

    for broker in cluster.brokers:
        broker_admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        wait_for(
            lambda broker_admin=broker_admin: described_id(broker_admin) == written,
            f"broker {broker.broker_id} to name the topic id {written}",
        )


def test_metadata_names_every_broker_and_the_controller(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap_servers})
    # Each broker learns of the others through its own ZooKeeper watch, a moment after
    # they registered (as a Kafka broker learns from the controller's UpdateMetadata).
    wait_for(
        lambda: sorted(admin.list_topics(timeout=WAIT_S).brokers) == [0, 1, 2],
        "the metadata to name every registered broker",
    )
    metadata = admin.list_topics(timeout=WAIT_S)
    for broker in cluster.brokers:
        listed = metadata.brokers[broker.broker_id]
        assert (listed.host, listed.port) == ("127.0.0.1", broker.port)
    assert metadata.controller_id in {0, 1, 2}
    registration = cluster.read_znode("/brokers/ids/2")
    assert registration is not None
    endpoints = json.loads(registration)["endpoints"]
    assert endpoints == [f"PLAINTEXT://127.0.0.1:{cluster.brokers[2].port}"]
