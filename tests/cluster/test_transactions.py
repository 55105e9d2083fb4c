"""The transaction coordinator in a cluster: the coordinator of a transactional id is
the leader of its ``__transaction_state`` partition (three replicas), found from any
broker; when it dies, the partition's new leader loads the open transaction from its
replica and goes on coordinating it (markers to other brokers are the log side's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from server.wire import WireClient
from tickwheel.cluster import LocalCluster
from tickwheel.coordinator.transaction import TRANSACTION_STATE_TOPIC
from tickwheel.coordinator.transaction._state_manager import java_abs, java_string_hash

from .helpers import CLUSTER_PROPERTIES, WAIT_S, ZOOKEEPER_TICK_MS, create_topic, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

E = ErrorCode
TXN_ID = "cluster-tx"
STATE_PARTITIONS = 3
REPLICATION = 3
FIND_COORDINATOR = 10
INIT_PRODUCER_ID = 22
ADD_PARTITIONS = 24
DESCRIBE_TRANSACTIONS = 65
TIMEOUT_MS = 600_000
PROPERTIES = {
    **CLUSTER_PROPERTIES,
    "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
}


@pytest.fixture
def txn_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path,
        REPLICATION,
        properties=PROPERTIES,
        chroot="/tickwheel-test",
        zookeeper_tick_ms=ZOOKEEPER_TICK_MS,
    ) as running:
        yield running


def _call(servers: str, api_key: int, version: int, values: dict[str, Any]) -> Any:
    client = WireClient(servers)
    try:
        return client.call(api_key, version, values)
    finally:
        client.close()


def _coordinator(cluster: LocalCluster, other_than: int = -1) -> tuple[int, str]:
    found: list[Any] = []

    def answered() -> bool:
        for broker in cluster.brokers:
            if not broker.running:
                continue
            body = _call(
                broker.bootstrap_servers, FIND_COORDINATOR, 1, {"key": TXN_ID, "key_type": 1}
            )
            if body.error_code == E.none and body.node_id != other_than:
                found[:] = [body]
                return True
        return False

    wait_for(answered, "a coordinator for the transactional id", timeout_s=2 * WAIT_S)
    body = found[0]
    return int(body.node_id), f"{body.host}:{body.port}"


def _state(servers: str) -> Any:
    body = _call(servers, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [TXN_ID]})
    return body.transaction_states[0]


def test_a_new_coordinator_takes_over_an_open_transaction(txn_cluster: LocalCluster) -> None:
    cluster = txn_cluster
    create_topic(cluster, "data", [[0, 1, 2], [1, 2, 0]])
    coordinator, servers = _coordinator(cluster)
    state_partition = java_abs(java_string_hash(TXN_ID)) % STATE_PARTITIONS
    leader = cluster.partition_state(TRANSACTION_STATE_TOPIC, state_partition)
    assert leader is not None
    assert leader.leader == coordinator
    init = _call(
        servers,
        INIT_PRODUCER_ID,
        4,
        {"transactional_id": TXN_ID, "transaction_timeout": TIMEOUT_MS},
    )
    assert init.error_code == E.none
    added = _call(
        servers,
        ADD_PARTITIONS,
        3,
        {
            "v3_and_below_transactional_id": TXN_ID,
            "v3_and_below_producer_id": init.producer_id,
            "v3_and_below_producer_epoch": init.producer_epoch,
            "v3_and_below_topics": [{"name": "data", "partitions": [0, 1]}],
        },
    )
    codes = {
        p.partition_error_code
        for t in added.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }
    assert codes == {E.none}
    cluster.brokers[coordinator].kill()
    _, new_servers = _coordinator(cluster, other_than=coordinator)

    def loaded() -> bool:
        state = _state(new_servers)
        return state.error_code == E.none

    wait_for(loaded, "the new coordinator to load the transaction", timeout_s=WAIT_S)
    state = _state(new_servers)
    assert (state.transaction_state, state.producer_id) == ("Ongoing", init.producer_id)
    assert {(t.topic, t.partitions) for t in state.topics} == {("data", (0, 1))}
