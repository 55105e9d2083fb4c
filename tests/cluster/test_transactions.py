"""The transaction coordinator in a cluster: the coordinator of a transactional id is
the leader of its ``__transaction_state`` partition (three replicas), found from any
broker; when it dies, the partition's new leader loads the open transaction from its
replica and goes on coordinating it.

With confluent-kafka clients: the markers of committed and aborted transactions reach
data partitions and a group coordinator on other brokers (WriteTxnMarkers), so a
read_committed consumer sees exactly the committed records; a coordinator killed or
stopped while its transaction is in PrepareCommit (a data partition's leader paused, so
that its marker cannot be written) is replaced by the state partition's new leader,
which loads PrepareCommit and sends the markers again until the transaction completes;
and a marker refused with NOT_LEADER_OR_FOLLOWER by a partition's former leader is sent
again to the new one. SIGSTOP makes each of these states happen on purpose, not by luck.

Verification and transactions v2 (KIP-890) across brokers: the data partitions' and
the group's leaders are not the coordinator, so each asks it over the wire
(AddPartitionsToTxn v5): librdkafka's version 1 transactions are verified there, and a
raw version 2 transaction (Produce v12 to another broker, EndTxn v5) has its partition
added there and its epoch bumped.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.errors import ErrorCode
from kio.serial.errors import OutOfBoundValue

from tickwheel.bench._batches import make_batch
from tickwheel.cluster import LocalCluster
from tickwheel.coordinator.transaction import TRANSACTION_STATE_TOPIC
from tickwheel.coordinator.transaction._state_manager import java_abs, java_string_hash
from tickwheel.protocol import ApiKey
from tickwheel.record import TRANSACTIONAL_FLAG_MASK

from .helpers import (
    CLUSTER_PROPERTIES,
    WAIT_S,
    ZOOKEEPER_TICK_MS,
    create_topic,
    wait_for,
    wire_call,
)

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

E = ErrorCode
TXN_ID = "cluster-tx"
STATE_PARTITIONS = 3
REPLICATION = 3
FIND_COORDINATOR = ApiKey.FIND_COORDINATOR
GROUP_KEY = 0
TRANSACTION_KEY = 1
PRODUCE = ApiKey.PRODUCE
INIT_PRODUCER_ID = ApiKey.INIT_PRODUCER_ID
ADD_PARTITIONS = ApiKey.ADD_PARTITIONS_TO_TXN
END_TXN = ApiKey.END_TXN
DESCRIBE_TRANSACTIONS = ApiKey.DESCRIBE_TRANSACTIONS
TIMEOUT_MS = 600_000
DATA_PARTITIONS = 2
POLL_S = 0.2
SETTLE_S = 1.0
PROPERTIES = {
    **CLUSTER_PROPERTIES,
    "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
    "offsets.topic.num.partitions": str(STATE_PARTITIONS),
    # A hand-over racing the controller's ISR writes at teardown retries sooner than
    # Kafka's 5 s.
    "controlled.shutdown.retry.backoff.ms": "500",
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


def _find(cluster: LocalCluster, key: str, key_type: int, other_than: int = -1) -> tuple[int, str]:
    """The coordinator of ``key`` (FindCoordinator v1 to the running brokers), once one
    other than broker ``other_than`` answers."""
    found: list[Any] = []

    def answered() -> bool:
        for broker in cluster.brokers:
            if not broker.running:
                continue
            body = wire_call(
                broker.bootstrap_servers, FIND_COORDINATOR, 1, {"key": key, "key_type": key_type}
            )
            if body.error_code == E.none and body.node_id != other_than:
                found[:] = [body]
                return True
        return False

    wait_for(answered, f"a coordinator for {key!r}", timeout_s=2 * WAIT_S)
    body = found[0]
    return int(body.node_id), f"{body.host}:{body.port}"


def _coordinator(cluster: LocalCluster, other_than: int = -1) -> tuple[int, str]:
    return _find(cluster, TXN_ID, TRANSACTION_KEY, other_than)


_COORDINATOR_NOT_READY = frozenset({E.not_coordinator, E.coordinator_load_in_progress})


def _init_producer_id(servers: str, version: int) -> Any:
    """InitProducerId for ``TXN_ID``, retried as a client retries while the coordinator
    FindCoordinator named has not yet taken its ``__transaction_state`` partition."""
    answers: list[Any] = []

    def answered() -> bool:
        answers[:] = [
            wire_call(
                servers,
                INIT_PRODUCER_ID,
                version,
                {"transactional_id": TXN_ID, "transaction_timeout": TIMEOUT_MS},
            )
        ]
        return answers[0].error_code not in _COORDINATOR_NOT_READY

    wait_for(answered, "the coordinator to take the transactional id")
    return answers[0]


def _state(servers: str, transactional_id: str = TXN_ID) -> Any:
    body = wire_call(servers, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]})
    return body.transaction_states[0]


def test_a_new_coordinator_takes_over_an_open_transaction(txn_cluster: LocalCluster) -> None:
    cluster = txn_cluster
    create_topic(cluster, "data", [[0, 1, 2], [1, 2, 0]])
    coordinator, servers = _coordinator(cluster)
    state_partition = java_abs(java_string_hash(TXN_ID)) % STATE_PARTITIONS
    leader = cluster.partition_state(TRANSACTION_STATE_TOPIC, state_partition)
    assert leader is not None
    assert leader.leader == coordinator
    init = _init_producer_id(servers, 4)
    assert init.error_code == E.none
    added = wire_call(
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
        try:
            state = _state(new_servers)
        except OutOfBoundValue:
            # An answer before the load (COORDINATOR_LOAD_IN_PROGRESS, or no such
            # transaction yet) carries Kafka's start time of -1, which kio's reader in
            # this test client refuses to decode; the loaded Ongoing one has a real time.
            return False
        return state.error_code == E.none

    wait_for(loaded, "the new coordinator to load the transaction", timeout_s=WAIT_S)
    state = _state(new_servers)
    assert (state.transaction_state, state.producer_id) == ("Ongoing", init.producer_id)
    assert {(t.topic, t.partitions) for t in state.topics} == {("data", (0, 1))}


def _others(cluster: LocalCluster, broker_id: int) -> list[int]:
    return [b.broker_id for b in cluster.brokers if b.broker_id != broker_id]


def _group_coordinated_by(cluster: LocalCluster, brokers: Collection[int]) -> str:
    """A group id whose group coordinator is one of ``brokers``."""
    for index in range(100):
        group = f"txn-group-{index}"
        node, _ = _find(cluster, group, GROUP_KEY)
        if node in brokers:
            return group
    raise AssertionError(f"no group tried is coordinated by brokers {brokers}")


def _producer(cluster: LocalCluster) -> Producer:
    return Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": TXN_ID})


def _produce(producer: Producer, prefix: str, count: int) -> list[bytes]:
    values = [f"{prefix}{i}".encode() for i in range(count)]
    for i, value in enumerate(values):
        producer.produce("data", value, partition=i % DATA_PARTITIONS)
    return values


def _read(cluster: LocalCluster, *, committed: bool, count: int) -> list[bytes]:
    """Every value of ``data`` from the start, read until there are ``count`` (then a
    little longer, so that anything wrongly delivered would show)."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "txn-reader",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition("data", p, 0) for p in range(DATA_PARTITIONS)])
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        settle: float | None = None
        while settle is None or time.monotonic() < settle:
            assert time.monotonic() < deadline, f"read only {sorted(values)}"
            message = consumer.poll(POLL_S)
            if message is not None and message.error() is None:
                values.append(message.value())
            if settle is None and len(values) >= count:
                settle = time.monotonic() + SETTLE_S
        return values
    finally:
        consumer.close()


