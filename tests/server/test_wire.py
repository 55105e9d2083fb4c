"""The broker at the wire level: versions, bad frames, ordering, and every advertised version."""

from __future__ import annotations

import socket
import struct
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from replica.records import batch
from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker
from tickwheel.server.apis import ADVERTISED_VERSIONS
from tickwheel.server.net._connection import SENDFILE_MIN_BYTES

from .wire import WireClient, create_topic, host_port

pytestmark = pytest.mark.integration

API_VERSIONS = ApiKey.API_VERSIONS
METADATA = ApiKey.METADATA
PRODUCE = ApiKey.PRODUCE
FETCH = ApiKey.FETCH
LIST_OFFSETS = ApiKey.LIST_OFFSETS
FIRST_AUTO_CREATE_FLAG_VERSION = 4


@pytest.fixture
def client(tickwheel_broker: BackgroundBroker) -> Any:
    wire = WireClient(tickwheel_broker.bootstrap_servers)
    yield wire
    wire.close()


def test_api_versions_lists_what_is_handled(client: WireClient) -> None:
    body = client.call(
        API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    assert body.error_code == ErrorCode.none
    advertised = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert advertised == {
        key: (r.min_version, r.max_version) for key, r in ADVERTISED_VERSIONS.items()
    }
    assert advertised[METADATA] == (1, 12)
    # Served from 3, listed from 0 as Kafka 4 lists it (KAFKA-18659).
    assert advertised[PRODUCE] == (0, 12)
    assert advertised[FETCH] == (4, 12)


def _tags_after_api_keys(frame: bytes) -> list[int]:
    """The tags of an ApiVersions v3+ response body's tagged fields (header v0)."""
    offset = 4 + 2  # correlation id, error code
    count_plus_one = frame[offset]  # fewer than 127 APIs: a one-byte varint
    offset += 1 + (count_plus_one - 1) * 7 + 4  # api keys (3 x int16 + no tags), throttle
    tags, offset = [], offset + 1  # fewer than 128 tagged fields
    for _ in range(frame[offset - 1]):
        tags.append(frame[offset])
        size = frame[offset + 1]
        offset += 2 + size
    assert offset == len(frame)
    return tags


def test_api_versions_v3_response_writes_only_the_finalized_features(
    client: WireClient,
) -> None:
    client.send(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    frame = client.read_frame()
    assert frame is not None
    # The epoch (tag 1) and the finalized features (tag 2); no supported features below
    # v4 (every range starts at 0) and no ZooKeeper-migration flag at its default.
    # Debian's kcat (librdkafka 2.0.2) reads this answer (test_kcat).
    assert _tags_after_api_keys(frame) == [1, 2]


def test_an_unsupported_api_versions_version_gets_error_35_and_a_v0_body(
    tickwheel_broker: BackgroundBroker,
) -> None:
    with socket.create_connection(host_port(tickwheel_broker.bootstrap_servers)) as sock:
        # ApiVersions v99, correlation id 42, a client id, and a body we cannot know.
        request = struct.pack(">hhih", API_VERSIONS, 99, 42, 1) + b"x" + b"\x00\x01\x02"
        sock.sendall(struct.pack(">i", len(request)) + request)
        size, correlation_id, error = struct.unpack(">iih", sock.recv(10))
        assert (correlation_id, error) == (42, ErrorCode.unsupported_version.value)
        rest = b""
        while len(rest) < size - 6:
            rest += sock.recv(size - 6 - len(rest))
    (count,) = struct.unpack_from(">i", rest)
    listed = [struct.unpack_from(">hhh", rest, 4 + 6 * i) for i in range(count)]
    assert {key: (low, high) for key, low, high in listed} == {
        key: (r.min_version, r.max_version) for key, r in ADVERTISED_VERSIONS.items()
    }


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(struct.pack(">hhih", 9999, 0, 1, -1), id="unknown-api-key"),
        pytest.param(struct.pack(">hhih", METADATA, 0, 1, -1) + b"\0\0\0\0", id="metadata-v0"),
        pytest.param(struct.pack(">hhih", FETCH, 13, 1, -1), id="fetch-v13"),
        pytest.param(struct.pack(">hhih", METADATA, 4, 1, -1) + b"\x7f", id="undecodable"),
    ],
)
def test_a_bad_request_closes_only_its_connection(
    tickwheel_broker: BackgroundBroker, client: WireClient, frame: bytes
) -> None:
    client.sock.sendall(struct.pack(">i", len(frame)) + frame)
    assert client.is_closed_by_broker()
    other = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        assert other.call(METADATA, 4, {"topics": [], "allow_auto_topic_creation": False})
    finally:
        other.close()


def test_a_frame_above_socket_request_max_bytes_closes_the_connection(
    client: WireClient,
) -> None:
    client.sock.sendall(struct.pack(">i", 200 * 1024 * 1024))
    assert client.is_closed_by_broker()


