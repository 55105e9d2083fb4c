"""Transactions on the data plane: transactional Produce, WriteTxnMarkers, read_committed
Fetch and ListOffsets, DescribeProducers, and real consumers at both isolation levels.

No transaction coordinator takes part: the tests write the transactional batches with
raw Produce requests and end the transactions with raw WriteTxnMarkers, as a
coordinator would, so the leader's verification with the coordinator
(``transaction.partition.verification.enable``) is off here; ``test_txn_verification``
covers it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiokafka
import kafka
import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.schema.errors import ErrorCode

from tickwheel.bench._batches import make_batch
from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker

from .wire import WireClient

pytestmark = pytest.mark.integration

PRODUCE = ApiKey.PRODUCE
FETCH = ApiKey.FETCH
LIST_OFFSETS = ApiKey.LIST_OFFSETS
METADATA = ApiKey.METADATA
API_VERSIONS = ApiKey.API_VERSIONS
INIT_PRODUCER_ID = ApiKey.INIT_PRODUCER_ID
WRITE_TXN_MARKERS = ApiKey.WRITE_TXN_MARKERS
DESCRIBE_PRODUCERS = ApiKey.DESCRIBE_PRODUCERS
TRANSACTIONAL = 0x10
TIMEOUT_S = 15.0
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
TOPIC = "txn"


def txn_batch(*values: bytes, producer_id: int, epoch: int, sequence: int) -> bytes:
    """A transactional batch: the log's own test encoder, with the transactional bit."""
    return make_batch(
        list(values),
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        attributes=TRANSACTIONAL,
        timestamp_ms=int(time.time() * 1000),
    )


def plain_batch(*values: bytes) -> bytes:
    return make_batch(list(values), timestamp_ms=int(time.time() * 1000))


class Txns:
    """A raw client that plays the producers and the coordinator."""

    def __init__(self, broker: BackgroundBroker) -> None:
        self.client = WireClient(broker.bootstrap_servers)
        self.client.call(
            METADATA, 4, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": True}
        )

    def close(self) -> None:
        self.client.close()

    def producer_id(self) -> int:
        body = self.client.call(
            INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 60_000}
        )
        assert body.error_code == ErrorCode.none
        return int(body.producer_id)

    def produce(
        self, records: dict[int, bytes], transactional_id: str | None = "tx", topic: str = TOPIC
    ) -> list[Any]:
        body = self.client.call(
            PRODUCE,
            9,
            {
                "transactional_id": transactional_id,
                "acks": -1,
                "timeout": 5000,
                "topic_data": [
                    {
                        "name": topic,
                        "partition_data": [
                            {"index": index, "records": data} for index, data in records.items()
                        ],
                    }
                ],
            },
        )
        return list(body.responses[0].partition_responses)

    def end(
        self, producer_id: int, commit: bool, partitions: tuple[int, ...] = (0,), topic: str = TOPIC
    ) -> Any:
        return self.client.call(
            WRITE_TXN_MARKERS,
            1,
            {
                "markers": [
                    {
                        "producer_id": producer_id,
                        "producer_epoch": 0,
                        "transaction_result": commit,
                        "topics": [{"name": topic, "partition_indexes": list(partitions)}],
                        "coordinator_epoch": 0,
                    }
                ]
            },
        )

    def fetch(
        self,
        isolation_level: int,
        offset: int = 0,
        max_wait_ms: int = 0,
        client: WireClient | None = None,
    ) -> Any:
        body = (client or self.client).call(
            FETCH, 11, fetch_request(isolation_level, offset, max_wait_ms)
        )
        return body.responses[0].partitions[0]

    def latest(self, isolation_level: int) -> int:
        body = self.client.call(
            LIST_OFFSETS,
            5,
            {
                "replica_id": -1,
                "isolation_level": isolation_level,
                "topics": [
                    {
                        "name": TOPIC,
                        "partitions": [
                            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
                        ],
                    }
                ],
            },
        )
        partition = body.topics[0].partitions[0]
        assert partition.error_code == ErrorCode.none
        return int(partition.offset)


def fetch_request(isolation_level: int, offset: int, max_wait_ms: int) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"transaction.partition.verification.enable": "false"}


@pytest.fixture
def txns(tickwheel_broker: BackgroundBroker) -> Any:
    raw = Txns(tickwheel_broker)
    yield raw
    raw.close()


