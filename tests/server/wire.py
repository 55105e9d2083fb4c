"""A raw Kafka protocol client for the broker tests: kio-encoded frames over a socket."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from typing import Any

from confluent_kafka import Consumer
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from tickwheel.protocol import ApiKey, build_entity, request_schema, response_schema
from tickwheel.protocol import encode_request as encode_request_frame

TIMEOUT_S = 10.0
NOT_YET_S = 0.3
"""How long ``nothing_yet`` waits for an answer that must not come."""
METADATA_ALL_TOPICS = {
    "topics": None,
    "allow_auto_topic_creation": False,
    "include_topic_authorized_operations": False,
}
"""A Metadata v12 request's values asking for every topic."""


def host_port(bootstrap_servers: str) -> tuple[str, int]:
    host, _, port = bootstrap_servers.rpartition(":")
    return host, int(port)


def encode_request(
    api_key: int, version: int, values: dict[str, Any], correlation_id: int
) -> bytes:
    """A whole request frame, size prefix included."""
    body = build_entity(request_schema(api_key, version), values)
    return encode_request_frame(correlation_id, body, client_id="wire-test")


class WireClient:
    """One connection; requests encoded with kio, responses decoded with kio."""

    def __init__(self, bootstrap_servers: str, source_host: str | None = None) -> None:
        """Connect; from ``source_host`` (another loopback address) if given."""
        source = None if source_host is None else (source_host, 0)
        self.sock = socket.create_connection(
            host_port(bootstrap_servers), timeout=TIMEOUT_S, source_address=source
        )
        self._next_correlation_id = 1

    def close(self) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, values: dict[str, Any]) -> int:
        """Send a request; returns its correlation id."""
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        self.sock.sendall(encode_request(api_key, version, values, correlation_id))
        return correlation_id

    def read_frame(self) -> bytes | None:
        """The next response frame (without its size), or None if the broker closed."""
        prefix = self._read_exactly(4)
        if prefix is None:
            return None
        (size,) = struct.unpack(">i", prefix)
        return self._read_exactly(size)

    def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        """The next response: its correlation id and decoded body."""
        frame = self.read_frame()
        assert frame is not None, "the broker closed the connection"
        cls = response_schema(api_key, version)
        header_cls: Any = cls.__header_schema__
        header, header_size = entity_reader(header_cls)(frame, 0)
        body, body_size = entity_reader(cls)(frame, header_size)
        assert header_size + body_size == len(frame), "the response has trailing bytes"
        return int(header.correlation_id), body

    def call(self, api_key: int, version: int, values: dict[str, Any]) -> Any:
        """Send a request and return the decoded response body."""
        correlation_id = self.send(api_key, version, values)
        answered, body = self.receive(api_key, version)
        assert answered == correlation_id
        return body

    def is_closed_by_broker(self) -> bool:
        """True if the broker has closed the connection (reads EOF)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _read_exactly(self, size: int) -> bytes | None:
        chunks = []
        remaining = size
        while remaining:
            try:
                chunk = self.sock.recv(remaining)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)


def nothing_yet(client: WireClient) -> bool:
    """Whether no byte of an answer arrives within ``NOT_YET_S``."""
    client.sock.settimeout(NOT_YET_S)
    try:
        client.sock.recv(1, socket.MSG_PEEK)
    except TimeoutError:
        return True
    finally:
        client.sock.settimeout(TIMEOUT_S)
    return False


CREATE_TOPICS = ApiKey.CREATE_TOPICS
FETCH = ApiKey.FETCH
ATTRIBUTES_OFFSET = 21


def count_committed(bootstrap_servers: str, topic: str, expected: int, timeout_s: float) -> int:
    """How many records of ``topic`` a read_committed consumer reads from the start, once
    it has ``expected`` (or ``timeout_s`` passed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"committed-reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    read = 0
    deadline = time.monotonic() + timeout_s
    try:
        while read < expected and time.monotonic() < deadline:
            read += sum(1 for m in consumer.consume(1000, timeout=1.0) if m.error() is None)
    finally:
        consumer.close()
    return read


def create_topic_result(client: WireClient, name: str, partitions: int = 1) -> Any:
    """Ask a CreateTopics v5 for ``name`` (replication factor 1); its per-topic result."""
    body = client.call(
        CREATE_TOPICS,
        5,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 1000,
        },
    )
    return body.topics[0]


def create_topic(client: WireClient, name: str, partitions: int = 1) -> None:
    """Create ``name`` (replication factor 1) through a CreateTopics v5 request."""
    assert create_topic_result(client, name, partitions).error_code == ErrorCode.none


def first_batch_attributes(bootstrap_servers: str, topic: str) -> int:
    """The attributes of the first batch of ``topic``'s partition 0, fetched (v12)."""
    wire = WireClient(bootstrap_servers)
    try:
        body = wire.call(
            FETCH,
            12,
            {
                "max_wait": 0,
                "min_bytes": 1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
                "forgotten_topics_data": [],
            },
        )
    finally:
        wire.close()
    records = body.responses[0].partitions[0].records
    (attributes,) = struct.unpack_from(">h", records, ATTRIBUTES_OFFSET)
    return int(attributes)
