"""Whole-broker faults of a ``LocalCluster``: a broker cut off from the others (its
replication, the transaction markers it is sent and the verifications it asks for;
ZooKeeper still sees it) and healed, a broker killed and restarted, a partition's
leadership moved (and the former leader's NOT_LEADER_OR_FOLLOWER naming the new one,
KIP-951)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from tickwheel.cluster import TXN_MARKERS, TXN_VERIFICATION, InterBrokerChannel, LocalCluster
from tickwheel.faults import FaultEndpointClient
from tickwheel.protocol import ApiKey

from .helpers import (
    LAG_TIME_MS,
    WAIT_S,
    create_topic,
    isr,
    local_cluster,
    produce_raw,
    record_batch,
    wait_for,
    wire_call,
)

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

LEADER = 0
ISOLATED = 2
TXN_ID = "isolated-tx"
TRANSACTION_KEY = 1
# The first Produce version with leader hints (KIP-951).
PRODUCE_HINT_VERSION = 10
# One __transaction_state partition on one broker: the coordinator is that broker, and
# its writes wait for no follower the isolation cuts off.
TXN_PROPERTIES = {
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


def test_an_isolated_follower_leaves_the_isr_and_rejoins_once_healed(tmp_path: Path) -> None:
    with local_cluster(tmp_path, faults=True) as cluster:
        create_topic(cluster, "cut", [[LEADER, 1, ISOLATED]])
        wait_for(lambda: isr(cluster, "cut") == (LEADER, 1, ISOLATED), "a full ISR")
        cluster.isolate(ISOLATED)
        wait_for(
            lambda: isr(cluster, "cut") == (LEADER, 1),
            "the isolated follower to leave the ISR",
        )
        assert cluster.is_registered(ISOLATED)
        error, _ = produce_raw(
            cluster.brokers[LEADER].bootstrap_servers, "cut", b"while cut", timeout_ms=LAG_TIME_MS
        )
        assert error == ErrorCode.none
        # The leader closed the isolated follower's fetches.
        leader_rules = cluster.brokers[LEADER].faults
        assert leader_rules is not None
        assert sum(rule["hits"] for rule in leader_rules.rules()) > 0
        cluster.heal()
        wait_for(
            lambda: isr(cluster, "cut") == (LEADER, 1, ISOLATED),
            "the healed follower to rejoin the ISR",
        )


def test_a_killed_and_restarted_broker_registers_again(tmp_path: Path) -> None:
    with local_cluster(tmp_path) as cluster:
        restarted = cluster.brokers[1]
        pid = restarted.pid
        restarted.restart()
        assert restarted.pid != pid
        cluster.wait_registered(restarted.broker_id)
        with pytest.raises(RuntimeError, match="without faults=True"):
            cluster.isolate(1)


def test_a_leader_moves_on_demand_and_its_data_stays(tmp_path: Path) -> None:
    with local_cluster(tmp_path) as cluster:
        create_topic(cluster, "moved", [[LEADER, 1, ISOLATED]])
        wait_for(lambda: isr(cluster, "moved") == (LEADER, 1, ISOLATED), "a full ISR")
        error, _ = produce_raw(
            cluster.brokers[LEADER].bootstrap_servers, "moved", b"before", timeout_ms=LAG_TIME_MS
        )
        assert error == ErrorCode.none
        new_leader = cluster.move_leader("moved", 0)
        assert new_leader == 1
        hints: list[tuple[int, int, list[int]]] = []
        wait_for(
            lambda: _not_leader_hint(cluster.brokers[LEADER].bootstrap_servers, "moved", hints),
            "the former leader to refuse the produce",
        )
        moved = cluster.partition_state("moved", 0)
        assert moved is not None
        assert hints == [(1, moved.leader_epoch, [cluster.brokers[1].port])]
        assert cluster.brokers[LEADER].running
        wait_for(lambda: set(isr(cluster, "moved")) == {LEADER, 1, ISOLATED}, "a full ISR again")
        assert cluster.move_leader("moved", 0, to=ISOLATED) == ISOLATED
        state = cluster.partition_state("moved", 0)
        assert state is not None
        assert state.leader == ISOLATED
        new_leader = ISOLATED
        error, _ = produce_raw(
            cluster.brokers[new_leader].bootstrap_servers, "moved", b"after", timeout_ms=5000
        )
        assert error == ErrorCode.none


def _coordinator(cluster: LocalCluster) -> int:
    found: list[int] = []

    def answered() -> bool:
        body = wire_call(
            cluster.brokers[0].bootstrap_servers,
            ApiKey.FIND_COORDINATOR,
            1,
            {"key": TXN_ID, "key_type": TRANSACTION_KEY},
        )
        found[:] = [int(body.node_id)]
        return bool(body.error_code == ErrorCode.none)

    wait_for(answered, "the transaction coordinator")
    return found[0]


def _transaction_state(cluster: LocalCluster, coordinator: int) -> str:
    body = wire_call(
        cluster.brokers[coordinator].bootstrap_servers,
        ApiKey.DESCRIBE_TRANSACTIONS,
        0,
        {"transactional_ids": [TXN_ID]},
    )
    return str(body.transaction_states[0].transaction_state)


def _cut_hits(plan: FaultEndpointClient | None, channel: InterBrokerChannel, sender: int) -> int:
    """How many requests ``plan``'s broker closed on ``sender``'s ``channel``."""
    assert plan is not None
    client_id = f"client_id={channel.client_id(sender)}"
    return sum(rule["hits"] for rule in plan.rules() if client_id in rule["rule"])


def test_an_isolated_broker_gets_no_markers_and_asks_no_verification(tmp_path: Path) -> None:
    with local_cluster(tmp_path, properties=TXN_PROPERTIES, faults=True) as cluster:
        coordinator = _coordinator(cluster)
        cut = next(b.broker_id for b in cluster.brokers if b.broker_id != coordinator)
        create_topic(cluster, "txn-cut", [[cut]])
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": TXN_ID}
        )
        producer.init_transactions(WAIT_S)
        producer.begin_transaction()
        producer.produce("txn-cut", b"before the cut")
        assert producer.flush(WAIT_S) == 0
        cluster.isolate(cut)
        # The commit is written, but its marker cannot reach the cut-off leader.
        producer.commit_transaction(WAIT_S)
        wait_for(
            lambda: _cut_hits(cluster.brokers[cut].faults, TXN_MARKERS, coordinator) > 0,
            "the cut-off leader to close the coordinator's marker requests",
        )
        assert _transaction_state(cluster, coordinator) == "PrepareCommit"
        cluster.heal()
        wait_for(
            lambda: _transaction_state(cluster, coordinator) == "CompleteCommit",
            "the markers to be written once healed",
        )
        # The leader verifies a transactional produce with the coordinator (KIP-890):
        # cut off, it cannot, and the records wait.
        cluster.isolate(cut)
        producer.begin_transaction()
        producer.produce("txn-cut", b"during the cut")
        wait_for(
            lambda: (
                producer.poll(0) >= 0
                and _cut_hits(cluster.brokers[coordinator].faults, TXN_VERIFICATION, cut) > 0
            ),
            "the coordinator to close the cut-off leader's verification requests",
        )
        assert len(producer) == 1
        cluster.heal()
        assert producer.flush(WAIT_S) == 0
        producer.commit_transaction(WAIT_S)


def _not_leader_hint(servers: str, topic: str, hints: list[tuple[int, int, list[int]]]) -> bool:
    """Produce to ``topic``'s partition 0 at ``servers``; when it is refused
    NOT_LEADER_OR_FOLLOWER, keep its hint in ``hints`` (leader id, epoch, the endpoints'
    ports) and say so."""
    partition_data = [{"index": 0, "records": record_batch(b"hinted")}]
    body = wire_call(
        servers,
        ApiKey.PRODUCE,
        PRODUCE_HINT_VERSION,
        {
            "acks": 1,
            "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": partition_data}],
        },
    )
    partition = body.responses[0].partition_responses[0]
    if partition.error_code != ErrorCode.not_leader_or_follower:
        return False
    leader = partition.current_leader
    hints[:] = [(leader.leader_id, leader.leader_epoch, [n.port for n in body.node_endpoints])]
    return True
