"""The share-group APIs on the wire (kio-encoded requests to a running broker).

ShareGroupHeartbeat, ShareGroupDescribe, ListGroups with type ``share``, a classic
JoinGroup on a share group's id, the size of a ShareFetch answer against its max bytes,
and the error answers of ShareFetch and ShareAcknowledge to requests a client should
not send.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from server.wire import WireClient, create_topic
from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration

HEARTBEAT, DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 77, 78, 79
JOIN_GROUP, LIST_GROUPS, METADATA, FIND_COORDINATOR = 11, 16, 3, 10
INCREMENTAL_ALTER_CONFIGS, GROUP_RESOURCE = 44, 32


@pytest.fixture
def client(tickwheel_broker: BackgroundBroker) -> Iterator[WireClient]:
    wire = WireClient(tickwheel_broker.bootstrap_servers)
    yield wire
    wire.close()


def topic_id(client: WireClient, name: str) -> uuid.UUID:
    body = client.call(
        METADATA,
        12,
        {
            "topics": [{"name": name, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    found = body.topics[0].topic_id
    assert isinstance(found, uuid.UUID)
    return found


def heartbeat(client: WireClient, group: str, member: str, epoch: int, **extra: Any) -> Any:
    return client.call(
        HEARTBEAT,
        1,
        {"group_id": group, "member_id": member, "member_epoch": epoch, **extra},
    )


def share_fetch(
    client: WireClient, epoch: int, topics: list[dict[str, Any]], version: int = 2, **extra: Any
) -> Any:
    values = {
        "group_id": "sg",
        "member_id": "m",
        "share_session_epoch": epoch,
        "max_wait": 0,
        "min_bytes": 1,
        "max_records": 100,
        "batch_size": 100,
        "topics": topics,
        "forgotten_topics_data": [],
        **extra,
    }
    return client.call(SHARE_FETCH, version, values)


def test_heartbeat_describe_and_list_a_share_group(client: WireClient) -> None:
    create_topic(client, "jobs", 3)
    tid = topic_id(client, "jobs")
    # Before FindCoordinator made __consumer_offsets, no broker coordinates the group.
    early = heartbeat(client, "sg", "m1", 0, subscribed_topic_names=["jobs"])
    assert early.error_code == ErrorCode.not_coordinator
    found = client.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["sg"]})
    assert found.coordinators[0].error_code == ErrorCode.none
    joined = heartbeat(client, "sg", "m1", 0, subscribed_topic_names=["jobs"])
    assert joined.error_code == ErrorCode.none
    assigned = joined.assignment.topic_partitions
    assert [(tp.topic_id, list(tp.partitions)) for tp in assigned] == [(tid, [0, 1, 2])]
    described = client.call(
        DESCRIBE, 1, {"group_ids": ["sg"], "include_authorized_operations": False}
    ).groups[0]
    assert (described.error_code, described.group_state, described.assignor_name) == (
        ErrorCode.none,
        "Stable",
        "simple",
    )
    member = described.members[0]
    assert (member.member_id, member.client_id, list(member.subscribed_topic_names)) == (
        "m1",
        "wire-test",
        ["jobs"],
    )
    assert member.assignment.topic_partitions[0].topic_name == "jobs"
    listed = client.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [
        ("sg", "share", "share")
    ]
    classic_only = client.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["classic"]})
    assert classic_only.groups == ()
    # Group ids are one namespace: a classic join of a share group's id is refused.
    join = client.call(
        JOIN_GROUP,
        5,
        {
            "group_id": "sg",
            "session_timeout": 10_000,
            "rebalance_timeout": 10_000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    )
    assert join.error_code == ErrorCode.inconsistent_group_protocol
    left = heartbeat(client, "sg", "m1", -1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)


def test_share_fetch_and_acknowledge_errors(client: WireClient) -> None:
    create_topic(client, "work")
    tid = topic_id(client, "work")
    partition = [
        {"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}
    ]
    assert share_fetch(client, 3, partition).error_code == ErrorCode.share_session_not_found
    acking = [
        {
            "topic_id": tid,
            "partitions": [
                {
                    "partition_index": 0,
                    "acknowledgement_batches": [
                        {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}
                    ],
                }
            ],
        }
    ]
    assert share_fetch(client, 0, acking).error_code == ErrorCode.invalid_request
    opened = share_fetch(client, 0, partition)
    assert opened.error_code == ErrorCode.none
    assert opened.responses[0].partitions[0].error_code == ErrorCode.none
    assert share_fetch(client, 5, []).error_code == ErrorCode.invalid_share_session_epoch
    unknown = [
        {
            "topic_id": uuid.uuid4(),
            "partitions": [{"partition_index": 0, "acknowledgement_batches": []}],
        }
    ]
    answered = share_fetch(client, 1, unknown)
    errors = {p.error_code for topic in answered.responses for p in topic.partitions}
    assert errors == {ErrorCode.unknown_topic_id}
    acked = client.call(
        SHARE_ACKNOWLEDGE,
        2,
        {"group_id": "sg", "member_id": "m", "share_session_epoch": 2, "topics": acking},
    )
    assert acked.error_code == ErrorCode.none
    assert acked.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
    initial = client.call(
        SHARE_ACKNOWLEDGE,
        2,
        {"group_id": "sg", "member_id": "m", "share_session_epoch": 0, "topics": []},
    )
    assert initial.error_code == ErrorCode.invalid_share_session_epoch
    final = client.call(
        SHARE_ACKNOWLEDGE,
        2,
        {"group_id": "sg", "member_id": "m", "share_session_epoch": -1, "topics": []},
    )
    assert final.error_code == ErrorCode.none
    assert share_fetch(client, 3, []).error_code == ErrorCode.share_session_not_found


def test_version_1_share_fetch_and_acknowledge_are_answered_in_version_1(
    client: WireClient,
) -> None:
    """A v1 request is read as the newest version (no lock renewal) and answered in v1."""
    create_topic(client, "v1-work")
    partitions = [
        {
            "topic_id": topic_id(client, "v1-work"),
            "partitions": [{"partition_index": 0, "acknowledgement_batches": []}],
        }
    ]
    opened = share_fetch(client, 0, partitions, version=1, member_id="v1")
    assert type(opened).__version__ == 1
    assert opened.error_code == ErrorCode.none
    assert opened.acquisition_lock_timeout.total_seconds() == 30  # Kafka's default lock
    (topic,) = opened.responses
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(0, ErrorCode.none)]
    final = client.call(
        SHARE_ACKNOWLEDGE,
        1,
        {"group_id": "sg", "member_id": "v1", "share_session_epoch": -1, "topics": []},
    )
    assert type(final).__version__ == 1
    assert final.error_code == ErrorCode.none
    closed = share_fetch(client, 1, [], version=1, member_id="v1")
    assert closed.error_code == ErrorCode.share_session_not_found


def start_at_earliest(client: WireClient, group: str) -> None:
    body = client.call(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": GROUP_RESOURCE,
                    "resource_name": group,
                    "configs": [
                        {
                            "name": "share.auto.offset.reset",
                            "config_operation": 0,
                            "value": "earliest",
                        }
                    ],
                }
            ],
            "validate_only": False,
        },
    )
    assert [r.error_code for r in body.responses] == [ErrorCode.none]


def test_only_a_share_fetch_s_first_batch_may_pass_its_max_bytes(
    tickwheel_broker: BackgroundBroker, client: WireClient
) -> None:
    create_topic(client, "large-batches")
    start_at_earliest(client, "sg")
    producer = Producer({"bootstrap.servers": tickwheel_broker.bootstrap_servers, "linger.ms": 0})
    for n in range(6):
        producer.produce("large-batches", bytes([n]) * 20_000)
        assert producer.flush(10) == 0  # one batch of about 20 kB each
    partitions = [
        {
            "topic_id": topic_id(client, "large-batches"),
            "partitions": [{"partition_index": 0, "acknowledgement_batches": []}],
        }
    ]
    limited = share_fetch(client, 0, partitions, member_id="limited", max_bytes=50_000)
    (records,) = [p.records for t in limited.responses for p in t.partitions]
    assert records is not None
    assert 40_000 < len(records) <= 50_000  # two batches; a third would pass the limit
    small = share_fetch(client, 0, partitions, member_id="small", max_bytes=1_000)
    (first,) = [p.records for t in small.responses for p in t.partitions]
    assert first is not None
    assert 20_000 < len(first) < 21_000  # one batch, larger than the limit


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"group.share.max.share.sessions": "2"}


def test_a_closed_connection_frees_the_share_sessions_it_opened(
    tickwheel_broker: BackgroundBroker,
) -> None:
    """Sessions opened under invented member ids fill the cache only while their
    connection lasts (Kafka ties a share session to its connection)."""
    first = WireClient(tickwheel_broker.bootstrap_servers)
    second = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        create_topic(first, "sessions", 1)
        partitions = [
            {
                "topic_id": topic_id(first, "sessions"),
                "partitions": [{"partition_index": 0, "acknowledgement_batches": []}],
            }
        ]
        for member in ("invented-1", "invented-2"):
            opened = share_fetch(first, 0, partitions, member_id=member)
            assert opened.error_code == ErrorCode.none
        refused = share_fetch(second, 0, partitions, member_id="real")
        assert refused.error_code == ErrorCode.share_session_limit_reached
        first.close()
        deadline = time.monotonic() + 10
        while share_fetch(second, 0, partitions, member_id="real").error_code != ErrorCode.none:
            assert time.monotonic() < deadline, "the closed connection's sessions stayed"
    finally:
        first.close()
        second.close()
