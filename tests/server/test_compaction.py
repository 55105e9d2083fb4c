"""Log compaction through the broker, with confluent-kafka producers and consumers."""

from __future__ import annotations

import time
from pathlib import Path

import kafka
import kafka.errors
import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.log._checkpoint import read_checkpoint
from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration

TIMEOUT_S = 20.0
# segment.ms: long enough that a burst of produces shares a segment, short enough that
# the next produce after a pause rolls it.
SEGMENT_MS = 300
# Keys of the records that roll segments; each is unique, so none compacts another.
ROLL_PREFIX = b"roll-"
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "8192",
    "segment.ms": str(SEGMENT_MS),
    "min.cleanable.dirty.ratio": "0.01",
}


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {
        "log.cleaner.backoff.ms": "50",
        "log.cleaner.min.cleanable.ratio": "0.01",
        "offsets.topic.segment.bytes": "1024",
    }


def create_topic(broker: BackgroundBroker, name: str, config: dict[str, str]) -> None:
    client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    client.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(TIMEOUT_S)


def produce(
    broker: BackgroundBroker,
    topic: str,
    records: list[tuple[bytes | None, bytes | None]],
    **config: str,
) -> tuple[list[Message], list[KafkaError]]:
    delivered: list[Message] = []
    errors: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is None:
            delivered.append(message)
        else:
            errors.append(error)

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, **config})
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
    assert producer.flush(TIMEOUT_S) == 0
    return delivered, errors


