"""Share groups through confluent-kafka's ShareConsumer (librdkafka 2.16) and Producer.

Every test runs one broker with short acquisition locks (``LOCK_MS``) and a delivery
count limit of ``DELIVERY_LIMIT``, produces to a fresh 1-partition topic, and reads it
with share consumers of a fresh group (``share.auto.offset.reset`` is latest: a group
starts at the high watermark when it first fetches, so each test produces only once its
consumers fetch -- it waits for a ShareFetch parked in the broker's purgatory).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tickwheel.server import BackgroundBroker
from tickwheel.timer import ManualClock

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LOCK_MS = 2_000
DELIVERY_LIMIT = 3
MAX_WAIT_MS = 5_000
DEADLINE_S = 20.0


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {
        "group.share.record.lock.duration.ms": str(LOCK_MS),
        "group.share.min.record.lock.duration.ms": "1000",
        "group.share.delivery.count.limit": str(DELIVERY_LIMIT),
        "group.share.heartbeat.interval.ms": "500",
        "group.share.min.heartbeat.interval.ms": "500",
        "group.share.session.timeout.ms": "6000",
        "group.share.min.session.timeout.ms": "1000",
    }


@pytest.fixture
def broker(tickwheel_broker: BackgroundBroker) -> BackgroundBroker:
    return tickwheel_broker


@pytest.fixture
def topic() -> str:
    return f"queue-{uuid.uuid4().hex[:8]}"


def consumer(broker: BackgroundBroker, group: str, **extra: Any) -> ShareConsumer:
    return ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "fetch.wait.max.ms": MAX_WAIT_MS,
            **extra,
        }
    )


@pytest.fixture
def consumers() -> Iterator[list[ShareConsumer]]:
    opened: list[ShareConsumer] = []
    yield opened
    for share_consumer in opened:
        share_consumer.close()


def produce(broker: BackgroundBroker, topic: str, values: list[bytes], *, one_by_one: bool) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value)
        if one_by_one:
            producer.flush(10)
    assert producer.flush(10) == 0


def create_topic(broker: BackgroundBroker, topic: str) -> None:
    broker.call(lambda b: b.context.create_topic(topic, 1, {}))


def waiting_share_fetches(broker: BackgroundBroker) -> int:
    """ShareFetches parked in the broker's ShareFetch purgatory (its PurgatorySize)."""
    return broker.metrics()["ShareFetch"].purgatory_size


