"""TxnOffsetCommit and OffsetFetch ``require_stable`` on a running broker, over the wire.

Raw kio requests, as a transactional producer's ``send_offsets_to_transaction`` and a
read_committed consumer send them. No transaction coordinator takes part (the broker's
verification with it, ``transaction.partition.verification.enable``, is off here;
``test_txn_verification`` covers it), so where a commit marker would reach the group
coordinator the test calls the ReplicaManager's ``txn_completion_listener`` itself, on
the broker's loop.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from kio.schema.errors import ErrorCode

from tickwheel.coordinator.group import OFFSETS_TOPIC
from tickwheel.protocol import ApiKey
from tickwheel.replica import TopicPartition
from tickwheel.server import BackgroundBroker

from .wire import WireClient, create_topic

pytestmark = pytest.mark.integration

API_VERSIONS = ApiKey.API_VERSIONS
FIND_COORDINATOR = ApiKey.FIND_COORDINATOR
JOIN_GROUP = ApiKey.JOIN_GROUP
OFFSET_FETCH = ApiKey.OFFSET_FETCH
TXN_OFFSET_COMMIT = ApiKey.TXN_OFFSET_COMMIT
PRODUCER_ID = 7001
_names = itertools.count()


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"transaction.partition.verification.enable": "false"}


@pytest.fixture
def client(tickwheel_broker: BackgroundBroker) -> Iterator[WireClient]:
    wire = WireClient(tickwheel_broker.bootstrap_servers)
    yield wire
    wire.close()


def unique(prefix: str) -> str:
    return f"{prefix}-txn-{next(_names)}"


def find_coordinator(client: WireClient, group: str) -> None:
    body = client.call(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    assert body.error_code == ErrorCode.none


def txn_offset_commit(
    client: WireClient,
    version: int,
    group: str,
    partitions: dict[tuple[str, int], int],
    *,
    member_id: str = "",
    generation_id: int = -1,
) -> dict[tuple[str, int], ErrorCode]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in partitions.items():
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": -1,
                "committed_metadata": "",
            }
        )
    body = client.call(
        TXN_OFFSET_COMMIT,
        version,
        {
            "transactional_id": "txn-app",
            "group_id": group,
            "producer_id": PRODUCER_ID,
            "producer_epoch": 0,
            "generation_id": generation_id,
            "member_id": member_id,
            "group_instance_id": None,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
        },
    )
    return {
        (topic.name, partition.partition_index): partition.error_code
        for topic in body.topics
        for partition in topic.partitions
    }


def offset_fetch(
    client: WireClient, group: str, topic: str, *, require_stable: bool
) -> tuple[int, ErrorCode]:
    body = client.call(
        OFFSET_FETCH,
        7,
        {
            "group_id": group,
            "topics": [{"name": topic, "partition_indexes": [0]}],
            "require_stable": require_stable,
        },
    )
    assert body.error_code == ErrorCode.none
    (partition,) = body.topics[0].partitions
    return partition.committed_offset, partition.error_code


def test_txn_offset_commit_is_advertised_at_0_to_5(client: WireClient) -> None:
    body = client.call(
        API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    advertised = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert advertised[TXN_OFFSET_COMMIT] == (0, 5)
    # require_stable from v7; v8-9 name several groups and a KIP-848 member's epoch.
    assert advertised[OFFSET_FETCH] == (1, 9)


@pytest.mark.parametrize("version", [0, 3])
def test_unknown_topics_and_partitions(client: WireClient, version: int) -> None:
    group, topic = unique("group"), unique("topic")
    create_topic(client, topic)
    find_coordinator(client, group)
    errors = txn_offset_commit(client, version, group, {(unique("missing"), 0): 5, (topic, 3): 5})
    assert set(errors.values()) == {ErrorCode.unknown_topic_or_partition}


def test_unknown_member_and_illegal_generation(client: WireClient) -> None:
    group, topic = unique("group"), unique("topic")
    create_topic(client, topic)
    find_coordinator(client, group)
    assert txn_offset_commit(
        client, 3, group, {(topic, 0): 5}, member_id="ghost", generation_id=1
    ) == {(topic, 0): ErrorCode.unknown_member_id}
    joined = client.call(
        JOIN_GROUP,
        3,
        {
            "group_id": group,
            "session_timeout": datetime.timedelta(seconds=10),
            "rebalance_timeout": datetime.timedelta(seconds=10),
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    )
    assert joined.error_code == ErrorCode.none
    assert txn_offset_commit(
        client,
        3,
        group,
        {(topic, 0): 5},
        member_id=joined.member_id,
        generation_id=joined.generation_id + 1,
    ) == {(topic, 0): ErrorCode.illegal_generation}


def test_txn_offset_commit_without_a_group_id_is_invalid(client: WireClient) -> None:
    topic = unique("topic")
    create_topic(client, topic)
    assert txn_offset_commit(client, 0, "", {(topic, 0): 5}) == {
        (topic, 0): ErrorCode.invalid_group_id
    }


def test_the_group_service_listens_for_transaction_markers(
    tickwheel_broker: BackgroundBroker,
) -> None:
    listener = tickwheel_broker.call(lambda broker: broker.replica_manager.txn_completion_listener)
    assert callable(listener)


def commit_marker_appended(broker: Any) -> None:
    broker.replica_manager.txn_completion_listener(
        PRODUCER_ID, [TopicPartition(OFFSETS_TOPIC, 0)], True
    )


def test_a_pending_transactional_offset_is_unstable_until_the_commit_marker(
    tickwheel_broker: BackgroundBroker, client: WireClient
) -> None:
    group, topic = unique("group"), unique("topic")
    create_topic(client, topic)
    find_coordinator(client, group)
    assert txn_offset_commit(client, 3, group, {(topic, 0): 42}) == {(topic, 0): ErrorCode.none}
    assert offset_fetch(client, group, topic, require_stable=True) == (
        -1,
        ErrorCode.unstable_offset_commit,
    )
    assert offset_fetch(client, group, topic, require_stable=False) == (-1, ErrorCode.none)
    tickwheel_broker.call(commit_marker_appended)
    assert offset_fetch(client, group, topic, require_stable=True) == (42, ErrorCode.none)


def test_a_read_committed_librdkafka_consumer_retries_until_the_commit(
    tickwheel_broker: BackgroundBroker, client: WireClient
) -> None:
    group, topic = unique("group"), unique("topic")
    create_topic(client, topic)
    find_coordinator(client, group)
    assert txn_offset_commit(client, 3, group, {(topic, 0): 42}) == {(topic, 0): ErrorCode.none}
    settings = {
        "bootstrap.servers": tickwheel_broker.bootstrap_servers,
        "group.id": group,
        "enable.auto.commit": False,
    }
    partition = confluent_kafka.TopicPartition(topic, 0)
    uncommitted = confluent_kafka.Consumer({**settings, "isolation.level": "read_uncommitted"})
    committed = confluent_kafka.Consumer({**settings, "isolation.level": "read_committed"})
    try:
        # No require_stable: the committed offset as it stands (none yet).
        assert uncommitted.committed([partition], timeout=10)[0].offset < 0
        # require_stable: UNSTABLE_OFFSET_COMMIT, retried until the caller gives up.
        with pytest.raises(confluent_kafka.KafkaException) as timed_out:
            committed.committed([partition], timeout=1)
        assert timed_out.value.args[0].code() == confluent_kafka.KafkaError._TIMED_OUT
        tickwheel_broker.call(commit_marker_appended)
        assert committed.committed([partition], timeout=10)[0].offset == 42
    finally:
        uncommitted.close()
        committed.close()
