"""The controller against a real ZooKeeper, its cache fed by hand: decisions start from
the states it wrote itself, even before its broker's event queue has applied them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tickwheel.cluster import (
    BrokerEndpoint,
    BrokerRegistration,
    Controller,
    ControllerSettings,
    MetadataCache,
    TopicAssignment,
    ZkClient,
    ZkSettings,
    ZooKeeperServer,
)
from tickwheel.cluster._zk import ControllerEpoch
from tickwheel.replica import LeaderAndIsr, TopicPartition

from .helpers import ZOOKEEPER_TICK_MS

pytestmark = [pytest.mark.cluster, pytest.mark.integration]

TP = TopicPartition("orders", 0)
NO_LEADER = -1


@pytest.fixture
def zk(tmp_path: Path) -> Iterator[ZkClient]:
    with ZooKeeperServer(tmp_path / "zookeeper", tick_ms=ZOOKEEPER_TICK_MS) as server:
        client = ZkClient(ZkSettings(server.connect + "/controller-test", session_timeout_ms=4000))
        client.start()
        try:
            yield client
        finally:
            client.stop()


def _live(cache: MetadataCache, *broker_ids: int) -> None:
    cache.set_brokers(
        BrokerRegistration(b, (BrokerEndpoint(b, "127.0.0.1", 9092 + b),)) for b in broker_ids
    )


def test_a_leader_back_before_its_offline_state_was_applied_is_elected_again(
    zk: ZkClient,
) -> None:
    """Broker 0, the only in-sync replica, dies and is back at once: the controller takes
    the partition offline, then sees 0 live while its own offline write is still queued
    (unapplied) in its broker's event queue. It must elect 0 from that write, not judge
    from the cached state that 0 still leads."""
    stored = LeaderAndIsr(leader=0, leader_epoch=3, isr=(0,), controller_epoch=1)
    zk.create_topic("orders", TopicAssignment({0: (0, 1, 2)}, "id"), {}, {0: stored})
    cached = zk.partition_state(TP)
    assert cached is not None
    cache = MetadataCache()
    cache.set_topic("orders", {0: (0, 1, 2)}, {})
    cache.set_partition_state(TP, cached)
    queued: list[LeaderAndIsr] = []
    controller = Controller(
        zk,
        cache,
        ControllerSettings(auto_leader_rebalance_enable=False),
        lambda _tp, state: queued.append(state),
        lambda: False,
    )
    epoch = zk.elect_controller(1)
    assert epoch is not None

    async def run() -> None:
        _live(cache, 1, 2)
        await controller.activate(epoch)
        _live(cache, 0, 1, 2)
        await controller.on_brokers_changed()

    asyncio.run(run())
    assert [(s.leader, s.leader_epoch) for s in queued] == [(NO_LEADER, 4), (0, 5)]
    final = zk.partition_state(TP)
    assert final is not None
    assert (final.leader, final.leader_epoch, final.isr) == (0, 5, (0,))


def _elr_controller(zk: ZkClient, cache: MetadataCache) -> tuple[Controller, ControllerEpoch]:
    """A controller over ``cache`` keeping eligible leader replicas, elected in ``zk``."""
    controller = Controller(
        zk,
        cache,
        ControllerSettings(auto_leader_rebalance_enable=False),
        lambda _tp, _state: None,
        lambda: True,
    )
    epoch = zk.elect_controller(1)
    assert epoch is not None
    return controller, epoch


def test_a_broker_back_from_an_unclean_shutdown_leaves_the_elr_once(zk: ZkClient) -> None:
    """Broker 0 registers without a clean shutdown marker: the controller takes it out
    of the ELR instead of electing it, then marks its registration handled, so a
    controller taking over later leaves it alone."""
    stored = LeaderAndIsr(NO_LEADER, 3, (), 1, elr=(0, 2), last_known_elr=(0,))
    zk.create_topic("orders", TopicAssignment({0: (0, 1, 2)}, "id"), {}, {0: stored})
    cached = zk.partition_state(TP)
    assert cached is not None
    cache = MetadataCache()
    cache.set_topic("orders", {0: (0, 1, 2)}, {"min.insync.replicas": "2"})
    cache.set_partition_state(TP, cached)
    registration = BrokerRegistration(0, (BrokerEndpoint(0, "127.0.0.1", 9092),))
    zk.register_broker(registration)
    cache.set_brokers([registration])
    controller, epoch = _elr_controller(zk, cache)
    asyncio.run(controller.activate(epoch))
    final = zk.partition_state(TP)
    assert final is not None
    assert (final.leader, final.isr, final.elr) == (NO_LEADER, (), (2,))
    assert zk.uncleanly_registered([0]) == set()


def test_clearing_the_elr_gives_an_offline_partition_its_eligible_replicas_back(
    zk: ZkClient,
) -> None:
    """A topic's min.insync.replicas changed (or the feature turned off): its ELRs go,
    and a leaderless partition keeps its eligible replicas as its ISR."""
    led = LeaderAndIsr(1, 3, (1,), 1, elr=(0,))
    offline = LeaderAndIsr(NO_LEADER, 3, (), 1, elr=(2,), last_known_elr=(1,))
    zk.create_topic(
        "orders", TopicAssignment({0: (0, 1, 2), 1: (0, 1, 2)}, "id"), {}, {0: led, 1: offline}
    )
    cache = MetadataCache()
    cache.set_topic("orders", {0: (0, 1, 2), 1: (0, 1, 2)}, {})
    for partition in (0, 1):
        state = zk.partition_state(TopicPartition("orders", partition))
        assert state is not None
        cache.set_partition_state(TopicPartition("orders", partition), state)
    _live(cache, 1)
    controller, epoch = _elr_controller(zk, cache)

    async def run() -> None:
        await controller.activate(epoch)
        await controller.clear_elr("orders")

    asyncio.run(run())
    states = [zk.partition_state(TopicPartition("orders", p)) for p in (0, 1)]
    assert [(s.leader, s.isr, s.elr, s.last_known_elr) for s in states if s is not None] == [
        (1, (1,), (), ()),
        (NO_LEADER, (1, 2), (), ()),
    ]
