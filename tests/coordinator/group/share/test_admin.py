"""The share groups' administration on the wire (no Python client has these calls):
DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets and
DeleteGroups, checked against what confluent-kafka's ShareConsumer then receives."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kio.schema.errors import ErrorCode

from server.wire import WireClient
from tickwheel.server import BackgroundBroker

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DEADLINE_S = 20.0
DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92
DELETE_GROUPS, LIST_GROUPS = 42, 16
GROUP = "admin-queue"


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {
        "group.share.heartbeat.interval.ms": "500",
        "group.share.min.heartbeat.interval.ms": "500",
        "group.share.session.timeout.ms": "6000",
        "group.share.min.session.timeout.ms": "1000",
    }


@pytest.fixture
def topic(tickwheel_broker: BackgroundBroker) -> str:
    name = f"admin-{uuid.uuid4().hex[:8]}"
    tickwheel_broker.call(lambda b: b.context.create_topic(name, 2, {}))
    admin = AdminClient({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    earliest = ConfigResource(
        ConfigResource.Type.GROUP,
        GROUP,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([earliest])[earliest].result(DEADLINE_S)
    producer = Producer({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    for i in range(10):
        producer.produce(name, f"a{i}".encode(), partition=0)
    for i in range(4):
        producer.produce(name, f"b{i}".encode(), partition=1)
    assert producer.flush(DEADLINE_S) == 0
    return name


def _consume(
    broker: BackgroundBroker, topic: str, count: int, settle: Callable[[Message], AcknowledgeType]
) -> list[Message]:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": GROUP,
            "share.acknowledgement.mode": "explicit",
            "fetch.wait.max.ms": 500,
        }
    )
    consumer.subscribe([topic])
    received: list[Message] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(received) < count:
            assert time.monotonic() < deadline, f"received {len(received)} of {count}"
            for message in consumer.poll(0.2) or []:
                assert message.error() is None, message.error()
                received.append(message)
                consumer.acknowledge(message, settle(message))
        consumer.commit_sync(DEADLINE_S)
    finally:
        consumer.close()
    return received


def _describe(client: WireClient, group: str, topics: list[Any] | None = None) -> Any:
    body = client.call(DESCRIBE_OFFSETS, 1, {"groups": [{"group_id": group, "topics": topics}]})
    (described,) = body.groups
    return described


def _starts(described: Any) -> dict[tuple[str, int], tuple[int, int, ErrorCode]]:
    return {
        (t.topic_name, p.partition_index): (p.start_offset, p.lag, p.error_code)
        for t in described.topics
        for p in t.partitions
    }


def _until_empty(call: Callable[[], Any], error_of: Callable[[Any], ErrorCode]) -> Any:
    """``call`` until the group is no longer NON_EMPTY (the closed consumer's leave is in)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        answer = call()
        if error_of(answer) != ErrorCode.non_empty_group:
            return answer
        assert time.monotonic() < deadline, "the group stayed non-empty"


def test_describe_alter_and_delete_share_group_offsets(
    tickwheel_broker: BackgroundBroker, topic: str
) -> None:
    def first_six_of_p0(message: Message) -> AcknowledgeType:
        keep = message.partition() == 0 and message.offset() >= 6
        return AcknowledgeType.RELEASE if keep else AcknowledgeType.ACCEPT

    _consume(tickwheel_broker, topic, 14, first_six_of_p0)
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        described = _describe(client, GROUP)
        assert described.error_code == ErrorCode.none
        assert _starts(described) == {
            (topic, 0): (6, 4, ErrorCode.none),
            (topic, 1): (4, 0, ErrorCode.none),
        }
        old = client.call(DESCRIBE_OFFSETS, 0, {"groups": [{"group_id": GROUP, "topics": None}]})
        assert {
            (t.topic_name, p.partition_index): p.start_offset
            for t in old.groups[0].topics
            for p in t.partitions
        } == {(topic, 0): 6, (topic, 1): 4}  # version 0: the same, without the lag
        asked = _describe(client, GROUP, [{"topic_name": topic, "partitions": [1, 7]}])
        assert _starts(asked) == {
            (topic, 1): (4, 0, ErrorCode.none),
            (topic, 7): (-1, -1, ErrorCode.unknown_topic_or_partition),
        }

        alter = {
            "group_id": GROUP,
            "topics": [
                {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 2}]}
            ],
        }
        altered = _until_empty(lambda: client.call(ALTER_OFFSETS, 0, alter), lambda a: a.error_code)
        assert altered.error_code == ErrorCode.none
        assert [(p.partition_index, p.error_code) for p in altered.responses[0].partitions] == [
            (0, ErrorCode.none)
        ]
        assert _starts(_describe(client, GROUP))[(topic, 0)] == (2, 8, ErrorCode.none)
    finally:
        client.close()
    again = _consume(tickwheel_broker, topic, 8, lambda m: AcknowledgeType.ACCEPT)
    assert sorted((m.partition(), m.offset(), m.delivery_count()) for m in again) == [
        (0, offset, 1) for offset in range(2, 10)
    ]

    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        delete = {"group_id": GROUP, "topics": [{"topic_name": topic}]}
        deleted = _until_empty(
            lambda: client.call(DELETE_OFFSETS, 0, delete), lambda a: a.error_code
        )
        assert (deleted.error_code, deleted.responses[0].error_code) == (
            ErrorCode.none,
            ErrorCode.none,
        )
    finally:
        client.close()
    # With no state left, the group starts again at the earliest offset.
    everything = _consume(tickwheel_broker, topic, 14, lambda m: AcknowledgeType.ACCEPT)
    assert len({(m.partition(), m.offset()) for m in everything}) == 14


