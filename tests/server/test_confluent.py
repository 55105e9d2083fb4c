"""confluent-kafka (librdkafka 2.x) against the broker: produce, consume, admin, long poll."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from replica.records import batch
from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, BrokerConfig

from .wire import WireClient, first_batch_attributes

pytestmark = pytest.mark.integration

TIMEOUT_S = 15.0
LONG_POLL_WAIT_MS = 500
PRODUCE_DELAY_S = 0.2
# A fetch woken by the append answers within milliseconds; one that is not woken
# answers when its 500 ms wait ends, about 300 ms after a message produced 200 ms in.
WOKEN_LATENCY_LIMIT_S = 0.15
FETCH = ApiKey.FETCH
PRODUCE = ApiKey.PRODUCE
CODEC_MASK = 0x07
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# Small enough that 500 messages in batches of 20 fill several segments.
SMALL_SEGMENT_BYTES = 4096


def admin(broker: BackgroundBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create_topic(broker: BackgroundBroker, name: str, partitions: int = 1) -> None:
    client = admin(broker)  # referenced until the result is in: a destroyed handle fails it
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT_S)


def produce_all(
    broker: BackgroundBroker, topic: str, values: list[bytes], **config: str | int
) -> list[Message]:
    delivered: list[Message] = []
    errors: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(error)
        else:
            delivered.append(message)

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, **config})
    for value in values:
        producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []
    return delivered


def consumer(broker: BackgroundBroker, **config: str | int) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "tests",
            "enable.auto.commit": False,
            **config,
        }
    )


def consume(broker: BackgroundBroker, topic: str, count: int, partitions: int = 1) -> list[bytes]:
    reader = consumer(broker)
    reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None
            values.append(value)
    finally:
        reader.close()
    return values


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_with_acks_then_consume_with_assign(
    tickwheel_broker: BackgroundBroker, acks: str
) -> None:
    values = [b"value-%d" % i for i in range(200)]
    delivered = produce_all(tickwheel_broker, "acks", values, acks=acks)
    assert len(delivered) == len(values)
    if acks != "0":
        assert [m.offset() for m in delivered] == list(range(len(values)))
    assert consume(tickwheel_broker, "acks", len(values)) == values


def test_acks_all_goes_through_the_produce_purgatory(tickwheel_broker: BackgroundBroker) -> None:
    produce_all(tickwheel_broker, "all", [b"x"], acks="all")
    # On one replica a DelayedProduce completes on its first check: it is never left
    # waiting, and never expires.
    produce_metrics = tickwheel_broker.metrics()["Produce"]
    assert (produce_metrics.num_delayed_operations, produce_metrics.expirations) == (0, 0)


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_compressed_batches_are_stored_and_served_as_sent(
    tickwheel_broker: BackgroundBroker, codec: str
) -> None:
    topic = f"compressed-{codec}"
    create_topic(tickwheel_broker, topic)
    values = [b"compressible " * 20 + b"%d" % i for i in range(100)]
    produce_all(tickwheel_broker, topic, values, **{"compression.type": codec, "linger.ms": 50})
    assert (
        first_batch_attributes(tickwheel_broker.bootstrap_servers, topic) & CODEC_MASK
        == CODECS[codec]
    )
    assert consume(tickwheel_broker, topic, len(values)) == values


def test_a_message_produced_during_a_long_poll_arrives_at_once(
    tickwheel_broker: BackgroundBroker,
) -> None:
    create_topic(tickwheel_broker, "long-poll")
    reader = consumer(
        tickwheel_broker, **{"fetch.wait.max.ms": LONG_POLL_WAIT_MS, "fetch.min.bytes": 1}
    )
    reader.assign([TopicPartition("long-poll", 0, 0)])
    producer = Producer({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    producer.list_topics(timeout=TIMEOUT_S)
    try:
        assert reader.poll(1.0) is None  # the consumer is now long-polling an empty log
        sent_at: list[float] = []

        def produce_later() -> None:
            sent_at.append(time.monotonic())
            producer.produce("long-poll", value=b"now", partition=0)
            producer.flush(TIMEOUT_S)

        timer = threading.Timer(PRODUCE_DELAY_S, produce_later)
        timer.start()
        message = reader.poll(TIMEOUT_S)
        received_at = time.monotonic()
        timer.join()
    finally:
        reader.close()
    assert message is not None
    assert message.value() == b"now"
    assert received_at - sent_at[0] < WOKEN_LATENCY_LIMIT_S


def raw_fetch_timing(broker: BackgroundBroker, topic: str, min_bytes: int) -> tuple[float, int]:
    """Seconds a Fetch(max_wait 500 ms) took when a record arrives 200 ms in; its bytes."""
    create_topic(broker, topic)
    fetching = WireClient(broker.bootstrap_servers)
    producing = WireClient(broker.bootstrap_servers)
    try:
        started = time.monotonic()
        fetching.send(
            FETCH,
            12,
            {
                "max_wait": LONG_POLL_WAIT_MS,
                "min_bytes": min_bytes,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
                "forgotten_topics_data": [],
            },
        )
        time.sleep(PRODUCE_DELAY_S)  # when to produce, not a synchronisation
        producing.call(
            PRODUCE,
            9,
            {
                "acks": 1,
                "timeout": 1000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": 0, "records": batch(b"x")}]}
                ],
            },
        )
        _, body = fetching.receive(FETCH, 12)
        elapsed = time.monotonic() - started
    finally:
        fetching.close()
        producing.close()
    return elapsed, len(body.responses[0].partitions[0].records)


def test_fetch_min_bytes_1_returns_when_the_record_arrives(
    tickwheel_broker: BackgroundBroker,
) -> None:
    elapsed, size = raw_fetch_timing(tickwheel_broker, "min1", min_bytes=1)
    assert size > 0
    assert elapsed < LONG_POLL_WAIT_MS / 1000 - WOKEN_LATENCY_LIMIT_S


def test_fetch_min_bytes_above_what_arrives_waits_the_full_time_then_returns_it(
    tickwheel_broker: BackgroundBroker,
) -> None:
    elapsed, size = raw_fetch_timing(tickwheel_broker, "min-big", min_bytes=100_000)
    assert size > 0, "the expired fetch returns what it has"
    assert elapsed >= LONG_POLL_WAIT_MS / 1000 * 0.95


def test_restart_keeps_every_message(tmp_path: object) -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "offsets.topic.num.partitions": "1",
            "log.segment.bytes": str(SMALL_SEGMENT_BYTES),
        }
    )
    values = [b"persisted-%d" % i for i in range(500)]
    with BackgroundBroker(config) as first:
        create_topic(first, "durable", partitions=2)
        produce_all(first, "durable", values, acks="all", **{"batch.num.messages": 20})
    with BackgroundBroker(config) as second:
        assert consume(second, "durable", len(values), partitions=2) == values
        more = produce_all(second, "durable", [b"after"], acks="all")
        assert more[0].offset() == len(values)


@pytest.fixture
def admin_client(tickwheel_broker: BackgroundBroker) -> AdminClient:
    return admin(tickwheel_broker)


def test_admin_create_describe_and_delete(admin_client: AdminClient) -> None:
    created = admin_client.create_topics(
        [NewTopic("admin", 3, 1, config={"retention.ms": "60000"})]
    )
    created["admin"].result(TIMEOUT_S)
    metadata = admin_client.list_topics(timeout=TIMEOUT_S)
    assert len(metadata.topics["admin"].partitions) == 3
    (described,) = admin_client.describe_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, "admin")]
    ).values()
    configs = described.result(TIMEOUT_S)
    assert configs["retention.ms"].value == "60000"
    assert configs["segment.bytes"].value == str(1 << 30)
    (broker,) = admin_client.describe_configs(
        [ConfigResource(ConfigResource.Type.BROKER, "0")]
    ).values()
    broker_configs = broker.result(TIMEOUT_S)
    assert broker_configs["auto.create.topics.enable"].value == "true"
    assert broker_configs["socket.request.max.bytes"].value == "104857600"
    admin_client.create_partitions([NewPartitions("admin", 5)])["admin"].result(TIMEOUT_S)
    assert len(admin_client.list_topics(timeout=TIMEOUT_S).topics["admin"].partitions) == 5
    admin_client.delete_topics(["admin"])["admin"].result(TIMEOUT_S)
    assert "admin" not in admin_client.list_topics(timeout=TIMEOUT_S).topics


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        (NewTopic("rf2", 1, 2), KafkaError.INVALID_REPLICATION_FACTOR),
        (NewTopic("zero", 0, 1), KafkaError.INVALID_PARTITIONS),
        (NewTopic("bad/name", 1, 1), KafkaError.TOPIC_EXCEPTION),
        (NewTopic("cfg", 1, 1, config={"no.such.config": "1"}), KafkaError.INVALID_CONFIG),
    ],
)
def test_admin_create_validation(admin_client: AdminClient, topic: NewTopic, expected: int) -> None:
    with pytest.raises(KafkaException) as raised:
        admin_client.create_topics([topic])[topic.topic].result(TIMEOUT_S)
    assert raised.value.args[0].code() == expected


def test_admin_create_existing_and_validate_only(admin_client: AdminClient) -> None:
    admin_client.create_topics([NewTopic("twice", 1, 1)])["twice"].result(TIMEOUT_S)
    with pytest.raises(KafkaException) as raised:
        admin_client.create_topics([NewTopic("twice", 1, 1)])["twice"].result(TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    admin_client.create_topics([NewTopic("dry", 1, 1)], validate_only=True)["dry"].result(TIMEOUT_S)
    assert "dry" not in admin_client.list_topics(timeout=TIMEOUT_S).topics


def test_list_offsets_and_delete_records(
    tickwheel_broker: BackgroundBroker, admin_client: AdminClient
) -> None:
    create_topic(tickwheel_broker, "offsets")
    producer = Producer({"bootstrap.servers": tickwheel_broker.bootstrap_servers, "linger.ms": 0})
    base_ms = 1_700_000_000_000
    for i, step in enumerate([0, 1000, 5000, 2000]):
        producer.produce("offsets", value=b"%d" % i, partition=0, timestamp=base_ms + step)
        producer.flush(TIMEOUT_S)
    tp = TopicPartition("offsets", 0)

    def lookup(spec: OffsetSpec) -> tuple[int, int]:
        result = admin_client.list_offsets({tp: spec})[tp].result(TIMEOUT_S)
        return result.offset, result.timestamp

    assert lookup(OffsetSpec.earliest())[0] == 0
    assert lookup(OffsetSpec.latest())[0] == 4
    assert lookup(OffsetSpec.max_timestamp()) == (2, base_ms + 5000)
    assert lookup(OffsetSpec.for_timestamp(base_ms + 500))[0] == 1
    assert lookup(OffsetSpec.for_timestamp(base_ms + 9000))[0] == -1
    deleted = admin_client.delete_records([TopicPartition("offsets", 0, 2)])
    assert deleted[TopicPartition("offsets", 0, 2)].result(TIMEOUT_S).low_watermark == 2
    assert lookup(OffsetSpec.earliest())[0] == 2
