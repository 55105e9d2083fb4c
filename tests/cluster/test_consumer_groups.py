"""A consumer-protocol group (KIP-848) in a cluster: when its coordinator dies, the
leader of the group's ``__consumer_offsets`` partition moves, the new coordinator
rebuilds the group from its replica of the group's records, and the member goes on
consuming its partitions through the new coordinator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.cluster import LocalCluster
from tickwheel.coordinator import partition_for
from tickwheel.coordinator.group import OFFSETS_TOPIC

from .helpers import CLUSTER_PROPERTIES, SESSION_TIMEOUT_MS, WAIT_S, ZOOKEEPER_TICK_MS, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

TOPIC = "modern"
GROUP = "kip848-cluster"
PARTITIONS = 4
OFFSETS_PARTITIONS = 6
REPLICATION = 3
POLL_S = 0.2


@pytest.fixture
def consumer_group_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """Three brokers; consumer-group sessions long enough to outlive a coordinator move."""
    properties = {
        **CLUSTER_PROPERTIES,
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        "offsets.topic.replication.factor": str(REPLICATION),
        "group.consumer.session.timeout.ms": "45000",
        "group.consumer.heartbeat.interval.ms": "500",
        "group.consumer.min.heartbeat.interval.ms": "100",
    }
    with LocalCluster(
        tmp_path,
        REPLICATION,
        properties=properties,
        chroot="/tickwheel-test",
        zookeeper_tick_ms=ZOOKEEPER_TICK_MS,
    ) as running:
        yield running


def _produce(bootstrap_servers: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all"})
    for index in range(first, first + count):
        producer.produce(TOPIC, value=str(index).encode(), partition=index % PARTITIONS)
    assert producer.flush(WAIT_S) == 0


def _offsets_leader(cluster: LocalCluster, partition: int) -> int:
    state = cluster.partition_state(OFFSETS_TOPIC, partition)
    assert state is not None
    return state.leader


def test_a_consumer_group_survives_the_death_of_its_coordinator(
    consumer_group_cluster: LocalCluster,
) -> None:
    cluster = consumer_group_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, REPLICATION)])[TOPIC].result(WAIT_S)
    offsets_partition = partition_for(GROUP, OFFSETS_PARTITIONS)
    _produce(cluster.bootstrap_servers, 0, 40)
    seen: list[int] = []
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": GROUP,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )

    def read(count: int) -> bool:
        message = consumer.poll(POLL_S)
        if message is not None:
            assert message.error() is None, message.error()
            seen.append(int(message.value() or b""))
            consumer.commit(message, asynchronous=False)
        return len(seen) >= count

    try:
        consumer.subscribe([TOPIC])
        wait_for(lambda: read(40), "the member to read the first 40 messages")
        assignment = {tp.partition for tp in consumer.assignment()}
        assert assignment == set(range(PARTITIONS))

        coordinator = _offsets_leader(cluster, offsets_partition)
        survivors = [b for b in cluster.brokers if b.broker_id != coordinator]
        cluster.brokers[coordinator].kill()
        wait_for(
            lambda: _offsets_leader(cluster, offsets_partition) not in (coordinator, -1),
            "a new leader of the group's offsets partition",
            timeout_s=SESSION_TIMEOUT_MS / 1000 + WAIT_S,
        )
        _produce(",".join(b.bootstrap_servers for b in survivors), 40, 40)
        wait_for(lambda: read(80), "the member to read on through the new coordinator")
        assert sorted(seen) == list(range(80))
        # The member kept its partitions, and the new coordinator knows it.
        assert {tp.partition for tp in consumer.assignment()} == set(range(PARTITIONS))
        survivor_admin = AdminClient({"bootstrap.servers": survivors[0].bootstrap_servers})
        described = survivor_admin.describe_consumer_groups([GROUP])[GROUP].result(WAIT_S)
        assert len(described.members) == 1
    finally:
        consumer.close()
