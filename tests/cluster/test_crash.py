"""RF 3: a broker SIGKILLed at a random moment under an acks=all idempotent producer;
once it is back, and before anything new is written, every acknowledged record is
read back once and in order.

Each round kills a random broker — the leader or a follower of the partitions — at a
random moment after the round's first acknowledgement, restarts it at once, and reads
back. A partition the killed broker led either comes back to it (if it registers
before its old session expires) with the high watermark of its last checkpoint, which
lags until its followers' next fetches raise it to what the whole ISR holds; or moves
to another in-sync replica, and the restarted broker truncates to the new leader's log
before it follows. Either way every record acks=all acknowledged is read. The next
round starts once every ISR is full again.
"""

from __future__ import annotations

import random
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as ClientPartition

from server.crashing import produce_until_killed
from tickwheel.cluster import LocalCluster

from .helpers import SESSION_TIMEOUT_MS, WAIT_S, create_topic, isr, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

TOPIC = "crashing"
ROUNDS = 3
ASSIGNMENT = [[0, 1, 2], [1, 2, 0]]
_MS_PER_S = 1000


def _read_back(cluster: LocalCluster, partition: int, wanted: set[int], where: str) -> list[int]:
    """Read ``partition`` from the start until every ``wanted`` value was seen; a
    failure names ``where`` and the consumer's last error."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "crash-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([ClientPartition(TOPIC, partition, OFFSET_BEGINNING)])
        values: list[int] = []
        missing = set(wanted)
        last_error = None
        deadline = time.monotonic() + WAIT_S
        while missing:
            assert time.monotonic() < deadline, (
                f"{where}: {len(missing)} of {len(wanted)} missing, {len(values)} read, "
                f"last error {last_error}"
            )
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                last_error = message.error()
                continue
            assert message.offset() == len(values)
            values.append(int(message.value()))
            missing.discard(values[-1])
        return values
    finally:
        consumer.close()


def test_acknowledged_records_survive_a_killed_broker(cluster: LocalCluster) -> None:
    create_topic(cluster, TOPIC, ASSIGNMENT, {"min.insync.replicas": "2"})
    rng = random.Random()
    acked: dict[int, list[int]] = {partition: [] for partition in range(len(ASSIGNMENT))}
    number = 0
    for round_index in range(ROUNDS):
        victim = rng.randrange(len(cluster.brokers))
        number = produce_until_killed(
            cluster.bootstrap_servers,
            TOPIC,
            len(ASSIGNMENT),
            number,
            rng.uniform(0.2, 1.0),
            cluster.brokers[victim].kill,
            acked,
        )
        cluster.brokers[victim].start()
        cluster.wait_registered(victim, timeout_s=SESSION_TIMEOUT_MS / _MS_PER_S + WAIT_S)
        for partition, wanted in acked.items():
            where = f"round {round_index} (broker {victim} killed), partition {partition}"
            values = _read_back(cluster, partition, set(wanted), where)
            assert values == sorted(set(values)), f"{where}: duplicated or out of order"
        wait_for(
            lambda: all(len(isr(cluster, TOPIC, p)) == 3 for p in range(len(ASSIGNMENT))),
            "every ISR to be full again",
        )
    assert all(acked.values())