def write_committed_and_aborted(txns: Txns) -> tuple[int, int]:
    """c1 (A), a1 (B), c2 (A), B aborts, A commits, then a plain "tail" record."""
    a, b = txns.producer_id(), txns.producer_id()
    assert (
        txns.produce({0: txn_batch(b"c1", producer_id=a, epoch=0, sequence=0)})[0].base_offset == 0
    )
    assert (
        txns.produce({0: txn_batch(b"a1", producer_id=b, epoch=0, sequence=0)})[0].base_offset == 1
    )
    assert (
        txns.produce({0: txn_batch(b"c2", producer_id=a, epoch=0, sequence=1)})[0].base_offset == 2
    )
    assert txns.end(b, commit=False).markers[0].topics[0].partitions[0].error_code == 0
    assert txns.end(a, commit=True).markers[0].topics[0].partitions[0].error_code == 0
    assert txns.produce({0: plain_batch(b"tail")}, transactional_id=None)[0].base_offset == 5
    return a, b


def test_read_committed_fetch_lso_and_aborted_list(txns: Txns) -> None:
    a, b = txns.producer_id(), txns.producer_id()
    txns.produce({0: txn_batch(b"a1", producer_id=a, epoch=0, sequence=0)})
    txns.produce({0: txn_batch(b"b1", producer_id=b, epoch=0, sequence=0)})
    # Both open: nothing is stable.
    assert txns.latest(READ_COMMITTED) == 0
    assert txns.latest(READ_UNCOMMITTED) == 2
    committed = txns.fetch(READ_COMMITTED)
    assert (committed.last_stable_offset, committed.high_watermark) == (0, 2)
    assert committed.aborted_transactions == ()
    assert not committed.records
    # DescribeProducers shows both open transactions.
    described = txns.client.call(
        DESCRIBE_PRODUCERS, 0, {"topics": [{"name": TOPIC, "partition_indexes": [0, 7]}]}
    )
    [p0, p7] = described.topics[0].partitions
    assert p0.error_code == ErrorCode.none
    assert {(s.producer_id, s.current_txn_start_offset) for s in p0.active_producers} == {
        (a, 0),
        (b, 1),
    }
    assert p7.error_code == ErrorCode.unknown_topic_or_partition
    # a aborts: still nothing stable (b began before a's marker).
    txns.end(a, commit=False)
    assert txns.latest(READ_COMMITTED) == 1
    committed = txns.fetch(READ_COMMITTED)
    assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(a, 0)]
    txns.end(b, commit=True)
    assert txns.latest(READ_COMMITTED) == 4
    committed = txns.fetch(READ_COMMITTED)
    assert committed.last_stable_offset == 4
    assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(a, 0)]
    uncommitted = txns.fetch(READ_UNCOMMITTED)
    assert uncommitted.aborted_transactions is None
    described = txns.client.call(
        DESCRIBE_PRODUCERS, 0, {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}
    )
    assert {
        s.current_txn_start_offset for s in described.topics[0].partitions[0].active_producers
    } == {-1}


def test_produce_rules_for_transactional_batches(txns: Txns) -> None:
    a, b = txns.producer_id(), txns.producer_id()
    refused = txns.produce(
        {0: txn_batch(b"x", producer_id=a, epoch=0, sequence=0)}, transactional_id=None
    )
    assert refused[0].error_code == ErrorCode.transactional_id_authorization_failed
    txns.client.call(METADATA, 4, {"topics": [{"name": "txn2"}], "allow_auto_topic_creation": True})
    mixed = txns.client.call(
        PRODUCE,
        9,
        {
            "transactional_id": "tx",
            "acks": -1,
            "timeout": 5000,
            "topic_data": [
                {
                    "name": TOPIC,
                    "partition_data": [
                        {"index": 0, "records": txn_batch(b"x", producer_id=a, epoch=0, sequence=0)}
                    ],
                },
                {
                    "name": "txn2",
                    "partition_data": [
                        {"index": 0, "records": txn_batch(b"y", producer_id=b, epoch=0, sequence=0)}
                    ],
                },
            ],
        },
    )
    codes = {p.error_code for t in mixed.responses for p in t.partition_responses}
    assert codes == {ErrorCode.invalid_producer_id_mapping}
    # Nothing was written.
    assert txns.latest(READ_UNCOMMITTED) == 0
    # A non-transactional batch from a producer with an open transaction.
    txns.produce({0: txn_batch(b"x", producer_id=a, epoch=0, sequence=0)})
    plain = make_batch([b"z"], producer_id=a, producer_epoch=0, base_sequence=1)
    assert txns.produce({0: plain})[0].error_code == ErrorCode.invalid_txn_state


