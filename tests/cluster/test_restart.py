"""A follower killed (SIGKILL) and restarted recovers its own log and fetches only
what it missed."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from tickwheel.cluster import LocalCluster

from .helpers import (
    SESSION_TIMEOUT_MS,
    WAIT_S,
    create_topic,
    isr,
    log_bytes,
    segment_files,
    wait_for,
)

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

TOPIC = "restarted"
FOLLOWER = 2
BATCH = 200
_MS_PER_S = 1000


def _produce(cluster: LocalCluster, first: int, count: int) -> None:
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5}
    )
    for index in range(first, first + count):
        producer.produce(TOPIC, value=f"message-{index}".encode())
    assert producer.flush(WAIT_S) == 0


def test_killed_follower_catches_up_from_its_own_log(cluster: LocalCluster) -> None:
    create_topic(cluster, TOPIC, [[0, 1, FOLLOWER]])
    logs = [b.log_dir for b in cluster.brokers]

    def replicas_identical() -> bool:
        return len({log_bytes(d, TOPIC) for d in logs}) == 1

    _produce(cluster, 0, BATCH)
    wait_for(replicas_identical, "the first messages on every replica")
    follower = cluster.brokers[FOLLOWER]
    segment = next(segment_files(follower.log_dir, TOPIC))
    inode, before = segment.stat().st_ino, segment.read_bytes()

    follower.kill()
    # acks=all waits until the dead follower leaves the ISR, then goes on.
    _produce(cluster, BATCH, BATCH)
    assert FOLLOWER not in isr(cluster, TOPIC)

    follower.start()
    cluster.wait_registered(FOLLOWER, timeout_s=SESSION_TIMEOUT_MS / _MS_PER_S + WAIT_S)
    wait_for(replicas_identical, "the restarted follower to catch up")
    wait_for(lambda: FOLLOWER in isr(cluster, TOPIC), "the restarted follower to rejoin")
    # It kept its own log (the same file, what it had as its start) and fetched the rest.
    assert segment.stat().st_ino == inode
    assert segment.read_bytes().startswith(before)
    assert len(segment.read_bytes()) > len(before)
