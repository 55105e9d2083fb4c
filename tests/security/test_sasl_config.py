"""A SASL listener's settings from Kafka's properties, prefixed per listener or not."""

from __future__ import annotations

import pytest

from tickwheel.security import SaslConfigError, SaslListenerConfig, client_credentials

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a";'
)


def _config(properties: dict[str, str]) -> SaslListenerConfig:
    return SaslListenerConfig.from_properties("SASL_PLAINTEXT", properties.get)


def test_kafkas_default_gssapi_alone_leaves_no_mechanism() -> None:
    with pytest.raises(SaslConfigError, match="names no mechanism tickwheel serves"):
        _config({})
    with pytest.raises(SaslConfigError, match="names no mechanism"):
        _config({"sasl.enabled.mechanisms": "GSSAPI,OAUTHBEARER"})


def test_mechanisms_tickwheel_serves_in_the_listed_order() -> None:
    config = _config({"sasl.enabled.mechanisms": "GSSAPI, scram-sha-512,SCRAM-SHA-256", "x": "y"})
    assert config.mechanisms == ("SCRAM-SHA-512", "SCRAM-SHA-256")
    assert config.plain_users == {}
    assert config.max_reauth_ms == {"SCRAM-SHA-512": 0, "SCRAM-SHA-256": 0}


def test_plain_users_come_from_the_jaas_line() -> None:
    config = _config(
        {
            "sasl.enabled.mechanisms": "PLAIN",
            "plain.sasl.jaas.config": PLAIN_JAAS,
            "connections.max.reauth.ms": "60000",
        }
    )
    assert config.plain_users == {"admin": "admin-secret", "alice": "a"}
    assert config.max_reauth_ms == {"PLAIN": 60_000}
    unprefixed = _config({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": PLAIN_JAAS})
    assert unprefixed.plain_users == config.plain_users


def test_a_mechanism_may_have_its_own_session_lifetime() -> None:
    config = _config(
        {
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "connections.max.reauth.ms": "60000",
            "scram-sha-512.connections.max.reauth.ms": "5000",
        }
    )
    assert config.max_reauth_ms == {"SCRAM-SHA-256": 60_000, "SCRAM-SHA-512": 5_000}


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"sasl.enabled.mechanisms": "PLAIN"}, "no listener.name.sasl_plaintext.plain"),
        (
            {"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "a.B required;"},
            "PLAIN needs",
        ),
        ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "broken"}, "control flag"),
        (
            {"sasl.enabled.mechanisms": "SCRAM-SHA-256", "connections.max.reauth.ms": "soon"},
            "not an integer",
        ),
    ],
)
def test_unusable_settings(properties: dict[str, str], message: str) -> None:
    with pytest.raises(SaslConfigError, match=message):
        _config(properties)


def test_client_credentials_of_the_inter_broker_mechanism() -> None:
    scram = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="broker" password="broker-secret";'
    )
    lookup = {"scram-sha-256.sasl.jaas.config": scram, "plain.sasl.jaas.config": PLAIN_JAAS}.get
    assert client_credentials(lookup, "L", "SCRAM-SHA-256") == ("broker", "broker-secret")
    assert client_credentials(lookup, "L", "PLAIN") == ("admin", "admin-secret")
    with pytest.raises(SaslConfigError, match=r"no sasl\.jaas\.config"):
        client_credentials(lookup, "L", "SCRAM-SHA-512")
    with pytest.raises(SaslConfigError, match="no username and password"):
        client_credentials({"sasl.jaas.config": "a.B required;"}.get, "L", "PLAIN")
