"""Log directories: a full disk takes one offline loudly, the others keep serving; the
high watermark reaches its checkpoint on its own interval.

The full disk is a 1 MiB tmpfs mounted as the second of two ``log.dirs`` (skipped
where this process may not mount one).
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as ClientPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from replica.records import batch
from tickwheel.pytest_plugin import TEST_BROKER_PROPERTIES
from tickwheel.replica import TopicPartition
from tickwheel.server import BackgroundBroker, BrokerConfig

from .wire import WireClient

pytestmark = pytest.mark.integration

TOPIC = "disks"
WAIT_S = 30.0
_POLL_S = 0.02
_RECORD = b"r" * 32_768
PRODUCE, FETCH = 0, 1


@pytest.fixture
def small_dir(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, unmounted at the end."""
    path = tmp_path / "small"
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def _broker(log_dirs: str, **properties: str) -> BackgroundBroker:
    return BackgroundBroker(
        BrokerConfig.from_properties(
            {
                **TEST_BROKER_PROPERTIES,
                "log.dirs": log_dirs,
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "tickwheel.metrics.port": "0",
                **properties,
            }
        )
    )


def _offline_gauge(broker: BackgroundBroker) -> float:
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("kafka_log_LogManager_OfflineLogDirectoryCount "):
                return float(line.rpartition(" ")[2])
    raise AssertionError("no OfflineLogDirectoryCount gauge")


def _fill(broker: BackgroundBroker, partition: int) -> KafkaError:
    """Produce to ``partition`` without retries until a write fails; returns the error."""
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, _: Message) -> None:
        if error is not None:
            errors.append(error)

    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "acks": 1, "retries": 0, "linger.ms": 0}
    )
    deadline = time.monotonic() + WAIT_S
    while not errors:
        assert time.monotonic() < deadline, "the small directory never filled up"
        producer.produce(TOPIC, _RECORD, partition=partition, on_delivery=delivered)
        producer.flush(WAIT_S)
    return errors[0]


def _read_all(broker: BackgroundBroker, partition: int, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "disks",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([ClientPartition(TOPIC, partition, OFFSET_BEGINNING)])
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def test_a_full_log_dir_goes_offline_and_the_other_keeps_serving(
    tmp_path: Path, small_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    big_dir = tmp_path / "big"
    with _broker(f"{big_dir},{small_dir}") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, num_partitions=2)])[TOPIC].result(WAIT_S)

        def dir_of(partition: int) -> object:
            tp = TopicPartition(TOPIC, partition)
            return broker.call(lambda b: b.replica_manager.log_manager.dir_of(tp))

        # Each new partition goes to the directory holding fewest.
        placed = {dir_of(0), dir_of(1)}
        assert placed == {big_dir, small_dir}
        small, big = (0, 1) if dir_of(0) == small_dir else (1, 0)
        assert _offline_gauge(broker) == 0

        with caplog.at_level(logging.ERROR):
            error = _fill(broker, small)
        assert error.code() == KafkaError.KAFKA_STORAGE_ERROR
        failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(failures) == 1, [r.getMessage() for r in failures]
        assert str(small_dir) in failures[0].getMessage()
        assert "errno 28" in failures[0].getMessage()
        assert _offline_gauge(broker) == 1

        client = WireClient(broker.bootstrap_servers)
        try:
            produced = client.call(
                PRODUCE,
                9,
                {
                    "acks": 1,
                    "timeout": 1000,
                    "topic_data": [
                        {
                            "name": TOPIC,
                            "partition_data": [{"index": small, "records": batch(b"x")}],
                        }
                    ],
                },
            )
            fetched = client.call(
                FETCH,
                12,
                {
                    "max_wait": 0,
                    "min_bytes": 1,
                    "topics": [
                        {
                            "topic": TOPIC,
                            "partitions": [
                                {"partition": small, "fetch_offset": 0, "partition_max_bytes": 4096}
                            ],
                        }
                    ],
                    "forgotten_topics_data": [],
                },
            )
        finally:
            client.close()
        storage_error = ErrorCode.kafka_storage_error
        assert produced.responses[0].partition_responses[0].error_code == storage_error
        assert fetched.responses[0].partitions[0].error_code == storage_error

        metadata = admin.list_topics(TOPIC, timeout=WAIT_S).topics[TOPIC].partitions
        assert metadata[small].leader == -1
        assert metadata[small].error.code() == KafkaError.LEADER_NOT_AVAILABLE
        assert metadata[big].leader == broker.broker.config.broker_id

        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
        for index in range(10):
            producer.produce(TOPIC, f"big-{index}".encode(), partition=big)
        assert producer.flush(WAIT_S) == 0
        assert _read_all(broker, big, 10) == [f"big-{index}".encode() for index in range(10)]


def test_the_high_watermark_is_checkpointed_on_its_interval(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    with _broker(str(log_dir), **{"replica.high.watermark.checkpoint.interval.ms": "50"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1)])[TOPIC].result(WAIT_S)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for index in range(7):
            producer.produce(TOPIC, f"{index}".encode())
        assert producer.flush(WAIT_S) == 0
        # One file for every partition of the log directory.
        checkpoint = log_dir / "replication-offset-checkpoint"

        def checkpointed() -> str:
            # Kafka's format: version, entry count, then "topic partition offset".
            return checkpoint.read_text().splitlines()[-1] if checkpoint.exists() else ""

        deadline = time.monotonic() + WAIT_S
        # Written by the periodic task while the broker runs: no flush, no stop.
        while checkpointed() != f"{TOPIC} 0 7":
            assert time.monotonic() < deadline, "the high watermark was never checkpointed"
            time.sleep(_POLL_S)