def test_delete_groups_removes_a_share_group_and_its_state(
    tickwheel_broker: BackgroundBroker, topic: str
) -> None:
    _consume(tickwheel_broker, topic, 14, lambda m: AcknowledgeType.ACCEPT)
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        listed = client.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
        assert [(g.group_id, g.group_type) for g in listed.groups] == [(GROUP, "share")]
        result = _until_empty(
            lambda: client.call(DELETE_GROUPS, 2, {"groups_names": [GROUP, "no-such-group"]}),
            lambda a: a.results[0].error_code,
        )
        assert [(r.group_id, r.error_code) for r in result.results] == [
            (GROUP, ErrorCode.none),
            ("no-such-group", ErrorCode.group_id_not_found),
        ]
        listed = client.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
        assert list(listed.groups) == []
        assert _describe(client, GROUP).error_code == ErrorCode.group_id_not_found
    finally:
        client.close()


def test_admin_errors(tickwheel_broker: BackgroundBroker, topic: str) -> None:
    classic = Consumer(
        {"bootstrap.servers": tickwheel_broker.bootstrap_servers, "group.id": "classic-one"}
    )
    try:
        classic.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while not classic.assignment():
            assert time.monotonic() < deadline, "the classic consumer was never assigned"
            classic.poll(0.1)
        client = WireClient(tickwheel_broker.bootstrap_servers)
        try:
            assert _describe(client, "classic-one").error_code == ErrorCode.group_id_not_found
            assert _describe(client, "nobody").error_code == ErrorCode.group_id_not_found
            assert _describe(client, "").error_code == ErrorCode.invalid_group_id
            _consume(tickwheel_broker, topic, 14, lambda m: AcknowledgeType.RELEASE)
            negative = {
                "group_id": GROUP,
                "topics": [
                    {
                        "topic_name": topic,
                        "partitions": [{"partition_index": 0, "start_offset": -5}],
                    },
                    {
                        "topic_name": "absent",
                        "partitions": [{"partition_index": 0, "start_offset": 0}],
                    },
                ],
            }
            answer = _until_empty(
                lambda: client.call(ALTER_OFFSETS, 0, negative), lambda a: a.error_code
            )
            assert [
                (t.topic_name, [p.error_code for p in t.partitions]) for t in answer.responses
            ] == [
                (topic, [ErrorCode.invalid_request]),
                ("absent", [ErrorCode.unknown_topic_or_partition]),
            ]
        finally:
            client.close()
    finally:
        classic.close()