def consume_all(broker: BackgroundBroker, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """Every record from the beginning to the high watermark, as (offset, key, value)."""
    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "compaction-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    reader.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[int, bytes, bytes | None]] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                return out
            assert error is None, error
            key = message.key()
            assert key is not None
            out.append((message.offset(), key, message.value()))
    finally:
        reader.close()
    raise AssertionError(f"{topic}: no end of partition within {TIMEOUT_S} s")


def unrolled(records: list[tuple[int, bytes, bytes | None]]) -> list[tuple[bytes, bytes | None]]:
    """(key, value) of the records but the roll markers."""
    return [(key, value) for _, key, value in records if not key.startswith(ROLL_PREFIX)]


def cleaned_offset(broker: BackgroundBroker, topic: str) -> int:
    path = Path(str(broker.broker.config.log_dirs)) / f"{topic}-0" / "cleaner-offset-checkpoint"
    return read_checkpoint(str(path)) or 0


def wait_until_cleaned(broker: BackgroundBroker, topic: str, offset: int) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while cleaned_offset(broker, topic) < offset:
        assert time.monotonic() < deadline, f"{topic} not cleaned up to {offset}"
        time.sleep(0.05)


def roll_active_segment(broker: BackgroundBroker, topic: str) -> int:
    """Produce one record after segment.ms, so the segment before it closes; its offset."""
    time.sleep(SEGMENT_MS / 1000 + 0.1)
    delivered, errors = produce(broker, topic, [(ROLL_PREFIX + b"%d" % time.monotonic_ns(), b"")])
    assert errors == []
    return delivered[0].offset()


@pytest.mark.parametrize("compression", ["none", "lz4", "snappy"])
def test_1001_records_over_10_keys_leave_the_latest_per_key(
    tickwheel_broker: BackgroundBroker, compression: str
) -> None:
    topic = f"latest-{compression}"
    create_topic(tickwheel_broker, topic, TOPIC_CONFIG)
    records = [(b"key-%d" % (i % 10), b"value-%d" % i) for i in range(1001)]
    delivered, errors = produce(
        tickwheel_broker,
        topic,
        records,
        **{"compression.type": compression, "linger.ms": "5", "batch.size": "2000"},
    )
    assert errors == []
    produced = {m.offset(): (m.key(), m.value()) for m in delivered}
    roll_offset = roll_active_segment(tickwheel_broker, topic)
    wait_until_cleaned(tickwheel_broker, topic, roll_offset)
    seen = consume_all(tickwheel_broker, topic)
    # A consumer that wants the latest value per key reads 10 records and the roll
    # marker; each kept the offset it was produced at (gaps, never renumbering).
    assert len(seen) == 11
    for offset, key, value in seen[:-1]:
        assert produced[offset] == (key, value)
    latest = {key: value for _, key, value in seen[:-1]}
    assert latest == {
        **{b"key-%d" % k: b"value-%d" % (990 + k) for k in range(1, 10)},
        b"key-0": b"value-1000",
    }
    metrics = tickwheel_broker.call(lambda broker: broker.context.metrics.render())
    assert isinstance(metrics, bytes)
    assert b"kafka_log_LogCleaner_cleaner_recopy_percent" in metrics
    assert b"kafka_log_LogCleanerManager_max_dirty_percent" in metrics


def test_tombstones_are_delivered_then_dropped_after_delete_retention(
    tickwheel_broker: BackgroundBroker,
) -> None:
    topic = "tombstones"
    create_topic(tickwheel_broker, topic, {**TOPIC_CONFIG, "delete.retention.ms": "1000"})
    produce(tickwheel_broker, topic, [(b"a", b"1"), (b"b", b"1"), (b"a", None)])
    roll_offset = roll_active_segment(tickwheel_broker, topic)
    wait_until_cleaned(tickwheel_broker, topic, roll_offset)
    # The tombstone is still there for consumers that must see the delete.
    assert unrolled(consume_all(tickwheel_broker, topic)) == [(b"b", b"1"), (b"a", None)]
    time.sleep(1.0)
    produce(tickwheel_broker, topic, [(b"c", b"1")])
    roll_offset = roll_active_segment(tickwheel_broker, topic)
    wait_until_cleaned(tickwheel_broker, topic, roll_offset)
    assert unrolled(consume_all(tickwheel_broker, topic)) == [(b"b", b"1"), (b"c", b"1")]


def test_min_compaction_lag_keeps_recent_records(tickwheel_broker: BackgroundBroker) -> None:
    topic = "lagged"
    create_topic(tickwheel_broker, topic, {**TOPIC_CONFIG, "min.compaction.lag.ms": "3600000"})
    produce(tickwheel_broker, topic, [(b"k", b"%d" % i) for i in range(20)])
    roll_active_segment(tickwheel_broker, topic)
    time.sleep(0.5)
    assert cleaned_offset(tickwheel_broker, topic) == 0
    assert len(consume_all(tickwheel_broker, topic)) == 21


def test_a_record_without_a_key_is_refused(tickwheel_broker: BackgroundBroker) -> None:
    create_topic(tickwheel_broker, "keyed", TOPIC_CONFIG)
    delivered, errors = produce(tickwheel_broker, "keyed", [(None, b"no key")])
    assert delivered == []
    assert [error.code() for error in errors] == [KafkaError.INVALID_RECORD]


def test_consumer_offsets_is_compacted(tickwheel_broker: BackgroundBroker) -> None:
    topic = "committed"
    create_topic(tickwheel_broker, topic, {})
    produce(tickwheel_broker, topic, [(b"k", b"v")])
    committer = Consumer(
        {
            "bootstrap.servers": tickwheel_broker.bootstrap_servers,
            "group.id": "committer",
            "enable.auto.commit": False,
        }
    )
    try:
        for offset in range(1, 201):
            committer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            if offset == 100:
                time.sleep(0.05)
    finally:
        committer.close()
    offsets_dir = Path(str(tickwheel_broker.broker.config.log_dirs)) / "__consumer_offsets-0"

    def on_disk() -> int:
        return sum(path.stat().st_size for path in offsets_dir.glob("*.log"))

    # 200 commits of about 100 bytes each; compaction leaves a few (and the active
    # segment, 1 KiB at most). The cleaner works through the segments as they close,
    # so the size is awaited, not read at the first cleaning.
    deadline = time.monotonic() + TIMEOUT_S
    while (read_checkpoint(str(offsets_dir / "cleaner-offset-checkpoint")) or 0) < 150 or (
        on_disk() >= 200 * 100 / 4
    ):
        assert time.monotonic() < deadline, (
            f"__consumer_offsets was not cleaned: {on_disk()} bytes on disk"
        )
        time.sleep(0.05)
    reader = Consumer(
        {"bootstrap.servers": tickwheel_broker.bootstrap_servers, "group.id": "committer"}
    )
    try:
        (committed,) = reader.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
    finally:
        reader.close()
    assert committed.offset == 200


def test_kafka_python_idempotent_producer_and_consumer_on_a_compacted_topic(
    tickwheel_broker: BackgroundBroker,
) -> None:
    servers = tickwheel_broker.bootstrap_servers
    topic = "kp-compacted"
    create_topic(tickwheel_broker, topic, TOPIC_CONFIG)
    producer = kafka.KafkaProducer(bootstrap_servers=servers, linger_ms=5)  # idempotent
    try:
        for i in range(300):
            producer.send(topic, key=b"k%d" % (i % 5), value=b"%d" % i, partition=0)
        producer.flush()
        roll_offset = roll_active_segment(tickwheel_broker, topic)
        wait_until_cleaned(tickwheel_broker, topic, roll_offset)
        # The producer's sequence survived the cleaning (its last batch was kept).
        producer.send(topic, key=b"k0", value=b"after", partition=0).get(TIMEOUT_S)
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=servers, consumer_timeout_ms=int(TIMEOUT_S * 1000)
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        seen = []
        for message in consumer:
            seen.append((message.offset, message.key, message.value))
            if message.value == b"after":
                break
    finally:
        consumer.close()
    assert [(key, value) for _, key, value in seen if not key.startswith(ROLL_PREFIX)] == [
        *[(b"k%d" % k, b"%d" % (295 + k)) for k in range(5)],
        (b"k0", b"after"),
    ]


def test_keyless_records_fail_their_batch_with_their_own_error(
    tickwheel_broker: BackgroundBroker,
) -> None:
    """librdkafka reads the record errors (KIP-467): the keyless records fail with
    INVALID_RECORD, the others of their batch with its local error for a record refused
    because of another; nothing of the batch is appended, as in Kafka."""
    create_topic(tickwheel_broker, "mixed", TOPIC_CONFIG)
    keyless = set(range(3, 100, 10))
    outcomes: dict[int, int] = {}

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        outcomes[int(message.value() or b"")] = (
            KafkaError.NO_ERROR if error is None else error.code()
        )

    # One linger long enough that the 100 records travel as one batch.
    producer = Producer(
        {"bootstrap.servers": tickwheel_broker.bootstrap_servers, "linger.ms": 1000}
    )
    for i in range(100):
        key = None if i in keyless else b"k%d" % i
        producer.produce("mixed", key=key, value=b"%d" % i, partition=0, on_delivery=on_delivery)
    assert producer.flush(TIMEOUT_S) == 0
    assert {i for i, code in outcomes.items() if code == KafkaError.INVALID_RECORD} == keyless
    assert {i for i, code in outcomes.items() if code == KafkaError._INVALID_DIFFERENT_RECORD} == (
        set(range(100)) - keyless
    )
    assert consume_all(tickwheel_broker, "mixed") == []


def test_kafka_python_fails_each_keyless_record_with_kafkas_message(
    tickwheel_broker: BackgroundBroker,
) -> None:
    """kafka-python, like Kafka's Java client, gives each record named in the record
    errors its message, and the others of the batch a generic error."""
    create_topic(tickwheel_broker, "named", TOPIC_CONFIG)
    producer = kafka.KafkaProducer(
        bootstrap_servers=tickwheel_broker.bootstrap_servers, linger_ms=1000
    )
    futures = [
        producer.send("named", key=None if i % 3 == 1 else b"k", value=b"%d" % i, partition=0)
        for i in range(6)
    ]
    producer.flush(TIMEOUT_S)
    producer.close()
    outcomes = []
    for future in futures:
        with pytest.raises(kafka.errors.KafkaError) as raised:
            future.get(TIMEOUT_S)
        outcomes.append((type(raised.value), raised.value.args[0]))
    keyless = (
        kafka.errors.InvalidRecordError,
        "Compacted topic cannot accept message without key in topic partition named-0",
    )
    assert [outcome == keyless for outcome in outcomes] == [i % 3 == 1 for i in range(6)]
    assert {o for o in outcomes if o != keyless} == {
        (
            kafka.errors.KafkaError,
            "Failed to append record because it was part of a batch which had one more more "
            "invalid records",
        )
    }