def _offsets(offset: int) -> list[TopicPartition]:
    return [TopicPartition("data", p, offset) for p in range(DATA_PARTITIONS)]


def test_markers_reach_partitions_and_offsets_on_other_brokers(txn_cluster: LocalCluster) -> None:
    cluster = txn_cluster
    coordinator, servers = _coordinator(cluster)
    first, second = _others(cluster, coordinator)
    create_topic(cluster, "data", [[first, second, coordinator], [second, coordinator, first]])
    group = _group_coordinated_by(cluster, (first, second))
    group_member = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    producer = _producer(cluster)
    try:
        producer.init_transactions(WAIT_S)
        committed = _produce_transaction(producer, group_member, "c", 10, commit=True)
        aborted = _produce_transaction(producer, group_member, "a", 99, commit=False)
        assert _committed_offsets(group_member) == [10, 10]
        committed += _produce_transaction(producer, group_member, "d", 20, commit=True)
        assert _committed_offsets(group_member) == [20, 20]
    finally:
        group_member.close()
    state = _state(servers)
    assert (state.error_code, state.transaction_state) == (E.none, "CompleteCommit")
    assert sorted(_read(cluster, committed=True, count=len(committed))) == sorted(committed)
    everything = committed + aborted
    assert sorted(_read(cluster, committed=False, count=len(everything))) == sorted(everything)
    _transaction_v2_through_another_leader(cluster, servers, first)


