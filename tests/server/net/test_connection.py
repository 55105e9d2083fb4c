"""Clients that send garbage, speak TLS, or leave before their answer: one WARNING line
or none, never a traceback, and the broker goes on.

Each test connects from a loopback address of its own (127.0.0.N): the broker limits its
lines about a misbehaving client per client host, so a line another test provoked from
127.0.0.1 a moment ago would hold this one back.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from server.wire import WireClient, host_port
from tickwheel.bench._batches import make_batch
from tickwheel.bench.fuzz import (
    all_schema_breaking_frames,
    encode_body,
    encode_request,
    seed_entity,
)
from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration

FETCH = ApiKey.FETCH
PRODUCE = ApiKey.PRODUCE
API_VERSIONS = ApiKey.API_VERSIONS
CREATE_TOPICS = ApiKey.CREATE_TOPICS
CONNECTION_LOGGER = "tickwheel.server.net._connection"
TLS_CLIENT_HELLO = bytes.fromhex("16030100a5010000a10303") + bytes(32)
WAIT_S = 10.0
SENDFILE_VALUE = b"v" * 100_000  # above the server's 64 KiB sendfile threshold


@pytest.fixture
def client_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.INFO)
    yield caplog
    records = caplog.get_records("call")
    failures = [r.getMessage() for r in records if r.levelno >= logging.ERROR or r.exc_info]
    assert failures == [], "no ERROR line, no traceback"


def warnings_from(caplog: pytest.LogCaptureFixture, host: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == CONNECTION_LOGGER and r.levelno == logging.WARNING and host in r.getMessage()
    ]


def schema_breaking(key: int, version: int, path: tuple[str | int, ...], bad: bytes) -> bytes:
    """The fuzzer's seed request, one field written as ``bad``; correlation id 77."""
    seed = seed_entity(key, version)
    whole = encode_request(key, version, seed, 77)
    header = whole[4 : len(whole) - len(encode_body(seed))]
    body = encode_body(seed, path, bad)
    return struct.pack(">i", len(header) + len(body)) + header + body


def api_versions(client: WireClient) -> Any:
    return client.call(
        API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )


def test_a_null_array_gets_invalid_request_and_the_connection_goes_on(
    tickwheel_broker: BackgroundBroker, client_logs: pytest.LogCaptureFixture
) -> None:
    host = "127.0.0.11"
    client = WireClient(tickwheel_broker.bootstrap_servers, source_host=host)
    try:
        client.sock.sendall(schema_breaking(FETCH, 12, ("topics",), b"\x00"))
        correlation_id, body = client.receive(FETCH, 12)
        assert (correlation_id, body.error_code) == (77, ErrorCode.invalid_request)
        assert api_versions(client).error_code == ErrorCode.none
    finally:
        client.close()
    (line,) = warnings_from(client_logs, host)
    assert "answering INVALID_REQUEST" in line
    assert "FetchRequest v12 (api_key=1, correlation_id=77)" in line
    assert "non-nullable field topics is null" in line


def test_a_null_array_where_the_api_has_no_error_code_closes_the_connection(
    tickwheel_broker: BackgroundBroker, client_logs: pytest.LogCaptureFixture
) -> None:
    host = "127.0.0.12"
    client = WireClient(tickwheel_broker.bootstrap_servers, source_host=host)
    try:
        client.sock.sendall(schema_breaking(PRODUCE, 9, ("topic_data",), b"\x00"))
        assert client.is_closed_by_broker()
    finally:
        client.close()
    (line,) = warnings_from(client_logs, host)
    assert "closing connection" in line
    assert "ProduceRequest v9 (api_key=0, correlation_id=77)" in line
    assert "non-nullable field topic_data is null" in line


def test_a_tls_client_on_the_plaintext_listener_is_told_apart(
    tickwheel_broker: BackgroundBroker, client_logs: pytest.LogCaptureFixture
) -> None:
    host = "127.0.0.13"
    with socket.create_connection(
        host_port(tickwheel_broker.bootstrap_servers), timeout=WAIT_S, source_address=(host, 0)
    ) as sock:
        sock.sendall(TLS_CLIENT_HELLO)
        assert sock.recv(1) == b"", "closed"
    (line,) = warnings_from(client_logs, host)
    assert line.startswith(f"TLS handshake on a PLAINTEXT listener from {host}:")
    assert line.endswith("is the client configured with security.protocol=SSL?")


def test_repeated_garbage_from_one_host_is_one_line_with_a_count(
    tickwheel_broker: BackgroundBroker, client_logs: pytest.LogCaptureFixture
) -> None:
    host = "127.0.0.14"
    for _ in range(20):
        with socket.create_connection(
            host_port(tickwheel_broker.bootstrap_servers), timeout=WAIT_S, source_address=(host, 0)
        ) as sock:
            sock.sendall(TLS_CLIENT_HELLO)
            assert sock.recv(1) == b""
    assert len(warnings_from(client_logs, host)) == 1, "the rest are counted, not logged"


