"""Eligible leader replicas (KIP-966) in a cluster, seen through kafka-python's
``describe_topic_partitions``: replicas that leave an ISR below min.insync.replicas
may lead when the ISR empties, without losing an acknowledged record; one that comes
back from an unclean shutdown is no longer eligible."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from tickwheel.cluster import BrokerProcess, LocalCluster
from tickwheel.replica import NO_LEADER, LeaderAndIsr

from .helpers import SESSION_TIMEOUT_MS, WAIT_S, create_topic, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

TOPIC = "eligible"
ELR_FEATURE = "eligible.leader.replicas.version"
FIRST, SECOND, THIRD = 0, 1, 2
BATCH = 50
_MS_PER_S = 1000
_REGISTER_S = SESSION_TIMEOUT_MS / _MS_PER_S + WAIT_S


def _produce(broker: BrokerProcess, first: int) -> list[bytes]:
    """``BATCH`` records acknowledged by every in-sync replica (acks=all)."""
    values = [f"record-{index}".encode() for index in range(first, first + BATCH)]
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
    for value in values:
        producer.produce(TOPIC, value=value)
    assert producer.flush(WAIT_S) == 0
    return values


def _consume(broker: BrokerProcess, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, consumer_timeout_ms=int(WAIT_S * _MS_PER_S)
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        consumer.seek_to_beginning()
        return [record.value for record in itertools.islice(consumer, count)]
    finally:
        consumer.close()


@contextlib.contextmanager
def _admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    """A kafka-python admin client of the brokers live now, reached through ``broker``."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        yield admin
    finally:
        admin.close()


def _described(broker: BrokerProcess) -> dict[str, Any]:
    """Partition 0 of the topic as ``broker`` describes it."""
    with _admin(broker) as admin:
        answer = admin.describe_topic_partitions([TOPIC])
    [topic] = answer["topics"]
    [partition] = topic["partitions"]
    described = dict(partition)
    # kafka-python reads an empty nullable array as None.
    for field in ("eligible_leader_replicas", "last_known_elr"):
        described[field] = described[field] or []
    return described


def _state(cluster: LocalCluster) -> LeaderAndIsr:
    state = cluster.partition_state(TOPIC, 0)
    assert state is not None
    return state


def _wait_state(
    cluster: LocalCluster, leader: int, isr: tuple[int, ...], elr: tuple[int, ...]
) -> None:
    """Wait until ZooKeeper holds this leader, ISR and ELR for partition 0."""

    def reached() -> bool:
        state = _state(cluster)
        return (state.leader, state.isr, state.elr) == (leader, isr, elr)

    wait_for(reached, f"leader {leader}, ISR {isr}, ELR {elr}", timeout_s=_REGISTER_S)


def test_eligible_replicas_lead_without_loss_and_an_unclean_shutdown_leaves_them(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, TOPIC, [[FIRST, SECOND, THIRD]], {"min.insync.replicas": "2"})
    first, second, third = cluster.brokers
    acked = _produce(first, 0)

    # The third leaves an ISR at min ISR: not eligible. The second leaves it below.
    third.stop()
    _wait_state(cluster, FIRST, (FIRST, SECOND), ())
    acked += _produce(first, BATCH)
    second.stop()
    _wait_state(cluster, FIRST, (FIRST,), (SECOND,))
    described = _described(first)
    assert (described["isr_nodes"], described["eligible_leader_replicas"]) == ([FIRST], [SECOND])

    # The leader stops too; the second, eligible, comes back first and leads.
    first.stop()
    second.start()
    cluster.wait_registered(SECOND, timeout_s=_REGISTER_S)
    _wait_state(cluster, SECOND, (SECOND,), (FIRST,))
    described = _described(second)
    assert (described["leader_id"], described["isr_nodes"]) == (SECOND, [SECOND])
    assert (described["eligible_leader_replicas"], described["last_known_elr"]) == ([FIRST], [])
    first.start()
    _wait_state(cluster, SECOND, (FIRST, SECOND), ())
    assert _consume(second, len(acked)) == acked

    # Killed, the first drops to the ELR; with the leader stopped as well, it comes
    # back from an unclean shutdown and is taken out of the ELR instead of leading.
    first.kill()
    # Until its session expires, ZooKeeper still counts the killed broker as live.
    wait_for(lambda: not cluster.is_registered(FIRST), "the killed broker's session to end")
    _wait_state(cluster, SECOND, (SECOND,), (FIRST,))
    second.stop()
    first.start()
    cluster.wait_registered(FIRST, timeout_s=_REGISTER_S)
    _wait_state(cluster, NO_LEADER, (), (SECOND,))
    described = _described(first)
    assert (described["leader_id"], described["isr_nodes"]) == (NO_LEADER, [])
    assert (described["eligible_leader_replicas"], described["last_known_elr"]) == (
        [SECOND],
        [SECOND],
    )
    second.start()
    _wait_state(cluster, SECOND, (FIRST, SECOND), ())
    assert _consume(first, len(acked)) == acked

    # A new min.insync.replicas for the topic clears its ELR (Kafka's ClearElrRecord),
    # and so does turning the feature off.
    first.stop()
    _wait_state(cluster, SECOND, (SECOND,), (FIRST,))
    with _admin(second) as admin:
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"min.insync.replicas": "3"})]
        )
    _wait_state(cluster, SECOND, (SECOND,), ())
    first.start()
    _wait_state(cluster, SECOND, (FIRST, SECOND), ())
    first.stop()
    _wait_state(cluster, SECOND, (SECOND,), (FIRST,))
    with _admin(second) as admin:
        assert admin.update_features({ELR_FEATURE: ("SAFE_DOWNGRADE", 0)}) == {ELR_FEATURE: "OK"}
    _wait_state(cluster, SECOND, (SECOND,), ())
