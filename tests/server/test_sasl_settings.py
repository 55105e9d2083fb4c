"""SASL settings in ``BrokerConfig``: Kafka's names, ``listener.name.<l>.`` properties,
the users file of a single node, and what a broker refuses to start with."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tickwheel.cluster._znodes import desanitize_user, sanitize_user
from tickwheel.security import SCRAM_SHA_256, credential_to_string
from tickwheel.server import BackgroundBroker, BrokerConfig, ConfigError
from tickwheel.server._users import UserConfigs

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'


def test_listener_properties_are_kept_and_seen_per_listener() -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "listener.name.client.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.client.plain.sasl.jaas.config": JAAS,
            "connection.failed.authentication.delay.ms": "250",
        }
    )
    assert config.connection_failed_authentication_delay_ms == 250
    client = config.listener_view("CLIENT")
    assert client["plain.sasl.jaas.config"] == JAAS
    assert client["sasl.enabled.mechanisms"] == "PLAIN"
    assert config.listener_view("INTERNAL")["sasl.enabled.mechanisms"] == "SCRAM-SHA-256"
    assert "plain.sasl.jaas.config" not in config.listener_view("INTERNAL")
    with pytest.raises(ConfigError, match="must not be negative"):
        BrokerConfig(connection_failed_authentication_delay_ms=-1)


@pytest.mark.integration
def test_a_sasl_listener_without_a_mechanism_does_not_start(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}
    )
    with pytest.raises(ConfigError, match="GSSAPI"), BackgroundBroker(config):
        pass


def test_the_users_file_keeps_salted_credentials(tmp_path: Path) -> None:
    users = UserConfigs(tmp_path)
    text = credential_to_string(SCRAM_SHA_256.credential("secret"))
    asyncio.run(users.alter("alice", {"SCRAM-SHA-256": text}))
    assert "secret" not in (tmp_path / "tickwheel-users.json").read_text().replace(text, "")
    again = UserConfigs(tmp_path)
    again.load()
    assert again.credentials.lookup("alice", "SCRAM-SHA-256") is not None
    assert again.credentials.lookup("alice", "SCRAM-SHA-512") is None


def test_user_znode_names_are_sanitized_as_kafka_does() -> None:
    assert sanitize_user("alice") == "alice"
    assert sanitize_user("User:a b*c/é") == "User%3Aa%20b%2Ac%2F%C3%A9"
    assert sanitize_user("x.y-z_~") == "x.y-z_%7E"
    assert desanitize_user(sanitize_user("x.y-z_~ /")) == "x.y-z_~ /"
