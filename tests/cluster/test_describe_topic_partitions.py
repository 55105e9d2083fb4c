"""DescribeTopicPartitions in a cluster: every broker answers from its metadata cache,
page by page, with each partition's replicas, ISR, leader and offline replicas."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from server.wire import WireClient
from tickwheel.cluster import LocalCluster
from tickwheel.protocol import ApiKey

from .helpers import create_topic, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

DESCRIBE_TOPIC_PARTITIONS = ApiKey.DESCRIBE_TOPIC_PARTITIONS
ASSIGNMENT = [[0, 1, 2], [1, 2, 0], [2, 0, 1]]


def _described(bootstrap_servers: str, topic: str, limit: int) -> list[Any]:
    """Every partition of ``topic``, following the cursor at ``limit`` per page."""
    client = WireClient(bootstrap_servers)
    partitions: list[Any] = []
    cursor = None
    try:
        while True:
            response = client.call(
                DESCRIBE_TOPIC_PARTITIONS,
                0,
                {"topics": [{"name": topic}], "response_partition_limit": limit, "cursor": cursor},
            )
            [answered] = response.topics
            assert answered.error_code == ErrorCode.none
            partitions += answered.partitions
            if response.next_cursor is None:
                return partitions
            assert len(answered.partitions) == limit
            cursor = {
                "topic_name": response.next_cursor.topic_name,
                "partition_index": response.next_cursor.partition_index,
            }
    finally:
        client.close()


def test_every_broker_describes_the_cluster_view(cluster: LocalCluster) -> None:
    topic = "spread"
    create_topic(cluster, topic, ASSIGNMENT)
    for broker in cluster.brokers:
        wait_for(
            lambda b=broker.bootstrap_servers: (
                [len(p.isr_nodes) for p in _described(b, topic, 2)] == [3, 3, 3]
            ),
            f"broker {broker.broker_id} to see every replica in sync",
        )
        partitions = _described(broker.bootstrap_servers, topic, 2)
        assert [list(p.replica_nodes) for p in partitions] == ASSIGNMENT
        assert [p.leader_id for p in partitions] == [r[0] for r in ASSIGNMENT]
        assert all(p.offline_replicas == () for p in partitions)

    cluster.brokers[2].kill()
    survivor = cluster.brokers[0].bootstrap_servers

    def led_by_the_others() -> bool:
        partitions = _described(survivor, topic, 2)
        return all(p.offline_replicas == (2,) and p.leader_id in (0, 1) for p in partitions)

    wait_for(led_by_the_others, "broker 2 offline and every partition led by 0 or 1")
    partitions = _described(survivor, topic, 2)
    assert all(p.error_code == ErrorCode.none and 2 not in p.isr_nodes for p in partitions)
