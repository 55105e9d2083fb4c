"""Leader failover: a controller re-elects leaders when brokers die, followers truncate
to where their leader's log parts from theirs, and leadership moves back on request.

Every scenario runs three broker processes and ZooKeeper (6 s sessions): a SIGKILLed
broker is noticed when its session expires, so each kill costs about that long.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ElectionType,
    KafkaError,
    Producer,
)
from confluent_kafka import TopicPartition as ClientPartition
from confluent_kafka.admin import AdminClient

from tickwheel.cluster import LocalCluster
from tickwheel.replica import NO_LEADER

from .helpers import (
    SESSION_TIMEOUT_MS,
    WAIT_S,
    create_topic,
    isr,
    local_cluster,
    log_bytes,
    read_all,
    wait_for,
    writing,
)

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

TOPIC = "failover"
ASSIGNMENT = [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
_MS_PER_S = 1000
SESSION_S = SESSION_TIMEOUT_MS / _MS_PER_S
FAILOVER_S = SESSION_S + 5.0
"""A dead leader's partitions take writes again within its session timeout plus this."""
NEW_RECORDS = 8


def _leader(cluster: LocalCluster, topic: str, partition: int = 0) -> int:
    state = cluster.partition_state(topic, partition)
    assert state is not None
    return state.leader


def _restart(cluster: LocalCluster, broker_id: int) -> None:
    cluster.brokers[broker_id].start()
    cluster.wait_registered(broker_id, timeout_s=SESSION_S + WAIT_S)


def _replicas_identical(cluster: LocalCluster, topic: str, assignment: list[list[int]]) -> bool:
    """Whether every replica of every partition holds the same log bytes."""
    return all(
        len({log_bytes(cluster.brokers[b].log_dir, topic, p) for b in replicas}) == 1
        for p, replicas in enumerate(assignment)
    )


def test_killed_leaders_lose_no_acknowledged_record(cluster: LocalCluster) -> None:
    create_topic(cluster, TOPIC, ASSIGNMENT, {"min.insync.replicas": "2"})
    with writing(cluster, TOPIC, len(ASSIGNMENT)) as writer:
        for _ in range(3):
            wait_for(lambda: writer.acked_since(0, 0), "writes to partition 0")
            victim = _leader(cluster, TOPIC)
            cluster.brokers[victim].kill()
            killed_at = time.monotonic()
            before = len(writer.acked[0])
            wait_for(
                lambda v=victim: _leader(cluster, TOPIC) not in (v, NO_LEADER),
                "a new leader of partition 0",
                timeout_s=FAILOVER_S,
            )
            wait_for(
                lambda b=before: writer.acked_since(0, b),
                "partition 0 to take writes again",
                timeout_s=FAILOVER_S - (time.monotonic() - killed_at),
            )
            _restart(cluster, victim)
            wait_for(
                lambda: all(len(isr(cluster, TOPIC, p)) == 3 for p in range(len(ASSIGNMENT))),
                "every ISR to be full again",
            )
    assert not writer.failed
    for partition, acked in enumerate(writer.acked):
        values = read_all(cluster, TOPIC, partition)
        assert values == sorted(set(values)), f"partition {partition}: duplicated or reordered"
        assert set(acked) <= set(values), f"partition {partition}: acknowledged records lost"
    wait_for(lambda: _replicas_identical(cluster, TOPIC, ASSIGNMENT), "identical replicas")


def test_a_new_controller_handles_the_next_leader_death(cluster: LocalCluster) -> None:
    create_topic(cluster, TOPIC, ASSIGNMENT)
    old_controller = cluster.controller_id()
    assert old_controller is not None
    cluster.brokers[old_controller].kill()
    wait_for(
        lambda: cluster.controller_id() not in (None, old_controller),
        "a new controller",
        timeout_s=FAILOVER_S,
    )
    new_controller = cluster.controller_id()
    assert new_controller is not None
    # A leader that is not the new controller dies next; the new controller moves it.
    victim = next(b for b in range(3) if b not in (old_controller, new_controller))
    partition = next(p for p, replicas in enumerate(ASSIGNMENT) if replicas[0] == victim)
    wait_for(lambda: _leader(cluster, TOPIC, partition) == victim, "the victim to lead")
    cluster.brokers[victim].kill()
    wait_for(
        lambda: _leader(cluster, TOPIC, partition) == new_controller,
        "the new controller to elect the last live replica",
        timeout_s=FAILOVER_S,
    )


