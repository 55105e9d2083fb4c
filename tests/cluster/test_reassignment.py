"""Partition reassignment in a three-broker cluster, through kafka-python's admin client:
a replica moves to another broker under acks=all load and nothing acknowledged is lost."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition

from tickwheel.cluster import LocalCluster, TopicAssignment, decode_topic, topic_path

from .helpers import WAIT_S, create_topic, isr, log_bytes, read_all, wait_for, writing

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

TOPIC = "moving"
MOVED = KafkaTopicPartition(TOPIC, 0)


@pytest.fixture
def admin(cluster: LocalCluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    yield client
    client.close()


def _assigned(cluster: LocalCluster) -> TopicAssignment:
    """The topic's assignment as ZooKeeper holds it."""
    data = cluster.read_znode(topic_path(TOPIC))
    assert data is not None
    return decode_topic(TOPIC, data)


def test_a_replica_moves_under_acks_all_load_and_no_acknowledged_record_is_lost(
    cluster: LocalCluster, admin: KafkaAdminClient
) -> None:
    create_topic(cluster, TOPIC, [[0, 1]], {"min.insync.replicas": "2"})
    with writing(cluster, TOPIC, 1) as writer:
        wait_for(lambda: writer.acked_since(0, 200), "records acknowledged before the move")
        assert admin.alter_partition_reassignments({MOVED: [2, 1]}) == {MOVED: None}
        wait_for(lambda: admin.list_partition_reassignments() == {}, "the move to complete")
        assert _assigned(cluster) == TopicAssignment({0: (2, 1)}, _assigned(cluster).topic_id)
        assert sorted(isr(cluster, TOPIC)) == [1, 2]
        moved_at = len(writer.acked[0])
        wait_for(lambda: writer.acked_since(0, moved_at + 200), "records acknowledged after it")
    assert not writer.failed
    values = read_all(cluster, TOPIC, 0)
    assert values == sorted(set(values)), "duplicated or reordered"
    assert set(writer.acked[0]) <= set(values), "acknowledged records lost"
    wait_for(
        lambda: (
            log_bytes(cluster.brokers[2].log_dir, TOPIC)
            == log_bytes(cluster.brokers[1].log_dir, TOPIC)
        ),
        "identical replicas on brokers 1 and 2",
    )
    wait_for(
        lambda: not (cluster.brokers[0].log_dir / f"{TOPIC}-0").exists(),
        "broker 0 to delete its replica",
        timeout_s=WAIT_S,
    )
