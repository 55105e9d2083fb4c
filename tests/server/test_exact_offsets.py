"""ListOffsets by time answers records, not batches, as real clients ask for them.

20 records with timestamps base+0 s ... base+19 s produced in one batch (plain and
compressed): ``offsets_for_times`` at base+7.5 s answers offset 8, and ListOffsets
with ``max_timestamp`` (KIP-734) answers 19, the record holding the largest timestamp.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration

TIMEOUT_S = 15.0
RECORDS = 20
BASE_MS = 1_700_000_000_000
SECOND_MS = 1_000


def produce_one_batch(bootstrap: str, topic: str, compression: str) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 1_000, "compression.type": compression}
    )
    for index in range(RECORDS):
        producer.produce(
            topic, str(index).encode(), partition=0, timestamp=BASE_MS + index * SECOND_MS
        )
    assert producer.flush(TIMEOUT_S) == 0


def new_topic(bootstrap: str, **configs: str) -> str:
    name = f"times-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(TIMEOUT_S)
    return name


def offset_for_time(bootstrap: str, topic: str, timestamp_ms: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "times"})
    try:
        (found,) = consumer.offsets_for_times(
            [TopicPartition(topic, 0, timestamp_ms)], timeout=TIMEOUT_S
        )
    finally:
        consumer.close()
    assert found.error is None
    return int(found.offset)


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_a_time_inside_a_batch_finds_its_record(
    tickwheel_broker: BackgroundBroker, compression: str
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    topic = new_topic(bootstrap)
    produce_one_batch(bootstrap, topic, compression)
    assert offset_for_time(bootstrap, topic, BASE_MS + 7_500) == 8
    assert offset_for_time(bootstrap, topic, BASE_MS + 8_000) == 8
    assert offset_for_time(bootstrap, topic, BASE_MS) == 0
    assert offset_for_time(bootstrap, topic, BASE_MS + 19_001) == -1  # librdkafka's END
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    largest = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(TIMEOUT_S)
    assert (largest.offset, largest.timestamp) == (19, BASE_MS + 19 * SECOND_MS)


def test_kafka_python_offsets_for_times(tickwheel_broker: BackgroundBroker) -> None:
    from kafka import KafkaConsumer  # noqa: PLC0415 - one client per test
    from kafka import TopicPartition as KafkaTopicPartition  # noqa: PLC0415

    bootstrap = tickwheel_broker.bootstrap_servers
    topic = new_topic(bootstrap)
    produce_one_batch(bootstrap, topic, "gzip")
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = KafkaTopicPartition(topic, 0)
        found = consumer.offsets_for_times({tp: BASE_MS + 12_250})[tp]
    finally:
        consumer.close()
    assert found is not None
    assert (found.offset, found.timestamp) == (13, BASE_MS + 13 * SECOND_MS)


def test_log_append_time_records_all_carry_the_batch_time(
    tickwheel_broker: BackgroundBroker,
) -> None:
    """Every record of a LogAppendTime batch has the time the leader stamped on it, so
    a lookup up to that time answers the batch's first record."""
    bootstrap = tickwheel_broker.bootstrap_servers
    topic = new_topic(bootstrap, **{"message.timestamp.type": "LogAppendTime"})
    produce_one_batch(bootstrap, topic, "none")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    largest = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(TIMEOUT_S)
    assert largest.offset == 0
    assert largest.timestamp > BASE_MS + 19 * SECOND_MS  # stamped now, not by the producer
    assert offset_for_time(bootstrap, topic, largest.timestamp) == 0
    assert offset_for_time(bootstrap, topic, largest.timestamp + 1) == -1
