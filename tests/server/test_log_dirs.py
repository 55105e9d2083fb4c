"""DescribeLogDirs and AlterReplicaLogDirs on a broker with two ``log.dirs``.

kafka-python's ``describe_log_dirs`` and ``alter_replica_log_dirs`` (confluent-kafka has
neither), and kio frames for a move made while a producer writes: every record is read
back after it, and the broker restarted keeps the partition in its new directory.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KafkaPartition
from kafka.errors import (
    InvalidTopicError,
    KafkaStorageError,
    LogDirNotFoundError,
    NoError,
    ReplicaNotAvailableError,
)
from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey
from tickwheel.pytest_plugin import TEST_BROKER_PROPERTIES
from tickwheel.replica import TopicPartition
from tickwheel.server import BackgroundBroker, BrokerConfig

from .wire import WireClient

pytestmark = pytest.mark.integration

TOPIC = "moving"
WAIT_S = 30.0
_POLL_S = 0.01
_SEGMENT_BYTES = 65_536
_FLUSH_EVERY = 50
_PRODUCER = {"acks": "all", "batch.size": 8192, "linger.ms": 1}
ALTER_REPLICA_LOG_DIRS = ApiKey.ALTER_REPLICA_LOG_DIRS
LONG_TOPIC = "t" * 249
"""The longest topic name Kafka allows: too long for a future directory's name."""


def _broker(first: Path, second: Path) -> BackgroundBroker:
    return BackgroundBroker(
        BrokerConfig.from_properties(
            {
                **TEST_BROKER_PROPERTIES,
                "log.dirs": f"{first},{second}",
                "listeners": "PLAINTEXT://127.0.0.1:0",
            }
        )
    )


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "one", tmp_path / "two"


@pytest.fixture
def broker(dirs: tuple[Path, Path]) -> Iterator[BackgroundBroker]:
    with _broker(*dirs) as started:
        admin = AdminClient({"bootstrap.servers": started.bootstrap_servers})
        admin.create_topics(
            [NewTopic(TOPIC, num_partitions=2, config={"segment.bytes": str(_SEGMENT_BYTES)})]
        )[TOPIC].result(WAIT_S)
        yield started


def _dir_of(broker: BackgroundBroker, partition: int) -> object:
    tp = TopicPartition(TOPIC, partition)
    return broker.call(lambda b: b.replica_manager.log_manager.dir_of(tp))


def _producer(broker: BackgroundBroker, failures: list[KafkaError]) -> Producer:
    """A producer whose delivery errors land in ``failures``."""

    def delivered(error: KafkaError | None, _: Message) -> None:
        if error is not None:
            failures.append(error)

    return Producer(
        {"bootstrap.servers": broker.bootstrap_servers, **_PRODUCER, "on_delivery": delivered}
    )


def _produce(broker: BackgroundBroker, partition: int, values: list[bytes]) -> None:
    failures: list[KafkaError] = []
    producer = _producer(broker, failures)
    for value in values:
        producer.produce(TOPIC, value, partition=partition)
    assert producer.flush(WAIT_S) == 0
    assert failures == []


def _read_all(broker: BackgroundBroker, partition: int, count: int) -> list[bytes]:
    """The first ``count`` values of the partition, read with kafka-python."""
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        enable_auto_commit=False,
        consumer_timeout_ms=int(WAIT_S * 1000),
    )
    try:
        consumer.assign([KafkaPartition(TOPIC, partition)])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        for message in consumer:
            values.append(message.value)
            if len(values) == count:
                break
        return values
    finally:
        consumer.close()


def _admin(broker: BackgroundBroker) -> Any:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)


def test_kafka_python_describes_each_log_dir_and_its_partitions(
    broker: BackgroundBroker, dirs: tuple[Path, Path]
) -> None:
    _produce(broker, 0, [b"a" * 100] * 50)
    admin = _admin(broker)
    try:
        (answer,) = admin.describe_log_dirs()
        filtered = admin.describe_log_dirs({TOPIC: [1]})
    finally:
        admin.close()
    log_dirs = {entry["log_dir"]: entry for entry in answer["log_dirs"]}
    assert set(log_dirs) == {os.path.abspath(d) for d in dirs}
    held: dict[int, dict[str, Any]] = {}
    for path, entry in log_dirs.items():
        assert entry["error_code"] == 0
        assert 0 < entry["usable_bytes"] <= entry["total_bytes"]
        for topic in entry["topics"]:
            assert topic["name"] == TOPIC
            for partition in topic["partitions"]:
                held[partition["partition_index"]] = {**partition, "dir": path}
    assert set(held) == {0, 1}
    assert held[0]["dir"] != held[1]["dir"]
    assert held[0]["dir"] == os.path.abspath(str(_dir_of(broker, 0)))
    assert held[0]["partition_size"] > 50 * 100
    assert held[1]["partition_size"] == 0
    assert all(p["offset_lag"] == 0 and not p["is_future_key"] for p in held.values())
    only_one = [
        partition["partition_index"]
        for entry in filtered[0]["log_dirs"]
        for topic in entry["topics"]
        for partition in topic["partitions"]
    ]
    assert only_one == [1]


