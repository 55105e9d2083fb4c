"""FindCoordinator in a cluster: the offsets topic is never created with fewer replicas
than ``offsets.topic.replication.factor`` (Kafka's rule), so the answer is
COORDINATOR_NOT_AVAILABLE until enough brokers are alive."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tickwheel.cluster import BrokerEndpoint, BrokerRegistration, MetadataCache
from tickwheel.coordinator import CoordinatorNode
from tickwheel.coordinator.group import OFFSETS_TOPIC, GroupConfig
from tickwheel.replica import LeaderAndIsr, TopicPartition
from tickwheel.server.apis._groups import _cluster_locator

PARTITIONS = 2


@dataclass
class FakeCluster:
    """The two things the locator uses of a ``ClusterNode``."""

    cache: MetadataCache = field(default_factory=MetadataCache)
    created: list[tuple[str, int, int]] = field(default_factory=list)

    def create_topic_later(
        self, name: str, num_partitions: int, replication_factor: int, _configs: Any
    ) -> None:
        self.created.append((name, num_partitions, replication_factor))


@dataclass
class FakeContext:
    """What the locator reads of the ``BrokerContext``: the request's listener."""

    request_listener: str = "PLAINTEXT"


def brokers(count: int) -> list[BrokerRegistration]:
    return [
        BrokerRegistration(b, (BrokerEndpoint(b, "127.0.0.1", 9092 + b),)) for b in range(count)
    ]


def test_the_offsets_topic_waits_for_as_many_brokers_as_its_replication_factor() -> None:
    cluster = FakeCluster()
    config = GroupConfig(
        offsets_topic_num_partitions=PARTITIONS, offsets_topic_replication_factor=3
    )
    locate = _cluster_locator(FakeContext(), cluster, config, {})  # type: ignore[arg-type]

    cluster.cache.set_brokers(brokers(2))
    assert locate(0) is None
    assert cluster.created == []

    cluster.cache.set_brokers(brokers(3))
    assert locate(0) is None
    assert cluster.created == [(OFFSETS_TOPIC, PARTITIONS, 3)]

    cluster.cache.set_topic(OFFSETS_TOPIC, dict.fromkeys(range(PARTITIONS), (0, 1, 2)), {})
    cluster.cache.set_partition_state(TopicPartition(OFFSETS_TOPIC, 1), LeaderAndIsr(2, version=0))
    assert locate(1) == CoordinatorNode(2, "127.0.0.1", 9094)
    # Once the topic exists, a lost broker only matters if it led the partition.
    cluster.cache.set_brokers(brokers(2))
    assert locate(1) is None
    assert cluster.created == [(OFFSETS_TOPIC, PARTITIONS, 3)]
