"""Share state outlives its broker: a broker SIGKILLed while a share consumer holds
records comes back with every accepted and rejected record settled and every held one
available again, with its delivery count (``__share_group_state``, through the share
coordinator). The group starts at the earliest offset through the group config
``share.auto.offset.reset``, set with the AdminClient."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tickwheel.cluster import BrokerProcess, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DEADLINE_S = 30.0
GROUP = "survivors"
TOPIC = "durable-queue"
PROPERTIES = {
    "offsets.topic.num.partitions": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.session.timeout.ms": "1000",
}


def _poll_until(
    consumer: ShareConsumer, done: Callable[[list[Message]], bool], what: str
) -> list[Message]:
    received: list[Message] = []
    deadline = time.monotonic() + DEADLINE_S
    while not done(received):
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {len(received)}"
        for message in consumer.poll(0.2) or []:
            assert message.error() is None, message.error()
            received.append(message)
    return received


def _consumer(bootstrap: str) -> ShareConsumer:
    return ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "share.acknowledgement.mode": "explicit",
            "fetch.wait.max.ms": 500,
        }
    )


def test_a_killed_broker_redelivers_no_accepted_or_rejected_record(tmp_path: Path) -> None:
    broker = BrokerProcess(1, free_port(), tmp_path / "logs", PROPERTIES)
    broker.start()
    try:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(DEADLINE_S)
        earliest = ConfigResource(
            ConfigResource.Type.GROUP,
            GROUP,
            incremental_configs=[
                ConfigEntry(
                    "share.auto.offset.reset",
                    "earliest",
                    incremental_operation=AlterConfigOpType.SET,
                )
            ],
        )
        admin.incremental_alter_configs([earliest])[earliest].result(DEADLINE_S)
        producer = Producer({"bootstrap.servers": bootstrap})
        values = [f"r{i:02d}".encode() for i in range(30)]
        for value in values:
            producer.produce(TOPIC, value)
        assert producer.flush(DEADLINE_S) == 0

        first = _consumer(bootstrap)
        first.subscribe([TOPIC])
        delivered = _poll_until(first, lambda got: len(got) >= len(values), "every record")
        assert [m.value() for m in delivered] == values
        accepted, rejected, held = delivered[:15], delivered[15:20], delivered[20:]
        for message in accepted:
            first.acknowledge(message, AcknowledgeType.ACCEPT)
        for message in rejected:
            first.acknowledge(message, AcknowledgeType.REJECT)
        results = first.commit_sync(DEADLINE_S)
        assert results
        assert all(error is None for error in results.values()), results
        # The broker dies with ten records acquired and never acknowledged.
        broker.kill()
        broker.start()

        second = _consumer(bootstrap)
        second.subscribe([TOPIC])
        redelivered = _poll_until(second, lambda got: len(got) >= len(held), "the held records")
        assert [(m.value(), m.delivery_count()) for m in redelivered] == [
            (m.value(), 2) for m in held
        ]
        for message in redelivered:
            second.acknowledge(message, AcknowledgeType.ACCEPT)
        second.commit_sync(DEADLINE_S)
        # Nothing settled before the crash comes back: the next record is the sentinel.
        producer.produce(TOPIC, b"sentinel")
        assert producer.flush(DEADLINE_S) == 0
        after = _poll_until(second, bool, "the sentinel")
        assert [m.value() for m in after] == [b"sentinel"]
        second.close()
        first.close()
    finally:
        broker.stop()