@pytest.mark.parametrize("version", range(1, 13))
def test_metadata_at_every_version_lists_the_requested_topics(
    client: WireClient, version: int
) -> None:
    create_topic(client, "meta", partitions=2)
    body = client.call(
        METADATA,
        version,
        {
            "topics": [{"name": "meta", "topic_id": None}, {"name": "absent", "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )
    (broker,) = body.brokers
    assert broker.node_id == 0
    topics = {t.name: t for t in body.topics}
    assert [p.partition_index for p in topics["meta"].partitions] == [0, 1]
    assert all(p.leader_id == 0 for p in topics["meta"].partitions)
    if version < FIRST_AUTO_CREATE_FLAG_VERSION:
        # Before v4 a Metadata request cannot opt out: Kafka auto-creates.
        assert topics["absent"].error_code == ErrorCode.none
    else:
        assert topics["absent"].error_code == ErrorCode.unknown_topic_or_partition


def test_metadata_auto_creates_a_requested_topic(client: WireClient) -> None:
    body = client.call(
        METADATA, 4, {"topics": [{"name": "auto"}], "allow_auto_topic_creation": True}
    )
    assert body.topics[0].error_code == ErrorCode.none
    assert len(body.topics[0].partitions) == 1


def produce_values(topic: str, acks: int, version: int = 9) -> dict[str, Any]:
    return {
        "acks": acks,
        "timeout": 1000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch(b"value")}]}
        ],
    }


def fetch_values(topic: str, offset: int, max_wait_ms: int, min_bytes: int = 1) -> dict[str, Any]:
    return {
        "max_wait": max_wait_ms,
        "min_bytes": min_bytes,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                ],
            }
        ],
        "forgotten_topics_data": [],
    }


def test_acks_0_gets_no_response_and_the_next_request_is_answered(client: WireClient) -> None:
    create_topic(client, "acks0")
    client.send(PRODUCE, 9, produce_values("acks0", acks=0))
    body = client.call(
        LIST_OFFSETS,
        7,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": "acks0", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )
    assert body.topics[0].partitions[0].offset == 1


def test_a_failed_acks_0_produce_closes_the_connection(client: WireClient) -> None:
    client.send(PRODUCE, 9, produce_values("no-such-topic", acks=0))
    assert client.is_closed_by_broker(), "no response can carry the error: Kafka closes"


def test_a_waiting_fetch_keeps_later_requests_behind_it(
    tickwheel_broker: BackgroundBroker, client: WireClient
) -> None:
    create_topic(client, "order")
    fetch_id = client.send(FETCH, 12, fetch_values("order", 0, max_wait_ms=30_000))
    metadata_id = client.send(
        METADATA,
        12,
        {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    producer = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        produced = producer.call(PRODUCE, 9, produce_values("order", acks=1))
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
    finally:
        producer.close()
    first_id, fetched = client.receive(FETCH, 12)
    assert first_id == fetch_id, "the fetch, waiting in the purgatory, is answered first"
    partition = fetched.responses[0].partitions[0]
    assert partition.high_watermark == 1
    assert partition.records
    second_id, _ = client.receive(METADATA, 12)
    assert second_id == metadata_id


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_at_every_version_returns_the_records(client: WireClient, version: int) -> None:
    create_topic(client, "fv")
    for produce_version in (3, 9):
        client.call(PRODUCE, produce_version, produce_values("fv", acks=-1))
    body = client.call(FETCH, version, fetch_values("fv", 0, max_wait_ms=0))
    partition = body.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    assert partition.high_watermark == 2
    assert len(partition.records) == 2 * len(batch(b"value"))


def test_a_large_fetch_is_sent_with_sendfile_byte_for_byte(client: WireClient) -> None:
    create_topic(client, "big")
    values = [bytes([i]) * 100_000 for i in range(3)]
    records = [batch(value) for value in values]
    for one in records:
        answer = client.call(
            PRODUCE,
            9,
            {
                "acks": 1,
                "timeout": 1000,
                "topic_data": [{"name": "big", "partition_data": [{"index": 0, "records": one}]}],
            },
        )
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none
    body = client.call(FETCH, 12, fetch_values("big", 0, max_wait_ms=0))
    fetched = body.responses[0].partitions[0].records
    assert len(fetched) == sum(len(r) for r in records) > SENDFILE_MIN_BYTES
    # Offsets and leader epochs were patched by the log; everything after them is as sent.
    position = 0
    for one in records:
        assert fetched[position + 16 : position + len(one)] == one[16:]
        position += len(one)


@pytest.mark.parametrize("tickwheel_broker_properties", [{"connections.max.idle.ms": "200"}])
def test_idle_connections_are_closed(client: WireClient) -> None:
    assert client.call(18, 0, {}).error_code == ErrorCode.none
    assert client.is_closed_by_broker(), "the broker closes a connection idle for 200 ms"
