"""Committed offsets and groups survive a broker restart (they live in ``__consumer_offsets``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.server import BackgroundBroker, BrokerConfig

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 3
MESSAGES = 60
DEADLINE_S = 30.0
GROUP = "restart-group"


def config(log_dir: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(log_dir),
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "500",
            "offsets.topic.num.partitions": "5",
        }
    )


def subscribe(bootstrap: str) -> Consumer:
    member = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 2000,
            "heartbeat.interval.ms": 200,
        }
    )
    member.subscribe([TOPIC])
    return member


def consume(member: Consumer, count: int) -> list[int]:
    values: list[int] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(values) < count:
        assert time.monotonic() < deadline, f"consumed {len(values)} of {count}"
        message = member.poll(0.1)
        if message is None:
            continue
        assert message.error() is None, message.error()
        value = message.value()
        assert value is not None
        values.append(int(value))
        member.commit(message=message, asynchronous=False)
    return values


def test_commits_survive_a_restart(tmp_path: Path) -> None:
    with BackgroundBroker(config(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(DEADLINE_S)
        producer = Producer({"bootstrap.servers": bootstrap})
        for index in range(MESSAGES):
            producer.produce(TOPIC, str(index).encode(), partition=index % PARTITIONS)
        assert producer.flush(DEADLINE_S) == 0
        member = subscribe(bootstrap)
        first = consume(member, MESSAGES // 2)
        committed_before = member.committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=DEADLINE_S
        )
        member.close()

    with BackgroundBroker(config(tmp_path)) as broker:
        member = subscribe(broker.bootstrap_servers)
        try:
            committed_after = member.committed(
                [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=DEADLINE_S
            )
            assert [tp.offset for tp in committed_after] == [tp.offset for tp in committed_before]
            rest = consume(member, MESSAGES - len(first))
        finally:
            member.close()
    assert sorted(first + rest) == list(range(MESSAGES))
