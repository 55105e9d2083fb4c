"""Transactions with real clients against a real broker on loopback.

confluent-kafka (librdkafka), kafka-python and aiokafka transactional producers and
read_committed consumers: committed records delivered exactly once, aborted ones never
(read_uncommitted sees both), consume-transform-produce whose consumed offsets commit
with the transaction, a zombie fenced by a newer instance, a transaction left open past
its timeout aborted by the coordinator, and a broker restarted (cleanly, or after a
SIGKILL) in the middle of a transaction. Conditions are awaited by polling the
clients with a deadline.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.errors import ProducerFenced  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition as AioPartition  # type: ignore[import-untyped]
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpPartition
from kafka.errors import ProducerFencedError  # type: ignore[import-untyped]
from kafka.structs import OffsetAndMetadata  # type: ignore[import-untyped]

from tickwheel.cluster import BrokerProcess, free_port
from tickwheel.server import BackgroundBroker, BrokerConfig

pytestmark = pytest.mark.integration

PARTITIONS = 3
DEADLINE_S = 30.0
POLL_S = 0.2


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "3",
    }


def _new_topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(DEADLINE_S)
    return name


@pytest.fixture
def topic(tickwheel_broker: BackgroundBroker) -> str:
    return _new_topic(tickwheel_broker.bootstrap_servers)


def _read(
    bootstrap: str,
    topic: str,
    *,
    committed: bool,
    until: Callable[[list[bytes]], bool],
    partitions: int = PARTITIONS,
) -> list[bytes]:
    """Every value of ``topic`` from the start, read until ``until`` holds (then a little
    longer, so that anything wrongly delivered would show)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        settle: float | None = None
        while settle is None or time.monotonic() < settle:
            assert time.monotonic() < deadline, f"read only {sorted(values)}"
            message = consumer.poll(POLL_S)
            if message is not None and message.error() is None:
                values.append(message.value())
            if settle is None and until(values):
                settle = time.monotonic() + 1.0
        return values
    finally:
        consumer.close()


def _has(count: int) -> Callable[[list[bytes]], bool]:
    return lambda values: len(values) >= count


def _values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(count)]


# -- commit and abort, each client ---------------------------------------------------


def _confluent_commit_then_abort(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    for i, value in enumerate(_values("c", 30)):
        producer.produce(topic, value, partition=i % PARTITIONS)
    producer.commit_transaction(DEADLINE_S)
    producer.begin_transaction()
    for i, value in enumerate(_values("a", 30)):
        producer.produce(topic, value, partition=i % PARTITIONS)
    producer.flush(DEADLINE_S)
    producer.abort_transaction(DEADLINE_S)
    producer.begin_transaction()
    for i, value in enumerate(_values("d", 30)):
        producer.produce(topic, value, partition=i % PARTITIONS)
    producer.commit_transaction(DEADLINE_S)


def _kafka_python_commit_then_abort(bootstrap: str, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"tx-{topic}")
    try:
        producer.init_transactions()
        for prefix, commit in (("c", True), ("a", False), ("d", True)):
            producer.begin_transaction()
            for i, value in enumerate(_values(prefix, 30)):
                producer.send(topic, value, partition=i % PARTITIONS)
            producer.flush()
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close()


def _aiokafka_commit_then_abort(bootstrap: str, topic: str) -> None:
    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"tx-{topic}")
        await producer.start()
        try:
            for prefix, commit in (("c", True), ("a", False), ("d", True)):
                await producer.begin_transaction()
                for i, value in enumerate(_values(prefix, 30)):
                    await producer.send(topic, value, partition=i % PARTITIONS)
                await producer.flush()
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())