def _transaction_v2_through_another_leader(
    cluster: LocalCluster, coordinator_servers: str, leader: int
) -> None:
    """A version 2 transaction whose partition (data-0) another broker leads: unadded
    at v11 it is refused, at v12 that broker adds it through the coordinator."""
    started = _init_producer_id(coordinator_servers, 5)
    assert started.error_code == E.none
    pid, epoch = int(started.producer_id), int(started.producer_epoch)
    (leader_broker,) = [b for b in cluster.brokers if b.broker_id == leader]

    def produce(version: int) -> Any:
        batch = make_batch(
            [b"v2"],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0,
            attributes=TRANSACTIONAL_FLAG_MASK,
            timestamp_ms=int(time.time() * 1000),
        )
        body = wire_call(
            leader_broker.bootstrap_servers,
            PRODUCE,
            version,
            {
                "transactional_id": TXN_ID,
                "acks": -1,
                "timeout": int(WAIT_S * 1000),
                "topic_data": [
                    {"name": "data", "partition_data": [{"index": 0, "records": batch}]}
                ],
            },
        )
        return body.responses[0].partition_responses[0].error_code

    assert produce(11) == E.transaction_abortable
    assert produce(12) == E.none
    state = _state(coordinator_servers)
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [("data", [0])]
    ended = wire_call(
        coordinator_servers,
        END_TXN,
        5,
        {
            "transactional_id": TXN_ID,
            "producer_id": pid,
            "producer_epoch": epoch,
            "committed": True,
        },
    )
    assert (ended.error_code, ended.producer_epoch) == (E.none, epoch + 1)
    wait_for(
        lambda: _state(coordinator_servers).transaction_state == "CompleteCommit",
        "the version 2 commit's markers",
    )


def _produce_transaction(
    producer: Producer, group_member: Consumer, prefix: str, offset: int, *, commit: bool
) -> list[bytes]:
    """One transaction of ten records over both partitions, committing ``offset`` for
    both as the group's; committed or aborted."""
    producer.begin_transaction()
    values = _produce(producer, prefix, 10)
    producer.send_offsets_to_transaction(
        _offsets(offset), group_member.consumer_group_metadata(), WAIT_S
    )
    if commit:
        producer.commit_transaction(WAIT_S)
    else:
        assert producer.flush(WAIT_S) == 0
        producer.abort_transaction(WAIT_S)
    return values


def _committed_offsets(group_member: Consumer) -> list[int]:
    return [tp.offset for tp in group_member.committed(_offsets(0), timeout=WAIT_S)]


