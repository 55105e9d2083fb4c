"""Every acknowledged record is readable after a crash, before anything new is written.

Round after round, an idempotent acks=all producer (confluent-kafka) writes numbered
records to a broker process (``tickwheel serve``) until a random moment, when the
broker is SIGKILLed. The broker is started again on its log directory and, before
any producer writes, a consumer reads each partition up to its high watermark: every
record the producer saw acknowledged must be there, once, in the order it was sent
(records sent but never acknowledged may be there too). The high watermark
checkpoint is written every 5 s (Kafka's default), so the crash always finds it
behind: the records are readable only because becoming leader raises the high
watermark again.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.cluster import BrokerProcess, free_port

from .crashing import produce_until_killed

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROUNDS = 6
TOPIC = "crash"
PARTITIONS = 2
WAIT_S = 30.0
_POLL_S = 0.05
PROPERTIES = {
    "offsets.topic.num.partitions": "1",
    "replica.high.watermark.checkpoint.interval.ms": "5000",
}


def _wait_listening(broker: BrokerProcess) -> None:
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", broker.port), timeout=1.0).close()
            return
        except OSError:
            if time.monotonic() > deadline or not broker.running:
                raise AssertionError(f"broker never listened; see {broker.output}") from None
            time.sleep(_POLL_S)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(1, free_port(), tmp_path / "logs", PROPERTIES)
    process.start()
    try:
        _wait_listening(process)
        admin = AdminClient({"bootstrap.servers": process.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS)])[TOPIC].result(WAIT_S)
        yield process
    finally:
        process.stop()


def _read_back(broker: BrokerProcess, partition: int) -> tuple[list[int], int]:
    """Every record of ``partition`` below its high watermark, and that watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "crash-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), WAIT_S)
        consumer.assign([TopicPartition(TOPIC, partition, OFFSET_BEGINNING)])
        values: list[int] = []
        next_offset = 0
        deadline = time.monotonic() + WAIT_S
        while next_offset < high:
            assert time.monotonic() < deadline, f"read {next_offset} of {high} records"
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            assert message.offset() == next_offset
            values.append(int(message.value()))
            next_offset += 1
        return values, high
    finally:
        consumer.close()


def test_acknowledged_records_are_readable_after_every_sigkill(broker: BrokerProcess) -> None:
    rng = random.Random()
    acked: dict[int, list[int]] = {partition: [] for partition in range(PARTITIONS)}
    number = 0
    for round_index in range(ROUNDS):
        number = produce_until_killed(
            broker.bootstrap_servers,
            TOPIC,
            PARTITIONS,
            number,
            rng.uniform(0.05, 0.4),
            broker.kill,
            acked,
        )
        broker.start()
        _wait_listening(broker)
        for partition in range(PARTITIONS):
            values, high = _read_back(broker, partition)
            where = f"round {round_index}, partition {partition}"
            assert len(values) == high, where
            assert values == sorted(set(values)), f"{where}: duplicated or out of order"
            missing = set(acked[partition]) - set(values)
            assert not missing, f"{where}: {len(missing)} acknowledged records are missing"
    assert sum(map(len, acked.values())) > ROUNDS
