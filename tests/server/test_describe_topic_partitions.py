"""DescribeTopicPartitions (key 75): pages of partitions through the cursor, per-topic
errors and authorization, over kio on the wire and through kafka-python's admin client;
confluent-kafka's describe_topics (librdkafka knows no key 75: it asks Metadata) agrees."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient
from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey
from tickwheel.security import AclOperation as Op
from tickwheel.security import ResourceType as Resource
from tickwheel.server import BackgroundBroker, BrokerConfig

from .acls import grant
from .wire import WireClient

pytestmark = pytest.mark.integration

DESCRIBE_TOPIC_PARTITIONS = ApiKey.DESCRIBE_TOPIC_PARTITIONS
METADATA = ApiKey.METADATA
TIMEOUT_S = 15.0
BROKER_LIMIT = 4
ZERO_ID = None  # kio reads the zero topic id as None
TOPICS = {"pages-a": 5, "pages-b": 3, "pages-c": 2}
ANONYMOUS = "User:ANONYMOUS"
LONG_MASK = (1 << 64) - 1


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"max.request.partition.size.limit": str(BROKER_LIMIT)}


@pytest.fixture
def broker(tickwheel_broker: BackgroundBroker) -> BackgroundBroker:
    for name, partitions in TOPICS.items():
        tickwheel_broker.call(lambda b, n=name, p=partitions: b.context.create_topic(n, p, {}))
    return tickwheel_broker


def describe(
    client: WireClient,
    topics: list[str],
    limit: int = 2000,
    cursor: tuple[str, int] | None = None,
) -> Any:
    return client.call(
        DESCRIBE_TOPIC_PARTITIONS,
        0,
        {
            "topics": [{"name": t} for t in topics],
            "response_partition_limit": limit,
            "cursor": None
            if cursor is None
            else {"topic_name": cursor[0], "partition_index": cursor[1]},
        },
    )


def pages(client: WireClient, topics: list[str], limit: int) -> list[list[tuple[str, int]]]:
    """Every page of ``topics`` (all: empty) at ``limit``, following the cursor to the end."""
    found: list[list[tuple[str, int]]] = []
    cursor = None
    while True:
        response = describe(client, topics, limit, cursor)
        found.append([(t.name, p.partition_index) for t in response.topics for p in t.partitions])
        if response.next_cursor is None:
            return found
        cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)


def metadata_topics(client: WireClient, include_operations: bool = False) -> dict[str, Any]:
    response = client.call(
        METADATA,
        12,
        {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": include_operations,
        },
    )
    return {t.name: t for t in response.topics}


def test_the_cursor_continues_where_the_limit_stopped_across_topics(
    broker: BackgroundBroker,
) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        # Asked in any order, answered in name order; the request's 100 is capped at 4.
        first = describe(client, ["pages-c", "pages-a", "pages-b"], limit=100)
        assert [(t.name, len(t.partitions)) for t in first.topics] == [("pages-a", 4)]
        assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == (
            "pages-a",
            4,
        )
        second = describe(client, ["pages-c", "pages-a", "pages-b"], 100, ("pages-a", 4))
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in second.topics] == [
            ("pages-a", [4]),
            ("pages-b", [0, 1, 2]),
        ]
        # The limit ran out on a topic boundary: the next page starts at its partition 0.
        assert (second.next_cursor.topic_name, second.next_cursor.partition_index) == (
            "pages-c",
            0,
        )
        third = describe(client, ["pages-c", "pages-a", "pages-b"], 100, ("pages-c", 0))
        assert [(t.name, len(t.partitions)) for t in third.topics] == [("pages-c", 2)]
        assert third.next_cursor is None

        everything = sorted((n, i) for n, count in TOPICS.items() for i in range(count))
        walked = pages(client, [], limit=3)
        assert [len(page) for page in walked] == [3, 3, 3, 1]
        assert [tp for page in walked for tp in page] == everything
    finally:
        client.close()


def test_a_limit_below_one_still_describes_one_partition(broker: BackgroundBroker) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        response = describe(client, ["pages-b"], limit=0)
        assert [len(t.partitions) for t in response.topics] == [1]
        assert (response.next_cursor.topic_name, response.next_cursor.partition_index) == (
            "pages-b",
            1,
        )
        # A cursor past a topic's last partition describes none of it and goes on.
        past = describe(client, ["pages-b", "pages-c"], cursor=("pages-b", 7))
        assert [(t.name, len(t.partitions)) for t in past.topics] == [
            ("pages-b", 0),
            ("pages-c", 2),
        ]
        assert past.next_cursor is None
    finally:
        client.close()


def test_topics_are_described_as_metadata_describes_them(broker: BackgroundBroker) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        known = metadata_topics(client, include_operations=True)["pages-b"]
        response = describe(client, ["pages-b"])
        [topic] = response.topics
        assert (topic.error_code, topic.topic_id, topic.is_internal) == (
            ErrorCode.none,
            known.topic_id,
            False,
        )
        assert topic.topic_authorized_operations == known.topic_authorized_operations > 0
        for described, expected in zip(topic.partitions, known.partitions, strict=True):
            assert described.error_code == ErrorCode.none
            assert (described.partition_index, described.leader_id) == (
                expected.partition_index,
                expected.leader_id,
            )
            assert described.leader_epoch == expected.leader_epoch
            assert described.replica_nodes == described.isr_nodes == (0,)
            assert described.offline_replicas == ()
            # No eligible leader replicas: the controller keeps none (ELR off).
            assert described.eligible_leader_replicas == described.last_known_elr == ()
    finally:
        client.close()


def test_unknown_and_illegal_topics_and_bad_cursors(broker: BackgroundBroker) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        response = describe(client, ["pages-c", "missing", "bad name!"])
        answered = {t.name: (t.error_code, t.topic_id, t.partitions) for t in response.topics}
        assert answered == {
            "bad name!": (ErrorCode.invalid_topic_exception, ZERO_ID, ()),
            "missing": (ErrorCode.unknown_topic_or_partition, ZERO_ID, ()),
            "pages-c": (ErrorCode.none, answered["pages-c"][1], answered["pages-c"][2]),
        }
        assert len(answered["pages-c"][2]) == 2

        for topics, cursor in ((["pages-a"], ("pages-b", 0)), (["pages-a"], ("pages-a", -1))):
            refused = describe(client, topics, cursor=cursor)
            assert [(t.name, t.error_code) for t in refused.topics] == [
                ("pages-a", ErrorCode.invalid_request)
            ]
            assert refused.next_cursor is None
    finally:
        client.close()


def test_kafka_python_pages_through_a_topic(broker: BackgroundBroker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        seen: list[int] = []
        cursor = None
        while True:
            page = admin.describe_topic_partitions(["pages-a"], 2, cursor)
            [topic] = page["topics"]
            assert topic["error_code"] == 0
            seen += [p["partition_index"] for p in topic["partitions"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
            assert cursor["topic_name"] == "pages-a"
        assert seen == [0, 1, 2, 3, 4]
    finally:
        admin.close()


def test_confluent_describe_topics_agrees(broker: BackgroundBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    described = admin.describe_topics(TopicCollection(["pages-a"]))["pages-a"].result(TIMEOUT_S)
    client = WireClient(broker.bootstrap_servers)
    try:
        [topic] = describe(client, ["pages-a"], cursor=("pages-a", 4)).topics
    finally:
        client.close()
    their_id = described.topic_id
    assert topic.topic_id == uuid.UUID(
        int=(their_id.get_most_significant_bits() & LONG_MASK) << 64
        | their_id.get_least_significant_bits() & LONG_MASK
    )
    [last] = topic.partitions
    theirs = described.partitions[last.partition_index]
    assert (theirs.id, theirs.leader.id, [r.id for r in theirs.isr]) == (
        last.partition_index,
        last.leader_id,
        list(last.isr_nodes),
    )


def test_topics_the_principal_may_not_describe(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "auto.create.topics.enable": "false",
        }
    )
    with BackgroundBroker(config) as running:
        for name in ("seen", "hidden"):
            running.call(lambda b, n=name: b.context.create_topic(n, 1, {}))
        grant(running, Resource.TOPIC, "seen", Op.DESCRIBE)
        client = WireClient(running.bootstrap_servers)
        try:
            everything = describe(client, [])
            assert [t.name for t in everything.topics] == ["seen"]
            assert everything.topics[0].topic_authorized_operations == 1 << Op.DESCRIBE.value
            asked = describe(client, ["seen", "hidden", "unknown"])
            # The refused topics come last, with the zero id, whether they exist or not.
            assert [(t.name, t.error_code, t.topic_id) for t in asked.topics][1:] == [
                ("hidden", ErrorCode.topic_authorization_failed, ZERO_ID),
                ("unknown", ErrorCode.topic_authorization_failed, ZERO_ID),
            ]
            assert asked.topics[0].name == "seen"
            assert asked.topics[0].error_code == ErrorCode.none
        finally:
            client.close()