def test_write_txn_markers_errors_and_api_versions(txns: Txns) -> None:
    body = txns.end(123, commit=True, partitions=(0, 9), topic="nope")
    results = {p.partition_index: p.error_code for p in body.markers[0].topics[0].partitions}
    assert results == {
        0: ErrorCode.unknown_topic_or_partition,
        9: ErrorCode.unknown_topic_or_partition,
    }
    versions = txns.client.call(
        API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert advertised[WRITE_TXN_MARKERS] == (1, 1)
    assert advertised[DESCRIBE_PRODUCERS] == (0, 0)


def test_a_read_committed_long_poll_wakes_on_the_marker(
    tickwheel_broker: BackgroundBroker, txns: Txns
) -> None:
    pid = txns.producer_id()
    txns.produce({0: txn_batch(b"v", producer_id=pid, epoch=0, sequence=0)})
    poller = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        poller.send(FETCH, 11, fetch_request(READ_COMMITTED, 0, 10_000))
        # Wait until the fetch is parked in the purgatory (nothing stable yet), then commit.
        deadline = time.monotonic() + TIMEOUT_S
        while _parked_fetches(tickwheel_broker) == 0:
            assert time.monotonic() < deadline, "the fetch never waited"
            time.sleep(0.01)
        started = time.monotonic()
        txns.end(pid, commit=True)
        _, body = poller.receive(FETCH, 11)
        elapsed = time.monotonic() - started
    finally:
        poller.close()
    partition = body.responses[0].partitions[0]
    assert partition.last_stable_offset == 2
    assert partition.records
    assert elapsed < 2.0


def _parked_fetches(broker: BackgroundBroker) -> int:
    count = broker.call(lambda b: b.context.replica_manager.fetch_purgatory.num_delayed)
    assert isinstance(count, int)
    return count


def _confluent_values(broker: BackgroundBroker, isolation: str) -> list[bytes]:
    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"txn-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    reader.assign([TopicPartition(TOPIC, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while b"tail" not in values and time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.append(message.value() or b"")
    finally:
        reader.close()
    return values


def _kafka_python_values(broker: BackgroundBroker, isolation: str) -> list[bytes]:
    reader = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        consumer_timeout_ms=int(TIMEOUT_S * 1000),
        enable_auto_commit=False,
        isolation_level=isolation,
    )
    try:
        reader.assign([kafka.TopicPartition(TOPIC, 0)])
        reader.seek_to_beginning()
        values: list[bytes] = []
        for message in reader:
            values.append(message.value)
            if message.value == b"tail":
                break
        return values
    finally:
        reader.close()


async def _aiokafka_values_async(bootstrap_servers: str, isolation: str) -> list[bytes]:
    reader = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, enable_auto_commit=False, isolation_level=isolation
    )
    await reader.start()
    try:
        partition = aiokafka.TopicPartition(TOPIC, 0)
        reader.assign([partition])
        await reader.seek_to_beginning(partition)
        values: list[bytes] = []
        async with asyncio.timeout(TIMEOUT_S):
            while b"tail" not in values:
                message = await reader.getone()
                values.append(message.value or b"")
        return values
    finally:
        await reader.stop()


def _aiokafka_values(broker: BackgroundBroker, isolation: str) -> list[bytes]:
    return asyncio.run(_aiokafka_values_async(broker.bootstrap_servers, isolation))


def test_consumers_see_only_committed_records_when_read_committed(
    tickwheel_broker: BackgroundBroker, txns: Txns
) -> None:
    write_committed_and_aborted(txns)
    everything = [b"c1", b"a1", b"c2", b"tail"]
    committed = [b"c1", b"c2", b"tail"]
    assert _confluent_values(tickwheel_broker, "read_committed") == committed
    assert _confluent_values(tickwheel_broker, "read_uncommitted") == everything
    assert _kafka_python_values(tickwheel_broker, "read_committed") == committed
    assert _kafka_python_values(tickwheel_broker, "read_uncommitted") == everything
    assert _aiokafka_values(tickwheel_broker, "read_committed") == committed
    assert _aiokafka_values(tickwheel_broker, "read_uncommitted") == everything
