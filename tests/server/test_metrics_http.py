"""The metrics server's routing and the partition gauges' arithmetic (no sockets)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from tickwheel.replica import Partition, TopicPartition
from tickwheel.server import BrokerMetrics
from tickwheel.server._metrics import PartitionCounts, route

BROKER = 1


def metrics(partitions: list[Partition] | None = None) -> BrokerMetrics:
    return BrokerMetrics(list, lambda: 0, partitions=lambda: partitions or [])


def status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


@pytest.mark.parametrize(
    ("request_line", "expected"),
    [
        (b"GET /healthz HTTP/1.1", 200),
        (b"GET /readyz HTTP/1.0", 200),
        (b"GET /metrics HTTP/1.1", 200),
        (b"HEAD /metrics HTTP/1.1", 200),
        (b"GET / HTTP/1.1", 404),
        (b"GET /favicon.ico HTTP/1.1", 404),
        (b"POST /metrics HTTP/1.1", 400),
        (b"GET /metrics", 400),
        (b"GET metrics HTTP/1.1", 400),
        (b"\x16\x03\x01\x02\x00", 400),  # a TLS ClientHello
    ],
)
def test_routes(request_line: bytes, expected: int) -> None:
    assert status(route(metrics(), lambda: True, request_line)) == expected


def test_not_ready_is_503_while_alive_is_still_200() -> None:
    assert status(route(metrics(), lambda: False, b"GET /readyz HTTP/1.1")) == 503
    assert status(route(metrics(), lambda: False, b"GET /healthz HTTP/1.1")) == 200


def test_head_has_no_body() -> None:
    response = route(metrics(), lambda: True, b"HEAD /healthz HTTP/1.1")
    assert response.endswith(b"\r\n\r\n")
    assert b"Content-Length: 3\r\n" in response


def partition(
    index: int,
    *,
    leader: int = BROKER,
    replicas: tuple[int, ...] = (BROKER,),
    isr: set[int] | None = None,
    min_isr: int = 1,
    offline: bool = False,
) -> Partition:
    return Partition(
        topic_partition=TopicPartition("t", index),
        log=cast(Any, None),  # the gauges never read the log
        local_broker_id=BROKER,
        leader_id=leader,
        assigned_replicas=replicas,
        isr=set(replicas) if isr is None else isr,
        min_insync_replicas=min_isr,
        offline=offline,
    )


def test_partition_counts() -> None:
    partitions = [
        partition(0),
        partition(1, replicas=(1, 2, 3), isr={1, 2}),  # under-replicated
        partition(2, replicas=(1, 2), isr={1}, min_isr=2),  # under-replicated, under min ISR
        partition(3, min_isr=2),  # min.insync.replicas above its replicas
        partition(4, leader=2, replicas=(1, 2), isr={2}),  # a follower: the leader counts it
        partition(5, leader=-1, replicas=(1, 2), isr=set()),  # no leader: offline
        partition(6, offline=True),  # in an offline log directory
    ]
    assert PartitionCounts.of(partitions) == PartitionCounts(
        partition_count=7,
        leader_count=4,
        under_replicated=2,
        under_min_isr=2,
        offline_replicas=1,
        offline_partitions=2,
    )
    assert metrics(partitions).partition_counts().under_min_isr == 2


def test_a_partition_being_reassigned_counts_its_original_replicas() -> None:
    """Moving from (1, 2) to (1, 3): RS (1, 3, 2), 3 added, 2 removed (Kafka's count)."""
    moving = partition(0, replicas=(1, 3, 2), isr={1, 2})
    moving.adding_replicas, moving.removing_replicas = (3,), (2,)
    behind = partition(1, replicas=(1, 3, 2), isr={1})
    behind.adding_replicas, behind.removing_replicas = (3,), (2,)
    counts = PartitionCounts.of([moving, behind, partition(2)])
    assert (counts.under_replicated, counts.reassigning) == (1, 2)
    text = metrics([moving, behind]).render().decode()
    assert "kafka_server_ReplicaManager_ReassigningPartitions 2.0" in text
    assert "kafka_server_ReplicaManager_UnderReplicatedPartitions 1.0" in text


def test_only_the_controller_reports_offline_partitions() -> None:
    offline = [partition(0, leader=-1)]
    follower = BrokerMetrics(
        list, lambda: 0, partitions=lambda: offline, controller_active=lambda: False
    )
    text = follower.render().decode()
    assert "kafka_controller_KafkaController_ActiveControllerCount 0.0" in text
    assert "kafka_controller_KafkaController_OfflinePartitionsCount 0.0" in text
    assert "kafka_controller_KafkaController_OfflinePartitionsCount 1.0" in (
        metrics(offline).render().decode()
    )


def _samples(broker_metrics: BrokerMetrics) -> dict[str, float]:
    text = broker_metrics.render().decode()
    return {
        name: float(value)
        for line in text.splitlines()
        if line.startswith("kafka_server_BrokerTopicMetrics_")
        for name, _, value in [line.rpartition(" ")]
    }


def test_topic_rates_split_clients_from_followers_and_drop_unhosted_topics() -> None:
    hosted = [partition(0)]  # topic "t" only
    broker_metrics = metrics(hosted)
    broker_metrics.record_produce("t", 100, 3)
    broker_metrics.record_produce("t", 0, 0)  # a failed append: counted, no bytes
    broker_metrics.record_fetch("t", 40, from_follower=False)
    broker_metrics.record_fetch("t", 60, from_follower=True)
    broker_metrics.record_produce("gone", 7, 1)  # a topic no longer hosted here
    samples = _samples(broker_metrics)
    prefix = "kafka_server_BrokerTopicMetrics_"
    assert samples[prefix + 'TotalProduceRequestsPerSec_total{topic="t"}'] == 2
    assert samples[prefix + "TotalProduceRequestsPerSec_total"] == 3
    assert samples[prefix + 'BytesInPerSec_total{topic="t"}'] == 100
    assert samples[prefix + "BytesInPerSec_total"] == 107  # all topics keep what "gone" took
    assert prefix + 'BytesInPerSec_total{topic="gone"}' not in samples
    assert samples[prefix + 'MessagesInPerSec_total{topic="t"}'] == 3
    assert samples[prefix + "MessagesInPerSec_total"] == 4
    assert samples[prefix + 'TotalFetchRequestsPerSec_total{topic="t"}'] == 2
    assert samples[prefix + 'BytesOutPerSec_total{topic="t"}'] == 40
    assert samples[prefix + 'ReplicationBytesOutPerSec_total{topic="t"}'] == 60
