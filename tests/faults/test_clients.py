"""Real clients through injected faults: they retry, recover, and lose or repeat nothing.

Short client timeouts are set through the clients' own configs, so a dropped answer
costs a second, not Kafka's default 30.
"""

from __future__ import annotations

import time

import kafka
import kafka.errors
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tickwheel.faults import FaultPlan
from tickwheel.server import BackgroundBroker
from tickwheel.timer import ManualClock

pytestmark = pytest.mark.integration

TIMEOUT_S = 30.0
MESSAGES = 50
# A dropped Produce or EndTxn answer is given up on after this long, then retried.
SOCKET_TIMEOUT_MS = 1500


def create_topic(broker: BackgroundBroker, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT_S)


def poll_values(consumer: Consumer, count: int) -> list[bytes]:
    """The values of the next ``count`` messages (fewer if they do not come in time)."""
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    return values


def consume(broker: BackgroundBroker, topic: str, count: int, **config: str) -> list[bytes]:
    """The first ``count`` values of ``topic``, read from its start."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"reader-{topic}",
            "enable.auto.commit": False,
            **config,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = poll_values(consumer, count)
        # Nothing more: a duplicate would follow the last value.
        extra = consumer.poll(0.5)
        assert extra is None or extra.error() is not None, extra.value()
        return values
    finally:
        consumer.close()


def produce_idempotently(broker: BackgroundBroker, topic: str) -> list[bytes]:
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 5,
            "retry.backoff.ms": 20,
            "socket.timeout.ms": SOCKET_TIMEOUT_MS,
            "request.timeout.ms": SOCKET_TIMEOUT_MS,
        }
    )
    values = [f"m{i}".encode() for i in range(MESSAGES)]
    failed: list[str] = []
    for value in values:
        producer.produce(
            topic, value, on_delivery=lambda err, _: failed.append(str(err)) if err else None
        )
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert failed == []
    return values


@pytest.mark.parametrize(
    "fault",
    [
        {"error": "NOT_LEADER_OR_FOLLOWER", "count": 3},
        {"kind": "drop", "phase": "after", "count": 1},
        {"kind": "close", "phase": "after", "count": 2},
    ],
    ids=["not-leader", "answer-dropped", "closed-after-append"],
)
def test_an_idempotent_producer_retries_without_duplicates(
    tickwheel_broker: BackgroundBroker, tickwheel_faults: FaultPlan, fault: dict[str, object]
) -> None:
    topic = f"idempotent-{fault.get('error', fault.get('kind'))}".lower()
    create_topic(tickwheel_broker, topic)
    handle = tickwheel_faults.add(api="Produce", topic=topic, **fault)
    sent = produce_idempotently(tickwheel_broker, topic)
    assert handle.spent
    assert consume(tickwheel_broker, topic, MESSAGES) == sent


def test_a_fetch_delayed_past_its_max_wait_keeps_the_consumers_position(
    tickwheel_manual_broker: BackgroundBroker,
    tickwheel_faults: FaultPlan,
    tickwheel_clock: ManualClock,
) -> None:
    broker = tickwheel_manual_broker
    create_topic(broker, "delayed")
    sent = produce_idempotently(broker, "delayed")
    handle = tickwheel_faults.add(api="Fetch", topic="delayed", kind="delay", delay_ms=10_000)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "delayed",
            "fetch.wait.max.ms": 500,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition("delayed", 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while handle.hits == 0 and time.monotonic() < deadline:
            assert consumer.poll(0.1) is None
        handle.remove()
        assert consumer.poll(0.5) is None, "a delayed fetch was answered before its time"
        tickwheel_clock.advance(10_000)
        assert poll_values(consumer, MESSAGES) == sent
        assert consumer.position([TopicPartition("delayed", 0)])[0].offset == MESSAGES
    finally:
        consumer.close()


@pytest.mark.parametrize("error", ["NOT_LEADER_OR_FOLLOWER", "UNKNOWN_LEADER_EPOCH"])
def test_a_consumer_reads_everything_once_through_fetch_errors(
    tickwheel_broker: BackgroundBroker, tickwheel_faults: FaultPlan, error: str
) -> None:
    topic = f"fetch-{error}".lower()
    create_topic(tickwheel_broker, topic)
    sent = produce_idempotently(tickwheel_broker, topic)
    fetch_faults = tickwheel_faults.add(api="Fetch", topic=topic, error=error, count=3)
    assert consume(tickwheel_broker, topic, MESSAGES) == sent
    assert fetch_faults.spent


def test_a_consumer_group_survives_coordinator_errors(
    tickwheel_broker: BackgroundBroker, tickwheel_faults: FaultPlan
) -> None:
    create_topic(tickwheel_broker, "grouped")
    sent = produce_idempotently(tickwheel_broker, "grouped")
    hits = [
        tickwheel_faults.add(api="FindCoordinator", error="COORDINATOR_LOAD_IN_PROGRESS", count=2),
        tickwheel_faults.add(api="JoinGroup", error="NOT_COORDINATOR", count=1),
        tickwheel_faults.add(api="SyncGroup", error="COORDINATOR_LOAD_IN_PROGRESS", count=1),
        tickwheel_faults.add(api="OffsetCommit", error="NOT_COORDINATOR", count=1),
    ]
    consumer = Consumer(
        {
            "bootstrap.servers": tickwheel_broker.bootstrap_servers,
            "group.id": "survivors",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "retry.backoff.ms": 20,
        }
    )
    try:
        consumer.subscribe(["grouped"])
        assert poll_values(consumer, MESSAGES) == sent
        committed = None
        deadline = time.monotonic() + TIMEOUT_S
        while committed is None and time.monotonic() < deadline:
            try:
                committed = consumer.commit(asynchronous=False)
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
        assert committed is not None
        assert [(tp.topic, tp.offset) for tp in committed] == [("grouped", MESSAGES)]
    finally:
        consumer.close()
    assert [handle.spent for handle in hits] == [True, True, True, True]


def test_a_consumer_protocol_member_survives_heartbeat_errors(
    tickwheel_broker: BackgroundBroker, tickwheel_faults: FaultPlan
) -> None:
    create_topic(tickwheel_broker, "kip848")
    sent = produce_idempotently(tickwheel_broker, "kip848")
    heartbeat_faults = [
        tickwheel_faults.add(
            api="ConsumerGroupHeartbeat", error="COORDINATOR_LOAD_IN_PROGRESS", count=1
        ),
        tickwheel_faults.add(api="ConsumerGroupHeartbeat", error="NOT_COORDINATOR", count=1),
    ]
    consumer = Consumer(
        {
            "bootstrap.servers": tickwheel_broker.bootstrap_servers,
            "group.id": "kip848",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "retry.backoff.ms": 20,
        }
    )
    try:
        consumer.subscribe(["kip848"])
        assert poll_values(consumer, MESSAGES) == sent
    finally:
        consumer.close()
    assert [handle.spent for handle in heartbeat_faults] == [True, True]


def test_a_transactional_producer_recovers_from_a_dropped_end_txn_answer(
    tickwheel_broker: BackgroundBroker, tickwheel_faults: FaultPlan
) -> None:
    create_topic(tickwheel_broker, "txn")
    producer = Producer(
        {
            "bootstrap.servers": tickwheel_broker.bootstrap_servers,
            "transactional.id": "dropped-end",
            "socket.timeout.ms": SOCKET_TIMEOUT_MS,
            "retry.backoff.ms": 20,
        }
    )
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    values = [f"t{i}".encode() for i in range(MESSAGES)]
    for value in values:
        producer.produce("txn", value)
    handle = tickwheel_faults.add(api="EndTxn", kind="drop", phase="after", count=1)
    deadline = time.monotonic() + TIMEOUT_S
    committed = False
    while not committed and time.monotonic() < deadline:
        try:
            producer.commit_transaction(TIMEOUT_S)
            committed = True
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
    assert committed
    assert handle.spent
    assert (
        consume(tickwheel_broker, "txn", MESSAGES, **{"isolation.level": "read_committed"})
        == values
    )


def test_a_thirty_second_delay_takes_milliseconds_on_the_manual_clock(
    tickwheel_manual_broker: BackgroundBroker,
    tickwheel_faults: FaultPlan,
    tickwheel_clock: ManualClock,
) -> None:
    create_topic(tickwheel_manual_broker, "slow")
    handle = tickwheel_faults.add(api="Produce", topic="slow", kind="delay", delay_ms=30_000)
    producer = Producer({"bootstrap.servers": tickwheel_manual_broker.bootstrap_servers})
    delivered: list[int] = []
    producer.produce("slow", b"late", on_delivery=lambda err, msg: delivered.append(msg.offset()))
    started_s = time.monotonic()
    deadline = started_s + TIMEOUT_S
    while handle.hits == 0 and time.monotonic() < deadline:
        producer.poll(0.05)
    producer.poll(0.3)
    assert delivered == [], "answered before the broker's clock moved"
    tickwheel_clock.advance(30_000)
    assert producer.flush(TIMEOUT_S) == 0
    assert delivered == [0]
    assert time.monotonic() - started_s < 5.0


def test_an_out_of_order_sequence_fails_one_batch_and_the_producer_goes_on(
    tickwheel_broker: BackgroundBroker, tickwheel_faults: FaultPlan
) -> None:
    # No client retries OUT_OF_ORDER_SEQUENCE_NUMBER (it means the broker lost acked
    # data): kafka-python fails the batch and bumps its epoch (KIP-360), librdkafka
    # raises a fatal error. Either way nothing is written twice.
    create_topic(tickwheel_broker, "sequenced")
    producer = kafka.KafkaProducer(
        bootstrap_servers=tickwheel_broker.bootstrap_servers, enable_idempotence=True
    )
    try:
        assert producer.send("sequenced", b"first").get(TIMEOUT_S).offset == 0
        handle = tickwheel_faults.add(
            api="Produce", topic="sequenced", error="OUT_OF_ORDER_SEQUENCE_NUMBER", count=1
        )
        with pytest.raises(kafka.errors.OutOfOrderSequenceNumberError):
            producer.send("sequenced", b"lost").get(TIMEOUT_S)
        assert handle.spent
        assert producer.send("sequenced", b"third").get(TIMEOUT_S).offset == 1
    finally:
        producer.close()
    assert consume(tickwheel_broker, "sequenced", 2) == [b"first", b"third"]
