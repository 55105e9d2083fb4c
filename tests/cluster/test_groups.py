"""Consumer groups in a cluster: the group's coordinator is the leader of its
``__consumer_offsets`` partition, found from any broker; two confluent-kafka
``subscribe`` consumers split the partitions, and their commits replicate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConsumerPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.cluster import LocalCluster
from tickwheel.coordinator import partition_for
from tickwheel.coordinator.group import OFFSETS_TOPIC

from .helpers import CLUSTER_PROPERTIES, WAIT_S, ZOOKEEPER_TICK_MS, isr, log_bytes, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

TOPIC = "grouped"
GROUP = "cluster-group"
PARTITIONS = 4
OFFSETS_PARTITIONS = 6
REPLICATION = 3
MESSAGES_PER_ROUND = 40
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
POLL_S = 0.2

GROUP_PROPERTIES = {
    **CLUSTER_PROPERTIES,
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "offsets.topic.replication.factor": str(REPLICATION),
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture
def group_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A running three-broker cluster whose offsets topic has three replicas."""
    with LocalCluster(
        tmp_path,
        REPLICATION,
        properties=GROUP_PROPERTIES,
        chroot="/tickwheel-test",
        zookeeper_tick_ms=ZOOKEEPER_TICK_MS,
    ) as running:
        yield running


def _produce(bootstrap_servers: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all"})
    for index in range(first, first + count):
        producer.produce(TOPIC, value=str(index).encode(), partition=index % PARTITIONS)
    assert producer.flush(WAIT_S) == 0


def _consumer(bootstrap_servers: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        }
    )


def _poll_into(consumer: Consumer, seen: list[bytes]) -> None:
    """Take what one poll returns, committing it synchronously."""
    message = consumer.poll(POLL_S)
    if message is None:
        return
    assert message.error() is None, message.error()
    seen.append(message.value())
    consumer.commit(message, asynchronous=False)


def _committed(bootstrap_servers: str) -> dict[int, int]:
    reader = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": GROUP})
    try:
        partitions = [ConsumerPartition(TOPIC, p) for p in range(PARTITIONS)]
        return {tp.partition: tp.offset for tp in reader.committed(partitions, timeout=WAIT_S)}
    finally:
        reader.close()


def test_subscribed_consumers_split_partitions_and_commits_replicate(
    group_cluster: LocalCluster,
) -> None:
    cluster = group_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, REPLICATION)])[TOPIC].result(WAIT_S)
    _produce(cluster.bootstrap_servers, 0, MESSAGES_PER_ROUND)

    # Each consumer bootstraps from a different broker: FindCoordinator must send both
    # to the leader of the group's offsets partition, wherever that is.
    first = _consumer(cluster.brokers[0].bootstrap_servers)
    second = _consumer(cluster.brokers[1].bootstrap_servers)
    first_seen: list[bytes] = []
    second_seen: list[bytes] = []
    try:
        first.subscribe([TOPIC])

        def first_round_read() -> bool:
            _poll_into(first, first_seen)
            return len(first_seen) >= MESSAGES_PER_ROUND

        wait_for(first_round_read, "the first consumer to read the first round")
        assert len(first.assignment()) == PARTITIONS
        assert sum(_committed(cluster.bootstrap_servers).values()) == MESSAGES_PER_ROUND

        second.subscribe([TOPIC])

        def split() -> bool:
            _poll_into(first, first_seen)
            _poll_into(second, second_seen)
            mine = {tp.partition for tp in first.assignment()}
            theirs = {tp.partition for tp in second.assignment()}
            return bool(mine) and bool(theirs) and mine | theirs == set(range(PARTITIONS))

        wait_for(split, "the two consumers to split the partitions")
        mine = {tp.partition for tp in first.assignment()}
        theirs = {tp.partition for tp in second.assignment()}
        assert not mine & theirs

        _produce(cluster.bootstrap_servers, MESSAGES_PER_ROUND, MESSAGES_PER_ROUND)
        total = 2 * MESSAGES_PER_ROUND

        def second_round_read() -> bool:
            _poll_into(first, first_seen)
            _poll_into(second, second_seen)
            return len(first_seen) + len(second_seen) >= total

        wait_for(second_round_read, "both consumers to read the second round")
        assert second_seen, "the second consumer read nothing"
        everything = first_seen + second_seen
        assert sorted(everything) == sorted(str(i).encode() for i in range(total))
    finally:
        first.close()
        second.close()

    # Commits went through the group's coordinator: every partition is committed to
    # its end, read back through a broker the consumers did not bootstrap from.
    committed = _committed(cluster.brokers[2].bootstrap_servers)
    assert sum(committed.values()) == total
    assert all(offset > 0 for offset in committed.values())

    # ... and were appended with acks=all: the offsets partition has every replica
    # in sync, and every replica's log holds the same bytes.
    offsets_partition = partition_for(GROUP, OFFSETS_PARTITIONS)
    assert sorted(isr(cluster, OFFSETS_TOPIC, offsets_partition)) == list(range(REPLICATION))
    logs = [b.log_dir for b in cluster.brokers]
    wait_for(
        lambda: len({log_bytes(d, OFFSETS_TOPIC, offsets_partition) for d in logs}) == 1,
        "every replica of the group's offsets partition to hold the same log",
    )
    assert log_bytes(logs[0], OFFSETS_TOPIC, offsets_partition)


def test_committed_offsets_survive_the_death_of_the_coordinator(
    group_cluster: LocalCluster,
) -> None:
    cluster = group_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, REPLICATION)])[TOPIC].result(WAIT_S)
    _produce(cluster.bootstrap_servers, 0, MESSAGES_PER_ROUND)
    consumer = _consumer(cluster.bootstrap_servers)
    seen: list[bytes] = []
    try:
        consumer.subscribe([TOPIC])

        def read_all() -> bool:
            _poll_into(consumer, seen)
            return len(seen) >= MESSAGES_PER_ROUND

        wait_for(read_all, "the consumer to read and commit everything")
    finally:
        consumer.close()
    before = _committed(cluster.bootstrap_servers)
    assert sum(before.values()) == MESSAGES_PER_ROUND

    offsets_partition = partition_for(GROUP, OFFSETS_PARTITIONS)
    coordinator = _offsets_leader(cluster, offsets_partition)
    cluster.brokers[coordinator].kill()
    wait_for(
        lambda: _offsets_leader(cluster, offsets_partition) not in (coordinator, -1),
        "a new leader of the group's offsets partition",
        timeout_s=SESSION_TIMEOUT_MS / 1000 + WAIT_S,
    )
    # The new coordinator loaded the group from its replica of the partition.
    assert _committed(cluster.bootstrap_servers) == before


def _offsets_leader(cluster: LocalCluster, partition: int) -> int:
    state = cluster.partition_state(OFFSETS_TOPIC, partition)
    assert state is not None
    return state.leader