def _kafka_python_read_committed(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    try:
        consumer.assign([KpPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < count:
            assert time.monotonic() < deadline, f"read only {len(values)}"
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(record.value for record in records)
        return values
    finally:
        consumer.close()


def _aiokafka_read_committed(bootstrap: str, topic: str, count: int) -> list[bytes]:
    async def run() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            isolation_level="read_committed",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            consumer.assign([AioPartition(topic, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            values: list[bytes] = []
            deadline = time.monotonic() + DEADLINE_S
            while len(values) < count:
                assert time.monotonic() < deadline, f"read only {len(values)}"
                batches = await consumer.getmany(timeout_ms=200)
                values.extend(r.value for records in batches.values() for r in records)
            return values
        finally:
            await consumer.stop()

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("produce", "read_committed"),
    [
        (_confluent_commit_then_abort, None),
        (_kafka_python_commit_then_abort, _kafka_python_read_committed),
        (_aiokafka_commit_then_abort, _aiokafka_read_committed),
    ],
    ids=["confluent-kafka", "kafka-python", "aiokafka"],
)
def test_committed_records_are_read_once_and_aborted_ones_never(
    tickwheel_broker: BackgroundBroker,
    topic: str,
    produce: Callable[[str, str], None],
    read_committed: Callable[[str, str, int], list[bytes]] | None,
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    produce(bootstrap, topic)
    wanted = sorted(_values("c", 30) + _values("d", 30))
    committed = _read(bootstrap, topic, committed=True, until=_has(60))
    assert sorted(committed) == wanted
    everything = _read(bootstrap, topic, committed=False, until=_has(90))
    assert sorted(everything) == sorted(wanted + _values("a", 30))
    if read_committed is not None:
        assert sorted(read_committed(bootstrap, topic, 60)) == wanted


# -- consume-transform-produce --------------------------------------------------------


def _committed_offsets(bootstrap: str, group: str, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=DEADLINE_S
        )
        return [tp.offset for tp in found]
    finally:
        consumer.close()


def _confluent_transform(
    bootstrap: str, source: str, sink: str, group: str, *, abort_first: bool
) -> None:
    """Copy ``source`` to ``sink`` upper-cased, 25 records per transaction, the consumed
    offsets committed with each; ``abort_first``: the first transaction is aborted and
    the consumer rewound to what the group has committed, as an application does."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"ctp-{group}"})
    producer.init_transactions(DEADLINE_S)
    consumer.subscribe([source])
    copied = 0
    deadline = time.monotonic() + DEADLINE_S
    try:
        while copied < 100:
            assert time.monotonic() < deadline, f"copied only {copied}"
            messages = consumer.consume(25, POLL_S)
            messages = [m for m in messages if m.error() is None]
            if not messages:
                continue
            producer.begin_transaction()
            for message in messages:
                producer.produce(sink, message.value().upper(), partition=message.partition())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
            )
            if abort_first:
                producer.abort_transaction(DEADLINE_S)
                abort_first = False
                committed = consumer.committed(consumer.assignment(), timeout=DEADLINE_S)
                for tp in committed:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
                continue
            producer.commit_transaction(DEADLINE_S)
            copied += len(messages)
    finally:
        consumer.close()


def test_consume_transform_produce_commits_offsets_with_the_output(
    tickwheel_broker: BackgroundBroker, topic: str
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    sink = _new_topic(bootstrap)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(_values("v", 100)):
        producer.produce(topic, value, partition=i % PARTITIONS)
    assert producer.flush(DEADLINE_S) == 0
    group = f"ctp-{uuid.uuid4().hex[:6]}"
    _confluent_transform(bootstrap, topic, sink, group, abort_first=True)
    output = _read(bootstrap, sink, committed=True, until=_has(100))
    assert sorted(output) == sorted(v.upper() for v in _values("v", 100))
    assert sum(_committed_offsets(bootstrap, group, topic)) == 100


def test_kafka_python_and_aiokafka_send_offsets_to_transaction(
    tickwheel_broker: BackgroundBroker, topic: str
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    kp_group, aio_group = f"kp-{uuid.uuid4().hex[:6]}", f"aio-{uuid.uuid4().hex[:6]}"
    kp = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kp-{topic}")
    try:
        kp.init_transactions()
        kp.begin_transaction()
        kp.send(topic, b"kp", partition=0)
        kp.send_offsets_to_transaction(
            {KpPartition(topic, 0): OffsetAndMetadata(7, "", -1)}, kp_group
        )
        kp.commit_transaction()
    finally:
        kp.close()

    async def aio() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"aio-{topic}")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send(topic, b"aio", partition=1)
                await producer.send_offsets_to_transaction({AioPartition(topic, 1): 9}, aio_group)
        finally:
            await producer.stop()

    asyncio.run(aio())
    assert _committed_offsets(bootstrap, kp_group, topic)[0] == 7
    assert _committed_offsets(bootstrap, aio_group, topic)[1] == 9
    assert sorted(_read(bootstrap, topic, committed=True, until=_has(2))) == [b"aio", b"kp"]


# -- fencing and timeouts --------------------------------------------------------------


def _fatal(error: KafkaException) -> bool:
    reason: KafkaError = error.args[0]
    return reason.fatal() or reason.code() in {KafkaError._FENCED, KafkaError.PRODUCER_FENCED}


def test_a_newer_instance_fences_the_zombie_and_aborts_its_transaction(
    tickwheel_broker: BackgroundBroker, topic: str
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    transactional_id = f"zombie-{topic}"
    zombie = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    zombie.init_transactions(DEADLINE_S)
    zombie.begin_transaction()
    for value in _values("z", 10):
        zombie.produce(topic, value, partition=0)
    assert zombie.flush(DEADLINE_S) == 0
    newer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    newer.init_transactions(DEADLINE_S)
    newer.begin_transaction()
    for value in _values("n", 10):
        newer.produce(topic, value, partition=0)
    newer.commit_transaction(DEADLINE_S)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(DEADLINE_S)
    assert _fatal(raised.value)
    assert sorted(_read(bootstrap, topic, committed=True, until=_has(10))) == sorted(
        _values("n", 10)
    )


def test_kafka_python_and_aiokafka_zombies_are_fenced(
    tickwheel_broker: BackgroundBroker, topic: str
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    zombie = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kpz-{topic}")
    newer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kpz-{topic}")
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=0)
        zombie.flush()
        newer.init_transactions()
        with pytest.raises(ProducerFencedError):
            zombie.commit_transaction()
    finally:
        zombie.close(timeout=1)
        newer.close()

    async def aio() -> None:
        zombie = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"aioz-{topic}")
        newer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"aioz-{topic}")
        await zombie.start()
        try:
            await zombie.begin_transaction()
            await zombie.send_and_wait(topic, b"zombie", partition=1)
            await newer.start()
            with pytest.raises(ProducerFenced):
                await zombie.commit_transaction()
        finally:
            await newer.stop()
            await zombie.stop()

    asyncio.run(aio())


def test_a_transaction_left_open_past_its_timeout_is_aborted(
    tickwheel_broker: BackgroundBroker, topic: str
) -> None:
    """The coordinator aborts the stalled transaction (and bumps its epoch, fencing the
    producer), so the last stable offset moves and a later commit becomes readable."""
    bootstrap = tickwheel_broker.bootstrap_servers
    stalled = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"stalled-{topic}",
            "transaction.timeout.ms": 1000,
        }
    )
    stalled.init_transactions(DEADLINE_S)
    stalled.begin_transaction()
    stalled.produce(topic, b"stalled", partition=0)
    assert stalled.flush(DEADLINE_S) == 0
    other = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"other-{topic}"})
    other.init_transactions(DEADLINE_S)
    other.begin_transaction()
    other.produce(topic, b"later", partition=0)
    other.commit_transaction(DEADLINE_S)
    started = time.monotonic()
    assert _read(bootstrap, topic, committed=True, until=_has(1)) == [b"later"]
    # Readable only once the stalled transaction was aborted, about its timeout later.
    assert time.monotonic() - started < DEADLINE_S
    with pytest.raises(KafkaException) as raised:
        stalled.commit_transaction(DEADLINE_S)
    assert _fatal(raised.value)


# -- a broker restart mid-transaction ----------------------------------------------------


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[Callable[[], BackgroundBroker]]:
    """Start (again) a broker on the same port and log directory."""
    started: list[BackgroundBroker] = []
    port: list[int] = []

    def start() -> BackgroundBroker:
        listen_port = port[0] if port else 0
        config = BrokerConfig.from_properties(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{listen_port}",
                "log.dirs": str(tmp_path / "logs"),
                "offsets.topic.num.partitions": "1",
                "transaction.state.log.num.partitions": "1",
            }
        )
        broker = BackgroundBroker(config).start()
        started.append(broker)
        if not port:
            port.append(int(broker.bootstrap_servers.rsplit(":", 1)[1]))
        return broker

    yield start
    for broker in started:
        broker.stop()


def test_a_transaction_open_across_a_broker_restart_is_aborted_by_the_next_instance(
    restartable: Callable[[], BackgroundBroker],
) -> None:
    broker = restartable()
    bootstrap = broker.bootstrap_servers
    topic = _new_topic(bootstrap, partitions=1)
    first = Producer({"bootstrap.servers": bootstrap, "transactional.id": "restart"})
    first.init_transactions(DEADLINE_S)
    first.begin_transaction()
    for value in _values("open", 5):
        first.produce(topic, value, partition=0)
    assert first.flush(DEADLINE_S) == 0
    broker.stop()
    restartable()
    second = Producer({"bootstrap.servers": bootstrap, "transactional.id": "restart"})
    second.init_transactions(DEADLINE_S)
    second.begin_transaction()
    for value in _values("after", 5):
        second.produce(topic, value, partition=0)
    second.commit_transaction(DEADLINE_S)
    committed = _read(bootstrap, topic, committed=True, until=_has(5), partitions=1)
    assert committed == _values("after", 5)


def test_a_transaction_open_when_its_broker_is_killed_is_aborted_after_restart(
    tmp_path: Path,
) -> None:
    """SIGKILL with a transaction open and a later one committed behind it: the
    restarted broker reloads the open transaction from ``__transaction_state`` and aborts
    it at its timeout, so the committed records become readable with no producer left
    to finish anything (no hanging last stable offset)."""
    broker = BrokerProcess(
        1,
        free_port(),
        tmp_path / "logs",
        {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"},
    )
    broker.start()
    try:
        bootstrap = broker.bootstrap_servers
        topic = _new_topic(bootstrap, partitions=1)
        stalled = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": "killed-open",
                "transaction.timeout.ms": 2000,
            }
        )
        stalled.init_transactions(DEADLINE_S)
        stalled.begin_transaction()
        for value in _values("open", 5):
            stalled.produce(topic, value, partition=0)
        assert stalled.flush(DEADLINE_S) == 0
        later = Producer({"bootstrap.servers": bootstrap, "transactional.id": "killed-later"})
        later.init_transactions(DEADLINE_S)
        later.begin_transaction()
        for value in _values("later", 3):
            later.produce(topic, value, partition=0)
        later.commit_transaction(DEADLINE_S)
        broker.kill()
        broker.start()
        committed = _read(bootstrap, topic, committed=True, until=_has(3), partitions=1)
        assert committed == _values("later", 3)
    finally:
        broker.stop()
