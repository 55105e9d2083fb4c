"""The metadata cache: what Metadata responses and the transitions read."""

from __future__ import annotations

from tickwheel.cluster import NO_CONTROLLER, BrokerEndpoint, BrokerRegistration, MetadataCache
from tickwheel.replica import NO_LEADER, LeaderAndIsr, TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def _registration(broker_id: int) -> BrokerRegistration:
    """A broker with a PLAINTEXT listener on 9090 + id and an SSL one on 9190 + id."""
    return BrokerRegistration(
        broker_id,
        (
            BrokerEndpoint(broker_id, "127.0.0.1", 9090 + broker_id),
            BrokerEndpoint(broker_id, "10.0.0.1", 9190 + broker_id, "INTERNAL", "SSL"),
        ),
    )


def _cache() -> MetadataCache:
    cache = MetadataCache()
    cache.set_brokers([_registration(b) for b in (0, 1, 2)])
    cache.set_topic("t", {0: (0, 1, 2), 1: (1, 2, 0)}, {"min.insync.replicas": "2"})
    cache.set_partition_state(T0, LeaderAndIsr(0, 0, (0, 1, 2), 1, version=0))
    return cache


def test_describes_every_partition_with_leader_replicas_and_isr() -> None:
    described = _cache().partition_metadata("t")
    assert [p.partition for p in described] == [0, 1]
    first = described[0]
    assert (first.leader, first.leader_epoch, first.replicas, first.isr) == (
        0,
        0,
        (0, 1, 2),
        (0, 1, 2),
    )
    assert first.offline_replicas == ()


def test_partition_without_known_state_has_no_leader() -> None:
    described = _cache().partition_metadata("t")[1]
    assert described.leader == NO_LEADER
    assert not described.has_leader


def test_leader_that_is_not_live_is_never_described() -> None:
    cache = _cache()
    cache.set_brokers([_registration(b) for b in (1, 2)])
    described = cache.partition_metadata("t")[0]
    assert described.leader == NO_LEADER
    assert described.offline_replicas == (0,)


def test_older_or_equal_versions_never_replace_a_newer_state() -> None:
    cache = _cache()
    newer = LeaderAndIsr(0, 0, (0, 1), 1, version=3)
    assert cache.set_partition_state(T0, newer)
    assert not cache.set_partition_state(T0, LeaderAndIsr(0, 0, (0, 1, 2), 1, version=2))
    assert not cache.set_partition_state(T0, LeaderAndIsr(0, 0, (0,), 1, version=3))
    assert cache.partition_states[T0] == newer


def test_partition_membership_and_replicas() -> None:
    cache = _cache()
    cache.set_topic("solo", {0: (2,)}, {})
    assert cache.replicas(T1) == (1, 2, 0)
    assert cache.replicas(TopicPartition("solo", 1)) == ()
    assert cache.contains_partition(TopicPartition("solo", 0))
    assert not cache.contains_partition(TopicPartition("solo", 1))


def test_removing_a_topic_forgets_its_partitions_and_states() -> None:
    cache = _cache()
    assert sorted(cache.remove_topic("t")) == [T0, T1]
    assert cache.partition_metadata("t") == []
    assert T0 not in cache.partition_states
    assert cache.remove_topic("t") == []


def test_controller_is_described_only_while_it_is_live() -> None:
    cache = _cache()
    cache.controller_id = 2
    assert cache.live_controller_id() == 2
    cache.set_brokers([_registration(0)])
    assert cache.live_controller_id() == NO_CONTROLLER


def test_brokers_are_found_by_listener() -> None:
    cache = _cache()
    assert cache.broker(1, "PLAINTEXT") == BrokerEndpoint(1, "127.0.0.1", 9091)
    assert cache.broker(1, "INTERNAL") == BrokerEndpoint(1, "10.0.0.1", 9191, "INTERNAL", "SSL")
    assert cache.broker(1, "CLIENT") is None
    assert cache.broker(7, "PLAINTEXT") is None
    assert [e.port for e in cache.endpoints("INTERNAL")] == [9190, 9191, 9192]
    cache.set_brokers([_registration(2), BrokerRegistration(0, ())])
    assert [e.broker_id for e in cache.endpoints("PLAINTEXT")] == [2]
