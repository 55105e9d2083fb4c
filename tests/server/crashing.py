"""An idempotent acks=all producer writing numbered records until its broker is killed."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import KafkaError, Message, Producer

_MAX_QUEUED = 2000
WAIT_S = 30.0


def produce_until_killed(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    first: int,
    crash_after_s: float,
    kill: Callable[[], None],
    acked: dict[int, list[int]],
) -> int:
    """Send records numbered from ``first`` (record n to partition n % ``partitions``)
    until ``crash_after_s`` after the first acknowledgement (at most ``WAIT_S`` for it),
    then ``kill`` the broker; the acknowledged numbers go to ``acked`` by partition, in
    acknowledgement order. Returns the next number."""
    first_ack_s: list[float] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is None:
            acked[message.partition()].append(int(message.value()))
            if not first_ack_s:
                first_ack_s.append(time.monotonic())

    producer = Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
        }
    )
    number = first
    give_up_at = time.monotonic() + WAIT_S

    def crashing_time() -> bool:
        if first_ack_s:
            return time.monotonic() >= first_ack_s[0] + crash_after_s
        return time.monotonic() >= give_up_at

    while not crashing_time():
        producer.produce(
            topic, str(number).encode(), partition=number % partitions, on_delivery=delivered
        )
        number += 1
        producer.poll(0.001 if len(producer) > _MAX_QUEUED else 0)
    kill()
    # What is not acknowledged now never will be: this producer is done.
    producer.purge()
    producer.flush(0)
    producer.poll(0)
    return number
