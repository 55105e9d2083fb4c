"""Group ids are one namespace across Kafka 4's three group protocols: a classic, a
consumer-protocol and a share group side by side in ListGroups with their types, and a
heartbeat of one protocol for another protocol's group is GROUP_ID_NOT_FOUND."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, ShareConsumer
from kio.schema.errors import ErrorCode

from server.wire import WireClient
from tickwheel.server import BackgroundBroker

pytestmark = [pytest.mark.integration]

DEADLINE_S = 20.0
LIST_GROUPS, CONSUMER_GROUP_HEARTBEAT, SHARE_GROUP_HEARTBEAT = 16, 68, 76


def _until(condition: Callable[[], bool], poll: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        poll()


def test_three_group_types_share_one_namespace(tickwheel_broker: BackgroundBroker) -> None:
    topic = f"types-{uuid.uuid4().hex[:8]}"
    tickwheel_broker.call(lambda b: b.context.create_topic(topic, 1, {}))
    bootstrap = tickwheel_broker.bootstrap_servers
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": "classic-group"})
    modern = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "consumer-group", "group.protocol": "consumer"}
    )
    share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "share-group"})
    client = WireClient(bootstrap)
    try:
        for member in (classic, modern):
            member.subscribe([topic])
        share.subscribe([topic])

        def listed() -> dict[str, str]:
            body = client.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
            return {g.group_id: g.group_type for g in body.groups}

        def poll_all() -> None:
            classic.poll(0.05)
            modern.poll(0.05)
            share.poll(0.05)

        expected = {
            "classic-group": "classic",
            "consumer-group": "consumer",
            "share-group": "share",
        }
        _until(lambda: listed() == expected, poll_all, "the three groups")
        only_share = client.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
        assert [g.group_id for g in only_share.groups] == ["share-group"]

        consumer_heartbeat = client.call(
            CONSUMER_GROUP_HEARTBEAT,
            1,
            {
                "group_id": "share-group",
                "member_id": uuid.uuid4().hex,
                "member_epoch": 0,
                "instance_id": None,
                "rack_id": None,
                "rebalance_timeout": datetime.timedelta(seconds=30),
                "subscribed_topic_names": [topic],
                "subscribed_topic_regex": None,
                "server_assignor": None,
                "topic_partitions": [],
            },
        )
        assert consumer_heartbeat.error_code == ErrorCode.group_id_not_found
        for group_id in ("consumer-group", "classic-group"):
            share_heartbeat = client.call(
                SHARE_GROUP_HEARTBEAT,
                1,
                {
                    "group_id": group_id,
                    "member_id": uuid.uuid4().hex,
                    "member_epoch": 0,
                    "rack_id": None,
                    "subscribed_topic_names": [topic],
                },
            )
            assert share_heartbeat.error_code == ErrorCode.group_id_not_found, group_id
    finally:
        client.close()
        share.close()
        modern.close()
        classic.close()
