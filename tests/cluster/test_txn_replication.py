"""Transactions replicated: followers build the same ``.txnindex`` as the leader, and
after the leader dies the new leader serves read_committed from the same LSO.

The test writes the markers itself as a coordinator would, so the leaders' check of
each transactional Produce with the coordinator
(``transaction.partition.verification.enable``) is off in its cluster."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as ClientPartition
from kio.schema.errors import ErrorCode

from server.wire import WireClient
from tickwheel.bench._batches import make_batch
from tickwheel.cluster import LocalCluster
from tickwheel.protocol import ApiKey

from .helpers import create_topic, local_cluster, log_bytes, print_broker_logs, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

TOPIC = "txn"
PRODUCE = ApiKey.PRODUCE
INIT_PRODUCER_ID = ApiKey.INIT_PRODUCER_ID
WRITE_TXN_MARKERS = ApiKey.WRITE_TXN_MARKERS
TRANSACTIONAL = 0x10


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with local_cluster(
        tmp_path, properties={"transaction.partition.verification.enable": "false"}
    ) as running:
        yield running
    print_broker_logs(running)


def _txn_batch(value: bytes, producer_id: int) -> bytes:
    return make_batch(
        [value],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        attributes=TRANSACTIONAL,
        timestamp_ms=int(time.time() * 1000),
    )


def _produce(client: WireClient, records: bytes, transactional_id: str | None) -> Any:
    body = client.call(
        PRODUCE,
        9,
        {
            "transactional_id": transactional_id,
            "acks": -1,
            "timeout": 10_000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    return body.responses[0].partition_responses[0]


def _end(client: WireClient, producer_id: int, commit: bool) -> int:
    body = client.call(
        WRITE_TXN_MARKERS,
        1,
        {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": 0,
                    "transaction_result": commit,
                    "topics": [{"name": TOPIC, "partition_indexes": [0]}],
                    "coordinator_epoch": 0,
                }
            ]
        },
    )
    return int(body.markers[0].topics[0].partitions[0].error_code)


def _txn_indexes(log_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((log_dir / f"{TOPIC}-0").glob("*.txnindex"))}


def _read_committed(bootstrap_servers: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "txn-cluster",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([ClientPartition(TOPIC, 0, 0)])
    values: list[bytes] = []

    def read_tail() -> bool:
        for message in consumer.consume(10, 0.2):
            assert message.error() is None, message.error()
            values.append(message.value() or b"")
        return b"tail" in values

    try:
        wait_for(read_tail, "the tail record through read_committed")
    finally:
        consumer.close()
    return values


def test_followers_index_aborts_and_a_new_leader_keeps_them(cluster: LocalCluster) -> None:
    create_topic(cluster, TOPIC, [[0, 1, 2]], {"min.insync.replicas": "2"})
    client = WireClient(cluster.brokers[0].bootstrap_servers)
    try:
        pids = []
        for _ in range(2):
            answer = client.call(
                INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 60_000}
            )
            assert answer.error_code == ErrorCode.none
            pids.append(int(answer.producer_id))
        aborted, committed = pids
        assert _produce(client, _txn_batch(b"a1", aborted), "a").error_code == 0
        assert _produce(client, _txn_batch(b"c1", committed), "c").error_code == 0
        assert _end(client, aborted, commit=False) == ErrorCode.none
        assert _end(client, committed, commit=True) == ErrorCode.none
        assert _produce(client, make_batch([b"tail"]), None).error_code == 0
    finally:
        client.close()
    dirs = [broker.log_dir for broker in cluster.brokers]
    wait_for(
        lambda: (
            len({log_bytes(d, TOPIC) for d in dirs}) == 1
            and len({tuple(_txn_indexes(d).items()) for d in dirs}) == 1
        ),
        "identical logs and .txnindex files on every replica",
    )
    assert len(_txn_indexes(dirs[0])) == 1
    assert _read_committed(cluster.bootstrap_servers) == [b"c1", b"tail"]
    cluster.brokers[0].kill()
    survivors = ",".join(b.bootstrap_servers for b in cluster.brokers[1:])
    assert _read_committed(survivors) == [b"c1", b"tail"]
