"""``tickwheel transaction`` against three brokers: ``list`` asks every broker (each
lists only the ids it coordinates), ``describe`` finds an id's coordinator, and
``describe-producers`` asks a partition's leader, whichever broker ``-b`` names.

Three ``__transaction_state`` partitions of one replica each, one per broker, and
three transactional ids chosen to fall in different ones, so each broker coordinates
one of them; a topic with one partition led by each broker, and each id's producer
holding a transaction open on the partition of the same index.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tickwheel.cli import main
from tickwheel.cluster import LocalCluster
from tickwheel.coordinator.transaction._state_manager import java_abs, java_string_hash

from .helpers import CLUSTER_PROPERTIES, WAIT_S, ZOOKEEPER_TICK_MS, create_topic

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

BROKERS = 3
TOPIC = "cli-orders"
PROPERTIES = {
    **CLUSTER_PROPERTIES,
    "transaction.state.log.num.partitions": str(BROKERS),
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


def _ids() -> list[str]:
    """One transactional id per ``__transaction_state`` partition, in partition order."""
    by_partition: dict[int, str] = {}
    index = 0
    while len(by_partition) < BROKERS:
        candidate = f"cli-tx-{index}"
        by_partition.setdefault(java_abs(java_string_hash(candidate)) % BROKERS, candidate)
        index += 1
    return [by_partition[p] for p in range(BROKERS)]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path,
        BROKERS,
        properties=PROPERTIES,
        chroot="/tickwheel-test",
        zookeeper_tick_ms=ZOOKEEPER_TICK_MS,
    ) as running:
        yield running


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    status = main([*argv, "--format", "json"])
    captured = capsys.readouterr()
    assert (status, captured.err) == (0, "")
    return json.loads(captured.out)


def test_every_broker_is_asked(cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    create_topic(cluster, TOPIC, [[broker] for broker in range(BROKERS)])
    producers = []
    first_offsets = []
    for partition, transactional_id in enumerate(_ids()):
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id}
        )
        producer.init_transactions(WAIT_S)
        producer.begin_transaction()
        offsets: list[int] = []
        producer.produce(
            TOPIC,
            b"v",
            partition=partition,
            on_delivery=lambda _error, message, into=offsets: into.append(message.offset()),
        )
        assert producer.flush(WAIT_S) == 0
        producers.append(producer)
        first_offsets.append(offsets[0])

    # -b names broker 0 only: the others are found from its Metadata answer.
    b = ("-b", cluster.brokers[0].bootstrap_servers)
    listed = _json(capsys, "transaction", "list", *b)
    assert sorted(row["transactional_id"] for row in listed) == sorted(_ids())
    assert {row["transaction_state"] for row in listed} == {"Ongoing"}
    coordinators = {row["transactional_id"]: row["coordinator"] for row in listed}
    assert sorted(coordinators.values()) == list(range(BROKERS))
    for partition, transactional_id in enumerate(_ids()):
        described = _json(capsys, "transaction", "describe", transactional_id, *b)
        assert described["coordinator"] == coordinators[transactional_id]
        assert described["partitions"] == [{"topic": TOPIC, "partition": partition}]
        (producer,) = _json(
            capsys, "transaction", "describe-producers", TOPIC, "--partition", str(partition), *b
        )
        assert producer["producer_id"] == described["producer_id"]
        assert producer["current_transaction_start_offset"] == first_offsets[partition]
    for producer in producers:
        producer.abort_transaction(WAIT_S)