def _move_over_wire(
    broker: BackgroundBroker, partition: int, destination: Path
) -> list[tuple[str, int, ErrorCode]]:
    """AlterReplicaLogDirs v2 in a kio frame; each partition's answer."""
    client = WireClient(broker.bootstrap_servers)
    try:
        answer = client.call(
            ALTER_REPLICA_LOG_DIRS,
            2,
            {
                "dirs": [
                    {
                        "path": str(destination),
                        "topics": [{"name": TOPIC, "partitions": [partition]}],
                    }
                ]
            },
        )
    finally:
        client.close()
    return [
        (t.topic_name, p.partition_index, p.error_code)
        for t in answer.results
        for p in t.partitions
    ]


def test_a_move_under_writes_loses_nothing_and_survives_a_restart(
    broker: BackgroundBroker, dirs: tuple[Path, Path]
) -> None:
    source = _dir_of(broker, 0)
    destination = dirs[1] if source == dirs[0] else dirs[0]
    written: list[bytes] = []
    moved = threading.Event()
    producer_failed: list[BaseException] = []
    delivery_failures: list[KafkaError] = []

    def write() -> None:
        try:
            producer = _producer(broker, delivery_failures)
            # Records before, during and after the move; several closed segments.
            while not moved.is_set() or len(written) < 4000:
                value = f"record-{len(written)}".encode() * 20
                producer.produce(TOPIC, value, partition=0)
                written.append(value)
                if len(written) % _FLUSH_EVERY == 0:
                    assert producer.flush(WAIT_S) == 0
            assert producer.flush(WAIT_S) == 0
        except BaseException as error:
            producer_failed.append(error)
            raise

    writer = threading.Thread(target=write)
    writer.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while len(written) < 2000 and writer.is_alive():
            assert time.monotonic() < deadline
            time.sleep(_POLL_S)
        assert _move_over_wire(broker, 0, destination) == [(TOPIC, 0, ErrorCode.none)]
        while _dir_of(broker, 0) != destination:
            assert time.monotonic() < deadline, "the move never finished"
            time.sleep(_POLL_S)
        moved.set()
    finally:
        moved.set()
        writer.join(WAIT_S)
    assert not producer_failed
    assert delivery_failures == []
    assert _read_all(broker, 0, len(written)) == written
    assert not (source / f"{TOPIC}-0").exists()
    assert [p.name for p in source.iterdir() if p.name.startswith(TOPIC + "-0")] == []
    broker.stop()

    with _broker(*dirs) as restarted:
        assert _dir_of(restarted, 0) == destination
        assert _read_all(restarted, 0, len(written)) == written
        _produce(restarted, 0, [b"after"])
        assert _read_all(restarted, 0, len(written) + 1)[-1] == b"after"


def test_kafka_python_moves_and_gets_kafkas_errors(
    broker: BackgroundBroker, dirs: tuple[Path, Path]
) -> None:
    broker_id = broker.broker.config.broker_id
    source = _dir_of(broker, 1)
    destination = dirs[1] if source == dirs[0] else dirs[0]
    _produce(broker, 1, [b"x"] * 10)
    admin = _admin(broker)
    try:
        answers = admin.alter_replica_log_dirs(
            {
                (TOPIC, 1, broker_id): str(destination),
                ("unknown", 0, broker_id): str(destination),
                (TOPIC, 0, broker_id): "/no/such/log/dir",
                (LONG_TOPIC, 0, broker_id): str(destination),
            }
        )
        assert {(tpr.topic, tpr.partition): error for tpr, error in answers.items()} == {
            (TOPIC, 1): NoError,
            ("unknown", 0): ReplicaNotAvailableError,
            (TOPIC, 0): LogDirNotFoundError,
            (LONG_TOPIC, 0): InvalidTopicError,
        }
        deadline = time.monotonic() + WAIT_S
        while _dir_of(broker, 1) != destination:
            assert time.monotonic() < deadline, "the move never finished"
            time.sleep(_POLL_S)
        # Already there: nothing to do.
        again = admin.alter_replica_log_dirs({(TOPIC, 1, broker_id): str(destination)})
        assert list(again.values()) == [NoError]
        # The partition named before it existed is created where it was asked to go,
        # not in the other directory, which holds fewer.
        created = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        created.create_topics([NewTopic("unknown", 1)])["unknown"].result(WAIT_S)
        tp = TopicPartition("unknown", 0)
        assert broker.call(lambda b: b.replica_manager.log_manager.dir_of(tp)) == destination

        failed = OSError(errno.EIO, "injected")
        broker.call(lambda b: b.replica_manager.log_manager.fail_dir(destination, failed))
        (answer,) = admin.describe_log_dirs()
        offline = next(e for e in answer["log_dirs"] if e["log_dir"] == str(destination))
        assert offline["error_code"] == KafkaStorageError.errno
        assert offline["topics"] == []
        assert offline["total_bytes"] == offline["usable_bytes"] == -1
        refused = admin.alter_replica_log_dirs({(TOPIC, 0, broker_id): str(destination)})
        assert list(refused.values()) == [KafkaStorageError]
    finally:
        admin.close()