def test_a_returning_leader_truncates_what_it_never_replicated(cluster: LocalCluster) -> None:
    topic = "diverging"
    # Broker 1 may have left the ISR by the time it leads again: an unclean election
    # lets it lead either way, and the records only broker 0 held are the ones to go.
    create_topic(cluster, topic, [[0, 1]], {"unclean.leader.election.enable": "true"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": 1})
    for index in range(10):
        producer.produce(topic, f"replicated-{index}".encode())
    assert producer.flush(WAIT_S) == 0
    wait_for(lambda: _replicas_identical(cluster, topic, [[0, 1]]), "both replicas in step")
    cluster.brokers[1].kill()
    # acks=1: the leader appends records its dead follower never fetched.
    for index in range(5):
        producer.produce(topic, f"lost-{index}".encode())
    assert producer.flush(WAIT_S) == 0
    cluster.brokers[0].kill()
    _restart(cluster, 1)
    wait_for(
        lambda: _leader(cluster, topic) == 1, "broker 1 to lead", timeout_s=FAILOVER_S + SESSION_S
    )
    survivor = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    # More than were lost: the returning log ends below the new leader's, so only the
    # epochs, not an out-of-range fetch, can tell where the two logs part.
    for index in range(NEW_RECORDS):
        survivor.produce(topic, f"new-{index}".encode())
    assert survivor.flush(WAIT_S) == 0
    _restart(cluster, 0)
    wait_for(
        lambda: _replicas_identical(cluster, topic, [[0, 1]]), "broker 0 to truncate and catch up"
    )
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "diverging"})
    consumer.assign([ClientPartition(topic, 0, OFFSET_BEGINNING)])
    values = []
    deadline = time.monotonic() + WAIT_S
    while len(values) < 10 + NEW_RECORDS and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value().decode())
    consumer.close()
    expected = [f"replicated-{i}" for i in range(10)] + [f"new-{i}" for i in range(NEW_RECORDS)]
    assert values == expected


def test_unclean_election_only_where_allowed(cluster: LocalCluster) -> None:
    clean, unclean = "clean", "unclean"
    create_topic(cluster, clean, [[0, 1]], {"unclean.leader.election.enable": "false"})
    create_topic(cluster, unclean, [[0, 1]], {"unclean.leader.election.enable": "true"})
    cluster.brokers[1].kill()
    for topic in (clean, unclean):
        wait_for(lambda t=topic: isr(cluster, t) == (0,), f"{topic}: broker 1 out of the ISR")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for topic in (clean, unclean):
        producer.produce(topic, b"only-on-0")
    assert producer.flush(WAIT_S) == 0
    cluster.brokers[0].kill()
    _restart(cluster, 1)
    wait_for(lambda: _leader(cluster, unclean) == 1, "the out-of-sync replica to lead")
    # The clean topic stays offline: its only in-sync replica is dead, and eligible.
    assert _leader(cluster, clean) == NO_LEADER
    state = cluster.partition_state(clean, 0)
    assert state is not None
    assert (state.isr, state.elr) == ((), (0,))
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(
        timeout=WAIT_S
    )
    assert metadata.topics[clean].partitions[0].leader == -1
    assert metadata.topics[unclean].partitions[0].leader == 1


def test_sigterm_hands_leadership_over_and_elect_leaders_moves_it_back(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, TOPIC, ASSIGNMENT)
    leaving = 0
    partition = 0
    assert _leader(cluster, TOPIC, partition) == leaving
    stopped_at = time.monotonic()
    assert cluster.brokers[leaving].stop() == 0
    # Handed over before the process ended: no session timeout was waited for.
    assert _leader(cluster, TOPIC, partition) not in (leaving, NO_LEADER)
    assert time.monotonic() - stopped_at < SESSION_S
    _restart(cluster, leaving)
    wait_for(lambda: leaving in isr(cluster, TOPIC, partition), "the restarted broker in sync")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    def elected() -> bool:
        """One preferred election; False while the controller has not yet seen the
        restarted broker live and in sync (PREFERRED_LEADER_NOT_AVAILABLE, which Kafka
        makes retriable too)."""
        tp = ClientPartition(TOPIC, partition)
        error = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(WAIT_S)[tp]
        if isinstance(error, KafkaError):
            assert error.code() == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE, error
            return False
        return True

    wait_for(elected, "a preferred election that moves the leadership back")
    assert _leader(cluster, TOPIC, partition) == leaving
    again = admin.elect_leaders(ElectionType.PREFERRED, [ClientPartition(TOPIC, partition)])
    error = again.result(WAIT_S)[ClientPartition(TOPIC, partition)]
    assert isinstance(error, KafkaError)
    assert error.code() == KafkaError.ELECTION_NOT_NEEDED


def test_leadership_drifts_back_to_preferred_replicas(tmp_path: Path) -> None:
    properties = {"leader.imbalance.check.interval.seconds": "1"}
    with local_cluster(tmp_path, properties=properties) as cluster:
        create_topic(cluster, TOPIC, ASSIGNMENT)
        cluster.brokers[0].kill()
        wait_for(
            lambda: _leader(cluster, TOPIC) not in (0, NO_LEADER),
            "another leader of partition 0",
            timeout_s=FAILOVER_S,
        )
        _restart(cluster, 0)
        # Broker 0 leads none of the partitions it is preferred for: above 10 %.
        wait_for(lambda: _leader(cluster, TOPIC) == 0, "partition 0 back on broker 0")
