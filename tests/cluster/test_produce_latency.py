"""acks=all latency at a steady pace, with a second (idle) RF 3 topic on the cluster.

Each acks=all answer is written a few ms after its request arrived, once the
followers' next fetches moved the high watermark. Without ``TCP_NODELAY`` on the
broker's accepted sockets, Nagle held that answer while the previous one was still
unacknowledged, and the client acknowledges late (delayed ACK) unless it sends: every
answer then left with the client's *next* request, so a paced producer saw one send
interval of latency (21 ms at 50 messages/s) or up to the delayed-ACK timeout at
lower rates. The state is entered whenever two answers are written back to back
(a burst), and then keeps itself; the test makes the burst on purpose.
``replica.fetch.wait.max.ms`` is long so that a parked follower fetch that an append
failed to wake would stand out as well.

A connection reads its next Produce while an acks=all one waits for the followers
(issue 21): muted, as Kafka's connections are, a producer sending one message per
request could not go faster than one replication round trip per request, and past
that its latency grew with its rate. The second test holds one acks=all produce with
a paused follower and shows that a later produce on the same connection is appended
(a consumer reads it) before the first is answered, while the answers still come in
order.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from tickwheel.cluster import LocalCluster

from .helpers import WAIT_S, create_topic, local_cluster, log_bytes, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

FETCH_WAIT_MS = 2000
RATE_PER_S = 50
MESSAGES = 100
BURST = 30
# A stall would be one send interval (20 ms) or a parked fetch (2000 ms); an
# undisturbed acks=all round trip on loopback takes a few ms.
MEDIAN_BOUND_MS = 10.0
P99_BOUND_MS = 100.0
# The paused follower's ZooKeeper session, as long as ZooKeeper grants (20 ticks of
# helpers.ZOOKEEPER_TICK_MS): its expiry would shrink the ISR and answer the held
# produce, so the piped one must be read back well before.
PAUSED_SESSION_TIMEOUT_MS = 10_000
PIPED_READ_S = 7.0


@pytest.fixture
def slow_fetch_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """Three brokers whose followers park their fetches for up to 2 s."""
    properties = {"replica.fetch.wait.max.ms": str(FETCH_WAIT_MS)}
    with local_cluster(tmp_path, properties=properties) as cluster:
        yield cluster


def _delivered(latencies: list[float], sent_s: float, error: KafkaError | None, _: Message) -> None:
    assert error is None, error
    latencies.append((time.perf_counter() - sent_s) * 1000)


def test_paced_acks_all_sends_are_answered_at_once(slow_fetch_cluster: LocalCluster) -> None:
    cluster = slow_fetch_cluster
    create_topic(cluster, "idle", [[1, 2, 0]])
    create_topic(cluster, "paced", [[0, 1, 2]])
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0}
    )
    # Until the first answer, the followers may not fetch the new partition yet.
    producer.produce("paced", b"warm-up")
    assert producer.flush(WAIT_S) == 0
    # Several answers written back to back: with Nagle, the last waits for an ACK.
    for _ in range(BURST):
        producer.produce("paced", b"burst")
    latencies: list[float] = []
    interval_s = 1 / RATE_PER_S
    next_send_s = time.perf_counter()
    for _ in range(MESSAGES):
        while (wait_s := next_send_s - time.perf_counter()) > 0:
            producer.poll(wait_s)
        producer.produce(
            "paced",
            b"x" * 100,
            on_delivery=functools.partial(_delivered, latencies, time.perf_counter()),
        )
        next_send_s += interval_s
    assert producer.flush(WAIT_S) == 0
    latencies.sort()
    median_ms = statistics.median(latencies)
    p99_ms = latencies[round(0.99 * (len(latencies) - 1))]
    assert median_ms < MEDIAN_BOUND_MS, f"p50 {median_ms:.1f} ms, p99 {p99_ms:.1f} ms"
    assert p99_ms < P99_BOUND_MS, f"p50 {median_ms:.1f} ms, p99 {p99_ms:.1f} ms"


def _record(delivered: list[str], error: KafkaError | None, message: Message) -> None:
    assert error is None, error
    delivered.append(str(message.topic()))


def test_a_produce_is_appended_while_an_earlier_one_waits_for_acks(tmp_path: Path) -> None:
    # The follower stays in the ISR while paused: the acks=all produce waits for it.
    properties = {
        "replica.lag.time.max.ms": "60000",
        "zookeeper.session.timeout.ms": str(PAUSED_SESSION_TIMEOUT_MS),
    }
    with local_cluster(tmp_path, properties=properties) as cluster:
        create_topic(cluster, "waiting", [[0, 1]])
        create_topic(cluster, "immediate", [[0]])
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0}
        )
        # Both leaders known, and the follower caught up, before it is paused.
        for topic in ("waiting", "immediate"):
            producer.produce(topic, b"warm-up")
        assert producer.flush(WAIT_S) == 0
        delivered: list[str] = []
        leader_log_dir = cluster.brokers[0].log_dir
        cluster.brokers[1].pause()
        try:
            producer.produce("waiting", b"held", on_delivery=functools.partial(_record, delivered))
            # The held produce is in the leader's log (and waits) before the next is sent.
            wait_for(
                lambda: b"held" in log_bytes(leader_log_dir, "waiting"),
                "the leader to append the held produce",
            )
            producer.produce(
                "immediate", b"piped", on_delivery=functools.partial(_record, delivered)
            )
            producer.poll(0)
            consumer = Consumer(
                {
                    "bootstrap.servers": cluster.bootstrap_servers,
                    "group.id": "pipelined-produce",
                    "enable.auto.commit": False,
                }
            )
            consumer.assign([TopicPartition("immediate", 0, OFFSET_BEGINNING)])
            values: list[bytes | None] = []
            deadline_s = time.monotonic() + PIPED_READ_S
            while b"piped" not in values and time.monotonic() < deadline_s:
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    values.append(message.value())
            consumer.close()
            producer.poll(0)
            # Appended (read back) while the earlier produce still waits: neither answered.
            assert b"piped" in values, values
            assert delivered == []
        finally:
            cluster.brokers[1].resume()
        assert producer.flush(WAIT_S) == 0
        assert delivered == ["waiting", "immediate"]
