"""Named listeners: parsing Kafka's listener settings, and a broker serving several."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tickwheel.server import BackgroundBroker, BrokerConfig, ConfigError
from tickwheel.server.config._listeners import DEFAULT_PROTOCOL_MAP as DEFAULT_MAP
from tickwheel.server.config._listeners import (
    ListenerError,
    ListenerSpec,
    inter_broker_listener,
    parse_advertised,
    parse_listeners,
    parse_protocol_map,
)


def test_listeners_take_their_protocol_from_the_map() -> None:
    specs = parse_listeners(
        "CLIENT://0.0.0.0:9093,REPLICATION://[::1]:9094,PLAINTEXT://:9092",
        DEFAULT_MAP + ",CLIENT:SASL_SSL,REPLICATION:SSL",
    )
    assert specs == (
        ListenerSpec("CLIENT", "SASL_SSL", "0.0.0.0", 9093),
        ListenerSpec("REPLICATION", "SSL", "::1", 9094),
        ListenerSpec("PLAINTEXT", "PLAINTEXT", "0.0.0.0", 9092),
    )


@pytest.mark.parametrize(
    ("listeners", "protocol_map", "problem"),
    [
        ("CLIENT://:9093", DEFAULT_MAP, "no security protocol"),
        ("PLAINTEXT://:9092,PLAINTEXT://:9093", DEFAULT_MAP, "twice"),
        ("PLAINTEXT://:9092,SSL://:9092", DEFAULT_MAP, "same port"),
        ("PLAINTEXT://host", DEFAULT_MAP, "no port"),
        ("localhost:9092", DEFAULT_MAP, "NAME://host:port"),
        ("", DEFAULT_MAP, "no listener"),
        ("A://:1", "A:KERBEROS", "not one of"),
        ("A://:1", "A", "NAME:PROTOCOL"),
    ],
)
def test_bad_listener_settings_are_refused(listeners: str, protocol_map: str, problem: str) -> None:
    with pytest.raises(ListenerError, match=problem):
        parse_listeners(listeners, protocol_map)
    with pytest.raises(ConfigError, match=problem):
        BrokerConfig(listeners=listeners, listener_security_protocol_map=protocol_map)


def test_protocol_map_names_are_case_insensitive() -> None:
    assert parse_protocol_map("client:sasl_ssl") == {"CLIENT": "SASL_SSL"}


def test_inter_broker_listener_follows_kafkas_rules() -> None:
    specs = parse_listeners(
        "CLIENT://:1,INTERNAL://:2,SSL://:3", DEFAULT_MAP + ",CLIENT:SASL_SSL,INTERNAL:SSL"
    )
    assert inter_broker_listener(specs, "internal", "").name == "INTERNAL"
    assert inter_broker_listener(specs, "", "SSL").name == "SSL"
    assert inter_broker_listener(specs, "", "SASL_SSL").name == "CLIENT"
    assert inter_broker_listener(specs, "", "").name == "CLIENT"
    with pytest.raises(ListenerError, match="not in listeners"):
        inter_broker_listener(specs, "OTHER", "")
    with pytest.raises(ListenerError, match="SASL_PLAINTEXT"):
        inter_broker_listener(specs, "", "SASL_PLAINTEXT")


def test_advertised_listeners_by_name() -> None:
    assert parse_advertised("CLIENT://kafka.example:19093,INTERNAL://:0") == {
        "CLIENT": ("kafka.example", 19093),
        "INTERNAL": ("", 0),
    }


@pytest.mark.integration
def test_each_listener_advertises_its_own_endpoint(tmp_path: Path) -> None:
    """Metadata through a listener names the brokers by that listener's endpoint."""
    config = BrokerConfig(
        listeners="INSIDE://127.0.0.1:0,OUTSIDE://127.0.0.1:0",
        listener_security_protocol_map="INSIDE:PLAINTEXT,OUTSIDE:PLAINTEXT",
        inter_broker_listener_name="INSIDE",
        log_dirs=str(tmp_path),
    )
    with BackgroundBroker(config) as broker:
        inside, outside = broker.endpoint("INSIDE"), broker.endpoint("OUTSIDE")
        assert inside.port != outside.port
        assert broker.bootstrap_servers == str(inside)
        for endpoint in (inside, outside):
            admin = AdminClient({"bootstrap.servers": str(endpoint)})
            brokers = admin.list_topics(timeout=10).brokers
            assert [(b.host, b.port) for b in brokers.values()] == [(endpoint.host, endpoint.port)]
