"""``tickwheel bench transactions``: its wire producer runs each protocol against a real
broker, and the records it commits are the ones a read_committed consumer reads."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.bench import transactions
from tickwheel.bench._wire_producer import Mode, WireProducer, WireProducerError
from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration

MESSAGES = 2_500
TIMEOUT_S = 30.0


def _topic(bootstrap: str) -> str:
    name = f"bench-wire-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 6, 1)])[name].result(TIMEOUT_S)
    return name


def _committed(bootstrap: str, topic: str, expected: int) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    read = 0
    try:
        for _ in range(int(TIMEOUT_S)):
            read += sum(1 for m in consumer.consume(1000, timeout=1.0) if m.error() is None)
            if read >= expected:
                break
    finally:
        consumer.close()
    return read


@pytest.mark.parametrize("mode", list(Mode))
def test_each_mode_commits_every_message(tickwheel_broker: BackgroundBroker, mode: Mode) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    topic = _topic(bootstrap)
    rate = transactions.wire_rate(bootstrap, topic, MESSAGES, 100, mode, f"tx-{mode.name}")
    assert rate > 0
    assert _committed(bootstrap, topic, MESSAGES) == MESSAGES


def test_a_refusal_is_raised_not_hidden(tickwheel_broker: BackgroundBroker) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    producer = WireProducer(bootstrap, "no-such-topic", Mode.V2, "tx-missing")
    try:
        with pytest.raises(WireProducerError, match="Produce to no-such-topic-0"):
            producer.send({0: [b"x"]})
    finally:
        producer.close()