def test_every_api_fed_schema_breaking_requests_answers_or_closes_without_a_traceback(
    tickwheel_broker: BackgroundBroker, client_logs: pytest.LogCaptureFixture
) -> None:
    """Nulls, negative and huge counts and lengths, out-of-range numbers, in every field
    of every API at every version, through the real decoder to the handlers."""
    address = host_port(tickwheel_broker.bootstrap_servers)
    frames = all_schema_breaking_frames()
    for frame in frames:
        with socket.create_connection(
            address, timeout=WAIT_S, source_address=("127.0.0.15", 0)
        ) as sock:
            sock.sendall(frame)
            sock.shutdown(socket.SHUT_WR)
            # Answered, or closed (and perhaps reset): either way the broker is done with it.
            try:
                while sock.recv(1 << 16):
                    pass
            except ConnectionResetError:
                pass
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        assert api_versions(client).error_code == ErrorCode.none
    finally:
        client.close()
    assert len(frames) > 1000


def create_topic(client: WireClient, name: str) -> None:
    topic = {"name": name, "num_partitions": 1, "replication_factor": 1}
    body = client.call(
        CREATE_TOPICS, 5, {"topics": [{**topic, "assignments": [], "configs": []}], "timeout": 1000}
    )
    assert body.topics[0].error_code == ErrorCode.none


def test_an_answer_to_a_client_that_reset_its_connection_is_dropped_quietly(
    tickwheel_broker: BackgroundBroker, client_logs: pytest.LogCaptureFixture
) -> None:
    """A Fetch waits in the purgatory, its client resets the connection, then a produce
    wakes it: the answer, records sent with sendfile, meets a closing transport."""
    admin = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        create_topic(admin, "left")
        fetcher = WireClient(tickwheel_broker.bootstrap_servers, source_host="127.0.0.16")
        fetcher.send(
            FETCH,
            12,
            {
                "max_wait": 30_000,
                "min_bytes": 1,
                "topics": [
                    {
                        "topic": "left",
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
                "forgotten_topics_data": [],
            },
        )
        deadline = time.monotonic() + WAIT_S
        while tickwheel_broker.metrics()["Fetch"].num_delayed_operations != 1:
            assert time.monotonic() < deadline, "the fetch never waited"
            time.sleep(0.01)
        # SO_LINGER 0: close with a reset, as a killed client's kernel does.
        fetcher.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        fetcher.close()
        # A round trip through the broker's loop: it has seen the reset by now.
        tickwheel_broker.call(lambda broker: None)
        produced = admin.call(
            PRODUCE,
            9,
            {
                "acks": 1,
                "timeout": 1000,
                "topic_data": [
                    {
                        "name": "left",
                        "partition_data": [{"index": 0, "records": make_batch([SENDFILE_VALUE])}],
                    }
                ],
            },
        )
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
        # The woken fetch runs before this call reaches the loop; its answer is dropped.
        tickwheel_broker.call(lambda broker: None)
        assert tickwheel_broker.metrics()["Fetch"].num_delayed_operations == 0
        assert api_versions(admin).error_code == ErrorCode.none
    finally:
        admin.close()


def produce_values(topic: str, acks: int) -> dict[str, Any]:
    return {
        "acks": acks,
        "timeout": 1000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": make_batch([b"v"])}]}
        ],
    }


def test_piped_produces_are_answered_in_order_and_a_failed_one_ends_the_connection(
    tickwheel_broker: BackgroundBroker,
) -> None:
    """Produces sent back to back are dispatched as read (issue 21) and answered in
    request order; an acks=0 produce that fails closes the connection after the answers
    before it, and a produce read after it is not appended, as on a muted connection."""
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        create_topic(client, "piped")
        sent = [client.send(PRODUCE, 9, produce_values("piped", 1)) for _ in range(3)]
        client.send(PRODUCE, 9, produce_values("no-such-topic", 0))
        client.send(PRODUCE, 9, produce_values("piped", 1))
        answers = [client.receive(PRODUCE, 9) for _ in sent]
        assert [correlation_id for correlation_id, _ in answers] == sent
        offsets = [body.responses[0].partition_responses[0].base_offset for _, body in answers]
        assert offsets == [0, 1, 2]
        assert client.is_closed_by_broker()
    finally:
        client.close()
    again = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        body = again.call(PRODUCE, 9, produce_values("piped", 1))
        assert body.responses[0].partition_responses[0].base_offset == 3
    finally:
        again.close()
