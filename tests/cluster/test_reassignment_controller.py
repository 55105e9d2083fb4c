"""The controller's reassignment phases against a real ZooKeeper, its cache fed from
ZooKeeper by hand (as its broker's watches would): the topic znode holds the move in
progress, a cancellation goes back to the original replicas, and a controller that
takes over completes what the previous one started."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.cluster import (
    BrokerEndpoint,
    BrokerRegistration,
    Controller,
    ControllerSettings,
    ElectionError,
    MetadataCache,
    ReassignmentResult,
    TopicAssignment,
    ZkClient,
    ZkSettings,
    ZooKeeperServer,
    decode_topic,
    topic_path,
)
from tickwheel.cluster._znodes import CONTROLLER_PATH
from tickwheel.replica import LeaderAndIsr, TopicPartition

from .helpers import ZOOKEEPER_TICK_MS

pytestmark = [pytest.mark.cluster, pytest.mark.integration]

TOPIC = "orders"
TP = TopicPartition(TOPIC, 0)
OK = ReassignmentResult(ErrorCode.none)


@pytest.fixture
def zk(tmp_path: Path) -> Iterator[ZkClient]:
    with ZooKeeperServer(tmp_path / "zookeeper", tick_ms=ZOOKEEPER_TICK_MS) as server:
        client = ZkClient(ZkSettings(server.connect + "/reassign-test", session_timeout_ms=4000))
        client.start()
        try:
            first = LeaderAndIsr(leader=0, leader_epoch=0, isr=(0, 1), controller_epoch=1)
            client.create_topic(TOPIC, TopicAssignment({0: (0, 1)}, "id"), {}, {0: first})
            yield client
        finally:
            client.stop()


def _stored(zk: ZkClient) -> TopicAssignment:
    found = zk.get(topic_path(TOPIC))
    assert found is not None
    return decode_topic(TOPIC, found[0])


def _synced(zk: ZkClient, cache: MetadataCache) -> MetadataCache:
    """``cache`` with every broker live and what ZooKeeper holds now (a broker's watches)."""
    cache.set_brokers(
        BrokerRegistration(b, (BrokerEndpoint(b, "127.0.0.1", 9092 + b),)) for b in (0, 1, 2)
    )
    stored = _stored(zk)
    cache.set_topic(
        TOPIC,
        stored.partitions,
        {},
        stored.topic_id,
        adding=stored.adding,
        removing=stored.removing,
    )
    state = zk.partition_state(TP)
    assert state is not None
    cache.set_partition_state(TP, state)
    return cache


def _controller(zk: ZkClient, cache: MetadataCache) -> Controller:
    settings = ControllerSettings(auto_leader_rebalance_enable=False)
    # Eligible leader replicas on, a new cluster's level.
    return Controller(zk, cache, settings, lambda _tp, _state: None, lambda: True)


def _catch_up(zk: ZkClient, cache: MetadataCache, *replicas: int) -> None:
    """The leader adds ``replicas`` to the ISR (its own conditional write)."""
    state = zk.partition_state(TP)
    assert state is not None
    assert zk.set_partition_state(TP, state.with_isr((*state.isr, *replicas))) is not None
    _synced(zk, cache)


def _state(zk: ZkClient) -> tuple[int, int, tuple[int, ...]]:
    state = zk.partition_state(TP)
    assert state is not None
    return state.leader, state.leader_epoch, state.isr


def test_a_move_adds_then_drops_replicas_and_moves_the_leader(zk: ZkClient) -> None:
    cache = _synced(zk, MetadataCache())
    controller = _controller(zk, cache)
    epoch = zk.elect_controller(1)
    assert epoch is not None

    async def run() -> None:
        await controller.activate(epoch)
        assert await controller.alter_reassignments({TP: (2, 1)}) == {TP: OK}
        assert _stored(zk) == TopicAssignment({0: (2, 1, 0)}, "id", {0: (2,)}, {0: (0,)})
        assert _state(zk) == (0, 1, (0, 1))
        _synced(zk, cache)
        assert controller.reassigning() == [TP]
        await controller.on_partition_state(TP)
        assert _stored(zk).adding == {0: (2,)}, "completed before the target was in sync"
        _catch_up(zk, cache, 2)
        await controller.on_partition_state(TP)

    asyncio.run(run())
    assert _stored(zk) == TopicAssignment({0: (2, 1)}, "id")
    assert _state(zk) == (2, 2, (1, 2))
    assert controller.reassigning() == []


def test_a_cancellation_returns_to_the_original_replicas(zk: ZkClient) -> None:
    cache = _synced(zk, MetadataCache())
    controller = _controller(zk, cache)
    epoch = zk.elect_controller(1)
    assert epoch is not None

    async def run() -> dict[TopicPartition, ReassignmentResult]:
        await controller.activate(epoch)
        assert await controller.alter_reassignments({TP: (2, 1)}) == {TP: OK}
        _catch_up(zk, cache, 2)
        assert _stored(zk).adding == {0: (2,)}, "the test caught up before the check"
        assert await controller.alter_reassignments({TP: None}) == {TP: OK}
        return await controller.alter_reassignments({TP: None})

    assert asyncio.run(run()) == {TP: ReassignmentResult(ErrorCode.no_reassignment_in_progress)}
    # As Kafka's: the target came first in RS, so the original order is not restored.
    assert _stored(zk) == TopicAssignment({0: (1, 0)}, "id")
    leader, _, in_sync = _state(zk)
    assert (leader, in_sync) == (0, (0, 1))


def test_a_new_controller_completes_the_move_and_fences_the_old_one(zk: ZkClient) -> None:
    old = _controller(zk, _synced(zk, MetadataCache()))
    first = zk.elect_controller(1)
    assert first is not None
    asyncio.run(old.activate(first))
    assert asyncio.run(old.alter_reassignments({TP: (2, 1)})) == {TP: OK}

    zk.delete_node(CONTROLLER_PATH, -1)
    second = zk.elect_controller(2)
    assert second is not None
    cache = MetadataCache()
    _catch_up(zk, cache, 2)
    new = _controller(zk, cache)
    asyncio.run(new.activate(second))
    assert _stored(zk) == TopicAssignment({0: (2, 1)}, "id")
    assert _state(zk)[::2] == (2, (1, 2))

    assert asyncio.run(old.alter_reassignments({TP: (0, 1)})) == {
        TP: ReassignmentResult(ErrorCode.not_controller)
    }
    assert not old.active
    with pytest.raises(ElectionError) as refused:
        asyncio.run(old.alter_reassignments({TP: (0, 1)}))
    assert refused.value.error_code == ErrorCode.not_controller


def test_targets_kafka_refuses(zk: ZkClient) -> None:
    cache = _synced(zk, MetadataCache())
    controller = _controller(zk, cache)
    epoch = zk.elect_controller(1)
    assert epoch is not None
    missing = TopicPartition(TOPIC, 7)

    async def run() -> tuple[dict[TopicPartition, ReassignmentResult], ...]:
        await controller.activate(epoch)
        return (
            await controller.alter_reassignments({TP: (0, 5), missing: (0, 1)}),
            await controller.alter_reassignments(
                {TP: (0, 1, 2)}, allow_replication_factor_change=False
            ),
        )

    dead, resized = asyncio.run(run())
    assert dead[TP].error_code == ErrorCode.invalid_replica_assignment
    assert "not alive" in str(dead[TP].message)
    assert dead[missing].error_code == ErrorCode.unknown_topic_or_partition
    assert resized[TP].error_code == ErrorCode.invalid_replication_factor
    assert _stored(zk) == TopicAssignment({0: (0, 1)}, "id")