def wait_for(condition: Callable[[], bool], what: str, *, poll: Callable[[], object]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        poll()


def poll_messages(share_consumer: ShareConsumer, timeout_s: float = 0.2) -> list[Message]:
    messages = share_consumer.poll(timeout_s) or []
    for message in messages:
        assert message.error() is None, message.error()
    return list(messages)


def test_three_share_consumers_see_every_record_exactly_once(
    broker: BackgroundBroker, topic: str, consumers: list[ShareConsumer]
) -> None:
    create_topic(broker, topic)
    consumers.extend(consumer(broker, "three", **{"max.poll.records": 5}) for _ in range(3))
    for share_consumer in consumers:
        share_consumer.subscribe([topic])
    received: list[list[tuple[int, bytes]]] = [[], [], []]
    stop = threading.Event()

    def run(index: int) -> None:
        while not stop.is_set():
            for message in poll_messages(consumers[index]):
                received[index].append((message.offset(), message.value()))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    try:
        wait_for(
            lambda: waiting_share_fetches(broker) >= 3,
            "three waiting fetches",
            poll=lambda: time.sleep(0.05),
        )
        values = [f"r{i}".encode() for i in range(90)]
        produce(broker, topic, values, one_by_one=True)
        wait_for(
            lambda: sum(map(len, received)) >= len(values),
            "every record",
            poll=lambda: time.sleep(0.05),
        )
        # Implicit acknowledgement: nothing comes back once every record was seen.
        time.sleep(LOCK_MS / 1000 + 0.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    seen = sorted(v for per_consumer in received for _, v in per_consumer)
    assert seen == sorted(values)
    assert all(received), [len(r) for r in received]


def test_release_redelivers_with_delivery_count_two_and_reject_never(
    broker: BackgroundBroker, topic: str, consumers: list[ShareConsumer]
) -> None:
    create_topic(broker, topic)
    share_consumer = consumer(broker, "acks", **{"share.acknowledgement.mode": "explicit"})
    consumers.append(share_consumer)
    share_consumer.subscribe([topic])
    wait_for(
        lambda: waiting_share_fetches(broker) >= 1,
        "a waiting fetch",
        poll=lambda: poll_messages(share_consumer),
    )
    produce(broker, topic, [b"release-me", b"reject-me"], one_by_one=True)
    deliveries: list[tuple[bytes, int | None]] = []

    def handle() -> None:
        for message in poll_messages(share_consumer):
            deliveries.append((message.value(), message.delivery_count()))
            if message.value() == b"reject-me":
                share_consumer.acknowledge(message, AcknowledgeType.REJECT)
            elif message.delivery_count() == 1:
                share_consumer.acknowledge(message, AcknowledgeType.RELEASE)
            else:
                share_consumer.acknowledge(message, AcknowledgeType.ACCEPT)

    wait_for(lambda: (b"release-me", 2) in deliveries, "the redelivery", poll=handle)
    produce(broker, topic, [b"after"], one_by_one=True)
    wait_for(lambda: (b"after", 1) in deliveries, "the next record", poll=handle)
    assert (b"release-me", 1) in deliveries
    assert [d for d in deliveries if d[0] == b"reject-me"] == [(b"reject-me", 1)]


def test_delivery_count_limit_archives_a_record(
    broker: BackgroundBroker, topic: str, consumers: list[ShareConsumer]
) -> None:
    create_topic(broker, topic)
    share_consumer = consumer(broker, "limit", **{"share.acknowledgement.mode": "explicit"})
    consumers.append(share_consumer)
    share_consumer.subscribe([topic])
    wait_for(
        lambda: waiting_share_fetches(broker) >= 1,
        "a waiting fetch",
        poll=lambda: poll_messages(share_consumer),
    )
    produce(broker, topic, [b"poison"], one_by_one=True)
    deliveries: list[tuple[bytes, int | None]] = []

    def handle() -> None:
        for message in poll_messages(share_consumer):
            deliveries.append((message.value(), message.delivery_count()))
            kind = AcknowledgeType.ACCEPT if message.value() == b"next" else AcknowledgeType.RELEASE
            share_consumer.acknowledge(message, kind)

    wait_for(lambda: len(deliveries) >= DELIVERY_LIMIT, "every delivery", poll=handle)
    produce(broker, topic, [b"next"], one_by_one=True)
    wait_for(lambda: (b"next", 1) in deliveries, "the next record", poll=handle)
    assert deliveries == [(b"poison", n) for n in range(1, DELIVERY_LIMIT + 1)] + [(b"next", 1)]


def set_group_configs(broker: BackgroundBroker, group: str, **configs: str) -> None:
    resource = ConfigResource(
        ConfigResource.Type.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
            for name, value in configs.items()
        ],
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.incremental_alter_configs([resource])[resource].result(DEADLINE_S)


def transactional_producer(broker: BackgroundBroker, topic: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "transactional.id": f"txn-{topic}",
            "linger.ms": 0,
        }
    )
    producer.init_transactions(DEADLINE_S)
    return producer


def produce_transactions(broker: BackgroundBroker, topic: str) -> None:
    """One aborted transaction, then one committed, whose last record is ``end``."""
    producer = transactional_producer(broker, topic)
    for values, commit in (([b"aborted-1", b"aborted-2"], False), ([b"kept", b"end"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value)
        producer.flush(DEADLINE_S)
        if commit:
            producer.commit_transaction(DEADLINE_S)
        else:
            producer.abort_transaction(DEADLINE_S)


@pytest.mark.parametrize(
    ("isolation_level", "expected"),
    [
        ("read_committed", [b"kept", b"end"]),
        ("read_uncommitted", [b"aborted-1", b"aborted-2", b"kept", b"end"]),
    ],
)
def test_a_read_committed_group_never_sees_an_aborted_transaction(
    broker: BackgroundBroker,
    topic: str,
    consumers: list[ShareConsumer],
    isolation_level: str,
    expected: list[bytes],
) -> None:
    create_topic(broker, topic)
    group = f"isolation-{isolation_level}"
    set_group_configs(
        broker,
        group,
        share_auto_offset_reset="earliest",
        share_isolation_level=isolation_level,
    )
    produce_transactions(broker, topic)
    share_consumer = consumer(broker, group)
    consumers.append(share_consumer)
    share_consumer.subscribe([topic])
    seen: list[bytes] = []
    wait_for(
        lambda: b"end" in seen,
        "the committed transaction",
        poll=lambda: seen.extend(m.value() for m in poll_messages(share_consumer)),
    )
    assert seen == expected


def test_a_read_committed_group_waits_for_an_open_transaction(
    broker: BackgroundBroker, topic: str, consumers: list[ShareConsumer]
) -> None:
    create_topic(broker, topic)
    set_group_configs(
        broker, "open", share_auto_offset_reset="earliest", share_isolation_level="read_committed"
    )
    producer = transactional_producer(broker, topic)
    producer.begin_transaction()
    producer.produce(topic, b"pending")
    producer.flush(DEADLINE_S)
    produce(broker, topic, [b"plain"], one_by_one=True)  # above the last stable offset
    share_consumer = consumer(broker, "open")
    consumers.append(share_consumer)
    share_consumer.subscribe([topic])
    seen: list[bytes] = []

    def collect() -> None:
        seen.extend(m.value() for m in poll_messages(share_consumer))

    wait_for(lambda: waiting_share_fetches(broker) >= 1, "a waiting fetch", poll=collect)
    assert seen == []
    producer.commit_transaction(DEADLINE_S)
    wait_for(lambda: len(seen) >= 2, "the committed records", poll=collect)
    assert seen == [b"pending", b"plain"]


_HOLDER = """
import sys
import time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit", "fetch.wait.max.ms": 500})
c.subscribe([sys.argv[3]])
print("subscribed", flush=True)
while True:
    held = c.poll(0.5) or []
    if held:
        print("holding", len(held), flush=True)
        time.sleep(3600)
"""


def test_records_of_a_killed_consumer_are_redelivered_after_the_lock_duration(
    broker: BackgroundBroker, topic: str, consumers: list[ShareConsumer]
) -> None:
    create_topic(broker, topic)
    values = [f"held-{i}".encode() for i in range(5)]
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, broker.bootstrap_servers, "kill", topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "subscribed"
        wait_for(
            lambda: waiting_share_fetches(broker) >= 1,
            "the holder's fetch",
            poll=lambda: time.sleep(0.05),
        )
        produce(broker, topic, values, one_by_one=False)
        assert holder.stdout.readline().split() == ["holding", str(len(values))]
        killed_at = time.monotonic()
        os.kill(holder.pid, signal.SIGKILL)
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    heir = consumer(broker, "kill")
    consumers.append(heir)
    heir.subscribe([topic])
    redelivered: list[tuple[bytes, int | None]] = []
    wait_for(
        lambda: len(redelivered) >= len(values),
        "the redelivery",
        poll=lambda: redelivered.extend(
            (m.value(), m.delivery_count()) for m in poll_messages(heir)
        ),
    )
    assert time.monotonic() - killed_at >= LOCK_MS / 1000 * 0.9
    assert redelivered == [(value, 2) for value in values]


def test_a_waiting_share_fetch_is_answered_when_a_record_is_produced(
    broker: BackgroundBroker, topic: str, consumers: list[ShareConsumer]
) -> None:
    create_topic(broker, topic)
    share_consumer = consumer(broker, "latency")
    consumers.append(share_consumer)
    share_consumer.subscribe([topic])
    wait_for(
        lambda: waiting_share_fetches(broker) >= 1,
        "a waiting fetch",
        poll=lambda: poll_messages(share_consumer),
    )
    received: list[Message] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set() and not received:
            received.extend(poll_messages(share_consumer, 0.05))

    thread = threading.Thread(target=run)
    thread.start()
    try:
        produced_at = time.monotonic()
        produce(broker, topic, [b"now"], one_by_one=True)
        wait_for(lambda: bool(received), "the record", poll=lambda: time.sleep(0.005))
        latency_s = time.monotonic() - produced_at
    finally:
        stop.set()
        thread.join()
    assert latency_s < MAX_WAIT_MS / 1000 / 5, latency_s


def test_a_lock_expires_when_the_broker_clock_passes_its_duration(
    tickwheel_manual_broker: BackgroundBroker,
    tickwheel_clock: ManualClock,
    topic: str,
    consumers: list[ShareConsumer],
) -> None:
    broker = tickwheel_manual_broker
    create_topic(broker, topic)
    holder = consumer(broker, "manual", **{"share.acknowledgement.mode": "explicit"})
    consumers.append(holder)
    holder.subscribe([topic])
    wait_for(
        lambda: waiting_share_fetches(broker) >= 1,
        "the holder's fetch",
        poll=lambda: poll_messages(holder),
    )
    produce(broker, topic, [b"held"], one_by_one=True)
    held: list[Message] = []
    wait_for(lambda: bool(held), "the record", poll=lambda: held.extend(poll_messages(holder)))
    # In explicit mode librdkafka fetches no more while records wait for acknowledgement,
    # so the next fetch to wait is the heir's.
    assert waiting_share_fetches(broker) == 0
    heir = consumer(broker, "manual")
    consumers.append(heir)
    heir.subscribe([topic])
    got: list[tuple[bytes, int | None]] = []

    def heir_polls() -> None:
        got.extend((m.value(), m.delivery_count()) for m in poll_messages(heir))

    wait_for(lambda: waiting_share_fetches(broker) >= 1, "the heir's fetch", poll=heir_polls)
    tickwheel_clock.advance(LOCK_MS - 1)
    heir_polls()
    assert got == []
    tickwheel_clock.advance(1)  # the lock's task on the wheel fires: the record is free
    wait_for(lambda: bool(got), "the redelivery", poll=heir_polls)
    assert got == [(b"held", 2)]
