"""Share groups in a cluster: a share-partition's leader keeps its state on another
broker (the share coordinator, over WriteShareGroupState), and when that leader is
SIGKILLed the new leader loads the state from there: accepted records stay settled,
and the records the consumer held come back with their delivery count."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kio.schema.errors import ErrorCode

from tickwheel.cluster import BrokerChannel, BrokerEndpoint, LocalCluster
from tickwheel.protocol import ApiKey, CoordinatorType

from .helpers import WAIT_S, create_topic, local_cluster, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

GROUP = "clustered-queue"
TOPIC = "clustered"
FIND_COORDINATOR_KEY = ApiKey.FIND_COORDINATOR
GROUP_KEY_TYPE, SHARE_KEY_TYPE = CoordinatorType.GROUP, CoordinatorType.SHARE
# Any share-partition key: with one state partition, every key has the same coordinator.
ANY_SHARE_KEY = "probe:AAAAAAAAAAAAAAAAAAAAAA:0"
PROPERTIES = {
    "offsets.topic.num.partitions": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.session.timeout.ms": "10000",
    "group.share.min.session.timeout.ms": "1000",
}


def _coordinator(cluster: LocalCluster, key_type: int, key: str) -> int | None:
    broker = cluster.brokers[0]
    endpoint = BrokerEndpoint(broker.broker_id, "127.0.0.1", broker.port)

    async def find() -> int | None:
        channel = BrokerChannel(endpoint, client_id="share-test", timeout_ms=10_000)
        try:
            body = await channel.request(
                FIND_COORDINATOR_KEY, 6, {"key_type": key_type, "coordinator_keys": [key]}
            )
        finally:
            await channel.close()
        (found,) = body.coordinators
        return int(found.node_id) if found.error_code == ErrorCode.none else None

    return asyncio.run(find())


def _found(cluster: LocalCluster, key_type: int, key: str, what: str) -> int:
    found: list[int] = []

    def named() -> bool:
        broker_id = _coordinator(cluster, key_type, key)
        found[:] = [] if broker_id is None else [broker_id]
        return bool(found)

    wait_for(named, what)
    return found[0]


def _poll(consumer: ShareConsumer, count: int) -> list[Message]:
    received: list[Message] = []
    deadline = time.monotonic() + WAIT_S
    while len(received) < count:
        assert time.monotonic() < deadline, f"received {len(received)} of {count}"
        for message in consumer.poll(0.2) or []:
            assert message.error() is None, message.error()
            received.append(message)
    return received


def _share_consumer(cluster: LocalCluster) -> ShareConsumer:
    return ShareConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": GROUP,
            "share.acknowledgement.mode": "explicit",
            "fetch.wait.max.ms": 500,
        }
    )


def test_a_share_partition_moves_with_its_leader_and_keeps_its_state(tmp_path: Path) -> None:
    with local_cluster(tmp_path, properties=PROPERTIES) as cluster:
        state_coordinator = _found(cluster, SHARE_KEY_TYPE, ANY_SHARE_KEY, "the share coordinator")
        group_coordinator = _found(cluster, GROUP_KEY_TYPE, GROUP, "the group coordinator")
        busy = {state_coordinator, group_coordinator}
        leader = next(b.broker_id for b in cluster.brokers if b.broker_id not in busy)
        followers = [b.broker_id for b in cluster.brokers if b.broker_id != leader]
        create_topic(cluster, TOPIC, [[leader, *followers]])
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        earliest = ConfigResource(
            ConfigResource.Type.GROUP,
            GROUP,
            incremental_configs=[
                ConfigEntry(
                    "share.auto.offset.reset",
                    "earliest",
                    incremental_operation=AlterConfigOpType.SET,
                )
            ],
        )
        admin.incremental_alter_configs([earliest])[earliest].result(WAIT_S)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        values = [f"c{i:02d}".encode() for i in range(20)]
        for value in values:
            producer.produce(TOPIC, value)
        assert producer.flush(WAIT_S) == 0

        first = _share_consumer(cluster)
        first.subscribe([TOPIC])
        delivered = _poll(first, len(values))
        for message in delivered[:10]:
            first.acknowledge(message, AcknowledgeType.ACCEPT)
        results = first.commit_sync(WAIT_S)
        assert results
        assert all(error is None for error in results.values()), results
        # The leader dies holding the other ten for ``first``.
        cluster.brokers[leader].kill()
        first.close()

        second = _share_consumer(cluster)
        second.subscribe([TOPIC])
        redelivered = _poll(second, 10)
        assert [(m.value(), m.delivery_count()) for m in redelivered] == [
            (value, 2) for value in values[10:]
        ]
        for message in redelivered:
            second.acknowledge(message, AcknowledgeType.ACCEPT)
        second.commit_sync(WAIT_S)
        producer.produce(TOPIC, b"sentinel")
        assert producer.flush(WAIT_S) == 0
        assert [m.value() for m in _poll(second, 1)] == [b"sentinel"]
        second.close()
