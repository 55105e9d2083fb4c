"""Transactions v2 and the leader's verification (KIP-890) on the wire: a broker, kio
requests, Kafka's exact answers.

Part 1: a transactional produce to a partition never added to the transaction is
refused (INVALID_TXN_STATE before Produce v11, TRANSACTION_ABORTABLE from v11) instead
of opening a transaction no marker closes; a produce verified, then overtaken by the
abort, is refused too. Part 2: Produce v12 adds the partition itself and EndTxn v5
bumps the epoch and answers it; TxnOffsetCommit is verified (v0-4) or adds the group's
offsets partition (v5) the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.errors import ErrorCode as E

from tickwheel.coordinator.group import OFFSETS_TOPIC
from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, BrokerConfig

from .test_transactions import (
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    FIND_COORDINATOR,
    METADATA,
    add,
    describe_empty,
    end,
    init,
)
from .test_transactions_data_plane import txn_batch
from .wire import WireClient

pytestmark = pytest.mark.integration

PRODUCE = ApiKey.PRODUCE
API_VERSIONS = ApiKey.API_VERSIONS
TXN_OFFSET_COMMIT = ApiKey.TXN_OFFSET_COMMIT
TOPIC = "t"


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"num.partitions": "2"}


@pytest.fixture
def client(tickwheel_broker: BackgroundBroker) -> Any:
    wire = WireClient(tickwheel_broker.bootstrap_servers)
    body = wire.call(METADATA, 4, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": True})
    assert body.topics[0].error_code == E.none
    assert wire.call(FIND_COORDINATOR, 1, {"key": "tx", "key_type": 1}).error_code == E.none
    yield wire
    wire.close()


def produce(
    client: WireClient, version: int, pid: int, epoch: int, sequence: int, partition: int = 0
) -> Any:
    body = client.call(
        PRODUCE,
        version,
        {
            "transactional_id": "tx",
            "acks": -1,
            "timeout": 5000,
            "topic_data": [
                {
                    "name": TOPIC,
                    "partition_data": [
                        {
                            "index": partition,
                            "records": txn_batch(
                                b"v", producer_id=pid, epoch=epoch, sequence=sequence
                            ),
                        }
                    ],
                }
            ],
        },
    )
    return body.responses[0].partition_responses[0]


def end_v5(client: WireClient, pid: int, epoch: int, commit: bool = True) -> Any:
    return client.call(
        END_TXN,
        5,
        {
            "transactional_id": "tx",
            "producer_id": pid,
            "producer_epoch": epoch,
            "committed": commit,
        },
    )


def partitions_of(client: WireClient) -> set[tuple[str, int]]:
    (state,) = client.call(
        DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx"]}
    ).transaction_states
    return {(t.topic, int(p)) for t in state.topics for p in t.partitions}


def test_transaction_version_2_is_finalized_and_its_apis_served(client: WireClient) -> None:
    body = client.call(
        API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    finalized = {f.name: int(f.max_version_level) for f in body.finalized_features}
    assert finalized["transaction.version"] == 2
    ranges = {int(k.api_key): int(k.max_version) for k in body.api_keys}
    assert (ranges[PRODUCE], ranges[END_TXN]) == (12, 5)


def test_an_unadded_partition_is_refused_and_opens_no_transaction(client: WireClient) -> None:
    started = init(client)
    pid, epoch = int(started.producer_id), int(started.producer_epoch)
    # No AddPartitionsToTxn: a v1 client's lost request, or a buggy client.
    assert produce(client, 9, pid, epoch, 0).error_code == E.invalid_txn_state
    assert produce(client, 11, pid, epoch, 0).error_code == E.transaction_abortable
    assert add(client, pid, epoch, t=[0]) == {(TOPIC, 0): E.none}
    answer = produce(client, 9, pid, epoch, 0)
    assert (answer.error_code, answer.base_offset) == (E.none, 0)
    # Partition 1 was never added: still refused while 0 takes records.
    assert produce(client, 9, pid, epoch, 0, partition=1).error_code == E.invalid_txn_state
    assert end(client, pid, epoch) == E.none


def test_a_produce_after_the_abort_cannot_reopen_the_transaction(client: WireClient) -> None:
    """The hanging transaction part 1 closes: a v1 producer's batch that arrives after
    its transaction was aborted (the partition no longer in any transaction) would open a
    transaction no coordinator knows of; it is refused and the LSO stays put."""
    started = init(client)
    pid, epoch = int(started.producer_id), int(started.producer_epoch)
    assert add(client, pid, epoch, t=[0]) == {(TOPIC, 0): E.none}
    assert produce(client, 9, pid, epoch, 0).error_code == E.none
    assert end(client, pid, epoch, commit=False) == E.none
    late = produce(client, 9, pid, epoch, 1)
    assert late.error_code == E.invalid_txn_state
    assert partitions_of(client) == set()


def test_produce_v12_adds_the_partition_and_end_txn_v5_bumps_the_epoch(
    client: WireClient,
) -> None:
    started = init(client, version=5)
    pid, epoch = int(started.producer_id), int(started.producer_epoch)
    first = produce(client, 12, pid, epoch, 0)
    assert (first.error_code, first.base_offset) == (E.none, 0)
    assert produce(client, 12, pid, epoch, 0, partition=1).error_code == E.none
    assert partitions_of(client) == {(TOPIC, 0), (TOPIC, 1)}
    ended = end_v5(client, pid, epoch)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (E.none, pid, epoch + 1)
    # A retry of the same EndTxn (its answer lost) gets the same answer.
    again = end_v5(client, pid, epoch)
    assert (again.error_code, again.producer_epoch) == (E.none, epoch + 1)
    # The old epoch is fenced; the new one starts its sequences at 0.
    assert produce(client, 12, pid, epoch, 1).error_code == E.invalid_producer_epoch
    second = produce(client, 12, pid, epoch + 1, 0)
    assert (second.error_code, second.base_offset) == (E.none, 2)  # after the marker
    aborted = end_v5(client, pid, epoch + 1, commit=False)
    assert (aborted.error_code, aborted.producer_epoch) == (E.none, epoch + 2)


def txn_offset_commit(client: WireClient, version: int, pid: int, epoch: int) -> ErrorCode:
    assert client.call(FIND_COORDINATOR, 1, {"key": "g", "key_type": 0}).error_code == E.none
    partition = {
        "partition_index": 0,
        "committed_offset": 5,
        "committed_leader_epoch": -1,
        "committed_metadata": "",
    }
    body = client.call(
        TXN_OFFSET_COMMIT,
        version,
        {
            "transactional_id": "tx",
            "group_id": "g",
            "producer_id": pid,
            "producer_epoch": epoch,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [partition]}],
        },
    )
    return ErrorCode(body.topics[0].partitions[0].error_code)


def test_txn_offset_commit_v5_adds_the_offsets_partition(client: WireClient) -> None:
    started = init(client, version=5)
    pid, epoch = int(started.producer_id), int(started.producer_epoch)
    # Version 1: the group's partition must have been added with AddOffsetsToTxn.
    assert txn_offset_commit(client, 3, pid, epoch) == E.invalid_txn_state
    assert txn_offset_commit(client, 4, pid, epoch) == E.transaction_abortable
    assert describe_empty(client, "tx")[1] == "Empty"
    # Version 2: the broker adds it.
    assert txn_offset_commit(client, 5, pid, epoch) == E.none
    assert partitions_of(client) == {(OFFSETS_TOPIC, 0)}
    ended = end_v5(client, pid, epoch)
    assert (ended.error_code, ended.producer_epoch) == (E.none, epoch + 1)


def test_with_verification_off_produce_v12_still_adds_its_partition(tmp_path: Path) -> None:
    """The switch turns part 1 off; a version 2 client adds no partition itself, so its
    leader still does."""
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "num.partitions": "2",
            "transaction.partition.verification.enable": "false",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1",
        }
    )
    with BackgroundBroker(config) as broker:
        wire = WireClient(broker.bootstrap_servers)
        try:
            metadata = {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": True}
            assert wire.call(METADATA, 4, metadata).topics[0].error_code == E.none
            found = wire.call(FIND_COORDINATOR, 1, {"key": "tx", "key_type": 1})
            assert found.error_code == E.none
            started = init(wire, version=5)
            pid, epoch = int(started.producer_id), int(started.producer_epoch)
            # Unverified, as before KIP-890: a v9 batch opens a transaction unasked.
            assert produce(wire, 9, pid, epoch, 0, partition=1).error_code == E.none
            assert produce(wire, 12, pid, epoch, 1, partition=1).error_code == E.none
            assert produce(wire, 12, pid, epoch, 0).error_code == E.none
            assert partitions_of(wire) == {(TOPIC, 0)}
        finally:
            wire.close()