@pytest.mark.parametrize("ending", ["killed", "stopped"])
def test_a_transaction_in_prepare_commit_completes_after_its_coordinator_dies(
    txn_cluster: LocalCluster, ending: str
) -> None:
    """The leader of partition 0, also the group coordinator of the offsets sent with
    the transaction, is paused while the transaction commits: EndTxn is answered once
    PrepareCommit is in ``__transaction_state`` (the paused broker drops out of its
    ISR), the marker to partition 1 is written, those to partition 0 and to the
    group's offsets partition cannot be. The coordinator is then killed (its
    ZooKeeper session expires) or stopped (its controlled shutdown hands the state
    partition over; the paused broker is not the controller, which must answer), the
    paused broker resumed: the state partition's new leader loads PrepareCommit and
    completes the commit, offsets included."""
    cluster = txn_cluster
    coordinator, servers = _coordinator(cluster)
    controller = cluster.controller_id()
    paused, other = sorted(_others(cluster, coordinator), key=lambda b: b == controller)
    create_topic(cluster, "data", [[paused, other, coordinator], [other, paused, coordinator]])
    group_member = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": _group_coordinated_by(cluster, (paused,)),
        }
    )
    producer = _producer(cluster)
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    committed = _produce(producer, "c", 20)
    producer.send_offsets_to_transaction(
        _offsets(7), group_member.consumer_group_metadata(), WAIT_S
    )
    assert producer.flush(WAIT_S) == 0
    cluster.brokers[paused].pause()
    try:
        producer.commit_transaction(WAIT_S)
        state = _state(servers)
        assert (state.error_code, state.transaction_state) == (E.none, "PrepareCommit")
        if ending == "killed":
            cluster.brokers[coordinator].kill()
        else:
            assert cluster.brokers[coordinator].stop() == 0
    finally:
        cluster.brokers[paused].resume()
    new_coordinator, new_servers = _coordinator(cluster, other_than=coordinator)

    def completed() -> bool:
        state = _state(new_servers)
        return state.error_code == E.none and state.transaction_state == "CompleteCommit"

    wait_for(completed, f"broker {new_coordinator} to complete the commit", timeout_s=WAIT_S)
    assert sorted(_read(cluster, committed=True, count=len(committed))) == sorted(committed)
    try:
        assert _committed_offsets(group_member) == [7, 7]
    finally:
        group_member.close()
    # The LSO moved past the commit: the next transaction is delivered too.
    producer.begin_transaction()
    committed += _produce(producer, "d", 10)
    producer.commit_transaction(WAIT_S)
    assert sorted(_read(cluster, committed=True, count=len(committed))) == sorted(committed)


def test_a_marker_follows_its_partition_to_a_new_leader(txn_cluster: LocalCluster) -> None:
    """The leader of partition 0 is paused while the transaction commits, so the
    coordinator's marker waits in its socket; its ZooKeeper session expires and the
    partition moves to another replica. Resumed, the old leader either refuses the
    marker or appends it and, on learning it follows, fails the append: either way
    NOT_LEADER_OR_FOLLOWER, and the coordinator sends the marker to the new leader."""
    cluster = txn_cluster
    coordinator, servers = _coordinator(cluster)
    moved, new_leader = _others(cluster, coordinator)
    create_topic(
        cluster, "data", [[moved, new_leader, coordinator], [new_leader, moved, coordinator]]
    )
    producer = _producer(cluster)
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    committed = _produce(producer, "c", 20)
    assert producer.flush(WAIT_S) == 0
    cluster.brokers[moved].pause()
    try:
        producer.commit_transaction(WAIT_S)
        state = _state(servers)
        assert (state.error_code, state.transaction_state) == (E.none, "PrepareCommit")

        def moved_away() -> bool:
            partition = cluster.partition_state("data", 0)
            return partition is not None and partition.leader == new_leader

        wait_for(moved_away, f"broker {new_leader} to lead data-0", timeout_s=WAIT_S)
    finally:
        cluster.brokers[moved].resume()

    def completed() -> bool:
        state = _state(servers)
        return state.error_code == E.none and state.transaction_state == "CompleteCommit"

    wait_for(completed, f"broker {coordinator} to complete the commit", timeout_s=WAIT_S)
    output = cluster.brokers[coordinator].output.read_text(encoding="utf-8", errors="replace")
    assert "marker for data-0 refused with not_leader_or_follower" in output
    assert sorted(_read(cluster, committed=True, count=len(committed))) == sorted(committed)
    producer.begin_transaction()
    committed += _produce(producer, "d", 10)
    producer.commit_transaction(WAIT_S)
    assert sorted(_read(cluster, committed=True, count=len(committed))) == sorted(committed)
