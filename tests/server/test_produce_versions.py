"""Produce at the wire: the removed versions 0-2, and per-record errors (KIP-467).

That ApiVersions lists Produce from 0 all the same (KAFKA-18659) is in ``test_wire``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.bench._batches import make_keyed_batch
from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker

from .wire import WireClient, create_topic

pytestmark = pytest.mark.integration

PRODUCE = ApiKey.PRODUCE
LIST_OFFSETS = ApiKey.LIST_OFFSETS
CREATE_TOPICS = ApiKey.CREATE_TOPICS
FIRST_RECORD_ERRORS_VERSION = 8
KEYLESS_REASON = "Compacted topic cannot accept message without key in topic partition {}-0"


@pytest.fixture
def client(tickwheel_broker: BackgroundBroker) -> Iterator[WireClient]:
    wire = WireClient(tickwheel_broker.bootstrap_servers)
    yield wire
    wire.close()


def latest_offset(client: WireClient, topic: str) -> int:
    body = client.call(
        LIST_OFFSETS,
        7,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )
    return int(body.topics[0].partitions[0].offset)


def produce(client: WireClient, version: int, topic: str, records: bytes, acks: int = 1) -> Any:
    body = client.call(
        PRODUCE,
        version,
        {
            "acks": acks,
            "timeout": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    return body.responses[0].partition_responses[0]


def create_compacted_topic(client: WireClient, topic: str) -> None:
    body = client.call(
        CREATE_TOPICS,
        5,
        {
            "topics": [
                {
                    "name": topic,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": "cleanup.policy", "value": "compact"}],
                }
            ],
            "timeout": 1000,
        },
    )
    assert body.topics[0].error_code == ErrorCode.none


def legacy_produce_frame(version: int, topic: str, records: bytes) -> bytes:
    """A Produce v0-v2 request (header v1; acks, timeout, topics), which kio cannot write."""
    client_id = b"legacy"
    header = struct.pack(">hhih", PRODUCE, version, 7, len(client_id)) + client_id
    name = topic.encode()
    body = struct.pack(">hii", 1, 1000, 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">iii", 1, 0, len(records)) + records
    return struct.pack(">i", len(header) + len(body)) + header + body


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_removed_produce_version_closes_the_connection_and_appends_nothing(
    tickwheel_broker: BackgroundBroker, client: WireClient, version: int
) -> None:
    create_topic(client, "legacy")
    legacy = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        legacy.sock.sendall(
            legacy_produce_frame(version, "legacy", make_keyed_batch([(b"k", b"v")]))
        )
        assert legacy.is_closed_by_broker()
    finally:
        legacy.close()
    assert latest_offset(client, "legacy") == 0


@pytest.mark.parametrize(("version", "acks"), [(8, 1), (9, 1), (9, -1)])
def test_keyless_records_on_a_compacted_topic_are_named_in_record_errors(
    client: WireClient, version: int, acks: int
) -> None:
    topic = f"compacted-v{version}-acks{acks}"
    create_compacted_topic(client, topic)
    good = make_keyed_batch([(b"a", b"1")])
    mixed = make_keyed_batch([(b"b", b"2"), (None, b"3"), (b"c", b"4"), (None, b"5")])
    # Kafka validates batch by batch: the first batch holding keyless records is named.
    answer = produce(client, version, topic, good + mixed, acks)
    reason = KEYLESS_REASON.format(topic)
    assert answer.error_code == ErrorCode.invalid_record
    assert answer.base_offset == -1
    assert answer.log_start_offset == 0
    assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
        (1, reason),
        (3, reason),
    ]
    assert answer.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        "showing the first three errors at most: "
        f"[RecordError(batchIndex=1, message='{reason}'), "
        f"RecordError(batchIndex=3, message='{reason}')]"
    )
    assert latest_offset(client, topic) == 0, "nothing of the request is appended"
    assert produce(client, version, topic, good).error_code == ErrorCode.none


def test_before_version_8_a_keyless_record_gets_the_error_code_alone(client: WireClient) -> None:
    create_compacted_topic(client, "compacted-v7")
    answer = produce(client, 7, "compacted-v7", make_keyed_batch([(None, b"v")]))
    assert answer.error_code == ErrorCode.invalid_record
    assert answer.base_offset == -1
