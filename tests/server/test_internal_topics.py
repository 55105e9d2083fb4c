"""Clients cannot write, trim, delete or grow ``__consumer_offsets``: only the coordinator."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tickwheel.coordinator.group import OFFSETS_TOPIC
from tickwheel.server import BackgroundBroker, BrokerConfig

pytestmark = pytest.mark.integration

TIMEOUT_S = 15.0
GROUP = "internal-topics"
COMMITTED = TopicPartition("orders", 0, 5)
# A key of no known __consumer_offsets layout: it once stopped the broker from starting.
GARBAGE_KEY = b"\x00\x01garbage"


def config(log_dir: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(log_dir),
            "offsets.topic.num.partitions": "1",
        }
    )


def group_client(broker: BackgroundBroker) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": GROUP,
            "enable.auto.commit": False,
        }
    )


def produce_garbage(broker: BackgroundBroker) -> KafkaError | None:
    outcomes: list[KafkaError | None] = []

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        outcomes.append(error)

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
    producer.produce(
        OFFSETS_TOPIC, key=GARBAGE_KEY, value=b"x", partition=0, on_delivery=on_delivery
    )
    assert producer.flush(TIMEOUT_S) == 0
    (outcome,) = outcomes
    return outcome


def admin_error(future: Future[Any]) -> int:
    with pytest.raises(KafkaException) as raised:
        future.result(TIMEOUT_S)
    code: int = raised.value.args[0].code()
    return code


def test_clients_cannot_touch_the_offsets_topic(tmp_path: Path) -> None:
    with BackgroundBroker(config(tmp_path)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(COMMITTED.topic, 1, 1)])[COMMITTED.topic].result(TIMEOUT_S)
        committer = group_client(broker)
        # The first commit creates __consumer_offsets and writes through the coordinator.
        committer.commit(offsets=[COMMITTED], asynchronous=False)
        committer.close()
        error = produce_garbage(broker)
        assert error is not None
        assert error.code() == KafkaError.TOPIC_EXCEPTION
        deleted = admin.delete_topics([OFFSETS_TOPIC])[OFFSETS_TOPIC]
        assert admin_error(deleted) == KafkaError.TOPIC_EXCEPTION
        grown = admin.create_partitions([NewPartitions(OFFSETS_TOPIC, 3)])[OFFSETS_TOPIC]
        assert admin_error(grown) == KafkaError.TOPIC_EXCEPTION
        trim = TopicPartition(OFFSETS_TOPIC, 0, 1)
        trimmed = admin.delete_records([trim])[trim]
        assert admin_error(trimmed) == KafkaError.TOPIC_EXCEPTION
        assert OFFSETS_TOPIC in admin.list_topics(timeout=TIMEOUT_S).topics
    with BackgroundBroker(config(tmp_path)) as restarted:
        reader = group_client(restarted)
        try:
            (committed,) = reader.committed([TopicPartition("orders", 0)], timeout=TIMEOUT_S)
            assert committed.offset == COMMITTED.offset
        finally:
            reader.close()


def test_metadata_never_auto_creates_an_internal_topic(tmp_path: Path) -> None:
    with BackgroundBroker(config(tmp_path)) as broker:
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "allow.auto.create.topics": True}
        )
        topic = producer.list_topics(OFFSETS_TOPIC, timeout=TIMEOUT_S).topics[OFFSETS_TOPIC]
        assert topic.error is not None
        assert topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        assert not (tmp_path / f"{OFFSETS_TOPIC}-0").exists()
        ordinary = producer.list_topics("made-by-metadata", timeout=TIMEOUT_S)
        assert ordinary.topics["made-by-metadata"].error is None
