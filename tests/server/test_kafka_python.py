"""kafka-python: its default idempotent producer (InitProducerId, sequences) and a consumer."""

from __future__ import annotations

import kafka
import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration

TIMEOUT_MS = 10_000
COUNT = 300


def test_idempotent_producer_and_consumer(tickwheel_broker: BackgroundBroker) -> None:
    servers = tickwheel_broker.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        admin.create_topics([NewTopic("kp", num_partitions=2, replication_factor=1)])
    finally:
        admin.close()
    producer = kafka.KafkaProducer(bootstrap_servers=servers)  # idempotent by default
    try:
        futures = [producer.send("kp", b"m-%d" % i, partition=i % 2) for i in range(COUNT)]
        producer.flush()
        offsets = sorted((f.get(TIMEOUT_MS / 1000).partition, f.get().offset) for f in futures)
    finally:
        producer.close()
    assert offsets == sorted((p, o) for p in (0, 1) for o in range(COUNT // 2))
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=servers, consumer_timeout_ms=TIMEOUT_MS, enable_auto_commit=False
    )
    try:
        consumer.assign([kafka.TopicPartition("kp", 0), kafka.TopicPartition("kp", 1)])
        consumer.seek_to_beginning()
        values = set()
        for message in consumer:
            values.add(message.value)
            if len(values) == COUNT:
                break
    finally:
        consumer.close()
    assert values == {b"m-%d" % i for i in range(COUNT)}
