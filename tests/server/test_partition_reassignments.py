"""AlterPartitionReassignments and ListPartitionReassignments on a single broker, the
controller of a cluster of one: a reassignment to its own id changes nothing, any other
is refused, and nothing is ever being reassigned; the replication throttle's configs are
checked and described as Kafka's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, BrokerConfig

from .wire import WireClient

pytestmark = pytest.mark.integration

TIMEOUT_S = 10.0
TOPIC = "moved"
BROKER_ID = 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundBroker]:
    config = BrokerConfig.from_properties(
        {
            "broker.id": str(BROKER_ID),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path_factory.mktemp("reassignments")),
        }
    )
    with BackgroundBroker(config) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(TIMEOUT_S)
        yield running


@pytest.fixture
def admin(broker: BackgroundBroker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    yield client
    client.close()


def test_kafka_python_reassigns_to_the_only_broker_and_is_refused_any_other(
    admin: KafkaAdminClient,
) -> None:
    own = KafkaTopicPartition(TOPIC, 0)
    results = admin.alter_partition_reassignments(
        {
            own: [BROKER_ID],
            KafkaTopicPartition(TOPIC, 1): [BROKER_ID],
            KafkaTopicPartition("elsewhere", 0): [BROKER_ID + 1],
        }
    )
    assert results == {
        own: None,
        KafkaTopicPartition(TOPIC, 1): UnknownTopicOrPartitionError,
        KafkaTopicPartition("elsewhere", 0): InvalidReplicationAssignmentError,
    }
    assert admin.list_partition_reassignments() == {}
    assert admin.alter_partition_reassignments({own: None}) == {own: NoReassignmentInProgressError}


@pytest.fixture
def wire(broker: BackgroundBroker) -> Iterator[WireClient]:
    client = WireClient(broker.bootstrap_servers)
    yield client
    client.close()


def answered(response: Any) -> dict[tuple[str, int], tuple[int, str | None]]:
    return {
        (topic.name, p.partition_index): (int(p.error_code), p.error_message)
        for topic in response.responses
        for p in topic.partitions
    }


@pytest.mark.parametrize("version", [0, 1])
def test_each_version_names_what_is_wrong_with_a_replica_list(
    wire: WireClient, version: int
) -> None:
    lists = {0: [], 1: [BROKER_ID, BROKER_ID], 2: [-1], 3: [BROKER_ID, 7]}
    response = wire.call(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        version,
        {
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": p, "replicas": replicas}
                        for p, replicas in lists.items()
                    ],
                }
            ]
        },
    )
    assert response.error_code == ErrorCode.none
    errors = answered(response)
    assert {key: code for key, (code, _) in errors.items()} == {
        (TOPIC, p): ErrorCode.invalid_replica_assignment for p in lists
    }
    assert errors[(TOPIC, 0)][1] == "Empty replica list specified in partition reassignment."
    assert "Duplicate replica ids" in str(errors[(TOPIC, 1)][1])
    assert "Invalid broker id" in str(errors[(TOPIC, 2)][1])
    assert "not alive" in str(errors[(TOPIC, 3)][1])


def test_a_named_partition_not_moving_is_not_listed(wire: WireClient) -> None:
    response = wire.call(
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        0,
        {"topics": [{"name": TOPIC, "partition_indexes": [0, 5]}]},
    )
    assert (response.error_code, response.topics) == (ErrorCode.none, ())


def _alter(
    admin: AdminClient, kind: ConfigResource.Type, name: str, key: str, value: str
) -> KafkaError | None:
    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(kind, name, incremental_configs=[entry])
    try:
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error
    return None


def test_the_throttle_configs_are_checked_and_described(broker: BackgroundBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic, own = ConfigResource.Type.TOPIC, ConfigResource.Type.BROKER
    refused = _alter(admin, topic, TOPIC, "leader.replication.throttled.replicas", "0-4")
    assert refused is not None
    assert refused.code() == KafkaError.INVALID_CONFIG
    assert "[partitionId]:[brokerId]" in refused.str()
    negative = _alter(admin, own, str(BROKER_ID), "leader.replication.throttled.rate", "-1")
    assert negative is not None
    assert negative.code() == KafkaError.INVALID_REQUEST
    assert "leader.replication.throttled.rate must be at least 0" in negative.str()
    assert _alter(admin, topic, TOPIC, "follower.replication.throttled.replicas", "*") is None
    assert _alter(admin, own, str(BROKER_ID), "follower.replication.throttled.rate", "50") is None
    resource = ConfigResource(own, str(BROKER_ID))
    described = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    assert described["follower.replication.throttled.rate"].value == "50"
    assert described["leader.replication.throttled.rate"].value == str(2**63 - 1)
