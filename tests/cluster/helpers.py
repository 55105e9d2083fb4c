"""Helpers for the cluster tests: a local cluster, bounded waits, raw produce, log bytes,
and a numbered acks=all writer with its reader."""

from __future__ import annotations

import asyncio
import datetime
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import crc32c
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as ClientPartition
from confluent_kafka.admin import AdminClient, NewTopic

from server.wire import WireClient
from tickwheel.cluster import BrokerChannel, BrokerEndpoint, BrokerProcess, LocalCluster
from tickwheel.log import write_varint
from tickwheel.protocol import ApiKey

LAG_TIME_MS = 2000
FETCH_WAIT_MS = 500
SESSION_TIMEOUT_MS = 6000
ZOOKEEPER_TICK_MS = 500
WAIT_S = 30.0
_MAX_QUEUED = 500
_LOG_TAIL_LINES = 40
_POLL_S = 0.05
PRODUCE_KEY = ApiKey.PRODUCE
FETCH_KEY = ApiKey.FETCH
FETCH_VERSION = 12
CONSUMER_REPLICA_ID = -1
NOT_LEADER_OR_FOLLOWER = 6
PRODUCE_VERSION = 9
ACKS_ALL = -1

CLUSTER_PROPERTIES = {
    "replica.lag.time.max.ms": str(LAG_TIME_MS),
    "replica.fetch.wait.max.ms": str(FETCH_WAIT_MS),
    "replica.fetch.backoff.ms": "200",
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "auto.create.topics.enable": "false",
    # A cluster's default is Kafka's 3, and the offsets topic is not created while
    # fewer brokers are alive. Consumers here only look their coordinator up (librdkafka
    # does so for any group.id) while brokers come and go; test_groups sets its own.
    "offsets.topic.replication.factor": "1",
}


def local_cluster(
    base_dir: Path,
    num_brokers: int = 3,
    properties: dict[str, str] | None = None,
    *,
    faults: bool = False,
) -> LocalCluster:
    """A (not yet started) cluster with the tests' short lag and session times, and
    ``properties`` on top; with ``faults``, each broker serves its fault plan."""
    return LocalCluster(
        base_dir,
        num_brokers,
        properties={**CLUSTER_PROPERTIES, **(properties or {})},
        chroot="/tickwheel-test",
        zookeeper_tick_ms=ZOOKEEPER_TICK_MS,
        faults=faults,
    )


def print_broker_logs(cluster: LocalCluster) -> None:
    """The end of each broker's log, for pytest to show when the test failed."""
    for broker in cluster.brokers:
        lines = broker.output.read_text(encoding="utf-8", errors="replace").splitlines()
        print(f"--- broker {broker.broker_id} ({broker.output}) ---")
        print("\n".join(lines[-_LOG_TAIL_LINES:]))


def wire_call(servers: str, api_key: int, version: int, values: dict[str, Any]) -> Any:
    """One request to ``servers`` on a connection of its own; the decoded answer."""
    client = WireClient(servers)
    try:
        return client.call(api_key, version, values)
    finally:
        client.close()


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> float:
    """Poll ``condition`` until it holds; returns the seconds it took (fails after timeout)."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(_POLL_S)
    return time.monotonic() - started


def _controller_named_by(broker: BrokerProcess) -> int:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    return int(admin.list_topics(timeout=WAIT_S).controller_id)


def _wait_for_controller(cluster: LocalCluster) -> None:
    """Wait until every running broker's Metadata names a live controller.

    A broker learns of the others' registrations from its own watch, a moment after
    ZooKeeper has them; an admin client whose first Metadata named no controller may
    not look for one again before its request times out.
    """
    for broker in cluster.brokers:
        if broker.running:
            wait_for(
                lambda b=broker: _controller_named_by(b) >= 0,
                f"broker {broker.broker_id} to name the controller",
            )


def create_topic(
    cluster: LocalCluster,
    name: str,
    replicas: Sequence[Sequence[int]],
    configs: dict[str, str] | None = None,
) -> None:
    """Create ``name`` with a manual assignment (one replica list per partition), and
    wait until every broker knows partition 0: its leader serves it, the others refer
    clients to the leader (each broker learns of the topic from its own watch)."""
    _wait_for_controller(cluster)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    topic = NewTopic(
        name,
        num_partitions=len(replicas),
        replica_assignment=[list(r) for r in replicas],
        config=configs or {},
    )
    admin.create_topics([topic])[name].result(WAIT_S)
    leader = replicas[0][0]
    for broker in cluster.brokers:
        expected = 0 if broker.broker_id == leader else NOT_LEADER_OR_FOLLOWER
        wait_for(
            lambda b=broker.bootstrap_servers, e=expected: fetch_raw(b, name) == e,
            f"broker {broker.broker_id} to know {name}",
        )


def isr(cluster: LocalCluster, topic: str, partition: int = 0) -> tuple[int, ...]:
    """The partition's ISR as ZooKeeper holds it."""
    state = cluster.partition_state(topic, partition)
    assert state is not None
    return state.isr


def log_bytes(log_dir: Path, topic: str, partition: int = 0) -> bytes:
    """Every segment of a partition's log, in offset order."""
    directory = log_dir / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def segment_files(log_dir: Path, topic: str, partition: int = 0) -> Iterator[Path]:
    """A partition's segment files, in offset order."""
    return iter(sorted((log_dir / f"{topic}-{partition}").glob("*.log")))


