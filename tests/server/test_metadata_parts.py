"""Metadata keeps each topic's encoded entry until the topic changes: a request costs
what the topics it asks for cost, and every answer is current."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kio.schema.metadata.v12.response import MetadataResponseTopic

from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, BrokerConfig
from tickwheel.server.apis import _metadata

from .wire import WireClient

pytestmark = pytest.mark.integration

TIMEOUT_S = 15.0
METADATA = ApiKey.METADATA


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The topics whose Metadata entry the broker built (rather than kept)."""
    names: list[str] = []
    real = _metadata._topic_entry

    def counting(context: Any, name: str) -> MetadataResponseTopic:
        names.append(name)
        return real(context, name)

    monkeypatch.setattr(_metadata, "_topic_entry", counting)
    return names


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BackgroundBroker]:
    config = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}
    )
    with BackgroundBroker(config) as running:
        yield running


def _metadata_of(client: WireClient, version: int, topics: list[str] | None) -> dict[str, int]:
    """Partition count by topic in a Metadata answer."""
    body = client.call(
        METADATA,
        version,
        {
            "topics": None
            if topics is None
            else [
                {"name": name, **({"topic_id": None} if version >= 10 else {})} for name in topics
            ],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
            **({"include_cluster_authorized_operations": False} if 8 <= version < 11 else {}),
        },
    )
    return {topic.name: len(topic.partitions) for topic in body.topics}


def test_entries_are_kept_until_their_topic_changes(
    broker: BackgroundBroker, built: list[str]
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics(
        [NewTopic(name, count, 1) for name, count in (("a", 2), ("b", 3), ("c", 1))]
    ).values():
        future.result(TIMEOUT_S)
    client = WireClient(broker.bootstrap_servers)
    try:
        everything = {"a": 2, "b": 3, "c": 1}
        assert _metadata_of(client, 12, None) == everything
        built.clear()
        assert _metadata_of(client, 12, None) == everything
        assert _metadata_of(client, 12, ["a", "c"]) == {"a": 2, "c": 1}
        assert built == []  # all kept
        # Another version is another encoding, built once.
        assert _metadata_of(client, 4, ["b"]) == {"b": 3}
        assert _metadata_of(client, 4, ["b"]) == {"b": 3}
        assert built == ["b"]
        built.clear()
        # Growing one topic rebuilds that topic only.
        admin.create_partitions([NewPartitions("b", 5)])["b"].result(TIMEOUT_S)
        assert _metadata_of(client, 12, None) == {"a": 2, "b": 5, "c": 1}
        assert built.count("a") == built.count("c") == 0
        # Deleted and created again: never the old answer.
        admin.delete_topics(["c"])["c"].result(TIMEOUT_S)
        assert _metadata_of(client, 12, None) == {"a": 2, "b": 5}
        admin.create_topics([NewTopic("c", 4, 1)])["c"].result(TIMEOUT_S)
        assert _metadata_of(client, 12, ["c"]) == {"c": 4}
    finally:
        client.close()
