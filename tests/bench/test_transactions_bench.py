"""``tickwheel bench transactions``: its wire producer runs each protocol against a real
broker, and the records it commits are the ones a read_committed consumer reads."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from server.wire import count_committed
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


@pytest.mark.parametrize("mode", list(Mode))
def test_each_mode_commits_every_message(tickwheel_broker: BackgroundBroker, mode: Mode) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    topic = _topic(bootstrap)
    rate = transactions.wire_rate(bootstrap, topic, MESSAGES, 100, mode, f"tx-{mode.name}")
    assert rate > 0
    assert count_committed(bootstrap, topic, MESSAGES, TIMEOUT_S) == MESSAGES


def test_a_refusal_is_raised_not_hidden(tickwheel_broker: BackgroundBroker) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    producer = WireProducer(bootstrap, "no-such-topic", Mode.V2, "tx-missing")
    try:
        with pytest.raises(WireProducerError, match="Produce to no-such-topic-0"):
            producer.send({0: [b"x"]})
    finally:
        producer.close()
