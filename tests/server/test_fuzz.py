"""Random and mutated request frames never take the broker down.

Each example opens a connection and sends 50 frames — random bytes behind a real or
made-up API key and version, or a well-formed request with bytes flipped, replaced,
inserted or cut — then a fresh connection must still be answered. 200 examples make
10,000 frames; afterwards a real client produces and consumes as usual.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from replica.records import batch
from tickwheel.server import BackgroundBroker
from tickwheel.server.apis import SUPPORTED_VERSIONS

from .wire import WireClient, encode_request, host_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLES = 200
FRAMES_PER_EXAMPLE = 50
TIMEOUT_S = 15.0

FETCH_PARTITION = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 4096}
FUZZ_GROUP = "fuzz-group"
OFFSET_COMMIT = 8
JOIN_GROUP = 11
SYNC_GROUP = 14
ADMIN_KEYS = (19, 20, 37)  # CreateTopics, DeleteTopics, CreatePartitions
FUZZ_ADMIN_TOPIC = "fuzz-admin"
SEEDS = [
    encode_request(18, 0, {}, 1),
    encode_request(18, 3, {"client_software_name": "f", "client_software_version": "1"}, 2),
    encode_request(3, 1, {"topics": [{"name": "fuzz"}]}, 3),
    encode_request(
        3,
        12,
        {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
        4,
    ),
    encode_request(
        0,
        3,
        {
            "acks": 1,
            "timeout": 100,
            "topic_data": [
                {"name": "fuzz", "partition_data": [{"index": 0, "records": batch(b"f")}]}
            ],
        },
        5,
    ),
    encode_request(
        0,
        9,
        {
            "acks": -1,
            "timeout": 100,
            "topic_data": [
                {"name": "fuzz", "partition_data": [{"index": 0, "records": batch(b"g")}]}
            ],
        },
        6,
    ),
    encode_request(
        1,
        4,
        {
            "max_wait": 0,
            "min_bytes": 1,
            "topics": [{"topic": "fuzz", "partitions": [FETCH_PARTITION]}],
        },
        7,
    ),
    encode_request(
        1,
        12,
        {
            "max_wait": 0,
            "min_bytes": 1,
            "topics": [{"topic": "fuzz", "partitions": [FETCH_PARTITION]}],
            "forgotten_topics_data": [],
        },
        8,
    ),
    encode_request(
        2,
        7,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": "fuzz", "partitions": [{"partition_index": 0, "timestamp": -3}]}],
        },
        9,
    ),
    encode_request(22, 4, {"transactional_id": None, "transaction_timeout": 1000}, 10),
    encode_request(
        32,
        4,
        {"resources": [{"resource_type": 2, "resource_name": "fuzz", "configuration_keys": None}]},
        11,
    ),
    encode_request(
        21,
        2,
        {
            "timeout": 100,
            "topics": [{"name": "fuzz", "partitions": [{"partition_index": 0, "offset": 0}]}],
        },
        12,
    ),
    # Group APIs: a join without a member id is answered at once (MEMBER_ID_REQUIRED), so
    # the seed itself never waits in the rebalance; its mutations may.
    encode_request(
        11,
        7,
        {
            "group_id": FUZZ_GROUP,
            "session_timeout": 10_000,
            "rebalance_timeout": 100,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"fuzz"}],
        },
        13,
    ),
    encode_request(
        14,
        5,
        {
            "group_id": FUZZ_GROUP,
            "generation_id": 1,
            "member_id": "fuzz-member",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": "fuzz-member", "assignment": b"fuzz"}],
        },
        14,
    ),
    encode_request(
        8,
        8,
        {
            "group_id": FUZZ_GROUP,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": "fuzz",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 1,
                            "committed_leader_epoch": -1,
                            "committed_metadata": None,
                        }
                    ],
                }
            ],
        },
        15,
    ),
    # Admin APIs, on a topic of their own so the produce/fetch seeds keep theirs.
    encode_request(
        19,
        5,
        {
            "topics": [
                {
                    "name": FUZZ_ADMIN_TOPIC,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 100,
            "validate_only": False,
        },
        16,
    ),
    encode_request(
        37,
        3,
        {
            "topics": [{"name": FUZZ_ADMIN_TOPIC, "count": 2, "assignments": None}],
            "timeout": 100,
            "validate_only": False,
        },
        17,
    ),
    encode_request(20, 4, {"topic_names": [FUZZ_ADMIN_TOPIC], "timeout": 100}, 18),
]
API_KEYS = [*sorted(SUPPORTED_VERSIONS), -1, 99, 32767]


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


random_frames = st.builds(
    lambda key, version, correlation, tail: _framed(
        struct.pack(">hhi", key, version, correlation) + tail
    ),
    st.sampled_from(API_KEYS),
    st.integers(-2, 20),
    st.integers(-(2**31), 2**31 - 1),
    st.binary(max_size=80),
)


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    body = bytearray(draw(st.sampled_from(SEEDS))[4:])
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, len(body)))
        action = draw(st.sampled_from(["flip", "replace", "insert", "cut"]))
        if action == "insert" or position == len(body):
            body[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif action == "flip":
            body[position] ^= 1 << draw(st.integers(0, 7))
        elif action == "replace":
            body[position] = draw(st.integers(0, 255))
        else:
            del body[position : position + draw(st.integers(1, 8))]
    if draw(st.integers(0, 20)) == 0:
        # Now and then a size prefix that lies.
        return struct.pack(">i", draw(st.integers(-(2**31), 2**31 - 1))) + bytes(body)
    return _framed(bytes(body))


def _send_all(broker: BackgroundBroker, frames: list[bytes]) -> None:
    with socket.create_connection(host_port(broker.bootstrap_servers), timeout=TIMEOUT_S) as sock:
        for frame in frames:
            try:
                sock.sendall(frame)
            except OSError:
                return  # the broker closed this connection: expected for bad frames


def _answers(broker: BackgroundBroker) -> bool:
    client = WireClient(broker.bootstrap_servers)
    try:
        body = client.call(18, 3, {"client_software_name": "check", "client_software_version": "1"})
        return bool(body.error_code == ErrorCode.none)
    finally:
        client.close()


def test_every_seed_is_answered(tickwheel_broker: BackgroundBroker) -> None:
    """The seeds are well-formed requests, so their mutations reach the handlers' logic."""
    seeded_keys = {struct.unpack_from(">h", seed, 4)[0] for seed in SEEDS}
    assert seeded_keys >= {JOIN_GROUP, SYNC_GROUP, OFFSET_COMMIT, *ADMIN_KEYS}
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        for seed in SEEDS:
            client.sock.sendall(seed)
            frame = client.read_frame()
            assert frame is not None, f"seed for api key {struct.unpack_from('>h', seed, 4)[0]}"
            assert frame[:4] == seed[8:12], "answered with the seed's correlation id"
    finally:
        client.close()


def test_bad_frames_never_stop_the_broker(tickwheel_broker: BackgroundBroker) -> None:
    sent: list[int] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        st.lists(
            random_frames | mutated_frames(),
            min_size=FRAMES_PER_EXAMPLE,
            max_size=FRAMES_PER_EXAMPLE,
        )
    )
    def run(frames: list[bytes]) -> None:
        _send_all(tickwheel_broker, frames)
        sent.append(len(frames))
        assert _answers(tickwheel_broker)

    run()
    assert sum(sent) >= EXAMPLES * FRAMES_PER_EXAMPLE
    producer = Producer({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    producer.produce("after-fuzz", value=b"still here", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        {"bootstrap.servers": tickwheel_broker.bootstrap_servers, "group.id": "after-fuzz"}
    )
    consumer.assign([TopicPartition("after-fuzz", 0, 0)])
    deadline = time.monotonic() + TIMEOUT_S
    try:
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
    finally:
        consumer.close()
    assert message is not None
    assert message.value() == b"still here"
