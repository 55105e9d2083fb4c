"""The znode documents: Kafka's JSON, read back, and bad documents refused."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.cluster import (
    BrokerEndpoint,
    BrokerRegistration,
    TopicAssignment,
    ZnodeError,
    broker_path,
    decode_broker,
    decode_partition_state,
    decode_topic,
    encode_broker,
    encode_partition_state,
    encode_topic,
    partition_state_path,
    split_connect,
    topic_path,
)
from tickwheel.cluster._znodes import (
    ProducerIdBlock,
    decode_controller,
    decode_features,
    decode_producer_id_block,
    decode_topic_config,
    encode_controller,
    encode_features,
    encode_producer_id_block,
    encode_topic_config,
)
from tickwheel.replica import LeaderAndIsr


def test_paths_follow_kafkas_layout() -> None:
    assert broker_path(3) == "/brokers/ids/3"
    assert topic_path("events") == "/brokers/topics/events"
    assert partition_state_path("events", 2) == "/brokers/topics/events/partitions/2/state"


def test_partition_state_is_kafkas_json() -> None:
    state = LeaderAndIsr(leader=1, leader_epoch=4, isr=(1, 2), controller_epoch=7, version=9)
    document = json.loads(encode_partition_state(state))
    assert document == {
        "controller_epoch": 7,
        "leader": 1,
        "version": 1,
        "leader_epoch": 4,
        "isr": [1, 2],
    }


def test_partition_state_written_by_kafka_is_read_with_the_znode_version() -> None:
    kafka = b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,0,1]}'
    state = decode_partition_state("state", kafka, zk_version=5)
    assert state == LeaderAndIsr(
        leader=2, leader_epoch=0, isr=(2, 0, 1), controller_epoch=1, version=5
    )


def test_partition_state_carries_its_eligible_leader_replicas() -> None:
    state = LeaderAndIsr(-1, 4, (), 7, 9, elr=(1, 2), last_known_elr=(3,))
    document = json.loads(encode_partition_state(state))
    assert (document["eligible_leader_replicas"], document["last_known_elr"]) == ([1, 2], [3])
    assert decode_partition_state("s", encode_partition_state(state), 9) == state


@given(
    leader=st.integers(-1, 1000),
    epoch=st.integers(0, 2**31 - 1),
    isr=st.lists(st.integers(0, 1000), unique=True, max_size=6),
    controller_epoch=st.integers(0, 2**31 - 1),
    version=st.integers(0, 2**31 - 1),
    elr=st.lists(st.integers(0, 1000), unique=True, max_size=3),
    last_known_elr=st.lists(st.integers(0, 1000), unique=True, max_size=3),
)
def test_partition_state_round_trips(
    leader: int,
    epoch: int,
    isr: list[int],
    controller_epoch: int,
    version: int,
    elr: list[int],
    last_known_elr: list[int],
) -> None:
    state = LeaderAndIsr(
        leader,
        epoch,
        tuple(isr),
        controller_epoch,
        version,
        elr=tuple(elr),
        last_known_elr=tuple(last_known_elr),
    )
    assert decode_partition_state("s", encode_partition_state(state), version) == state


def test_topic_assignment_is_kafkas_json_and_reads_kafkas() -> None:
    assignment = TopicAssignment({1: (2, 0), 0: (0, 1)}, topic_id="abc")
    document = json.loads(encode_topic(assignment))
    assert document["partitions"] == {"0": [0, 1], "1": [2, 0]}
    assert document["topic_id"] == "abc"
    assert document["adding_replicas"] == {}
    assert document["removing_replicas"] == {}
    kafka_v1 = b'{"version":1,"partitions":{"0":[1,2,3],"1":[2,3,1]}}'
    assert decode_topic("t", kafka_v1).partitions == {0: (1, 2, 3), 1: (2, 3, 1)}


def test_broker_registration_advertises_its_plaintext_endpoint() -> None:
    registration = BrokerRegistration(4, (BrokerEndpoint(4, "10.0.0.4", 9092),))
    document = json.loads(encode_broker(registration))
    assert document["endpoints"] == ["PLAINTEXT://10.0.0.4:9092"]
    assert document["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert (document["host"], document["port"]) == ("10.0.0.4", 9092)
    assert document["previous_broker_epoch"] == -1
    assert decode_broker(4, encode_broker(registration)) == registration


def test_broker_registration_says_whether_its_last_shutdown_was_clean() -> None:
    registration = BrokerRegistration(4, (BrokerEndpoint(4, "h", 9092),), previous_broker_epoch=77)
    assert json.loads(encode_broker(registration))["previous_broker_epoch"] == 77
    assert decode_broker(4, encode_broker(registration)) == registration
    kafka = b'{"version":4,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092"]}'
    assert decode_broker(4, kafka).previous_broker_epoch == -1


def test_broker_registration_names_every_listener_as_kafka_does() -> None:
    registration = BrokerRegistration(
        2,
        (
            BrokerEndpoint(2, "kafka.example", 9093, "CLIENT", "SASL_SSL"),
            BrokerEndpoint(2, "::1", 9094, "REPLICATION", "SSL"),
        ),
    )
    document = json.loads(encode_broker(registration))
    assert document["endpoints"] == ["CLIENT://kafka.example:9093", "REPLICATION://[::1]:9094"]
    assert document["listener_security_protocol_map"] == {
        "CLIENT": "SASL_SSL",
        "REPLICATION": "SSL",
    }
    # No PLAINTEXT listener: older readers get no endpoint (Kafka writes null and -1).
    assert (document["host"], document["port"]) == (None, -1)
    assert decode_broker(2, encode_broker(registration)) == registration
    assert registration.endpoint("REPLICATION") == BrokerEndpoint(
        2, "::1", 9094, "REPLICATION", "SSL"
    )
    assert registration.endpoint("PLAINTEXT") is None


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # Kafka 0.10.0 (version 2): endpoints named by protocol, no map.
        (
            b'{"version":2,"host":"h","port":9092,"jmx_port":-1,'
            b'"endpoints":["PLAINTEXT://h:9092","SSL://h:9093"]}',
            (BrokerEndpoint(1, "h", 9092), BrokerEndpoint(1, "h", 9093, "SSL", "SSL")),
        ),
        # Version 1: the top-level host and port alone.
        (b'{"version":1,"host":"h","port":9092,"jmx_port":-1}', (BrokerEndpoint(1, "h", 9092),)),
    ],
)
def test_older_broker_registrations_are_read(
    data: bytes, expected: tuple[BrokerEndpoint, ...]
) -> None:
    assert decode_broker(1, data) == BrokerRegistration(1, expected)


def test_topic_config_and_controller_round_trip() -> None:
    configs = {"min.insync.replicas": "2", "retention.ms": "1000"}
    assert decode_topic_config("t", encode_topic_config(configs)) == configs
    assert decode_controller(encode_controller(3)) == 3


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[1, 2]",
        b'{"leader": 1}',
        b'{"leader": 1, "leader_epoch": 0, "controller_epoch": 0, "isr": "1,2"}',
        b"\xff\xfe",
    ],
)
def test_malformed_partition_state_is_refused(data: bytes) -> None:
    with pytest.raises(ZnodeError):
        decode_partition_state("s", data, 0)


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":5}',
        b'{"endpoints": ["SSL//h:9093"]}',
        b'{"endpoints": ["SSL://h"]}',
        b'{"endpoints": [], "listener_security_protocol_map": "SSL"}',
    ],
)
def test_broker_without_a_readable_endpoint_is_refused(data: bytes) -> None:
    with pytest.raises(ZnodeError):
        decode_broker(1, data)


@pytest.mark.parametrize(
    ("connect", "expected"),
    [
        ("127.0.0.1:2181", ("127.0.0.1:2181", "")),
        ("a:2181,b:2181/kafka", ("a:2181,b:2181", "/kafka")),
        ("a:2181/kafka/prod/", ("a:2181", "/kafka/prod")),
        ("a:2181/", ("a:2181", "")),
    ],
)
def test_zookeeper_connect_splits_hosts_and_chroot(connect: str, expected: tuple[str, str]) -> None:
    assert split_connect(connect) == expected


def test_zookeeper_connect_without_hosts_is_refused() -> None:
    with pytest.raises(ValueError, match="names no host"):
        split_connect("/kafka")


def test_producer_id_block_is_kafkas_json() -> None:
    block = ProducerIdBlock(broker_id=2, first=1000, last=1999)
    document = json.loads(encode_producer_id_block(block))
    assert document == {"version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}
    assert decode_producer_id_block(encode_producer_id_block(block)) == block
    with pytest.raises(ZnodeError):
        decode_producer_id_block(b'{"version": 1, "broker": 2}')


def test_config_change_notifications_are_kafkas_documents() -> None:
    from tickwheel.cluster._znodes import (  # noqa: PLC0415 - grouped with its test
        config_change_sequence,
        decode_config_change,
        encode_config_change,
        entity_config_path,
    )

    document = json.loads(encode_config_change("brokers", "<default>"))
    assert document == {"version": 2, "entity_path": "brokers/<default>"}
    assert decode_config_change(encode_config_change("topics", "a.b")) == ("topics", "a.b")
    assert entity_config_path("topics", "t") == "/config/topics/t"
    assert config_change_sequence("config_change_0000000042") == 42
    assert config_change_sequence("something_else") is None
    with pytest.raises(ZnodeError):
        decode_config_change(b'{"version": 2}')


def test_the_feature_znode_is_kafkas_version_2_document() -> None:
    data = encode_features({"share.version": 1, "group.version": 1, "transaction.version": 0})
    assert json.loads(data) == {
        "version": 2,
        "status": 1,
        "features": {
            "group.version": {"max_version_level": 1},
            "share.version": {"max_version_level": 1},
        },
    }
    assert decode_features(data) == {"group.version": 1, "share.version": 1}


def test_a_version_1_feature_znode_is_read_and_a_disabled_one_finalizes_nothing() -> None:
    v1 = {
        "version": 1,
        "status": 1,
        "features": {"group.version": {"min_version_level": 1, "max_version_level": 1}},
    }
    assert decode_features(json.dumps(v1).encode()) == {"group.version": 1}
    assert decode_features(json.dumps({**v1, "status": 0}).encode()) == {}


@pytest.mark.parametrize(
    "document",
    [
        {"version": 3, "status": 1, "features": {}},
        {"version": 2, "status": 7, "features": {}},
        {"version": 2, "status": 1},
        {"version": 2, "status": 1, "features": {"group.version": {"max_version_level": 0}}},
        {"version": 2, "status": 1, "features": {"group.version": 1}},
    ],
)
def test_a_malformed_feature_znode_is_refused(document: dict[str, object]) -> None:
    with pytest.raises(ZnodeError, match="/feature"):
        decode_features(json.dumps(document).encode())
