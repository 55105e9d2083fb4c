"""The ISR under a stalled follower: it leaves after ``replica.lag.time.max.ms``,
``min.insync.replicas`` decides whether acks=all goes on, and it rejoins once
caught up."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Message, Producer
from kio.schema.errors import ErrorCode

from tickwheel.cluster import LocalCluster

from .helpers import (
    LAG_TIME_MS,
    WAIT_S,
    create_topic,
    isr,
    log_bytes,
    produce_raw,
    wait_for,
)

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

MIN_ISR_2 = "min-isr-2"
MIN_ISR_3 = "min-isr-3"
LEADER = 0
STALLED = 2
_MS_PER_S = 1000
EARLIEST_REMOVAL_MS = LAG_TIME_MS // 2
"""The follower's last caught-up fetch may precede its pause by a fetch wait and, on a
loaded machine, by scheduling delays too: half the lag time is a bound that still
tells removal by lag from removal at once."""
LATEST_REMOVAL_MS = 3 * LAG_TIME_MS
"""The lag time, plus the check interval (half of it), plus slack for the write."""
TIMEOUT_SLACK_MS = 500
"""How soon after its timeout an expired produce must be answered, seen from the client
(a new connection, and a loaded machine's scheduling)."""


def _produce(cluster: LocalCluster, topic: str, value: bytes) -> KafkaError | None:
    """One acks=all produce through confluent-kafka, no retries; its error or None."""
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 0,
            "retries": 0,
        }
    )
    outcome: list[KafkaError | None] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        outcome.append(error)

    producer.produce(topic, value=value, on_delivery=delivered)
    assert producer.flush(WAIT_S) == 0
    return outcome[0]


def test_stalled_follower_leaves_the_isr_and_rejoins(cluster: LocalCluster) -> None:
    for topic, min_isr in ((MIN_ISR_2, "2"), (MIN_ISR_3, "3")):
        create_topic(cluster, topic, [[LEADER, 1, STALLED]], {"min.insync.replicas": min_isr})
        assert _produce(cluster, topic, b"all in sync") is None
    leader = cluster.brokers[LEADER].bootstrap_servers
    follower = cluster.brokers[STALLED]

    follower.pause()
    paused_at = time.monotonic()
    try:
        # Waits for the stalled follower; once it leaves, the ISR (2) is below
        # min.insync.replicas (3) and the HW holds (Kafka's strict min ISR): the
        # produce times out.
        error, _ = produce_raw(leader, MIN_ISR_3, b"waits", timeout_ms=LATEST_REMOVAL_MS)
        assert error == ErrorCode.request_timed_out
        wait_for(
            lambda: STALLED not in isr(cluster, MIN_ISR_2) + isr(cluster, MIN_ISR_3),
            "the stalled follower to leave both ISRs",
        )
        left_after_ms = (time.monotonic() - paused_at) * _MS_PER_S
        assert left_after_ms >= EARLIEST_REMOVAL_MS
        assert sorted(isr(cluster, MIN_ISR_2)) == [LEADER, 1]

        assert _produce(cluster, MIN_ISR_2, b"two in sync are enough") is None
        rejected = _produce(cluster, MIN_ISR_3, b"two in sync are too few")
        assert rejected is not None
        assert rejected.code() == KafkaError.NOT_ENOUGH_REPLICAS
    finally:
        follower.resume()

    for topic in (MIN_ISR_2, MIN_ISR_3):
        wait_for(lambda t=topic: STALLED in isr(cluster, t), f"the follower to rejoin {topic}")
        logs = [b.log_dir for b in cluster.brokers]
        wait_for(
            lambda t=topic, dirs=logs: len({log_bytes(d, t) for d in dirs}) == 1,
            f"the follower to catch up on {topic}",
        )
    assert _produce(cluster, MIN_ISR_3, b"three in sync again") is None


def test_produce_waiting_on_a_silent_follower_completes_when_it_leaves_the_isr(
    cluster: LocalCluster,
) -> None:
    topic = "silent-follower"
    create_topic(cluster, topic, [[LEADER, 1, STALLED]])
    leader = cluster.brokers[LEADER].bootstrap_servers
    assert produce_raw(leader, topic, b"warm", timeout_ms=10_000)[0] == ErrorCode.none
    cluster.brokers[STALLED].pause()
    try:
        error, elapsed_s = produce_raw(leader, topic, b"waits", timeout_ms=WAIT_S * _MS_PER_S)
    finally:
        cluster.brokers[STALLED].resume()
    assert error == ErrorCode.none
    # Not before the follower could have been dropped, and long before the timeout.
    assert EARLIEST_REMOVAL_MS <= elapsed_s * _MS_PER_S <= LATEST_REMOVAL_MS


def test_produce_waiting_on_a_silent_follower_times_out_never_later(
    cluster: LocalCluster,
) -> None:
    topic = "timed-out"
    create_topic(cluster, topic, [[LEADER, 1, STALLED]])
    leader = cluster.brokers[LEADER].bootstrap_servers
    assert produce_raw(leader, topic, b"warm", timeout_ms=10_000)[0] == ErrorCode.none
    timeout_ms = LAG_TIME_MS // 4
    cluster.brokers[STALLED].pause()
    try:
        error, elapsed_s = produce_raw(leader, topic, b"waits", timeout_ms=timeout_ms)
    finally:
        cluster.brokers[STALLED].resume()
    assert error == ErrorCode.request_timed_out
    assert timeout_ms <= elapsed_s * _MS_PER_S <= timeout_ms + TIMEOUT_SLACK_MS
