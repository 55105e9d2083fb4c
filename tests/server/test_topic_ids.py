"""Topic ids as clients see them: Metadata names each topic's id, keeps it over a
restart, gives a topic created again a new one, and answers topics asked for by id."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey, decode_topic_id
from tickwheel.server import BackgroundBroker, BrokerConfig

from .wire import WireClient

pytestmark = pytest.mark.integration

TIMEOUT_S = 15.0
METADATA = ApiKey.METADATA
CREATE_TOPICS = ApiKey.CREATE_TOPICS
DELETE_TOPICS = ApiKey.DELETE_TOPICS
NO_ID = None
"""The zero topic id, as kio decodes it."""


def _described_id(admin: AdminClient, topic: str) -> uuid.UUID:
    description = admin.describe_topics(TopicCollection([topic]))[topic].result(TIMEOUT_S)
    topic_id = decode_topic_id(str(description.topic_id))
    assert topic_id is not None
    assert topic_id != uuid.UUID(int=0)
    return topic_id


def _metadata_by_id(
    client: WireClient, topic_id: uuid.UUID, version: int = 12, name: str | None = None
) -> Any:
    body = client.call(
        METADATA,
        version,
        {
            "topics": [{"topic_id": topic_id, "name": name}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
            **({"include_cluster_authorized_operations": False} if version < 11 else {}),
        },
    )
    (topic,) = body.topics
    return topic


def test_a_topic_keeps_its_id_over_a_restart_and_a_new_topic_gets_a_new_one(
    tmp_path: Path,
) -> None:
    config = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}
    )
    with BackgroundBroker(config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("ids", 2, 1)])["ids"].result(TIMEOUT_S)
        before = _described_id(admin, "ids")
    with BackgroundBroker(config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        assert _described_id(admin, "ids") == before
        admin.delete_topics(["ids"])["ids"].result(TIMEOUT_S)
        admin.create_topics([NewTopic("ids", 1, 1)])["ids"].result(TIMEOUT_S)
        assert _described_id(admin, "ids") != before


def test_metadata_and_delete_topics_by_id(tickwheel_broker: BackgroundBroker) -> None:
    admin = AdminClient({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    admin.create_topics([NewTopic("by-id", 3, 1)])["by-id"].result(TIMEOUT_S)
    topic_id = _described_id(admin, "by-id")
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        found = _metadata_by_id(client, topic_id)
        assert (found.error_code, found.name, len(found.partitions)) == (
            ErrorCode.none,
            "by-id",
            3,
        )
        # Kafka's Java admin client sends the name "" with the id: the id decides, and
        # so it does over any name that comes with it.
        for name in ("", "some-other-name"):
            named = _metadata_by_id(client, topic_id, name=name)
            assert (named.error_code, named.name, named.topic_id) == (
                ErrorCode.none,
                "by-id",
                topic_id,
            )
        unknown_id = uuid.uuid4()
        unknown = _metadata_by_id(client, unknown_id, name="")
        assert (unknown.error_code, unknown.name, unknown.topic_id) == (
            ErrorCode.unknown_topic_id,
            None,
            unknown_id,
        )
        # Ids are read from v12 only: before, Kafka refuses the request.
        for version in (10, 11):
            early = _metadata_by_id(client, topic_id, version, name="by-id")
            assert (early.error_code, early.name, early.topic_id) == (
                ErrorCode.invalid_request,
                "by-id",
                topic_id,
            )
        body = client.call(
            DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": topic_id}], "timeout": 5000}
        )
        (deleted,) = body.responses
        assert (deleted.error_code, deleted.name, deleted.topic_id) == (
            ErrorCode.none,
            "by-id",
            topic_id,
        )
        again = _metadata_by_id(client, topic_id)
        assert again.error_code == ErrorCode.unknown_topic_id
    finally:
        client.close()


def _create_v7(client: WireClient, name: str, *, validate_only: bool = False) -> Any:
    body = client.call(
        CREATE_TOPICS,
        7,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": 2,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 5000,
            "validate_only": validate_only,
        },
    )
    (topic,) = body.topics
    return topic


def test_create_topics_answers_the_new_topics_id(tickwheel_broker: BackgroundBroker) -> None:
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        validated = _create_v7(client, "fresh", validate_only=True)
        assert (validated.error_code, validated.topic_id) == (ErrorCode.none, NO_ID)
        created = _create_v7(client, "fresh")
        assert created.error_code == ErrorCode.none
        assert created.topic_id is not NO_ID
        found = _metadata_by_id(client, created.topic_id)
        assert (found.error_code, found.name) == (ErrorCode.none, "fresh")
        again = _create_v7(client, "fresh")
        assert (again.error_code, again.topic_id) == (ErrorCode.topic_already_exists, NO_ID)
    finally:
        client.close()
