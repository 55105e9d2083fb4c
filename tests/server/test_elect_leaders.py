"""ElectLeaders on a single broker, the controller of a cluster of one: every hosted
partition already has its only replica as leader, at each version a client may send."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, BrokerConfig

from .wire import WireClient

pytestmark = pytest.mark.integration

TIMEOUT_S = 10.0
TOPIC = "elected"
UNCLEAN = 1
INVALID_ELECTION_TYPE = 7


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundBroker]:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path_factory.mktemp("elect-leaders")),
        }
    )
    with BackgroundBroker(config) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(TIMEOUT_S)
        yield running


@pytest.fixture
def wire(broker: BackgroundBroker) -> Iterator[WireClient]:
    client = WireClient(broker.bootstrap_servers)
    yield client
    client.close()


def answered(response: Any) -> dict[tuple[str, int], int]:
    return {
        (topic.topic, p.partition_id): int(p.error_code)
        for topic in response.replica_election_results
        for p in topic.partition_result
    }


def test_an_admin_client_is_told_no_election_is_needed(broker: BackgroundBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    tp = TopicPartition(TOPIC, 0)
    error = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(TIMEOUT_S)[tp]
    assert isinstance(error, KafkaError)
    assert error.code() == KafkaError.ELECTION_NOT_NEEDED


@pytest.mark.parametrize("version", [0, 1, 2])
def test_each_version_is_answered_per_partition(wire: WireClient, version: int) -> None:
    values: dict[str, Any] = {
        "topic_partitions": [{"topic": TOPIC, "partitions": [1, 9]}],
        "timeout": 1000,
    }
    if version > 0:
        values["election_type"] = UNCLEAN
    response = wire.call(ApiKey.ELECT_LEADERS, version, values)
    assert answered(response) == {
        (TOPIC, 1): ErrorCode.election_not_needed,
        (TOPIC, 9): ErrorCode.unknown_topic_or_partition,
    }
    if version > 0:
        assert response.error_code == ErrorCode.none


def test_an_unknown_election_type_is_refused_whole(wire: WireClient) -> None:
    response = wire.call(
        ApiKey.ELECT_LEADERS,
        2,
        {
            "election_type": INVALID_ELECTION_TYPE,
            "topic_partitions": [{"topic": TOPIC, "partitions": [0]}],
            "timeout": 1000,
        },
    )
    assert response.error_code == ErrorCode.invalid_request
    assert response.replica_election_results == ()


def test_a_null_list_answers_no_partition(wire: WireClient) -> None:
    response = wire.call(
        ApiKey.ELECT_LEADERS, 1, {"election_type": 0, "topic_partitions": None, "timeout": 1000}
    )
    assert response.error_code == ErrorCode.none
    assert response.replica_election_results == ()
