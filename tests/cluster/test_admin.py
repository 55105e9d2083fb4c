"""Topic administration and request routing in a cluster: only the leader serves a
partition; CreatePartitions and DeleteTopics go through ZooKeeper to every broker."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KafkaNewTopic
from kio.schema.errors import ErrorCode

from tickwheel.cluster import LocalCluster
from tickwheel.protocol import decode_topic_id
from tickwheel.server._meta_properties import new_cluster_id

from .helpers import (
    WAIT_S,
    create_topic,
    fetch_raw,
    init_producer_id,
    produce_raw,
    wait_for,
)

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]


def test_only_the_leader_serves_a_partition(cluster: LocalCluster) -> None:
    topic = "led-by-0"
    create_topic(cluster, topic, [[0, 1]])  # broker 1 follows; broker 2 does not host it
    leader, follower, outsider = (b.bootstrap_servers for b in cluster.brokers)
    assert produce_raw(leader, topic, b"x", timeout_ms=10_000)[0] == ErrorCode.none
    for broker in (follower, outsider):
        error, _ = produce_raw(broker, topic, b"x", timeout_ms=10_000)
        assert error == ErrorCode.not_leader_or_follower
        assert fetch_raw(broker, topic) == ErrorCode.not_leader_or_follower
    assert fetch_raw(leader, topic) == ErrorCode.none
    assert produce_raw(leader, "no-such-topic", b"x", timeout_ms=10_000)[0] == (
        ErrorCode.unknown_topic_or_partition
    )


def test_partitions_are_added_and_topics_deleted_everywhere(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    topic = "grown"
    # kafka-python asks CreateTopics v7, whose answer names the new topic's id.
    creator = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        (created,) = creator.create_topics([KafkaNewTopic(topic, 1, 2)])["topics"]
    finally:
        creator.close()
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(WAIT_S)
    assert decode_topic_id(str(described.topic_id)) == uuid.UUID(created["topic_id"])
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(WAIT_S)

    def described() -> dict[int, list[int]]:
        metadata = admin.list_topics(topic, timeout=WAIT_S).topics[topic]
        return {p.id: p.replicas for p in metadata.partitions.values() if p.leader >= 0}

    wait_for(lambda: len(described()) == 3, "three partitions with leaders")
    assert all(len(replicas) == 2 for replicas in described().values())
    refused = admin.create_topics([NewTopic("too-wide", 1, 4)])["too-wide"]
    with pytest.raises(Exception, match="INVALID_REPLICATION_FACTOR"):
        refused.result(WAIT_S)

    admin.delete_topics([topic])[topic].result(WAIT_S)
    wait_for(
        lambda: all(not list(b.log_dir.glob(f"{topic}-*")) for b in cluster.brokers),
        "every replica's log to be deleted",
    )
    assert topic not in admin.list_topics(timeout=WAIT_S).topics
    assert cluster.partition_state(topic, 0) is None


def test_producer_ids_are_unique_across_the_cluster(cluster: LocalCluster) -> None:
    ids = [init_producer_id(b.bootstrap_servers) for b in cluster.brokers for _ in range(3)]
    assert len(set(ids)) == len(ids)
    block = cluster.read_znode("/latest_producer_id_block")
    assert block is not None
    assert json.loads(block)["version"] == 1

    topic = "idempotent"
    create_topic(cluster, topic, [[0, 1, 2]])
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True}
    )
    for index in range(100):
        producer.produce(topic, value=f"exactly-once-{index}".encode())
    assert producer.flush(WAIT_S) == 0


def test_every_broker_keeps_zookeepers_cluster_id_and_refuses_another(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    stored = cluster.read_znode("/cluster/id")
    assert stored is not None
    cluster_id = json.loads(stored)["id"]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    described = admin.describe_cluster(request_timeout=WAIT_S).result(WAIT_S)
    assert described.cluster_id == cluster_id
    assert sorted(node.id for node in described.nodes) == [0, 1, 2]
    for broker in cluster.brokers:
        text = (broker.log_dir / "meta.properties").read_text(encoding="utf-8")
        assert f"cluster.id={cluster_id}\n" in text
        assert f"broker.id={broker.broker_id}\n" in text
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "meta.properties").write_text(
        f"version=0\nbroker.id=9\ncluster.id={new_cluster_id()}\n", encoding="utf-8"
    )
    overrides = {
        "broker.id": "9",
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(foreign),
        "zookeeper.connect": cluster.zookeeper_connect,
    }
    command = [sys.executable, "-m", "tickwheel.cli", "serve"]
    for name, value in overrides.items():
        command += ["--override", f"{name}={value}"]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_S, check=False)
    assert refused.returncode == 2, refused.stderr
    assert "belong to another cluster" in refused.stderr
    assert not cluster.is_registered(9)
