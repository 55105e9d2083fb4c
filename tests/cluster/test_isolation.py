"""Whole-broker faults of a ``LocalCluster``: a broker cut off from the others'
replication (ZooKeeper still sees it) and healed, a broker killed and restarted, a
partition's leadership moved."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from .helpers import LAG_TIME_MS, create_topic, isr, local_cluster, produce_raw, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

LEADER = 0
ISOLATED = 2


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