def record_batch(value: bytes) -> bytes:
    """One uncompressed record batch (format v2) holding one record with ``value``."""
    body = (
        b"\x00"
        + write_varint(0)
        + write_varint(0)
        + write_varint(-1)
        + write_varint(len(value))
        + value
    )
    body += write_varint(0)
    record = write_varint(len(body)) + body
    now_ms = int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", 0, 0, now_ms, now_ms, -1, -1, -1, 1) + record
    header = struct.pack(">qii", 0, len(after_crc) + 9, -1) + b"\x02"
    return header + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc


async def raw_produce(
    bootstrap_servers: str, topic: str, value: bytes, *, timeout_ms: int, acks: int = ACKS_ALL
) -> tuple[int, float]:
    """Produce one record with Produce v9; returns (error code, seconds to the answer)."""
    host, _, port = bootstrap_servers.rpartition(":")
    channel = BrokerChannel(
        BrokerEndpoint(-1, host, int(port)), client_id="cluster-test", timeout_ms=60_000
    )
    request: dict[str, Any] = {
        "transactional_id": None,
        "acks": acks,
        "timeout": datetime.timedelta(milliseconds=timeout_ms),
        "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": record_batch(value)}]}
        ],
    }
    try:
        started = time.monotonic()
        response = await channel.request(PRODUCE_KEY, PRODUCE_VERSION, request)
        elapsed_s = time.monotonic() - started
    finally:
        await channel.close()
    error = int(response.responses[0].partition_responses[0].error_code)
    return error, elapsed_s


def produce_raw(
    bootstrap_servers: str, topic: str, value: bytes, *, timeout_ms: int
) -> tuple[int, float]:
    """``raw_produce`` from synchronous code."""
    return asyncio.run(raw_produce(bootstrap_servers, topic, value, timeout_ms=timeout_ms))


async def raw_fetch(
    bootstrap_servers: str, topic: str, offset: int = 0, *, max_wait_ms: int = 0, min_bytes: int = 1
) -> int:
    """A consumer's Fetch v12 of partition 0 (no wait by default); returns its error code."""
    host, _, port = bootstrap_servers.rpartition(":")
    channel = BrokerChannel(
        BrokerEndpoint(-1, host, int(port)), client_id="cluster-test", timeout_ms=60_000
    )
    request: dict[str, Any] = {
        "replica_id": CONSUMER_REPLICA_ID,
        "max_wait": datetime.timedelta(milliseconds=max_wait_ms),
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    try:
        response = await channel.request(FETCH_KEY, FETCH_VERSION, request)
    finally:
        await channel.close()
    return int(response.responses[0].partitions[0].error_code)


def fetch_raw(bootstrap_servers: str, topic: str) -> int:
    """``raw_fetch`` from synchronous code."""
    return asyncio.run(raw_fetch(bootstrap_servers, topic))


INIT_PRODUCER_ID_KEY = ApiKey.INIT_PRODUCER_ID
INIT_PRODUCER_ID_VERSION = 4


async def _init_producer_id(bootstrap_servers: str) -> int:
    host, _, port = bootstrap_servers.rpartition(":")
    channel = BrokerChannel(
        BrokerEndpoint(-1, host, int(port)), client_id="cluster-test", timeout_ms=60_000
    )
    request: dict[str, Any] = {
        "transactional_id": None,
        "transaction_timeout": datetime.timedelta(seconds=60),
        "producer_id": -1,
        "producer_epoch": -1,
    }
    try:
        response = await channel.request(INIT_PRODUCER_ID_KEY, INIT_PRODUCER_ID_VERSION, request)
    finally:
        await channel.close()
    assert int(response.error_code) == 0
    return int(response.producer_id)


def init_producer_id(bootstrap_servers: str) -> int:
    """A producer id from InitProducerId v4 at ``bootstrap_servers``."""
    return asyncio.run(_init_producer_id(bootstrap_servers))


class Writer:
    """An idempotent acks=all producer writing numbered records until stopped."""

    def __init__(self, cluster: LocalCluster, topic: str, partitions: int) -> None:
        self.acked: list[list[int]] = [[] for _ in range(partitions)]
        self.failed: list[KafkaError] = []
        self._partitions = partitions
        self._producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.acked[message.partition()].append(int(message.value()))
        else:
            self.failed.append(error)

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            if len(self._producer) < _MAX_QUEUED:
                self._producer.produce(
                    self._topic,
                    str(number).encode(),
                    partition=number % self._partitions,
                    on_delivery=self._delivered,
                )
                number += 1
            self._producer.poll(0.002)

    def acked_since(self, partition: int, count: int) -> bool:
        return len(self.acked[partition]) > count

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        assert self._producer.flush(WAIT_S) == 0


@contextmanager
def writing(cluster: LocalCluster, topic: str, partitions: int) -> Iterator[Writer]:
    """A ``Writer`` running for the block; flushed, every record answered, at its end."""
    writer = Writer(cluster, topic, partitions)
    writer.start()
    try:
        yield writer
    finally:
        writer.stop()


def read_all(cluster: LocalCluster, topic: str, partition: int) -> list[int]:
    """Every numbered record of the partition, from its start to its high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "failover-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        tp = ClientPartition(topic, partition)
        _, high = consumer.get_watermark_offsets(tp, WAIT_S)
        consumer.assign([ClientPartition(topic, partition, OFFSET_BEGINNING)])
        values: list[int] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < high:
            assert time.monotonic() < deadline, f"read {len(values)} of {high}"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(int(message.value()))
        return values
    finally:
        consumer.close()
