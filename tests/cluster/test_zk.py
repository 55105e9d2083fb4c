"""The ZooKeeper client against a real ZooKeeper: Kafka's layout, the chroot, and
conditional partition-state writes (two writers never both win)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tickwheel.cluster import (
    BrokerEndpoint,
    BrokerRegistration,
    ControllerMovedError,
    TopicAssignment,
    TopicExistsError,
    ZkClient,
    ZkSettings,
    ZooKeeperServer,
)
from tickwheel.replica import LeaderAndIsr, TopicPartition

from .helpers import ZOOKEEPER_TICK_MS

pytestmark = [pytest.mark.cluster, pytest.mark.integration]

CHROOT = "/kafka/prod"
T0 = TopicPartition("orders", 0)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    data_dir: Path = tmp_path_factory.mktemp("zookeeper")
    with ZooKeeperServer(data_dir, tick_ms=ZOOKEEPER_TICK_MS) as server:
        yield server


@pytest.fixture
def client(zookeeper: ZooKeeperServer, request: pytest.FixtureRequest) -> Iterator[ZkClient]:
    chroot = f"{CHROOT}/{request.node.name}"
    zk = ZkClient(ZkSettings(zookeeper.connect + chroot, session_timeout_ms=4000))
    zk.start()
    yield zk
    zk.stop()


def _raw(zookeeper: ZooKeeperServer) -> KazooClient:
    raw = KazooClient(hosts=zookeeper.connect)
    raw.start()
    return raw


def test_chroot_is_created_and_holds_kafkas_paths(
    zookeeper: ZooKeeperServer, client: ZkClient, request: pytest.FixtureRequest
) -> None:
    client.register_broker(BrokerRegistration(1, (BrokerEndpoint(1, "10.0.0.1", 9092),)))
    raw = _raw(zookeeper)
    try:
        base = f"{CHROOT}/{request.node.name}"
        assert set(raw.get_children(base)) >= {"brokers", "config", "cluster"}
        registration = json.loads(raw.get(f"{base}/brokers/ids/1")[0])
        assert registration["endpoints"] == ["PLAINTEXT://10.0.0.1:9092"]
        assert raw.exists(f"{base}/brokers/ids/1").ephemeralOwner != 0
    finally:
        raw.stop()
        raw.close()


def test_partition_state_writes_are_conditional(client: ZkClient) -> None:
    first = LeaderAndIsr(leader=1, leader_epoch=0, isr=(1, 2, 3), controller_epoch=1)
    client.create_topic(
        "orders", TopicAssignment({0: (1, 2, 3)}, "id"), {"min.insync.replicas": "2"}, {0: first}
    )
    with pytest.raises(TopicExistsError):
        client.create_topic("orders", TopicAssignment({0: (1,)}), {}, {0: first})
    read = client.get("/brokers/topics/orders/partitions/0/state")
    assert read is not None
    version = read[1].version
    # Two writers propose from the same version: exactly one wins.
    shrink = client.set_partition_state(T0, LeaderAndIsr(1, 0, (1, 2), 1, version))
    other = client.set_partition_state(T0, LeaderAndIsr(1, 0, (1, 3), 1, version))
    assert shrink is not None
    assert shrink.version == version + 1
    assert other is None
    stored = client.get("/brokers/topics/orders/partitions/0/state")
    assert stored is not None
    assert json.loads(stored[0])["isr"] == [1, 2]


def test_producer_id_blocks_never_overlap(client: ZkClient) -> None:
    blocks = [client.claim_producer_id_block(broker_id, 1000) for broker_id in (1, 2, 1)]
    assert [(b.first, b.last) for b in blocks] == [(0, 999), (1000, 1999), (2000, 2999)]


def test_controller_writes_are_fenced_by_the_controller_epoch(client: ZkClient) -> None:
    first = LeaderAndIsr(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)
    client.create_topic("orders", TopicAssignment({0: (1, 2)}, "id"), {}, {0: first})
    old = client.elect_controller(1)
    assert old is not None
    state = client.partition_state(T0)
    assert state is not None
    # A leader's own ISR write wins the race: the controller lost only that race.
    assert client.set_partition_state(T0, LeaderAndIsr(1, 0, (1,), 1, state.version))
    assert (
        client.set_partition_state_fenced(T0, LeaderAndIsr(2, 1, (2,), 1, state.version), old)
        is None
    )
    fresh = client.partition_state(T0)
    assert fresh is not None
    moved = client.set_partition_state_fenced(T0, LeaderAndIsr(2, 1, (2,), 1, fresh.version), old)
    assert moved is not None
    assert moved.leader == 2
    # A newer controller was elected: the old one's writes are refused as a whole.
    client.stop()
    client.start()
    newer = client.elect_controller(2)
    assert newer is not None
    assert newer.epoch == old.epoch + 1
    latest = client.partition_state(T0)
    assert latest is not None
    with pytest.raises(ControllerMovedError):
        client.set_partition_state_fenced(T0, LeaderAndIsr(1, 2, (1,), 1, latest.version), old)


def test_pipelined_controller_writes_are_fenced_one_by_one(client: ZkClient) -> None:
    first = LeaderAndIsr(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)
    tps = [TopicPartition("many", index) for index in range(20)]
    client.create_topic(
        "many",
        TopicAssignment(dict.fromkeys(range(20), (1, 2)), "id"),
        {},
        dict.fromkeys(range(20), first),
    )
    controller = client.elect_controller(1)
    assert controller is not None
    states = [client.partition_state(tp) for tp in tps]
    assert all(state is not None for state in states)
    # A leader's own ISR write to partition 7 wins the race against the controller's.
    raced = states[7]
    assert raced is not None
    assert client.set_partition_state(tps[7], LeaderAndIsr(1, 0, (1,), 1, raced.version))
    proposed = [
        (tp, LeaderAndIsr(2, 1, (2,), 1, state.version))
        for tp, state in zip(tps, states, strict=True)
        if state is not None
    ]
    written = client.set_partition_states_fenced(proposed, controller)
    assert [index for index, state in enumerate(written) if state is None] == [7]
    for tp, state in zip(tps, written, strict=True):
        stored = client.partition_state(tp)
        assert stored is not None
        if state is not None:
            assert stored == state
            assert stored.leader == 2
        else:
            assert stored.isr == (1,)
    # A newer controller was elected: the old one's batch is refused.
    client.stop()
    client.start()
    assert client.elect_controller(2) is not None
    latest = [(tp, client.partition_state(tp)) for tp in tps[:3]]
    with pytest.raises(ControllerMovedError):
        client.set_partition_states_fenced(
            [(tp, LeaderAndIsr(1, 3, (1,), 1, state.version)) for tp, state in latest if state],
            controller,
        )
    assert all(client.partition_state(tp) == state for tp, state in latest)
