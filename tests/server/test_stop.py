"""``Broker.stop`` with clients in the middle of things: a long-poll fetch waiting in the
Fetch purgatory is answered before its connection closes, and a request half sent
(a 100 MB frame of which a few bytes came) does not hold the stop."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest

from tickwheel.protocol import ApiKey
from tickwheel.pytest_plugin import TEST_BROKER_PROPERTIES
from tickwheel.server import BackgroundBroker, BrokerConfig

from .wire import WireClient, create_topic_result, host_port

pytestmark = pytest.mark.integration

TOPIC = "stopping"
FETCH = ApiKey.FETCH
LONG_POLL_MS = 30_000
HUGE_FRAME_BYTES = 104_857_600
HALF_SENT_BYTES = 65_536
STOP_BOUND_S = 5.0
WAIT_S = 10.0
_POLL_S = 0.01


def _fetch_waiting(broker: BackgroundBroker) -> bool:
    return broker.metrics()["Fetch"].num_delayed_operations == 1


def test_a_long_poll_is_answered_and_a_half_sent_request_is_dropped(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties({**TEST_BROKER_PROPERTIES, "log.dirs": str(tmp_path)})
    with BackgroundBroker(config) as broker:
        admin = WireClient(broker.bootstrap_servers)
        assert create_topic_result(admin, TOPIC).error_code == 0
        admin.close()
        fetching = WireClient(broker.bootstrap_servers)
        correlation_id = fetching.send(
            FETCH,
            12,
            {
                "max_wait": LONG_POLL_MS,
                "min_bytes": HUGE_FRAME_BYTES,
                "topics": [
                    {
                        "topic": TOPIC,
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
                "forgotten_topics_data": [],
            },
        )
        half_sent = socket.create_connection(host_port(broker.bootstrap_servers))
        half_sent.sendall(struct.pack(">i", HUGE_FRAME_BYTES) + b"\0" * HALF_SENT_BYTES)
        deadline = time.monotonic() + WAIT_S
        while not _fetch_waiting(broker):
            assert time.monotonic() < deadline, "the long poll never reached the purgatory"
            time.sleep(_POLL_S)
        started = time.monotonic()
        broker.stop()
    assert time.monotonic() - started < STOP_BOUND_S
    # Answered (an empty fetch, no error) before its connection closed.
    answered, body = fetching.receive(FETCH, 12)
    assert answered == correlation_id
    assert body.responses[0].partitions[0].error_code == 0
    assert fetching.is_closed_by_broker()
    fetching.close()
    with half_sent:
        half_sent.settimeout(WAIT_S)
        assert half_sent.recv(1) == b""
